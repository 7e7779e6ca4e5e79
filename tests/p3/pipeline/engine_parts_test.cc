// The engine's smaller parts: libtorch's exceptions as Status, data_parallel's gradient
// exchange, and the validation of the engine's options (the stage SGD through the core's
// optimizer validation).
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "p3/pipeline/engine_options.h"
#include "p3/pipeline/gradient_exchange.h"
#include "p3/pipeline/stage_sgd.h"
#include "p3/pipeline/torch_errors.h"

namespace p3::pipeline {
namespace {

CATCH_TEST_CASE("libtorch's errors and other exceptions become InternalErrors with a context") {
  absl::Status status = CatchTorchErrors("stage 1: forward of mini-batch 4", [] {
    // A real libtorch failure: mismatched shapes in a matrix product.
    torch::matmul(torch::ones({2, 3}), torch::ones({2, 3}));
    return absl::OkStatus();
  });
  CATCH_CHECK(status.code() == absl::StatusCode::kInternal);
  CATCH_CHECK(absl::StartsWith(status.message(), "stage 1: forward of mini-batch 4: "));
  CATCH_CHECK(absl::StrContains(status.message(), "cannot be multiplied"));
  // Without libtorch's backtrace.
  CATCH_CHECK_FALSE(absl::StrContains(status.message(), "Exception raised from"));

  status = CatchTorchErrors("loading",
                            []() -> absl::Status { throw std::runtime_error("corrupt file"); });
  CATCH_CHECK(status == absl::InternalError("loading: corrupt file"));

  // The body's own status passes through unchanged.
  CATCH_CHECK(CatchTorchErrors("x", [] { return absl::OkStatus(); }).ok());
  CATCH_CHECK(CatchTorchErrors("x", [] { return absl::NotFoundError("gone"); }) ==
              absl::NotFoundError("gone"));
}

CATCH_TEST_CASE("the gradient exchange sums the replicas' gradients weighted, every round") {
  constexpr int kReplicas = 3;
  constexpr int kRounds = 4;
  const std::vector<double> weights{0.5, 0.25, 0.25};
  GradientExchange exchange(kReplicas);
  // Each replica's view of every round: the sums and the loss (read before its next
  // Reduce(), as the contract says), checked on the main thread afterwards.
  std::vector<std::vector<std::vector<torch::Tensor>>> seen(
      kReplicas, std::vector<std::vector<torch::Tensor>>(kRounds));
  std::vector<std::vector<double>> losses(kReplicas, std::vector<double>(kRounds, -1));
  std::vector<int> failures(kReplicas, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < kReplicas; ++r) {
    threads.emplace_back([&, r] {
      for (int round = 0; round < kRounds; ++round) {
        // Parameter 0: every replica has a gradient (r + 1) * (round + 1); parameter 1:
        // only replica 0 has one; parameter 2: nobody has one.
        std::vector<torch::Tensor> grads{
            torch::full({2, 2}, static_cast<float>((r + 1) * (round + 1))),
            r == 0 ? torch::full({3}, 4.0f) : torch::Tensor(), torch::Tensor()};
        std::optional<GradientExchange::Result> result =
            exchange.Reduce(r, std::move(grads), weights[r], /*loss=*/10.0 * (r + 1), torch::kCPU);
        if (!result) {
          ++failures[r];
          return;
        }
        for (const torch::Tensor& g : *result->grads) {
          seen[r][round].push_back(g.defined() ? g.clone() : g);
        }
        losses[r][round] = result->loss;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kReplicas; ++r) {
    CATCH_CAPTURE(r);
    CATCH_CHECK(failures[r] == 0);
    for (int round = 0; round < kRounds; ++round) {
      CATCH_CAPTURE(round);
      CATCH_REQUIRE(seen[r][round].size() == 3);
      // 0.5 * 1 + 0.25 * 2 + 0.25 * 3 = 1.75 times (round + 1).
      CATCH_CHECK(torch::allclose(seen[r][round][0], torch::full({2, 2}, 1.75f * (round + 1))));
      CATCH_CHECK(torch::allclose(seen[r][round][1], torch::full({3}, 2.0f)));
      CATCH_CHECK_FALSE(seen[r][round][2].defined());
      CATCH_CHECK(losses[r][round] == Approx(0.5 * 10 + 0.25 * 20 + 0.25 * 30));
    }
  }
}

CATCH_TEST_CASE("a closed gradient exchange releases its replicas with nothing") {
  GradientExchange exchange(2);
  // Replica 0 waits for replica 1, which never comes; Close() ends the wait (or, if it
  // comes first, Reduce() refuses at once: the outcome is the same either way).
  std::optional<GradientExchange::Result> result = GradientExchange::Result{};
  std::thread replica(
      [&] { result = exchange.Reduce(0, {torch::ones({2})}, 1.0, 1.0, torch::kCPU); });
  exchange.Close();
  replica.join();
  CATCH_CHECK_FALSE(result.has_value());
  CATCH_CHECK_FALSE(exchange.Reduce(1, {torch::ones({2})}, 1.0, 1.0, torch::kCPU).has_value());
  exchange.Close();  // idempotent
}

CATCH_TEST_CASE("the stage SGD is validated by the core's optimizer validation") {
  const OptimizerOptions o = ToOptimizerOptions({0.1, 0.8, 0.05, 1e-3, true});
  CATCH_CHECK(o.kind == OptimizerKind::kSgd);
  CATCH_CHECK(o.lr == 0.1);
  CATCH_CHECK(o.momentum == 0.8);
  CATCH_CHECK(o.dampening == 0.05);
  CATCH_CHECK(o.weight_decay == 1e-3);
  CATCH_CHECK(o.nesterov);

  CATCH_CHECK(ValidateSgdOptions(SgdOptions{}).ok());
  auto message = [](const SgdOptions& s) { return std::string(ValidateSgdOptions(s).message()); };
  CATCH_CHECK(absl::StartsWith(message({.lr = 0}), "sgd: optimizer.lr: 0"));
  CATCH_CHECK(absl::StartsWith(message({.momentum = 1.0}), "sgd: optimizer.momentum: 1"));
  CATCH_CHECK(absl::StartsWith(message({.weight_decay = -1}), "sgd: optimizer.weight_decay: -1"));
  CATCH_CHECK(
      absl::StartsWith(message({.momentum = 0, .nesterov = true}), "sgd: optimizer.nesterov"));
  CATCH_CHECK(
      absl::StartsWith(message({.dampening = 0.5, .nesterov = true}), "sgd: optimizer.nesterov"));
  CATCH_CHECK(ValidateSgdOptions({.lr = -1}).code() == absl::StatusCode::kInvalidArgument);
}

CATCH_TEST_CASE("the bubble fraction is the stages' idle share of the call's time") {
  TrainStats stats;
  CATCH_CHECK(BubbleFraction(stats) == 0);  // nothing measured
  stats.seconds = 10;
  stats.busy_seconds = {10, 6, 4, 8};  // 28 of 40 stage-seconds busy
  CATCH_CHECK(BubbleFraction(stats) == Approx(0.3));
}

CATCH_TEST_CASE("pipeline options out of range are errors naming the field") {
  CATCH_CHECK(ValidatePipelineOptions(PipelineOptions{}).ok());
  auto message = [](auto change) {
    PipelineOptions o;
    change(o);
    absl::Status status = ValidatePipelineOptions(o);
    CATCH_CHECK(status.code() == absl::StatusCode::kInvalidArgument);
    return std::string(status.message());
  };
  CATCH_CHECK(absl::StartsWith(message([](PipelineOptions& o) { o.num_stages = 0; }),
                               "num_stages: 0 is out of range; allowed 1..64"));
  CATCH_CHECK(
      absl::StartsWith(message([](PipelineOptions& o) { o.num_stages = 65; }), "num_stages: 65"));
  CATCH_CHECK(absl::StartsWith(message([](PipelineOptions& o) { o.spectrain_version = 3; }),
                               "spectrain_version: 3 is not allowed"));
  CATCH_CHECK(absl::StartsWith(message([](PipelineOptions& o) { o.devices = {"cpu"}; }),
                               "devices: 1 devices for 2 stages"));
  CATCH_CHECK(absl::StartsWith(message([](PipelineOptions& o) { o.threads_per_stage = -1; }),
                               "threads_per_stage: -1"));
  CATCH_CHECK(absl::StartsWith(message([](PipelineOptions& o) { o.sgd.lr = -0.5; }),
                               "sgd: optimizer.lr: -0.5"));
}

}  // namespace
}  // namespace p3::pipeline
