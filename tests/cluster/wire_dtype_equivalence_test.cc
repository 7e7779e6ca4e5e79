// The 16-bit wire (scheduling.wire_dtype) end to end: the cluster equals local training
// with the wire's rounding bit for bit, the streams carry 2 bytes a value, and the
// worker's trace shows them.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "p3/base/trace.h"
#include "p3/core/mode.h"
#include "p3/core/optimizer.h"
#include "p3/core/slice_plan.h"
#include "p3/core/wire_dtype.h"
#include "server/parameter_server.h"
#include "tests/cluster/cluster_fixture.h"
#include "worker/worker.h"

namespace p3::cluster_test {
namespace {

// --- The 16-bit wire (scheduling.wire_dtype). The reference is `local` training with the
// wire's rounding put in where the cluster has it: each step every worker's gradient is
// rounded to the wire dtype slice by slice (float16: scaled by its own slice's
// Float16Scale, as the worker sends it), the float32 master values are updated with the
// mean of those, and the model's weights are the master values rounded slice by slice
// (what the servers send down). The update is p3's own SliceOptimizer (the servers'
// arithmetic, checked against libtorch's optimizer in the float32 tests above): libtorch's
// differs from it in the last bit now and then, and a last-bit difference can move a value
// to the neighbouring 16-bit number, a relative step of 2^-8 (bfloat16) that would force a
// tolerance hiding real errors. With the same arithmetic the cluster must match exactly.
torch::Tensor TrainLocalOnWire(Mode mode, int workers, int servers, WireDType dtype,
                               const OptimizerOptions& o = Sgd()) {
  auto model = MakeModel(1);
  std::vector<torch::Tensor> params;
  std::vector<TensorEntry> entries;
  for (auto& [name, p] : model->OrderedParameters()) {
    params.push_back(p);
    entries.push_back({name, p.numel()});
  }
  SlicePlanOptions plan_options;
  plan_options.granularity = TraitsOf(mode).sliced ? Granularity::kSliced : Granularity::kTensor;
  plan_options.slice_params = kSliceParams;
  plan_options.split_threshold = 1000;  // as TrainCluster's workers
  plan_options.num_servers = servers;
  const SlicePlan plan = *SlicePlan::Create(entries, plan_options);
  // Rounds `in` slice by slice into `out`, as a sender of each slice does.
  auto round = [&](const std::vector<float>& in, std::vector<float>* out) {
    out->resize(in.size());
    for (const Slice& s : plan.slices()) {
      const int e = dtype == WireDType::kFloat16
                        ? Float16ScaleExponent(in.data() + s.offset, s.length)
                        : 0;
      RoundToWire(dtype, in.data() + s.offset, s.length, e, out->data() + s.offset);
    }
  };
  auto flat = [&](bool grads) {
    std::vector<float> out;
    for (const torch::Tensor& p : params) {
      torch::Tensor t = (grads ? p.grad() : p.detach()).contiguous().reshape(-1);
      out.insert(out.end(), t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
    }
    return out;
  };
  auto set_weights = [&](const std::vector<float>& values) {
    torch::NoGradGuard no_grad;
    int64_t at = 0;
    for (torch::Tensor& p : params) {
      p.copy_(torch::from_blob(const_cast<float*>(values.data()) + at, p.sizes()));
      at += p.numel();
    }
  };
  std::vector<float> master = flat(false);
  std::vector<float> weights;
  const SliceOptimizer optimizer(o);
  std::vector<SliceOptimizerState> state(plan.slices().size());
  for (int step = 0; step < kSteps; ++step) {
    round(master, &weights);
    set_weights(weights);
    auto [x, y] = GlobalBatch(step, workers);
    std::vector<std::vector<float>> grads(workers);
    for (int r = 0; r < workers; ++r) {
      for (torch::Tensor& p : params) p.mutable_grad() = torch::Tensor();
      model->Loss(model->forward(x.narrow(0, r * kBatch, kBatch)), y.narrow(0, r * kBatch, kBatch))
          .backward();
      round(flat(true), &grads[r]);
    }
    for (const Slice& s : plan.slices()) {
      std::vector<const float*> ptrs;
      for (int r = 0; r < workers; ++r) ptrs.push_back(grads[r].data() + s.offset);
      optimizer.ApplyMean(master.data() + s.offset, ptrs.data(), workers, s.length,
                          &state[s.id], optimizer.LearningRate(step));
    }
  }
  round(master, &weights);
  return torch::tensor(weights);
}

CATCH_TEST_CASE("on a 16-bit wire the cluster trains bit for bit local with the wire's rounding") {
  torch::set_num_threads(1);
  struct Case {
    Mode mode;
    int workers;
    int servers;
  };
  const std::vector<Case> cases = {{Mode::kP3, 1, 1},       {Mode::kP3, 2, 2},
                                   {Mode::kBaseline, 2, 2}, {Mode::kValuesOnly, 2, 2}};
  for (WireDType dtype : {WireDType::kFloat32, WireDType::kBFloat16, WireDType::kFloat16}) {
    for (const Case& c : cases) {
      for (bool shared_memory : {false, true}) {
        CATCH_CAPTURE(WireDTypeName(dtype), ModeName(c.mode), c.workers, c.servers,
                      shared_memory);
        const torch::Tensor want = TrainLocalOnWire(c.mode, c.workers, c.servers, dtype);
        ClusterResult got = TrainCluster(RunSpec{.mode = c.mode,
                                                 .workers = c.workers,
                                                 .servers = c.servers,
                                                 .shared_memory = shared_memory,
                                                 .wire_dtype = dtype});
        for (int r = 0; r < c.workers; ++r) {
          CATCH_CAPTURE(r, got.status[r].ToString());
          CATCH_REQUIRE(got.status[r].ok());
          CATCH_CHECK(torch::equal(got.params[r], want));
        }
      }
    }
  }
  // The rounding is not a no-op: each 16-bit run differs from float32 and the two from
  // each other.
  const torch::Tensor f32 = TrainLocalOnWire(Mode::kP3, 2, 2, WireDType::kFloat32);
  const torch::Tensor bf16 = TrainLocalOnWire(Mode::kP3, 2, 2, WireDType::kBFloat16);
  const torch::Tensor f16 = TrainLocalOnWire(Mode::kP3, 2, 2, WireDType::kFloat16);
  CATCH_CHECK(RelativeError(bf16, f32) > 1e-4);
  CATCH_CHECK(RelativeError(f16, f32) > 1e-5);
  CATCH_CHECK_FALSE(torch::equal(bf16, f16));
  // ... and stays close to float32 training (bfloat16 keeps 8 bits: about 0.4 % per value).
  CATCH_CHECK(RelativeError(bf16, f32) < 1e-2);
  CATCH_CHECK(RelativeError(f16, f32) < 1e-3);
  std::cout << "16-bit wire against float32 after " << kSteps
            << " steps (relative): bfloat16 " << RelativeError(bf16, f32) << ", float16 "
            << RelativeError(f16, f32) << "\n";
}

CATCH_TEST_CASE("on a 16-bit wire the streams carry 2 bytes per value, half of float32") {
  torch::set_num_threads(1);
  constexpr int64_t kParams = 12 * 40 + 40 + 40 * 30 + 30 + 30 * 5 + 5;  // TestMlp: 1905
  for (Mode mode : {Mode::kP3, Mode::kBaseline}) {
    CATCH_CAPTURE(ModeName(mode));
    ClusterResult f32 = TrainCluster(
        RunSpec{.mode = mode, .workers = 2, .servers = 2, .shared_memory = false});
    for (WireDType dtype : {WireDType::kBFloat16, WireDType::kFloat16}) {
      CATCH_CAPTURE(WireDTypeName(dtype));
      ClusterResult half = TrainCluster(RunSpec{
          .mode = mode, .workers = 2, .servers = 2, .shared_memory = false, .wire_dtype = dtype});
      for (int r = 0; r < 2; ++r) {
        CATCH_CAPTURE(r);
        CATCH_REQUIRE(half.status[r].ok());
        CATCH_REQUIRE(f32.status[r].ok());
        // Worker 1 sends gradients only: every slice of every step at 2 bytes a value.
        // Worker 0 also sends the float32 initial values once.
        const int64_t init = r == 0 ? kParams * 4 : 0;
        CATCH_CHECK(half.stats[r].bytes_sent == init + kSteps * kParams * 2);
        CATCH_CHECK(f32.stats[r].bytes_sent == init + kSteps * kParams * 4);
        // Down: versions 0 .. kSteps of every slice, 2 bytes a value.
        CATCH_CHECK(half.stats[r].bytes_received * 2 == f32.stats[r].bytes_received);
        CATCH_CHECK(half.stats[r].bytes_received == (kSteps + 1) * kParams * 2);
      }
    }
  }
}

CATCH_TEST_CASE("the worker's trace shows a slice's gradient at 2 bytes a value") {
  torch::set_num_threads(1);
  const char* tmp = std::getenv("TEST_TMPDIR");
  for (WireDType dtype : {WireDType::kFloat32, WireDType::kBFloat16, WireDType::kFloat16}) {
    CATCH_CAPTURE(WireDTypeName(dtype));
    ServerOptions so;
    so.shard.wire_dtype = dtype;
    auto server = ParameterServer::Start(so);
    CATCH_REQUIRE(server.ok());
    TraceRecorder trace({.enabled = true, .process_name = "worker 0"});
    WorkerOptions wo;
    wo.servers = {"127.0.0.1:" + std::to_string((*server)->port())};
    wo.slice_params = kSliceParams;
    wo.peer_timeout = absl::Seconds(30);
    wo.wire_dtype = dtype;
    wo.trace = &trace;
    auto model = MakeModel(1);
    auto worker = Worker::Create(wo, model);
    CATCH_REQUIRE(worker.ok());
    auto [x, y] = GlobalBatch(0, 1);
    for (int step = 0; step < 2; ++step) {
      auto out = (*worker)->Forward(x);
      CATCH_REQUIRE(out.ok());
      CATCH_REQUIRE((*worker)->Backward(model->Loss(*out, y)).ok());
    }
    CATCH_REQUIRE((*worker)->Finish().ok());
    CATCH_CHECK((*server)->Wait().ok());
    const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/wire_trace.json";
    CATCH_REQUIRE(trace.WriteJson(path).ok());
    // Slice 0 is the first 50 values of fc1's weight: its gradient, sent twice.
    std::ifstream in(path);
    std::string line;
    int events = 0;
    const std::string bytes =
        absl::StrCat("\"bytes\": ", kSliceParams * BytesPerValue(dtype), "}");
    while (std::getline(in, line)) {
      if (!absl::StrContains(line, "\"name\": \"gradient 0\"")) continue;
      ++events;
      CATCH_CAPTURE(line);
      CATCH_CHECK(absl::StrContains(line, bytes));
    }
    CATCH_CHECK(events == 2);
  }
}

}  // namespace
}  // namespace p3::cluster_test
