// The worker's view of elastic membership: changes forwarded by every server, the
// release of a leaving worker's waits, a joining worker's wait.
#include "worker/elastic_membership.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace p3 {
namespace {

ElasticMembershipOptions Options(int rank) {
  return {.rank = rank, .num_servers = 2, .max_ranks = 3, .initial = 2};
}

CATCH_TEST_CASE("rank 0's request goes to every server, urgent, from the next iteration") {
  ElasticMembership m(Options(0), [](uint64_t) {});
  auto out = m.Request(99, {0, 1, 2});
  CATCH_REQUIRE(out.ok());
  CATCH_REQUIRE(out->size() == 2);
  for (int s = 0; s < 2; ++s) {
    CATCH_CHECK((*out)[s].server == s);
    CATCH_CHECK((*out)[s].message.kind == Upstream::Kind::kMembership);
    CATCH_CHECK((*out)[s].message.from_iteration == 100);
    CATCH_CHECK(*(*out)[s].message.present == std::vector<int>{0, 1, 2});
    CATCH_CHECK((*out)[s].priority < -1000000);
  }
  CATCH_CHECK(!m.Request(99, {1, 2}).ok());  // without rank 0
  ElasticMembership other(Options(1), [](uint64_t) {});
  CATCH_CHECK(other.Request(99, {0, 1, 2}).status().code() ==
              absl::StatusCode::kFailedPrecondition);
}

CATCH_TEST_CASE("a change forwarded by every server counts once; a contradiction fails") {
  ElasticMembership m(Options(1), [](uint64_t) {});
  CATCH_REQUIRE(m.Forwarded(0, 100, {0, 1, 2}).ok());
  CATCH_REQUIRE(m.Forwarded(1, 100, {0, 1, 2}).ok());
  CATCH_REQUIRE(m.Forwarded(1, 100, {0, 1, 2}).ok());  // again, to a joining worker
  CATCH_CHECK(m.changes().size() == 2);
  CATCH_CHECK(m.PresentAt(99) == std::vector<int>{0, 1});
  CATCH_CHECK(m.PresentAt(100) == std::vector<int>{0, 1, 2});
  const absl::Status differs = m.Forwarded(0, 100, {0, 2});
  CATCH_CHECK(differs.code() == absl::StatusCode::kInternal);
  CATCH_CHECK(std::string(differs.message()).find("another server") != std::string::npos);
}

CATCH_TEST_CASE("a leaving worker's waits are released once it finished the iteration before") {
  std::vector<uint64_t> released;
  ElasticMembership m(Options(2), [&](uint64_t v) { released.push_back(v); });
  CATCH_REQUIRE(m.Forwarded(0, 100, {0, 1, 2}).ok());
  m.Reached(150);
  CATCH_REQUIRE(m.Forwarded(0, 200, {0, 1}).ok());
  CATCH_CHECK(released.empty());  // still training iteration 199
  m.Reached(199);
  CATCH_CHECK(released.empty());
  m.Reached(200);
  CATCH_CHECK(released == std::vector<uint64_t>{200});
  m.Reached(201);
  CATCH_CHECK(released.size() == 1);  // once
  // The other order: the change comes after the iteration before it is done.
  std::vector<uint64_t> late;
  ElasticMembership n(Options(1), [&](uint64_t v) { late.push_back(v); });
  n.Reached(10);
  CATCH_CHECK(late.empty());
  CATCH_REQUIRE(n.Forwarded(1, 10, {0}).ok());
  CATCH_CHECK(late == std::vector<uint64_t>{10});
}

CATCH_TEST_CASE("a joining worker waits for the change that makes it present") {
  ElasticMembership m(Options(2), [](uint64_t) {});
  CATCH_CHECK(m.AwaitJoin(absl::Now()).status().code() == absl::StatusCode::kDeadlineExceeded);
  CATCH_REQUIRE(m.Forwarded(0, 7, {0, 2}).ok());
  auto first = m.AwaitJoin(absl::Now());
  CATCH_REQUIRE(first.ok());
  CATCH_CHECK(*first == 7);
  ElasticMembership aborted(Options(2), [](uint64_t) {});
  aborted.Abort(absl::UnavailableError("server 1 died"));
  CATCH_CHECK(aborted.AwaitJoin(absl::InfiniteFuture()).status().code() ==
              absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace p3
