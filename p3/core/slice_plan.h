// Cuts a model's parameter tensors into the slices that travel between workers and
// servers, and assigns each slice a server and a priority.
//
// Tensors are given in forward order (the order the forward pass uses them). The plan
// is a pure function of the tensor sizes and the options, so every worker and server
// computes the same plan.
//
// Example:
//   SlicePlanOptions options;  // P3: slices of 40,000 parameters
//   options.num_servers = 2;
//   absl::StatusOr<SlicePlan> plan = SlicePlan::Create({{"fc1.w", 100000}, {"fc1.b", 10}},
//                                                      options);
//   // plan->slices(): fc1.w [0,40000) -> server 0, [40000,80000) -> server 1,
//   //                 [80000,100000) -> server 0, fc1.b [0,10) -> server 1.
//   options.pack_params = 1000;  // small neighbours share a slice
//   // SlicePlan::Create({{"bn.w", 64}, {"bn.b", 64}, {"fc.w", 5000}}, options):
//   //   bn.w + bn.b [0,128) -> server 0 (one pack), fc.w [128,5128) -> server 1.
//
// A SlicePlan is immutable and safe to share between threads.
#ifndef P3_P3_CORE_SLICE_PLAN_H_
#define P3_P3_CORE_SLICE_PLAN_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace p3 {

inline constexpr int64_t kDefaultSliceParams = 40000;       // the P3 paper's
inline constexpr int64_t kDefaultSplitThreshold = 1000000;  // MXNet's bigarray bound
// A config's default pack size (scheduling.pack_params absent): 118 of ResNet-50's 161
// tensors travel in 46 packs, 217 slices a worker become 145 at slices of 320,000
// (docs/results/throughput/throughput.md, "Packs of small tensors").
// SlicePlanOptions and WorkerOptions default to no packs.
inline constexpr int64_t kDefaultPackParams = 65536;
// The most values one message carries; larger slices travel in parts (docs/protocol.md).
inline constexpr int64_t kDefaultMaxMessageParams = int64_t{1} << 20;

// Calls write(offset, count) for the consecutive parts of at most `max_part` values
// (at least 1) that cover [0, n): one call when n <= max_part. Stops at the first call
// that returns false; returns whether every part was written.
template <typename Write>
bool WriteInParts(int64_t n, int64_t max_part, Write write) {
  const int64_t part = std::max<int64_t>(1, max_part);
  int64_t offset = 0;
  do {
    const int64_t count = std::min(part, n - offset);
    if (!write(offset, count)) return false;
    offset += count;
  } while (offset < n);
  return true;
}

// Bounds that keep a hostile or mistaken model description from exhausting memory.
inline constexpr int64_t kMaxPlanParams = int64_t{1} << 40;
inline constexpr int64_t kMaxPlanSlices = int64_t{1} << 22;

enum class Granularity {
  kSliced,  // every tensor cut into slices of `slice_params` (P3)
  kTensor,  // whole tensors; a tensor above `split_threshold` split evenly over servers
};

struct SlicePlanOptions {
  // Default: kSliced.
  Granularity granularity = Granularity::kSliced;
  // Parameters per slice (kSliced). Default: 40,000. Must be >= 1.
  int64_t slice_params = kDefaultSliceParams;
  // Ownership stripes (kSliced): when > 0, each tensor is first cut into stripes of this
  // many parameters, the stripes go to the servers round-robin (continuing across
  // tensors), and each stripe is cut into slices of `slice_params` (its last one shorter).
  // Every slice size then leaves each parameter on the same server, so that a run can
  // switch slice sizes without moving optimizer state (online search, docs/protocol.md
  // "Re-plan"). 0: every slice is its own stripe (slice i to server i mod S).
  // Default: 0. Must be >= 0.
  int64_t owner_params = 0;
  // Packs (kSliced): when > 0, consecutive tensors of fewer than this many parameters each
  // share one slice, as many as fit in pack_params parameters (a slice holding several
  // tensors is a pack; a small tensor without small neighbours is a slice of its own). A
  // pack goes whole to one server, as a stripe of its own in the round robin; it is never
  // cut, whatever slice_params is (so a re-plan keeps it), and has the priority of its
  // first tensor, the one the forward pass needs first. It cuts the messages of a model
  // with many small tensors (ResNet-50: 109 BatchNorm tensors of 161) without changing
  // any result on a float32 or bfloat16 wire, the servers' arithmetic being per value; a
  // float16 wire scales each slice by its own exponent, so packs round differently there.
  // Default: 0 (no packs). Must be >= 0.
  int64_t pack_params = 0;
  // Tensors with more parameters are split over the servers (kTensor). Default: 1,000,000.
  int64_t split_threshold = kDefaultSplitThreshold;
  // Number of servers. Default: 1. Must be >= 1.
  int num_servers = 1;
};

