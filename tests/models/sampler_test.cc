// ShardedSampler: permutations, sharding across workers, determinism, validation.
#include <algorithm>
#include <catch2/catch.hpp>
#include <numeric>
#include <set>
#include <vector>

#include "models/sampler.h"

namespace p3::models {
namespace {

ShardedSampler Make(int64_t size, int64_t batch, int64_t workers, int64_t rank, uint64_t seed = 1) {
  absl::StatusOr<ShardedSampler> s = ShardedSampler::Create({.dataset_size = size,
                                                             .batch_size = batch,
                                                             .num_workers = workers,
                                                             .rank = rank,
                                                             .seed = seed});
  CATCH_REQUIRE(s.ok());
  return *s;
}

CATCH_TEST_CASE("each epoch is a permutation and epochs differ") {
  std::vector<int64_t> e0 = ShardedSampler::EpochPermutation(1000, 7, 0);
  std::vector<int64_t> e1 = ShardedSampler::EpochPermutation(1000, 7, 1);
  std::vector<int64_t> sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> identity(1000);
  std::iota(identity.begin(), identity.end(), 0);
  CATCH_CHECK(sorted == identity);
  CATCH_CHECK(e0 != identity);
  CATCH_CHECK(e0 != e1);
  CATCH_CHECK(e0 == ShardedSampler::EpochPermutation(1000, 7, 0));
  CATCH_CHECK(e0 != ShardedSampler::EpochPermutation(1000, 8, 0));
}

CATCH_TEST_CASE("the permutation is the same on every platform (pinned values)") {
  // Fisher-Yates over std::mt19937_64 with std::seed_seq: both fully specified by C++.
  std::vector<int64_t> p = ShardedSampler::EpochPermutation(10, 1, 0);
  CATCH_CHECK(p == ShardedSampler::EpochPermutation(10, 1, 0));
  CATCH_INFO("pinned permutation changed: the data order of experiments would change");
  CATCH_CHECK(p == std::vector<int64_t>{2, 1, 8, 9, 6, 7, 3, 5, 0, 4});
}

CATCH_TEST_CASE("ranks of one iteration are disjoint and concatenate to the global batch") {
  const int64_t size = 1003, batch = 8, workers = 4;
  ShardedSampler single = Make(size, batch * workers, 1, 0, /*seed=*/3);
  std::vector<ShardedSampler> ranks;
  for (int64_t r = 0; r < workers; ++r) ranks.push_back(Make(size, batch, workers, r, 3));
  CATCH_CHECK(single.iterations_per_epoch() == size / (batch * workers));
  for (const ShardedSampler& s : ranks) {
    CATCH_CHECK(s.iterations_per_epoch() == single.iterations_per_epoch());
  }
  // Three epochs, crossing epoch boundaries.
  for (int64_t it = 0; it < 3 * single.iterations_per_epoch(); ++it) {
    std::vector<int64_t> joined;
    for (ShardedSampler& s : ranks) {
      std::vector<int64_t> part = s.Indices(it);
      CATCH_REQUIRE(part.size() == static_cast<size_t>(batch));
      joined.insert(joined.end(), part.begin(), part.end());
    }
    CATCH_REQUIRE(joined == single.Indices(it));
    CATCH_REQUIRE(std::set<int64_t>(joined.begin(), joined.end()).size() == joined.size());
  }
}

CATCH_TEST_CASE("one epoch reads every sample at most once and drops only the remainder") {
  const int64_t size = 103, batch = 5, workers = 2;
  std::vector<ShardedSampler> ranks;
  for (int64_t r = 0; r < workers; ++r) ranks.push_back(Make(size, batch, workers, r));
  std::vector<int64_t> seen;
  for (int64_t it = 0; it < ranks[0].iterations_per_epoch(); ++it) {
    for (ShardedSampler& s : ranks) {
      for (int64_t i : s.Indices(it)) seen.push_back(i);
    }
  }
  CATCH_CHECK(seen.size() == 100);
  CATCH_CHECK(std::set<int64_t>(seen.begin(), seen.end()).size() == 100);
  CATCH_CHECK(*std::max_element(seen.begin(), seen.end()) < size);
}

CATCH_TEST_CASE("the sampler is deterministic and independent of call order") {
  ShardedSampler a = Make(500, 10, 2, 1, 9);
  ShardedSampler b = Make(500, 10, 2, 1, 9);
  std::vector<int64_t> late = a.Indices(77);  // epoch 3 first
  std::vector<int64_t> early = a.Indices(2);
  CATCH_CHECK(b.Indices(2) == early);
  CATCH_CHECK(b.Indices(77) == late);
}

CATCH_TEST_CASE("invalid options are InvalidArgument naming the field") {
  auto code = [](ShardedSamplerOptions o) { return ShardedSampler::Create(o).status(); };
  absl::Status s = code({.dataset_size = 100, .batch_size = 0});
  CATCH_CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(s.message().find("batch_size") != absl::string_view::npos);
  s = code({.dataset_size = 100, .batch_size = 4, .num_workers = 2, .rank = 2});
  CATCH_CHECK(s.message().find("rank") != absl::string_view::npos);
  s = code({.dataset_size = 100, .batch_size = 4, .num_workers = 0});
  CATCH_CHECK(s.message().find("num_workers") != absl::string_view::npos);
  s = code({.dataset_size = 7, .batch_size = 4, .num_workers = 2, .rank = 0});
  CATCH_CHECK(s.message().find("dataset_size") != absl::string_view::npos);
  ShardedSampler invalid({.dataset_size = 7, .batch_size = 4, .num_workers = 2});
  CATCH_CHECK(invalid.Indices(0).empty());
}

}  // namespace
}  // namespace p3::models
