// BufferExchange (worker/buffer_exchange.h): the round awaited and server 0's mean of it.
#include "worker/buffer_exchange.h"

#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

namespace p3 {
namespace {

absl::string_view Bytes(const std::vector<float>& v) {
  return absl::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

CATCH_TEST_CASE("the mean of the round awaited, from server 0, is taken once") {
  BufferExchange exchange(/*rank=*/1);
  exchange.Expect(7);
  const std::vector<float> mean = {0.5f, -1.0f, 2.0f};
  std::thread server([&] { CATCH_CHECK(exchange.Arrived(0, 7, Bytes(mean)).ok()); });
  absl::StatusOr<std::vector<float>> got = exchange.Await(absl::Seconds(20));
  server.join();
  CATCH_REQUIRE(got.ok());
  CATCH_CHECK(*got == mean);
}

CATCH_TEST_CASE("buffers of another round or server, twice, or cut mid-value are refused") {
  BufferExchange exchange(/*rank=*/1);
  exchange.Expect(7);
  const std::vector<float> mean = {0.5f, -1.0f};
  const absl::Status other_round = exchange.Arrived(0, 6, Bytes(mean));
  CATCH_CHECK(absl::IsInternal(other_round));
  CATCH_CHECK(other_round.message() ==
              "server 0 sent buffers of round 6 (8 bytes); this worker awaits round 7 from "
              "server 0");
  CATCH_CHECK(absl::IsInternal(exchange.Arrived(1, 7, Bytes(mean))));
  CATCH_CHECK(absl::IsInternal(exchange.Arrived(0, 7, Bytes(mean).substr(0, 5))));
  CATCH_CHECK(exchange.Arrived(0, 7, Bytes(mean)).ok());
  CATCH_CHECK(absl::IsInternal(exchange.Arrived(0, 7, Bytes(mean))));  // a second time
  CATCH_CHECK(exchange.Await(absl::Seconds(20)).value() == mean);
}

CATCH_TEST_CASE("a wait ends with the run's failure, or names the round when time runs out") {
  BufferExchange exchange(/*rank=*/2);
  exchange.Expect(3);
  const absl::Status late = exchange.Await(absl::ZeroDuration()).status();
  CATCH_CHECK(absl::IsDeadlineExceeded(late));
  CATCH_CHECK(late.message().find("worker 2: waited 0 for the mean of the workers' buffers "
                                  "(round 3) from server 0") != std::string::npos);
  exchange.Abort(absl::UnavailableError("server 0 is gone"));
  exchange.Abort(absl::InternalError("later"));  // the first wins
  CATCH_CHECK(exchange.Await(absl::Seconds(20)).status() ==
              absl::UnavailableError("server 0 is gone"));
}

}  // namespace
}  // namespace p3