struct TensorEntry {
  std::string name;
  int64_t numel = 0;
};

struct Slice {
  int id = 0;           // index in SlicePlan::slices()
  int tensor = 0;       // index of its (first) tensor, in forward order
  int last_tensor = 0;  // index of its last tensor: > tensor for a pack of several
  int64_t offset = 0;   // first parameter, in the flat buffer of all parameters
  int64_t length = 0;  // number of parameters
  int server = 0;      // the server that owns it
  int priority = 0;    // smaller is more urgent: the tensor's forward index
};

class SlicePlan {
 public:
  // Fails on an empty tensor list, a tensor with no parameters, bad options, or more than
  // kMaxPlanParams parameters or kMaxPlanSlices slices. Packs that would leave a server
  // without a slice (a model of a few packs) are left out when the plan without them has
  // a slice for every server; options() still says pack_params.
  static absl::StatusOr<SlicePlan> Create(const std::vector<TensorEntry>& tensors,
                                          const SlicePlanOptions& options);

  // Slices in forward order: by tensor, then by offset. Slice i of this stream goes to
  // server i mod S (round-robin continues across tensors); with owner_params, stripe i
  // does.
  const std::vector<Slice>& slices() const { return slices_; }
  const std::vector<TensorEntry>& tensors() const { return tensors_; }
  const SlicePlanOptions& options() const { return options_; }

  // The same tensors and options with slices of `slice_params`: with owner_params > 0 every
  // parameter stays on its server. Fails as Create() does.
  absl::StatusOr<SlicePlan> WithSliceParams(int64_t slice_params) const;

  // Offset of tensor `t` in the flat buffer of all parameters.
  int64_t tensor_offset(int t) const { return tensor_offsets_[t]; }
  // The slices holding tensor `t`: slices()[first] .. slices()[last - 1] for {first, last};
  // for a tensor in a pack, the pack alone.
  std::pair<int, int> tensor_slices(int t) const { return {first_slice_[t], end_slice_[t]}; }
  // The slices holding any of tensors [t_begin, t_end) (t_end may be tensors().size()); an
  // empty range when t_begin == t_end. A pack that holds tensors on both sides of a bound
  // belongs to both neighbouring ranges.
  std::pair<int, int> tensors_slices(int t_begin, int t_end) const;
  // Whether slice `id` is a pack of more than one tensor.
  bool is_pack(int id) const { return slices_[id].last_tensor > slices_[id].tensor; }
  int64_t total_params() const { return total_params_; }
  // Ids of the slices owned by `server`, in forward order.
  const std::vector<int>& server_slices(int server) const { return server_slices_[server]; }

 private:
  SlicePlan() = default;
  // Create's plan, with packs where `packs` and options.pack_params > 0.
  static absl::StatusOr<SlicePlan> Build(const std::vector<TensorEntry>& tensors,
                                         const SlicePlanOptions& options, bool packs);

  SlicePlanOptions options_;
  std::vector<TensorEntry> tensors_;
  std::vector<Slice> slices_;
  std::vector<int64_t> tensor_offsets_;
  std::vector<int> first_slice_;  // per tensor: the first slice holding it
  std::vector<int> end_slice_;    // per tensor: one past the last slice holding it
  std::vector<std::vector<int>> server_slices_;
  int64_t total_params_ = 0;
};

// The plan a server's slices are cut in, as its Welcome names it (docs/protocol.md,
// "Rejoining after a re-plan"): SlicePlan::WithSliceParams(slice_params) of the plan the
// workers' Hello names, in force since iteration `from_iteration`. slice_params 0: the
// Hello's plan itself (no re-plan has replaced it).
struct PlanInForce {
  uint64_t from_iteration = 0;
  int64_t slice_params = 0;
  bool operator==(const PlanInForce& o) const {
    return from_iteration == o.from_iteration && slice_params == o.slice_params;
  }
};

}  // namespace p3

#endif  // P3_P3_CORE_SLICE_PLAN_H_
