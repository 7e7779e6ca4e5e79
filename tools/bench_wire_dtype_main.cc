// Measures the 16-bit wire conversions (p3/core/wire_dtype.h) on this machine: for a block of
// float32 values as large as a slice, the median over --runs runs of GB/s of float32
// bytes converted, with memcpy of the same float32 bytes beside it for scale (all
// measured in one run, interleaved, so the machine's load affects all alike).
//
//   bazel-bin/tools/bench_wire_dtype [--values=1048576] [--runs=9]
//
// A conversion pays off on the wire when it is much faster than the link: 1 Gbit/s
// moves 0.125 GB/s, so halving the bytes saves 4 ns per value sent there.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "p3/base/stats.h"
#include "p3/core/wire_dtype.h"
#include "proto/program.h"

ABSL_FLAG(int64_t, values, 1 << 20, "float32 values per conversion (> 0)");
ABSL_FLAG(int, runs, 9, "runs; the median is printed (> 0)");

int main(int argc, char** argv) {
  p3::Program program("bench_wire_dtype", argc, argv);
  const int64_t n = absl::GetFlag(FLAGS_values);
  const int runs = absl::GetFlag(FLAGS_runs);
  if (n <= 0 || runs <= 0) return program.Fail(2, "--values and --runs must be > 0");
  std::vector<float> values(n), back(n), copy(n);
  std::vector<uint16_t> wire(n);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 0.01f);
  for (float& v : values) v = normal(rng);
  float scale = 1.0f;
  struct Case {
    const char* name;
    std::function<void()> run;
    std::vector<double> gbps;
  };
  std::vector<Case> cases = {
      {"memcpy float32 (reference)",
       [&] { std::memcpy(copy.data(), values.data(), n * sizeof(float)); }, {}},
      {"bfloat16 encode", [&] { p3::EncodeBFloat16(values.data(), n, wire.data()); }, {}},
      {"bfloat16 decode", [&] { p3::DecodeBFloat16(wire.data(), n, back.data()); }, {}},
      {"float16 scale (max scan)", [&] { scale = p3::Float16Scale(values.data(), n); }, {}},
      {"float16 encode", [&] { p3::EncodeFloat16(values.data(), n, scale, wire.data()); }, {}},
      {"float16 decode", [&] { p3::DecodeFloat16(wire.data(), n, 1.0f / scale, back.data()); },
       {}},
  };
  for (int r = 0; r < runs; ++r) {
    for (Case& c : cases) {
      const auto start = std::chrono::steady_clock::now();
      c.run();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      c.gbps.push_back(static_cast<double>(n) * sizeof(float) / s / 1e9);
    }
  }
  std::printf("%lld float32 values (%.1f MB), median of %d runs\n", static_cast<long long>(n),
              n * 4 / 1e6, runs);
  std::printf("%-28s %14s %14s\n", "conversion", "GB/s float32", "ns/value");
  for (Case& c : cases) {
    const double gbps = p3::Median(c.gbps);
    std::printf("%-28s %14.2f %14.3f\n", c.name, gbps, 4.0 / gbps);
  }
  return back[0] == 12345.0f ? 1 : 0;  // keeps the results alive
}
