// The servers' optimizer against hand computations and against libtorch's own.
#include <torch/torch.h>

#include "p3/optimizer.h"

#include <vector>

#include <catch2/catch.hpp>

namespace p3 {
namespace {

CATCH_TEST_CASE("SGD with momentum and weight decay matches a hand computation") {
  OptimizerOptions o;
  o.lr = 0.1;
  o.momentum = 0.5;
  o.weight_decay = 0.01;
  SliceOptimizer opt(o);
  SliceOptimizerState state;
  std::vector<float> p = {1.0f};
  std::vector<float> g = {2.0f};
  opt.Apply(p.data(), g.data(), 1, &state);
  // d = 2 + 0.01*1 = 2.01; buf = 2.01; p = 1 - 0.1*2.01 = 0.799
  CATCH_CHECK(p[0] == Approx(0.799f));
  opt.Apply(p.data(), g.data(), 1, &state);
  // d = 2 + 0.01*0.799 = 2.00799; buf = 0.5*2.01 + 2.00799 = 3.01299; p = 0.799 - 0.301299
  CATCH_CHECK(p[0] == Approx(0.497701f));
  CATCH_CHECK(state.steps == 2);
}

CATCH_TEST_CASE("plain SGD keeps no momentum buffer") {
  OptimizerOptions o;
  o.lr = 0.5;
  o.momentum = 0;
  SliceOptimizer opt(o);
  SliceOptimizerState state;
  std::vector<float> p = {1.0f, -1.0f};
  std::vector<float> g = {1.0f, 2.0f};
  opt.Apply(p.data(), g.data(), 2, &state);
  CATCH_CHECK(p[0] == Approx(0.5f));
  CATCH_CHECK(p[1] == Approx(-2.0f));
  CATCH_CHECK(state.buf.empty());
}

// Runs `steps` updates with libtorch's optimizer and with SliceOptimizer on the same
// gradients and returns the largest relative difference of the parameters.
template <typename TorchOptimizer, typename TorchOptions>
double CompareWithTorch(const OptimizerOptions& ours, TorchOptions theirs, int steps) {
  torch::manual_seed(7);
  torch::Tensor w = torch::randn({257}, torch::requires_grad());
  std::vector<float> p(w.data_ptr<float>(), w.data_ptr<float>() + w.numel());
  TorchOptimizer torch_opt({w}, theirs);
  SliceOptimizer opt(ours);
  SliceOptimizerState state;
  for (int step = 0; step < steps; ++step) {
    torch::Tensor g = torch::randn({257});
    w.mutable_grad() = g.clone();
    torch_opt.step();
    opt.Apply(p.data(), g.data_ptr<float>(), g.numel(), &state);
  }
  torch::Tensor mine = torch::from_blob(p.data(), {257}).clone();
  return ((mine - w.detach()).norm() / w.detach().norm()).item<double>();
}

CATCH_TEST_CASE("SGD equals torch::optim::SGD over several steps") {
  OptimizerOptions o;
  o.lr = 0.05;
  o.momentum = 0.9;
  o.weight_decay = 1e-3;
  auto theirs = torch::optim::SGDOptions(0.05).momentum(0.9).weight_decay(1e-3);
  CATCH_CHECK(CompareWithTorch<torch::optim::SGD>(o, theirs, 10) < 1e-6);
  o.nesterov = true;
  CATCH_CHECK(CompareWithTorch<torch::optim::SGD>(o, theirs.nesterov(true), 10) < 1e-6);
}

CATCH_TEST_CASE("Adam equals torch::optim::Adam over several steps") {
  OptimizerOptions o;
  o.kind = OptimizerKind::kAdam;
  o.lr = 0.01;
  o.weight_decay = 1e-2;
  auto theirs = torch::optim::AdamOptions(0.01).weight_decay(1e-2);
  CATCH_CHECK(CompareWithTorch<torch::optim::Adam>(o, theirs, 10) < 1e-6);
}

CATCH_TEST_CASE("optimizer options out of range are refused with the field named") {
  OptimizerOptions o;
  o.momentum = 1.0;
  absl::Status s = ValidateOptimizerOptions(o);
  CATCH_REQUIRE_FALSE(s.ok());
  CATCH_CHECK(s.message().find("momentum") != std::string::npos);
  o = OptimizerOptions();
  o.lr = 0;
  CATCH_CHECK(ValidateOptimizerOptions(o).message().find("lr") != std::string::npos);
  CATCH_CHECK(ValidateOptimizerOptions(OptimizerOptions()).ok());
}

}  // namespace
}  // namespace p3
