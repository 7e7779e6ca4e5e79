// A gradient message whose bytes arrive in several of gRPC's buffers: the shard sums and
// updates from the pieces as they are (p3/core/parameter_shard.h, Gradient with
// `segments`), with a value cut between two pieces put together on its own. The result
// must be bit for bit that of the same gradient handed over in one contiguous array, on
// every wire dtype, for one worker and three (the sum's every path: the first rank decoded
// into the sum, a later one added, one kept while ranks before it are missing, the last
// one added inside the update's pass), SGD with momentum and weight decay, and Adam.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "p3/core/parameter_shard.h"
#include "p3/core/wire_dtype.h"

namespace p3 {
namespace {

constexpr int64_t kParams = 1000;  // one slice: three blocks of 256 and a remainder

ClusterSignature OneSlice(int workers, WireDType dtype) {
  ClusterSignature sig;
  sig.num_workers = workers;
  sig.num_servers = 1;
  sig.tensors = {{"w", {kParams}, "float32"}};
  sig.plan.granularity = Granularity::kSliced;
  sig.plan.slice_params = kParams;
  sig.wire_dtype = dtype;
  return sig;
}

ShardOptions ShardFor(int workers, WireDType dtype, OptimizerKind kind) {
  ShardOptions o;
  o.num_workers = workers;
  o.wire_dtype = dtype;
  o.optimizer.kind = kind;
  o.optimizer.lr = 0.01;
  o.optimizer.momentum = 0.9;
  o.optimizer.weight_decay = 1e-3;
  return o;
}

// Values that differ in every bit position that matters, and a few large ones.
std::vector<float> GradientOf(int rank, uint64_t iteration) {
  std::vector<float> g(kParams);
  uint32_t x = 2654435761u * static_cast<uint32_t>(rank + 1) + 40503u * (iteration + 7);
  for (float& v : g) {
    x = x * 1664525u + 1013904223u;
    v = (static_cast<float>(x >> 8) / 16777216.0f - 0.5f) * ((x & 7) == 0 ? 300.0f : 1.0f);
  }
  return g;
}

// The bytes of values [from, to) of `g` on the wire, starting at an odd address, cut into
// pieces at odd byte positions: several of them inside a value.
struct CutMessage {
  std::string storage;
  std::vector<absl::string_view> segments;
};

CutMessage Cut(WireDType dtype, const std::vector<float>& g, int64_t from, int64_t to, int e) {
  CutMessage m;
  const size_t bytes = static_cast<size_t>(to - from) * BytesPerValue(dtype);
  m.storage.assign(bytes + 1, '\0');
  char* const start = m.storage.data() + 1;  // misaligned for every dtype
  EncodeValues(dtype, g.data() + from, to - from, e, start);
  size_t at = 0;
  for (size_t cut : {size_t{1}, size_t{7}, size_t{1026}, size_t{2051}, size_t{2053}, bytes}) {
    cut = std::min(cut, bytes);
    if (cut < at) continue;
    m.segments.emplace_back(start + at, cut - at);
    at = cut;
  }
  return m;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

CATCH_TEST_CASE(
    "a gradient cut into pieces at odd bytes, mid-value included, updates bit for bit as "
    "the same gradient in one piece") {
  for (WireDType dtype : {WireDType::kFloat32, WireDType::kBFloat16, WireDType::kFloat16}) {
    for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kAdam}) {
      for (const std::vector<int>& order :
           {std::vector<int>{0}, std::vector<int>{0, 1, 2}, std::vector<int>{2, 0, 1}}) {
        for (int parts : {1, 2}) {
          const int workers = static_cast<int>(order.size());
          CATCH_CAPTURE(WireDTypeName(dtype), kind == OptimizerKind::kSgd, workers, order[0],
                        parts);
          ParameterShard whole(ShardFor(workers, dtype, kind));
          ParameterShard cut(ShardFor(workers, dtype, kind));
          for (int r = 0; r < workers; ++r) {
            CATCH_REQUIRE(whole.Join(OneSlice(workers, dtype), r).ok());
            CATCH_REQUIRE(cut.Join(OneSlice(workers, dtype), r).ok());
          }
          std::vector<float> init(kParams);
          for (int64_t i = 0; i < kParams; ++i) init[i] = 0.001f * static_cast<float>(i % 97);
          CATCH_REQUIRE(whole.Init(0, 0, init.data(), kParams).ok());
          CATCH_REQUIRE(cut.Init(0, 0, init.data(), kParams).ok());
          std::vector<ToWorker> out_whole, out_cut;
          for (uint64_t it = 0; it < 3; ++it) {
            for (int rank : order) {
              const std::vector<float> g = GradientOf(rank, it);
              const std::optional<int> e =
                  dtype == WireDType::kFloat16
                      ? std::optional<int>(Float16ScaleExponent(g.data(), kParams))
                      : std::nullopt;
              const int64_t split = parts == 1 ? kParams : 613;
              for (int64_t from : {int64_t{0}, split}) {
                const int64_t to = from == 0 ? split : kParams;
                if (from >= to) continue;
                CATCH_REQUIRE(whole
                                  .Gradient(rank, 0, it, g.data() + from, to - from, from,
                                            &out_whole, e)
                                  .ok());
                const CutMessage m = Cut(dtype, g, from, to, e.value_or(0));
                CATCH_REQUIRE(m.segments.size() >= 4);
                CATCH_REQUIRE(cut.Gradient(rank, 0, it, m.segments, from, &out_cut, e).ok());
              }
            }
            const std::vector<float> a = whole.SliceValues(0)->first;
            const std::vector<float> b = cut.SliceValues(0)->first;
            CATCH_REQUIRE(a != init);  // the gradients did change the values
            CATCH_REQUIRE(SameBits(a, b));
          }
          // What goes back to the workers, too.
          CATCH_REQUIRE(out_whole.size() == out_cut.size());
          CATCH_REQUIRE(!out_cut.empty());
          CATCH_CHECK(out_whole.back().message.values->bytes() ==
                      out_cut.back().message.values->bytes());
        }
      }
    }
  }
}

}  // namespace
}  // namespace p3
