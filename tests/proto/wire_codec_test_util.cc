#include "tests/proto/wire_codec_test_util.h"

#include <random>

namespace p3 {

std::string Concat(const std::vector<absl::string_view>& parts) {
  std::string out;
  for (absl::string_view p : parts) out.append(p.data(), p.size());
  return out;
}

std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

}  // namespace p3
