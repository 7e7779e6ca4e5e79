// The servers' optimizer against hand computations and against libtorch's own.
#include "p3/core/optimizer.h"

#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <utility>
#include <vector>

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

// The same with a schedule: ours takes LearningRate(step) per update, libtorch's gets
// the rate set on its param group before each step, as mode `local` does, or is
// scheduled by torch::optim::StepLR(step_size, gamma) given as `torch_step_lr`.
template <typename TorchOptimizer, typename TorchOptions>
double CompareScheduledWithTorch(const OptimizerOptions& ours, TorchOptions theirs, int steps,
                                 std::optional<std::pair<unsigned, double>> torch_step_lr = {}) {
  torch::manual_seed(7);
  torch::Tensor w = torch::randn({257}, torch::requires_grad());
  std::vector<float> p(w.data_ptr<float>(), w.data_ptr<float>() + w.numel());
  TorchOptimizer torch_opt({w}, theirs);
  std::optional<torch::optim::StepLR> step_lr;
  if (torch_step_lr) {
    step_lr.emplace(torch_opt, torch_step_lr->first, torch_step_lr->second);
    // PyTorch's constructor takes the first step (last_epoch 0); libtorch 1.13's does not,
    // and would decay one update later than PyTorch's StepLR (and ours).
    step_lr->step();
  }
  SliceOptimizer opt(ours);
  SliceOptimizerState state;
  const float* grads[1];
  for (int step = 0; step < steps; ++step) {
    torch::Tensor g = torch::randn({257});
    w.mutable_grad() = g.clone();
    if (!torch_step_lr) {
      for (auto& group : torch_opt.param_groups()) group.options().set_lr(opt.LearningRate(step));
    }
    torch_opt.step();
    if (step_lr) step_lr->step();
    grads[0] = g.data_ptr<float>();
    opt.ApplyMean(p.data(), grads, 1, g.numel(), &state, opt.LearningRate(step));
  }
  torch::Tensor mine = torch::from_blob(p.data(), {257}).clone();
  return ((mine - w.detach()).norm() / w.detach().norm()).item<double>();
}

CATCH_TEST_CASE("scheduled SGD equals torch::optim::SGD under torch::optim::StepLR per iteration") {
  OptimizerOptions o;
  o.lr = 0.05;
  o.weight_decay = 1e-3;
  o.schedule.kind = LrScheduleKind::kStep;
  o.schedule.step_size = 3;
  o.schedule.gamma = 0.5;
  auto theirs = torch::optim::SGDOptions(0.05).momentum(0.9).weight_decay(1e-3);
  const std::pair<unsigned, double> step_lr = {3, 0.5};
  CATCH_CHECK(CompareScheduledWithTorch<torch::optim::SGD>(o, theirs, 12, step_lr) < 1e-6);
  CATCH_CHECK(CompareScheduledWithTorch<torch::optim::SGD>(o, theirs, 12) < 1e-6);
  // Not trivially so: the constant rate ends elsewhere.
  OptimizerOptions constant = o;
  constant.schedule = LrScheduleOptions();
  CATCH_CHECK(CompareScheduledWithTorch<torch::optim::SGD>(constant, theirs, 12, step_lr) > 1e-3);
}

CATCH_TEST_CASE("scheduled SGD and Adam equal libtorch's with the rate set per iteration") {
  OptimizerOptions o;
  o.lr = 0.05;
  o.schedule.kind = LrScheduleKind::kCosine;
  o.schedule.t_max = 10;
  o.schedule.eta_min = 0.001;
  o.schedule.warmup_iterations = 4;
  o.schedule.warmup_start_factor = 0.1;
  auto sgd = torch::optim::SGDOptions(0.05).momentum(0.9).weight_decay(1e-4);
  o.weight_decay = 1e-4;
  CATCH_CHECK(CompareScheduledWithTorch<torch::optim::SGD>(o, sgd, 12) < 1e-6);
  o.kind = OptimizerKind::kAdam;
  o.lr = 0.01;
  o.schedule.kind = LrScheduleKind::kMultiStep;
  o.schedule.t_max = 0;
  o.schedule.eta_min = 0;
  o.schedule.milestones = {3, 7};
  auto adam = torch::optim::AdamOptions(0.01).weight_decay(1e-4);
  CATCH_CHECK(CompareScheduledWithTorch<torch::optim::Adam>(o, adam, 12) < 1e-6);
}

