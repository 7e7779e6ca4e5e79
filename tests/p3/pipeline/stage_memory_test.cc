// The per-stage memory ledger and the counting CPU allocator (p3/pipeline/stage_memory.h):
// known allocation patterns give the expected current and peak bytes per owner and
// category, frees on other threads go to the owner, unowned threads are not counted.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "p3/pipeline/stage_memory.h"

namespace p3::pipeline {
namespace {

constexpr int64_t kFloat = 4;

CATCH_TEST_CASE("the ledger keeps current and peak bytes per owner and the breakdown at the peak") {
  MemoryLedger ledger(2);
  ledger.Add(0, MemoryCategory::kModel, 100);
  ledger.Add(0, MemoryCategory::kForward, 50);
  ledger.Add(0, MemoryCategory::kForward, -50);
  ledger.Add(0, MemoryCategory::kStash, 30);
  ledger.Add(1, MemoryCategory::kBackward, 7);
  ledger.Add(5, MemoryCategory::kBackward, 7);  // out of range: ignored
  const StageMemoryStats s = ledger.Stats(0);
  CATCH_CHECK(s.current_bytes == 130);
  CATCH_CHECK(s.peak_bytes == 150);
  CATCH_CHECK(s.AtPeak(MemoryCategory::kModel) == 100);
  CATCH_CHECK(s.AtPeak(MemoryCategory::kForward) == 50);
  CATCH_CHECK(s.AtPeak(MemoryCategory::kStash) == 0);
  CATCH_CHECK(s.CategoryPeak(MemoryCategory::kStash) == 30);
  CATCH_CHECK(s.Current(MemoryCategory::kForward) == 0);
  CATCH_CHECK(s.allocations == 3);
  CATCH_CHECK(ledger.Stats(1).peak_bytes == 7);
  ledger.ResetPeaks();
  CATCH_CHECK(ledger.Stats(0).peak_bytes == 130);
  CATCH_CHECK(ledger.Stats(0).CategoryPeak(MemoryCategory::kForward) == 0);
}

CATCH_TEST_CASE("tensor allocations are counted for the thread's owner and category until freed") {
  CATCH_REQUIRE(InstallCpuMemoryTracking().ok());
  CATCH_REQUIRE(InstallCpuMemoryTracking().ok());  // again: a no-op
  CATCH_CHECK(CpuMemoryTrackingInstalled());
  auto ledger = std::make_shared<MemoryLedger>(3);
  torch::Tensor kept;
  {
    ScopedMemoryOwner owner(ledger, 1, MemoryCategory::kModel);
    kept = torch::zeros({1000});  // 4000 bytes, owner 1, model
    {
      ScopedMemoryCategory forward(MemoryCategory::kForward);
      torch::Tensor a = torch::ones({500});  // 2000 bytes
      torch::Tensor b = torch::ones({250});  // 1000 bytes: the peak, 7000
    }  // a and b freed
    torch::Tensor c = torch::ones({100});  // back in kModel: 400 bytes
    const StageMemoryStats s = ledger->Stats(1);
    CATCH_CHECK(s.current_bytes == 1100 * kFloat);
    CATCH_CHECK(s.peak_bytes == 1750 * kFloat);
    CATCH_CHECK(s.AtPeak(MemoryCategory::kForward) == 750 * kFloat);
    CATCH_CHECK(s.AtPeak(MemoryCategory::kModel) == 1000 * kFloat);
    CATCH_CHECK(s.Current(MemoryCategory::kModel) == 1100 * kFloat);
  }
  // Outside the scope: not counted for anybody.
  torch::Tensor unowned = torch::ones({10000});
  CATCH_CHECK(ledger->Stats(0).peak_bytes == 0);
  CATCH_CHECK(ledger->Stats(1).current_bytes == 1000 * kFloat);
  CATCH_CHECK(ledger->Stats(2).peak_bytes == 0);
  kept = torch::Tensor();
  CATCH_CHECK(ledger->Stats(1).current_bytes == 0);
  CATCH_CHECK(ledger->Stats(1).peak_bytes == 1750 * kFloat);
}

CATCH_TEST_CASE("a tensor freed on another thread is credited back to the stage that made it") {
  CATCH_REQUIRE(InstallCpuMemoryTracking().ok());
  auto ledger = std::make_shared<MemoryLedger>(2);
  torch::Tensor handed;
  // Stage 0 makes an activation and hands it over.
  std::thread producer([&] {
    ScopedMemoryOwner owner(ledger, 0, MemoryCategory::kForward);
    handed = torch::ones({2048});
  });
  producer.join();
  // Stage 1 computes with it (its result is its own) and drops it.
  std::thread consumer([&] {
    ScopedMemoryOwner owner(ledger, 1, MemoryCategory::kForward);
    torch::Tensor y = handed + handed;
    handed = torch::Tensor();
  });
  consumer.join();
  CATCH_CHECK(ledger->Stats(0).peak_bytes == 2048 * kFloat);
  CATCH_CHECK(ledger->Stats(0).current_bytes == 0);
  CATCH_CHECK(ledger->Stats(1).peak_bytes == 2048 * kFloat);
  CATCH_CHECK(ledger->Stats(1).current_bytes == 0);
}

CATCH_TEST_CASE("scopes nest and restore the previous owner") {
  CATCH_REQUIRE(InstallCpuMemoryTracking().ok());
  auto a = std::make_shared<MemoryLedger>(1);
  auto b = std::make_shared<MemoryLedger>(1);
  std::vector<torch::Tensor> keep;
  {
    ScopedMemoryOwner outer(a, 0, MemoryCategory::kOther);
    {
      ScopedMemoryOwner inner(b, 0, MemoryCategory::kStash);
      keep.push_back(torch::ones({10}));
    }
    keep.push_back(torch::ones({20}));
  }
  CATCH_CHECK(b->Stats(0).Current(MemoryCategory::kStash) == 10 * kFloat);
  CATCH_CHECK(a->Stats(0).Current(MemoryCategory::kOther) == 20 * kFloat);
  CATCH_CHECK(a->Stats(0).current_bytes == 20 * kFloat);
  CATCH_CHECK(MemoryCategoryName(MemoryCategory::kStash) == "stash");
}

}  // namespace
}  // namespace p3::pipeline
