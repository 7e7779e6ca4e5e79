// bench_shard: the parameter server's hot loop without gRPC. A ParameterShard gets W
// workers' gradients of every slice for a number of iterations; the time per parameter
// value and iteration covers what the shard does per message: adding each gradient to the
// slice's sum in rank order (or keeping it until the ranks before it are in), the mean,
// the optimizer and the snapshot sent back. --memory_floor times the least memory
// traffic of the SGD update instead (the floor under the SGD figures).
//
//   bazel build //tools:bench_shard --jobs=2
//   (one command, wrapped here)
//   bazel-bin/tools/bench_shard --workers=4 --slice_params=40000 --slices=64
//       --iterations=20 --optimizer=sgd --repeats=5
//
// Prints one CSV line per repeat: optimizer,workers,slice_params,slices,iterations,
// ns_per_value,grad_gb_per_s,allocs_per_slice_update. See docs/results/server_hot_loop/server_hot_loop.md.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "p3/base/allocation_count.h"
#include "absl/flags/flag.h"
#include "p3/core/parameter_shard.h"
#include "proto/program.h"

ABSL_FLAG(int, workers, 4, "number of workers (gradients per slice and iteration)");
ABSL_FLAG(int64_t, slice_params, 40000, "values per slice");
ABSL_FLAG(int, slices, 64, "number of slices");
ABSL_FLAG(int, iterations, 20, "iterations timed (after 2 of warm-up)");
ABSL_FLAG(std::string, optimizer, "sgd", "sgd (momentum 0.9, weight decay 1e-4) or adam");
ABSL_FLAG(int, repeats, 1, "timed repeats, one CSV line each");
ABSL_FLAG(bool, header, false, "print the CSV header first");
ABSL_FLAG(bool, memory_floor, false,
          "instead of the shard, time the least memory traffic SGD with momentum needs per "
          "value (read and write the value and its momentum, write the snapshot; the "
          "gradient from cache, as the shard gets it): optimizer column 'floor'");