CATCH_TEST_CASE("a bad schedule is refused by the optimizer's validation, field named") {
  OptimizerOptions o;
  o.schedule.kind = LrScheduleKind::kCosine;
  const absl::Status s = ValidateOptimizerOptions(o);
  CATCH_CHECK(s.message() ==
              "optimizer.schedule.t_max: 0 is out of range; allowed >= 1 for \"cosine\"");
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

// The server's arithmetic before the fused pass, one whole-array pass at a time: the sum
// in rank order, the division, then the optimizer's per-element formula. ApplyMean must
// reproduce it bit for bit.
void ReferenceMeanAndUpdate(const OptimizerOptions& o, const std::vector<std::vector<float>>& grads,
                            std::vector<float>* params, SliceOptimizerState* state) {
  const int64_t n = static_cast<int64_t>(params->size());
  std::vector<float> mean = grads[0];
  for (size_t r = 1; r < grads.size(); ++r) {
    for (int64_t i = 0; i < n; ++i) mean[i] += grads[r][i];
  }
  if (grads.size() > 1) {
    const float w = static_cast<float>(grads.size());
    for (int64_t i = 0; i < n; ++i) mean[i] /= w;
  }
  float* p = params->data();
  const float wd = static_cast<float>(o.weight_decay);
  if (o.kind == OptimizerKind::kSgd) {
    const float lr = static_cast<float>(o.lr);
    const float momentum = static_cast<float>(o.momentum);
    const float keep = static_cast<float>(1.0 - o.dampening);
    const bool first = state->steps == 0;
    ++state->steps;
    if (momentum == 0) {
      for (int64_t i = 0; i < n; ++i) {
        float d = mean[i];
        if (wd != 0) d += wd * p[i];
        p[i] += -lr * d;
      }
      return;
    }
    if (first) state->buf.assign(n, 0.0f);
    float* buf = state->buf.data();
    for (int64_t i = 0; i < n; ++i) {
      float d = mean[i];
      if (wd != 0) d += wd * p[i];
      buf[i] = first ? d : buf[i] * momentum + keep * d;
      const float step = o.nesterov ? d + momentum * buf[i] : buf[i];
      p[i] += -lr * step;
    }
    return;
  }
  if (state->steps == 0) {
    state->buf.assign(n, 0.0f);
    state->buf_sq.assign(n, 0.0f);
  }
  ++state->steps;
  const double bias1 = 1 - std::pow(o.beta1, static_cast<double>(state->steps));
  const double bias2 = 1 - std::pow(o.beta2, static_cast<double>(state->steps));
  const float step_size = static_cast<float>(o.lr / bias1);
  const float bias2_sqrt = static_cast<float>(std::sqrt(bias2));
  const float fb1 = static_cast<float>(o.beta1), fb2 = static_cast<float>(o.beta2);
  const float eps = static_cast<float>(o.eps);
  float* m = state->buf.data();
  float* v = state->buf_sq.data();
  for (int64_t i = 0; i < n; ++i) {
    float g = mean[i];
    if (wd != 0) g += wd * p[i];
    m[i] = m[i] * fb1 + (1 - fb1) * g;
    v[i] = v[i] * fb2 + (1 - fb2) * g * g;
    const float denom = std::sqrt(v[i]) / bias2_sqrt + eps;
    p[i] += -step_size * (m[i] / denom);
  }
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

CATCH_TEST_CASE(
    "the fused mean and update, and the update from a rank-order sum, equal the separate "
    "passes bit for bit") {
  std::vector<OptimizerOptions> configs(6);
  configs[1].weight_decay = 1e-3;
  configs[2].nesterov = true;
  configs[2].weight_decay = 1e-2;
  configs[3].momentum = 0.5;
  configs[3].dampening = 0.3;
  configs[4].momentum = 0;
  configs[4].weight_decay = 1e-2;
  configs[5].kind = OptimizerKind::kAdam;
  configs[5].lr = 0.01;
  configs[5].weight_decay = 1e-2;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  int compared = 0;
  for (const OptimizerOptions& o : configs) {
    // Full blocks and a remainder, a remainder only, and one value.
    for (int64_t n : {1000, 100, 1}) {
      for (int workers : {1, 2, 3, 5}) {
        CATCH_CAPTURE(static_cast<int>(o.kind), o.momentum, o.nesterov, o.weight_decay, n, workers);
        std::vector<float> want(n);
        for (float& x : want) x = normal(rng);
        std::vector<float> got = want;
        std::vector<float> summed = want;  // ApplySum of the rank-order sum
        SliceOptimizerState want_state, got_state, summed_state;
        SliceOptimizer opt(o);
        for (int step = 0; step < 4; ++step) {
          std::vector<std::vector<float>> grads(workers, std::vector<float>(n));
          std::vector<const float*> ptrs;
          for (auto& g : grads) {
            for (float& x : g) x = normal(rng);
            ptrs.push_back(g.data());
          }
          ReferenceMeanAndUpdate(o, grads, &want, &want_state);
          opt.ApplyMean(got.data(), ptrs.data(), workers, n, &got_state);
          std::vector<float> sum = grads[0];
          for (int r = 1; r < workers; ++r) {
            for (int64_t i = 0; i < n; ++i) sum[i] += grads[r][i];
          }
          // Alternately the whole sum, and the sum of all but the last with the last.
          std::vector<const float*> terms = {sum.data()};
          if (step % 2 == 1 && workers > 1) {
            sum = grads[0];
            for (int r = 1; r + 1 < workers; ++r) {
              for (int64_t i = 0; i < n; ++i) sum[i] += grads[r][i];
            }
            terms.push_back(grads[workers - 1].data());
          }
          opt.ApplySum(summed.data(), terms.data(), static_cast<int>(terms.size()), workers, n,
                       &summed_state, o.lr);
        }
        CATCH_CHECK(SameBits(got, want));
        CATCH_CHECK(SameBits(summed, want));
        CATCH_CHECK(SameBits(summed_state.buf, want_state.buf));
        CATCH_CHECK(SameBits(got_state.buf, want_state.buf));
        CATCH_CHECK(SameBits(got_state.buf_sq, want_state.buf_sq));
        CATCH_CHECK(got_state.steps == want_state.steps);
        ++compared;
      }
    }
  }
  CATCH_CHECK(compared == 6 * 3 * 4);
}

}  // namespace
}  // namespace p3
