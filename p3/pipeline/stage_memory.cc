#include "p3/pipeline/stage_memory.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <new>
#include <utility>

namespace p3::pipeline {
namespace {

// The owner of this thread's allocations (null ledger: none).
struct ThreadOwner {
  std::shared_ptr<MemoryLedger> ledger;
  int owner = 0;
  MemoryCategory category = MemoryCategory::kOther;
};
thread_local ThreadOwner t_owner;

// Every allocation of the wrapper carries a header in front of its data saying where its
// bytes were counted (a null ledger: nowhere). The data pointer is also the DataPtr's
// context, as libtorch's raw_allocate()/raw_deallocate() require, so raw_deleter() frees
// it too.
struct Header {
  std::shared_ptr<MemoryLedger> ledger;
  int owner = 0;
  MemoryCategory category = MemoryCategory::kOther;
  int64_t bytes = 0;
};
// Keeps the data at the wrapped allocator's alignment (c10 aligns to 64 bytes).
constexpr size_t kHeaderBytes = 64;
static_assert(sizeof(Header) <= kHeaderBytes, "the header must fit in front of the data");

c10::DeleterFnPtr g_wrapped_deleter = nullptr;  // set once, before the wrapper is installed

void DeleteWithHeader(void* data) {
  if (data == nullptr) return;
  void* base = static_cast<char*>(data) - kHeaderBytes;
  auto* header = static_cast<Header*>(base);
  if (header->ledger != nullptr) header->ledger->Add(header->owner, header->category, -header->bytes);
  header->~Header();
  g_wrapped_deleter(base);
}

class TrackingCpuAllocator : public c10::Allocator {
 public:
  explicit TrackingCpuAllocator(c10::Allocator* wrapped) : wrapped_(wrapped) {}

  c10::DataPtr allocate(size_t n) const override {
    void* base = wrapped_->raw_allocate(n + kHeaderBytes);
    auto* header = new (base) Header();
    const ThreadOwner& owner = t_owner;
    if (owner.ledger != nullptr && n > 0) {
      header->ledger = owner.ledger;
      header->owner = owner.owner;
      header->category = owner.category;
      header->bytes = static_cast<int64_t>(n);
      owner.ledger->Add(owner.owner, owner.category, header->bytes);
    }
    void* data = static_cast<char*>(base) + kHeaderBytes;
    return c10::DataPtr(data, data, &DeleteWithHeader, c10::Device(c10::DeviceType::CPU));
  }

  c10::DeleterFnPtr raw_deleter() const override { return &DeleteWithHeader; }

 private:
  c10::Allocator* const wrapped_;
};

std::once_flag g_install_once;
// Never deleted: storages it allocated may be freed at any time until the process ends.
std::atomic<TrackingCpuAllocator*> g_tracking{nullptr};

}  // namespace

std::string MemoryCategoryName(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::kModel:
      return "model";
    case MemoryCategory::kOptimizer:
      return "optimizer";
    case MemoryCategory::kStash:
      return "stash";
    case MemoryCategory::kForward:
      return "forward";
    case MemoryCategory::kBackward:
      return "backward";
    case MemoryCategory::kOther:
      return "other";
  }
  return "unknown";
}

MemoryLedger::MemoryLedger(int owners) {
  for (int k = 0; k < owners; ++k) owners_.push_back(std::make_unique<Owner>());
}

void MemoryLedger::Add(int owner, MemoryCategory category, int64_t bytes) {
  if (owner < 0 || owner >= owners()) return;
  Owner& o = *owners_[owner];
  const int c = static_cast<int>(category);
  absl::MutexLock lock(&o.mu);
  StageMemoryStats& s = o.stats;
  s.current_bytes += bytes;
  s.current[c] += bytes;
  if (bytes > 0) ++s.allocations;
  s.category_peak[c] = std::max(s.category_peak[c], s.current[c]);
  if (s.current_bytes > s.peak_bytes) {
    s.peak_bytes = s.current_bytes;
    s.at_peak = s.current;
  }
}

StageMemoryStats MemoryLedger::Stats(int owner) const {
  if (owner < 0 || owner >= owners()) return {};
  const Owner& o = *owners_[owner];
  absl::MutexLock lock(&o.mu);
  return o.stats;
}

void MemoryLedger::ResetPeaks() {
  for (const auto& o : owners_) {
    absl::MutexLock lock(&o->mu);
    o->stats.peak_bytes = o->stats.current_bytes;
    o->stats.at_peak = o->stats.current;
    o->stats.category_peak = o->stats.current;
  }
}

absl::Status InstallCpuMemoryTracking() {
  std::call_once(g_install_once, [] {
    c10::Allocator* wrapped = c10::GetCPUAllocator();
    g_wrapped_deleter = wrapped->raw_deleter();
    if (g_wrapped_deleter == nullptr) return;  // cannot wrap it: reported below
    auto* tracking = new TrackingCpuAllocator(wrapped);
    // The default CPU allocator is registered with priority 0; the highest priority
    // keeps it from being replaced behind our back.
    c10::SetAllocator(c10::DeviceType::CPU, tracking, /*priority=*/255);
    g_tracking.store(tracking);
  });
  if (c10::GetCPUAllocator() != g_tracking.load()) {
    return absl::InternalError(
        "libtorch did not take the memory-tracking CPU allocator (its CPU allocator has no raw "
        "deleter to wrap, or another one has priority)");
  }
  return absl::OkStatus();
}

bool CpuMemoryTrackingInstalled() {
  const TrackingCpuAllocator* tracking = g_tracking.load();
  return tracking != nullptr && c10::GetCPUAllocator() == tracking;
}

ScopedMemoryOwner::ScopedMemoryOwner(std::shared_ptr<MemoryLedger> ledger, int owner,
                                     MemoryCategory category)
    : previous_ledger_(std::move(t_owner.ledger)),
      previous_owner_(t_owner.owner),
      previous_category_(t_owner.category) {
  t_owner.ledger = std::move(ledger);
  t_owner.owner = owner;
  t_owner.category = category;
}

ScopedMemoryOwner::~ScopedMemoryOwner() {
  t_owner.ledger = std::move(previous_ledger_);
  t_owner.owner = previous_owner_;
  t_owner.category = previous_category_;
}

ScopedMemoryCategory::ScopedMemoryCategory(MemoryCategory category)
    : previous_(t_owner.category) {
  t_owner.category = category;
}

ScopedMemoryCategory::~ScopedMemoryCategory() { t_owner.category = previous_; }

}  // namespace p3::pipeline
