// Worker::Backward with a loss scale (training.precision "fp16"): a power-of-two scale trains
// bit for bit what no scale trains (the gradients are unscaled exactly before they leave);
// one so large that the gradients overflow is reported by gradients_finite(), and the
// servers (skip_nonfinite) keep the values of that iteration.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <memory>
#include <vector>

#include "p3/core/parameter_shard.h"
#include "tests/cluster/test_mlp.h"
#include "worker/in_memory_transport.h"
#include "worker/worker.h"

namespace p3 {
namespace {

struct Run {
  torch::Tensor params;
  std::vector<bool> finite;
};

// One worker, one server, a step per entry of `scales` with that loss scale; a scale above
// 2^64 also multiplies the loss by 2^64 (a loss whose scaled gradients overflow float32).
Run Train(const std::vector<double>& scales, bool skip_nonfinite) {
  ShardOptions shard;
  shard.num_workers = 1;
  shard.optimizer.lr = 0.1;
  shard.optimizer.momentum = 0.9;
  shard.skip_nonfinite = skip_nonfinite;
  InMemoryServer server(shard);
  auto model = MakeTestMlp(1);
  torch::manual_seed(3);
  const torch::Tensor x = torch::randn({4, 12});
  const torch::Tensor y = torch::randint(0, 5, {4});
  WorkerOptions wo;
  wo.servers = {"memory:0"};
  wo.transport_factory = InMemoryTransportFactory({&server});
  wo.slice_params = 50;
  absl::StatusOr<std::unique_ptr<Worker>> worker = Worker::Create(wo, model);
  CATCH_REQUIRE(worker.ok());
  Run run;
  for (double scale : scales) {
    absl::StatusOr<torch::Tensor> out = (*worker)->Forward(x);
    CATCH_REQUIRE(out.ok());
    const torch::Tensor loss = model->Loss(*out, y) * (scale > 0x1p64 ? 0x1p64 : 1.0);
    CATCH_REQUIRE((*worker)->Backward(loss, scale).ok());
    run.finite.push_back((*worker)->gradients_finite());
  }
  CATCH_REQUIRE((*worker)->Finish().ok());
  CATCH_CHECK(server.Wait().ok());
  std::vector<torch::Tensor> parts;
  for (auto& [name, p] : model->OrderedParameters()) parts.push_back(p.detach().reshape(-1));
  run.params = torch::cat(parts).clone();
  return run;
}

CATCH_TEST_CASE("a power-of-two loss scale trains bit for bit what no scale trains") {
  const Run plain = Train({1, 1, 1}, /*skip_nonfinite=*/true);
  const Run scaled = Train({1024, 65536, 2}, true);
  CATCH_CHECK(torch::equal(plain.params, scaled.params));
  CATCH_CHECK(scaled.finite == std::vector<bool>{true, true, true});
}

CATCH_TEST_CASE("an overflowing loss scale is reported, and the servers keep that step's values") {
  // 2^100 on a loss multiplied by 2^64 overflows float32 in every gradient of any size:
  // step 1 is skipped on the server; steps 0 and 2 are the plain run's steps 0 and 1.
  const Run overflow = Train({1, 0x1p100, 1}, /*skip_nonfinite=*/true);
  CATCH_CHECK(overflow.finite == std::vector<bool>{true, false, true});
  const Run two = Train({1, 1}, true);
  CATCH_CHECK(torch::equal(overflow.params, two.params));
  CATCH_CHECK(torch::isfinite(overflow.params).all().item<bool>());
}

CATCH_TEST_CASE("a loss scale that is not finite and positive is refused") {
  ShardOptions shard;
  shard.num_workers = 1;
  InMemoryServer server(shard);
  auto model = MakeTestMlp(1);
  WorkerOptions wo;
  wo.servers = {"memory:0"};
  wo.transport_factory = InMemoryTransportFactory({&server});
  absl::StatusOr<std::unique_ptr<Worker>> worker = Worker::Create(wo, model);
  CATCH_REQUIRE(worker.ok());
  absl::StatusOr<torch::Tensor> out = (*worker)->Forward(torch::randn({2, 12}));
  CATCH_REQUIRE(out.ok());
  const absl::Status s = (*worker)->Backward(model->Loss(*out, torch::zeros({2}, torch::kLong)), 0);
  CATCH_CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(s.message().find("loss_scale") != std::string::npos);
}

}  // namespace
}  // namespace p3