namespace p3 {
namespace {

// Whether the shard has Gradient(..., std::vector<ToWorker>* out), the reusable-output
// form the server uses. The same source then also builds against the shard before that
// form existed, for before/after figures from one benchmark.
template <typename S, typename = void>
struct HasAppendingGradient : std::false_type {};
template <typename S>
struct HasAppendingGradient<S,
                            std::void_t<decltype(std::declval<S&>().Gradient(
                                0, 0, 0, nullptr, 0, 0, std::declval<std::vector<ToWorker>*>()))>>
    : std::true_type {};

template <typename Shard>
bool SendGradient(Shard& shard, int rank, int slice, uint64_t iteration, const float* values,
                  int64_t n, std::vector<ToWorker>* out) {
  if constexpr (HasAppendingGradient<Shard>::value) {
    out->clear();
    return shard.Gradient(rank, slice, iteration, values, n, 0, out).ok();
  } else {
    auto result = shard.Gradient(rank, slice, iteration, values, n);
    return result.ok();
  }
}

// The memory floor of the SGD update over slices x slice_params values: one pass that
// reads and writes each value and its momentum and writes its snapshot, with a gradient
// of one slice that stays in cache. Prints the CSV line of Run() with optimizer "floor".
int RunFloor(int64_t slice_params, int slices, int iterations, int repeats) {
  const int64_t n = slice_params * slices;
  std::vector<float> values(n, 1.0f), momentum(n, 0.0f), snapshot(n, 0.0f);
  std::vector<float> grad(slice_params, 1e-3f);
  auto pass = [&] {
    for (int64_t s = 0; s < slices; ++s) {
      float* __restrict p = values.data() + s * slice_params;
      float* __restrict m = momentum.data() + s * slice_params;
      float* __restrict out = snapshot.data() + s * slice_params;
      const float* __restrict g = grad.data();
      for (int64_t i = 0; i < slice_params; ++i) {
        m[i] = 0.9f * m[i] + g[i];
        p[i] -= 0.05f * m[i];
        out[i] = p[i];
      }
    }
  };
  for (int i = 0; i < 2; ++i) pass();
  for (int rep = 0; rep < repeats; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i) pass();
    const auto end = std::chrono::steady_clock::now();
    const double ns = std::chrono::duration<double, std::nano>(end - start).count();
    const double count = static_cast<double>(iterations) * n;
    std::printf("floor,1,%lld,%d,%d,%.4f,%.3f,0.00\n", static_cast<long long>(slice_params),
                slices, iterations, ns / count, count * sizeof(float) / ns);
  }
  // Keeps the passes from being optimised away.
  return values[n / 2] == 0.125f ? 3 : 0;
}

int Run() {
  const int workers = absl::GetFlag(FLAGS_workers);
  const int64_t slice_params = absl::GetFlag(FLAGS_slice_params);
  const int slices = absl::GetFlag(FLAGS_slices);
  const int iterations = absl::GetFlag(FLAGS_iterations);
  const std::string optimizer = absl::GetFlag(FLAGS_optimizer);
  if (workers < 1 || slice_params < 1 || slices < 1 || iterations < 1 ||
      (optimizer != "sgd" && optimizer != "adam")) {
    std::fprintf(stderr, "bench_shard: bad flags\n");
    return 2;
  }
  if (absl::GetFlag(FLAGS_memory_floor)) {
    if (absl::GetFlag(FLAGS_header)) {
      std::printf(
          "optimizer,workers,slice_params,slices,iterations,ns_per_value,grad_gb_per_s,"
          "allocs_per_slice_update\n");
    }
    return RunFloor(slice_params, slices, iterations, absl::GetFlag(FLAGS_repeats));
  }
  ShardOptions options;
  options.num_workers = workers;
  options.optimizer.kind = optimizer == "adam" ? OptimizerKind::kAdam : OptimizerKind::kSgd;
  options.optimizer.lr = optimizer == "adam" ? 1e-3 : 0.05;
  options.optimizer.weight_decay = 1e-4;
  ParameterShard shard(options);
  ClusterSignature sig;
  sig.num_workers = workers;
  sig.num_servers = 1;
  sig.tensors = {{"w", {slice_params * slices}, "float32"}};
  sig.plan.granularity = Granularity::kSliced;
  sig.plan.slice_params = slice_params;
  for (int r = 0; r < workers; ++r) {
    if (!shard.Join(sig, r).ok()) {
      std::fprintf(stderr, "bench_shard: join failed\n");
      return 1;
    }
  }
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> init(slice_params);
  for (float& x : init) x = normal(rng);
  for (int s = 0; s < slices; ++s) {
    if (!shard.Init(0, s, init.data(), slice_params).ok()) return 1;
  }
  // One gradient per worker, reused for every slice: the bench measures the server, not
  // the generation of gradients.
  std::vector<std::vector<float>> grads(workers, std::vector<float>(slice_params));
  for (auto& g : grads) {
    for (float& x : g) x = 1e-3f * normal(rng);
  }
  std::vector<ToWorker> out;
  out.reserve(2 * workers);
  uint64_t iteration = 0;
  auto run = [&](int count) {
    for (int i = 0; i < count; ++i, ++iteration) {
      for (int s = 0; s < slices; ++s) {
        for (int r = 0; r < workers; ++r) {
          if (!SendGradient(shard, r, s, iteration, grads[r].data(), slice_params, &out)) {
            std::fprintf(stderr, "bench_shard: gradient refused\n");
            std::exit(1);
          }
        }
      }
    }
    out.clear();
  };
  run(2);  // warm-up: buffers, optimizer state
  if (absl::GetFlag(FLAGS_header)) {
    std::printf(
        "optimizer,workers,slice_params,slices,iterations,ns_per_value,grad_gb_per_s,"
        "allocs_per_slice_update\n");
  }
  for (int rep = 0; rep < absl::GetFlag(FLAGS_repeats); ++rep) {
    const int64_t allocs_before = p3::AllocationCount();
    const auto start = std::chrono::steady_clock::now();
    run(iterations);
    const auto end = std::chrono::steady_clock::now();
    const int64_t allocs = p3::AllocationCount() - allocs_before;
    const double ns = std::chrono::duration<double, std::nano>(end - start).count();
    const double values = static_cast<double>(iterations) * slices * slice_params;
    const double grad_bytes = values * workers * sizeof(float);
    std::printf("%s,%d,%lld,%d,%d,%.4f,%.3f,%.2f\n", optimizer.c_str(), workers,
                static_cast<long long>(slice_params), slices, iterations, ns / values,
                grad_bytes / ns, static_cast<double>(allocs) / (iterations * slices));
  }
  return 0;
}

}  // namespace
}  // namespace p3

int main(int argc, char** argv) {
  p3::Program program("bench_shard", argc, argv);
  return p3::Run();
}
