#include "p3/core/shared_memory.h"

#include <sys/mman.h>

#include <catch2/catch.hpp>
#include <string>

namespace p3 {
namespace {

CATCH_TEST_CASE("a region opened by name and nonce shares memory with its creator") {
  absl::StatusOr<std::unique_ptr<SharedRegion>> mine = SharedRegion::Create(1000);
  CATCH_REQUIRE(mine.ok());
  for (int i = 0; i < 1000; ++i) {
    CATCH_REQUIRE((*mine)->params()[i] == 0.0f);  // zero-filled
    CATCH_REQUIRE((*mine)->grads()[i] == 0.0f);
  }
  absl::StatusOr<std::unique_ptr<SharedRegion>> theirs =
      SharedRegion::Open((*mine)->name(), (*mine)->nonce(), 1000);
  CATCH_REQUIRE(theirs.ok());
  (*mine)->grads()[999] = 2.5f;
  (*theirs)->params()[0] = -1.0f;
  CATCH_CHECK((*theirs)->grads()[999] == 2.5f);
  CATCH_CHECK((*mine)->params()[0] == -1.0f);
  // Parameters and gradients do not overlap, and both are page-aligned.
  CATCH_CHECK((*mine)->params() + 1000 <= (*mine)->grads());
  CATCH_CHECK(reinterpret_cast<uintptr_t>((*mine)->params()) % 4096 == 0);
  CATCH_CHECK(reinterpret_cast<uintptr_t>((*mine)->grads()) % 4096 == 0);
}

CATCH_TEST_CASE("a region with the wrong nonce or size is refused") {
  absl::StatusOr<std::unique_ptr<SharedRegion>> mine = SharedRegion::Create(100);
  CATCH_REQUIRE(mine.ok());
  absl::StatusOr<std::unique_ptr<SharedRegion>> wrong_nonce =
      SharedRegion::Open((*mine)->name(), (*mine)->nonce() + 1, 100);
  CATCH_CHECK(absl::IsFailedPrecondition(wrong_nonce.status()));
  // 100 and 101 floats round to the same pages: only the header tells them apart.
  absl::StatusOr<std::unique_ptr<SharedRegion>> wrong_count =
      SharedRegion::Open((*mine)->name(), (*mine)->nonce(), 101);
  CATCH_CHECK(absl::IsFailedPrecondition(wrong_count.status()));
  absl::StatusOr<std::unique_ptr<SharedRegion>> wrong_size =
      SharedRegion::Open((*mine)->name(), (*mine)->nonce(), 100000);
  CATCH_CHECK(absl::IsFailedPrecondition(wrong_size.status()));
  CATCH_CHECK(std::string(wrong_size.status().message()).find("expected") != std::string::npos);
}

CATCH_TEST_CASE("an unlinked or unknown name cannot be opened, but mappings stay valid") {
  absl::StatusOr<std::unique_ptr<SharedRegion>> mine = SharedRegion::Create(10);
  CATCH_REQUIRE(mine.ok());
  absl::StatusOr<std::unique_ptr<SharedRegion>> theirs =
      SharedRegion::Open((*mine)->name(), (*mine)->nonce(), 10);
  CATCH_REQUIRE(theirs.ok());
  (*mine)->Unlink();
  (*mine)->Unlink();  // twice is fine
  CATCH_CHECK(absl::IsNotFound(SharedRegion::Open((*mine)->name(), (*mine)->nonce(), 10).status()));
  (*theirs)->grads()[3] = 7.0f;
  CATCH_CHECK((*mine)->grads()[3] == 7.0f);
  CATCH_CHECK(absl::IsInvalidArgument(SharedRegion::Open("../etc/passwd", 1, 10).status()));
  CATCH_CHECK(absl::IsInvalidArgument(SharedRegion::Open("/a/b", 1, 10).status()));
}

CATCH_TEST_CASE("the creator removes the name when it goes away") {
  std::string name;
  uint64_t nonce = 0;
  {
    absl::StatusOr<std::unique_ptr<SharedRegion>> mine = SharedRegion::Create(10);
    CATCH_REQUIRE(mine.ok());
    name = (*mine)->name();
    nonce = (*mine)->nonce();
    CATCH_CHECK(SharedRegion::Open(name, nonce, 10).ok());
  }
  CATCH_CHECK(absl::IsNotFound(SharedRegion::Open(name, nonce, 10).status()));
}

CATCH_TEST_CASE("two regions get different names and nonces") {
  auto a = SharedRegion::Create(10);
  auto b = SharedRegion::Create(10);
  CATCH_REQUIRE(a.ok());
  CATCH_REQUIRE(b.ok());
  CATCH_CHECK((*a)->name() != (*b)->name());
  CATCH_CHECK((*a)->nonce() != (*b)->nonce());
}

}  // namespace
}  // namespace p3
