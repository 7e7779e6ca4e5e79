// Measured memory per pipeline stage. The stages of a PipelineEngine are threads of one
// process, so the process's resident size cannot tell them apart; instead every CPU
// tensor allocation made on a thread that has an *owner* (a stage) is counted for that
// owner, in a *category* (what the bytes are for), by a wrapper around libtorch's CPU
// allocator. The bytes go back to the owner and category of the allocation when the
// tensor's storage is freed, whichever thread frees it (an activation handed to the next
// stage is freed by that stage's thread but was allocated, and is counted, by this one).
//
// What is counted: the storage bytes libtorch asks its CPU allocator for (tensor data).
// Not counted: memory that libraries take from malloc themselves (OpenMP/BLAS scratch,
// libtorch's small bookkeeping objects, the allocator's own rounding), tensors on other
// devices, and allocations on threads without an owner (the caller's thread, unless it
// opens a ScopedMemoryOwner).
//
// Example:
//   P3_RETURN_IF_ERROR(InstallCpuMemoryTracking());   // once; process-wide
//   auto ledger = std::make_shared<MemoryLedger>(2);
//   {
//     ScopedMemoryOwner owner(ledger, 1, MemoryCategory::kForward);
//     torch::Tensor t = torch::empty({256});           // 1 KiB counted for owner 1
//   }                                                   // freed: back to 0, peak 1 KiB
//   StageMemoryStats s = ledger->Stats(1);              // s.peak_bytes == 1024
//
// Thread-safety: MemoryLedger is thread-safe (a mutex per owner). The scopes are
// per thread and must be destroyed in reverse order of creation on their thread.
#ifndef P3_PIPELINE_STAGE_MEMORY_H_
#define P3_PIPELINE_STAGE_MEMORY_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace p3::pipeline {

// What a stage's bytes are for; set by the code that allocates them (stage_engine.cc).
enum class MemoryCategory {
  kModel = 0,  // the stage's model replica (all blocks: every stage holds a whole replica)
  kOptimizer,  // SGD state: separate real weights, momentum, scratch
  kStash,      // weight versions kept for a later backward (pipedream, spectrain v2,
               // recomputation in pipelined modes)
  kForward,    // allocated in a forward: activations kept for the backward, the output
  kBackward,   // allocated in a backward: parameter gradients, input gradients, temporaries
  kOther,      // anything else on an owned thread (e.g. data_parallel's all-reduce)
};
inline constexpr int kNumMemoryCategories = 6;
// "model", "optimizer", "stash", "forward", "backward", "other".
std::string MemoryCategoryName(MemoryCategory category);

// One owner's figures, in bytes.
struct StageMemoryStats {
  int64_t current_bytes = 0;  // live now
  int64_t peak_bytes = 0;     // the most live at once (since creation or ResetPeaks())
  // Live bytes per category now, at the moment the peak was reached, and each
  // category's own peak (reached at any time: they need not add up to peak_bytes).
  std::array<int64_t, kNumMemoryCategories> current{};
  std::array<int64_t, kNumMemoryCategories> at_peak{};
  std::array<int64_t, kNumMemoryCategories> category_peak{};
  int64_t allocations = 0;  // allocations counted so far

  int64_t Current(MemoryCategory c) const { return current[static_cast<int>(c)]; }
  int64_t AtPeak(MemoryCategory c) const { return at_peak[static_cast<int>(c)]; }
  int64_t CategoryPeak(MemoryCategory c) const { return category_peak[static_cast<int>(c)]; }
};

// Current and peak bytes of `owners` owners (0..owners-1).
class MemoryLedger {
 public:
  explicit MemoryLedger(int owners);

  // `bytes` allocated (> 0) or freed (< 0) for `owner` in `category`. An owner out of
  // range is ignored.
  void Add(int owner, MemoryCategory category, int64_t bytes);
  StageMemoryStats Stats(int owner) const;
  // Every owner's peaks := its current figures.
  void ResetPeaks();
  int owners() const { return static_cast<int>(owners_.size()); }

 private:
  struct Owner {
    mutable absl::Mutex mu;
    StageMemoryStats stats ABSL_GUARDED_BY(mu);
  };
  std::vector<std::unique_ptr<Owner>> owners_;
};

// Installs, once for the process, a CPU allocator that wraps the one libtorch has
// (c10::GetCPUAllocator()) and counts allocations made on owned threads. It cannot be
// uninstalled (tensors it allocated may live until exit); on a thread without an owner
// it adds nothing but a thread-local read. Safe to call from several threads and again.
// InternalError if libtorch does not take it (another allocator with a higher priority).
absl::Status InstallCpuMemoryTracking();
bool CpuMemoryTrackingInstalled();

// While alive, CPU allocations on this thread are counted for `owner` of `ledger` in
// `category` (the ledger lives as long as the storages allocated under it). Restores
// the thread's previous owner when destroyed. A null ledger: nothing is counted.
class ScopedMemoryOwner {
 public:
  ScopedMemoryOwner(std::shared_ptr<MemoryLedger> ledger, int owner, MemoryCategory category);
  ~ScopedMemoryOwner();
  ScopedMemoryOwner(const ScopedMemoryOwner&) = delete;
  ScopedMemoryOwner& operator=(const ScopedMemoryOwner&) = delete;

 private:
  std::shared_ptr<MemoryLedger> previous_ledger_;
  int previous_owner_;
  MemoryCategory previous_category_;
};

// While alive, this thread's allocations go to `category` (same owner). Restores the
// previous category when destroyed. Does nothing visible on a thread without an owner.
class ScopedMemoryCategory {
 public:
  explicit ScopedMemoryCategory(MemoryCategory category);
  ~ScopedMemoryCategory();
  ScopedMemoryCategory(const ScopedMemoryCategory&) = delete;
  ScopedMemoryCategory& operator=(const ScopedMemoryCategory&) = delete;

 private:
  MemoryCategory previous_;
};

}  // namespace p3::pipeline

#endif  // P3_PIPELINE_STAGE_MEMORY_H_
