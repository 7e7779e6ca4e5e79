// The workload the simulator runs: a model's per-block forward and backward times of one
// worker's batch and the sizes of its parameter tensors, as measured by a profile file
// (docs/simulator.md, "Profile files"; configs/sim/profiles/).
//
// Example:
//   absl::StatusOr<Profile> profile = LoadProfile("configs/sim/profiles/resnet50_b8_cpu.json");
//   std::vector<TensorEntry> tensors = ProfileTensors(*profile);  // for SlicePlan::Create
//
// Plain values; thread-compatible.
#ifndef P3_P3_SIM_PROFILE_H_
#define P3_P3_SIM_PROFILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "p3/core/slice_plan.h"

namespace p3::sim {

// Per-block compute times of one worker's batch, in forward order.
struct ProfileBlock {
  std::string name;
  double forward_s = 0;
  double backward_s = 0;
  std::vector<int64_t> params;  // numel of each parameter tensor, in the block's order
};

struct Profile {
  std::string model;
  int64_t batch = 0;  // samples per worker and iteration the times are for
  std::string source;
  std::vector<ProfileBlock> blocks;
};

// Reads a profile JSON file (docs/simulator.md, "Profile files"). Errors name the file:
// ReadJsonFile's (p3/base/json_file.h) when it cannot be read or is not JSON,
// InvalidArgument naming the field or block that is wrong.
absl::StatusOr<Profile> LoadProfile(const std::string& path);
// `profile` with its last block, a sequence model's output projection (weight
// [rows * in], bias [rows]), cut as model.output_pieces cuts the model, by the one rule
// both use (models/output_rows.h): blocks "<name>.0" .. with the first rows % pieces
// pieces one row more than the rest, each with the block's forward and backward time in
// proportion to its rows. The last block's backward in a profile includes the loss
// (models/model_bench.cc), which the model runs once before any piece's backward: spread
// over the pieces here, so the time in which no piece's gradient exists is
// under-estimated by up to the loss's share. pieces <= 1: unchanged. InvalidArgument when
// the last block is not a weight and a bias of matching rows, or pieces exceeds the rows.
absl::StatusOr<Profile> CutOutputBlock(Profile profile, int64_t pieces);
// The tensors of `profile` in forward order, named "<block>/<index>" (the worker's
// BlockModel::OrderedParameters() names).
std::vector<TensorEntry> ProfileTensors(const Profile& profile);

}  // namespace p3::sim

#endif  // P3_P3_SIM_PROFILE_H_
