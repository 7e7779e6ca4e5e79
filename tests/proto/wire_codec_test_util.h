// Helpers shared by the wire codec's tests (proto/wire_codec.h).
#ifndef P3_TESTS_PROTO_WIRE_CODEC_TEST_UTIL_H_
#define P3_TESTS_PROTO_WIRE_CODEC_TEST_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "proto/p3.pb.h"

namespace p3 {

// The top-level members the tests name, by their generated field numbers.
inline constexpr int kHello = wire::WorkerMessage::kHelloFieldNumber;
inline constexpr int kInit = wire::WorkerMessage::kInitFieldNumber;
inline constexpr int kGradient = wire::WorkerMessage::kGradientFieldNumber;
inline constexpr int kDone = wire::WorkerMessage::kDoneFieldNumber;
inline constexpr int kWelcome = wire::ServerMessage::kWelcomeFieldNumber;
inline constexpr int kParams = wire::ServerMessage::kParamsFieldNumber;

// The parts in order, as one string.
std::string Concat(const std::vector<absl::string_view>& parts);
// n pseudo-random bytes, the same for the same seed.
std::string RandomBytes(size_t n, uint64_t seed);

}  // namespace p3

#endif  // P3_TESTS_PROTO_WIRE_CODEC_TEST_UTIL_H_
