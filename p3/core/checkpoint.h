// A server's checkpoint: the values and optimizer state of every slice it owns, all at
// the same version (iteration), in a self-checking binary file written atomically.
//
// File layout (little-endian): magic "P3CKPT01", u64 payload size, u64 FNV-1a-64 of the
// payload, then the payload: u64 iteration, i32 server_index, u32 slice count, and per
// slice: i32 slice id, i64 length, i64 optimizer steps, u8 has_buf, u8 has_buf_sq, the
// values (length float32), then buf and buf_sq (length float32 each) when present; then,
// only in a checkpoint of a re-planned run, "PLAN" and i64 slice_params, i64
// replan_slice_params (a file without them, as every file written before, reads as 0, 0:
// the config's plan); then, only in a checkpoint of an elastic run, "MEMB", u32 change
// count, and per change u64 from_iteration, u32 rank count, the ranks (i32 each) (a file
// without it reads as no membership).
//
// Example:
//   ShardCheckpoint ckpt = ...;                       // from ParameterShard's callback
//   absl::Status s = WriteCheckpoint(ckpt, "ckpt/server_0");   // ckpt/server_0/ckpt_000020.bin
//   absl::StatusOr<ShardCheckpoint> latest = ReadLatestCheckpoint("ckpt/server_0", 0);
//
//   CheckpointWriter writer([](ShardCheckpoint c) { ... WriteCheckpoint(c, dir) ... });
//   writer.Submit(std::move(ckpt));   // returns at once; written on the writer's thread
//   writer.Shutdown();                // writes what is queued, then joins
#ifndef P3_P3_CORE_CHECKPOINT_H_
#define P3_P3_CORE_CHECKPOINT_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "p3/core/membership.h"
#include "p3/core/optimizer.h"

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
  // The plan `slices` are cut in: slices of this size within the config's ownership
  // stripes (SlicePlan::WithSliceParams; a re-plan's); 0: the config's plan itself.
  int64_t slice_params = 0;
  // A re-plan that takes effect at `iteration` (its slices are still the old plan's):
  // the size from then on; 0: none. Restoring switches to it at once.
  int64_t replan_slice_params = 0;
  // Elastic runs (docs/reliability.md, "Elastic membership"): the membership changes in
  // effect up to `iteration`, the first from iteration 0 (so the present set at
  // `iteration` is the last one's); empty otherwise. A change the shard knew of that
  // takes effect after `iteration` is not recorded: whether it had arrived when the
  // checkpoint was cut depends on timing.
  std::vector<MembershipChange> membership;
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

// The newest iteration for which every one of servers 0 .. `servers`-1 has a valid
// checkpoint under `root` (<root>/server_<i>/ckpt_<iteration>.bin, each file read and
// verified, and holding that server's index and that iteration); 0 when there is none.
// An iteration that some server lacks, or whose file is torn or corrupt on one server,
// is passed over for an older one, so servers that each resume from the answer never
// mix iterations. What was passed over, and why, is appended to `passed_over` (may be
// null), for the log. Reads every candidate file: the cost is that of one restore per
// server per candidate.
uint64_t NewestCommonCheckpoint(const std::string& root, int servers,
                                std::string* passed_over = nullptr);

// Hands checkpoints to a function (usually one that calls WriteCheckpoint and reports
// the outcome) on a thread of its own, one at a time and in the order submitted, so that
// the thread that cut a checkpoint — a worker's stream handler — does not wait for the
// disk. The checkpoint is the caller's consistent copy; the writer only moves it.
//
// Thread-safe. Owns its thread; Shutdown() (also run by the destructor) hands on what is
// queued, then joins, and is safe to call twice.
class CheckpointWriter {
 public:
  // `write` runs on the writer's thread. At most `max_pending` checkpoints wait: Submit
  // blocks beyond that (a disk slower than the checkpoints come bounds the memory
  // instead of queueing copies of the shard without end). Default: 2.
  explicit CheckpointWriter(std::function<void(ShardCheckpoint)> write, size_t max_pending = 2);
  ~CheckpointWriter();

  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Queues `checkpoint`. Once Shutdown has begun, runs `write` on the calling thread
  // instead, so that nothing is lost.
  void Submit(ShardCheckpoint checkpoint);

  // Hands on every queued checkpoint, then joins the thread.
  void Shutdown();

 private:
  void Loop();

  const std::function<void(ShardCheckpoint)> write_;
  const size_t max_pending_;
  absl::Mutex mu_;
  std::deque<ShardCheckpoint> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Mutex join_mu_;  // serialises Shutdown's join
  std::thread thread_ ABSL_GUARDED_BY(join_mu_);
};

}  // namespace p3

#endif  // P3_P3_CORE_CHECKPOINT_H_
