// A server's checkpoint: the values and optimizer state of every slice it owns, all at
// the same version (iteration), in a self-checking binary file written atomically.
//
// File layout (little-endian): magic "P3CKPT01", u64 payload size, u64 FNV-1a-64 of the
// payload, then the payload: u64 iteration, i32 server_index, u32 slice count, and per
// slice: i32 slice id, i64 length, i64 optimizer steps, u8 has_buf, u8 has_buf_sq, the
// values (length float32), then buf and buf_sq (length float32 each) when present.
//
// Example:
//   ShardCheckpoint ckpt = ...;                       // from ParameterShard's callback
//   absl::Status s = WriteCheckpoint(ckpt, "ckpt/server_0");   // ckpt/server_0/ckpt_000020.bin
//   absl::StatusOr<ShardCheckpoint> latest = ReadLatestCheckpoint("ckpt/server_0", 0);
#ifndef P3_P3_CHECKPOINT_H_
#define P3_P3_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "p3/optimizer.h"

namespace p3 {

struct SliceCheckpoint {
  int slice_id = 0;
  std::vector<float> params;
  SliceOptimizerState optimizer;
};

struct ShardCheckpoint {
  uint64_t iteration = 0;  // every slice is at this version
  int server_index = 0;
  std::vector<SliceCheckpoint> slices;  // by slice id
};

// Writes `dir`/ckpt_<iteration>.bin: to a temporary file, fsync, rename, fsync of the
// folder — a crash at any point leaves either the old set of checkpoints or the new one,
// never a torn file under the final name. Then deletes all but the newest `keep`.
absl::Status WriteCheckpoint(const ShardCheckpoint& checkpoint, const std::string& dir,
                             int keep = 2);

// Reads and verifies one file (DataLoss for a torn or corrupt file).
absl::StatusOr<ShardCheckpoint> ReadCheckpoint(const std::string& path);

// The newest valid checkpoint in `dir`, or the one at `iteration` when it is not 0.
// NotFound when there is none; corrupt files are skipped (the reason is in the error
// when nothing valid is left).
absl::StatusOr<ShardCheckpoint> ReadLatestCheckpoint(const std::string& dir, uint64_t iteration);

}  // namespace p3

#endif  // P3_P3_CHECKPOINT_H_
