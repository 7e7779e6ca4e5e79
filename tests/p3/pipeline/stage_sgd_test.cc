// The stage optimizer (stage_sgd.h): its update against torch::optim::SGD, separate real
// weights, SpecTrain's prediction against a hand computation, and the weight swap that
// stashing rests on, for every block of small_cnn and row_lstm.
#include "p3/pipeline/stage_sgd.h"

#include <torch/torch.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "models/model.h"
#include "models/zoo.h"

namespace p3::pipeline {
namespace {

using models::BlockModel;

double MaxAbsDiff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  CATCH_REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t j = 0; j < a.size(); ++j) {
    m = std::max(m, (a[j].detach() - b[j].detach()).abs().max().item<double>());
  }
  return m;
}

absl::StatusOr<std::shared_ptr<BlockModel>> Zoo(const std::string& name) {
  models::ModelOptions o;
  o.name = name;
  o.seed = 5;
  return models::CreateModel(o);
}

CATCH_TEST_CASE("stage SGD updates exactly as torch::optim::SGD, and v is torch's buffer") {
  struct Case {
    double momentum, weight_decay, dampening;
    bool nesterov;
  };
  for (const bool separate : {false, true}) {
    for (const Case& c : {Case{0.9, 1e-3, 0, false}, Case{0.9, 0, 0, true}, Case{0, 1e-2, 0, false},
                          Case{0.5, 1e-4, 0.1, false}, Case{0.9, 1e-3, 0, true}}) {
      CATCH_CAPTURE(separate, c.momentum, c.weight_decay, c.nesterov);
      torch::manual_seed(11);
      torch::Tensor w0 = torch::randn({5, 3});
      torch::Tensor b0 = torch::randn({5});
      torch::Tensor ours_w = w0.clone().requires_grad_(true);
      torch::Tensor ours_b = b0.clone().requires_grad_(true);
      torch::Tensor ref_w = w0.clone().requires_grad_(true);
      torch::Tensor ref_b = b0.clone().requires_grad_(true);
      SgdOptions o{0.05, c.momentum, c.dampening, c.weight_decay, c.nesterov};
      StageSgd ours({ours_w, ours_b}, o, separate);
      torch::optim::SGD ref({ref_w, ref_b}, torch::optim::SGDOptions(0.05)
                                                .momentum(c.momentum)
                                                .dampening(c.dampening)
                                                .weight_decay(c.weight_decay)
                                                .nesterov(c.nesterov));
      for (int step = 0; step < 6; ++step) {
        torch::Tensor x = torch::randn({4, 3});
        ours.ZeroGrad();
        ref.zero_grad();
        torch::tanh(torch::nn::functional::linear(x, ours_w, ours_b)).pow(2).sum().backward();
        torch::tanh(torch::nn::functional::linear(x, ref_w, ref_b)).pow(2).sum().backward();
        ours.Step();
        ours.WriteReal();  // with separate real weights, the parameters are written back
        ref.step();
      }
      CATCH_CHECK(torch::equal(ours_w, ref_w));
      CATCH_CHECK(torch::equal(ours_b, ref_b));
      CATCH_CHECK(torch::equal(ours.real()[0], ref_w));
      CATCH_CHECK(ours.steps() == 6);
      if (c.momentum != 0) {
        auto& state = ref.state();
        auto it = state.find(c10::guts::to_string(ref_w.unsafeGetTensorImpl()));
        CATCH_REQUIRE(it != state.end());
        const auto& buf = static_cast<torch::optim::SGDParamState&>(*it->second).momentum_buffer();
        CATCH_CHECK(torch::equal(ours.velocity()[0], buf));
      }
    }
  }
}

CATCH_TEST_CASE("with separate real weights, Step updates them and leaves the parameters") {
  torch::Tensor param = torch::tensor({1.0f, 2.0f}).requires_grad_(true);
  StageSgd sgd({param}, SgdOptions{0.1, 0, 0, 0, false}, /*separate_real=*/true);
  param.mutable_grad() = torch::tensor({1.0f, -1.0f});
  sgd.Step();
  CATCH_CHECK(param[0].item<float>() == 1.0f);  // the working values are untouched
  CATCH_CHECK(sgd.real()[0][0].item<float>() == Approx(0.9).epsilon(1e-6));
  std::vector<torch::Tensor> copy;
  sgd.CopyWorking(&copy);
  sgd.WriteReal();
  CATCH_CHECK(param[1].item<float>() == Approx(2.1).epsilon(1e-6));
  sgd.WriteWorking(copy);
  CATCH_CHECK(torch::equal(param, torch::tensor({1.0f, 2.0f})));
}

CATCH_TEST_CASE("predicted weights match a hand computation: W - s * lr * v") {
  // PredictedWeight alone.
  torch::Tensor w = torch::tensor({1.0f, 2.0f, -0.5f});
  torch::Tensor v = torch::tensor({0.5f, -1.0f, 2.0f});
  torch::Tensor p = PredictedWeight(w, v, 0.1, 3);
  CATCH_CHECK(p[0].item<float>() == Approx(0.85).epsilon(1e-6));
  CATCH_CHECK(p[1].item<float>() == Approx(2.3).epsilon(1e-6));
  CATCH_CHECK(p[2].item<float>() == Approx(-1.1).epsilon(1e-6));

  // Through the optimizer: lr 0.1, momentum 0.9, no weight decay.
  torch::Tensor param = torch::tensor({1.0f, 2.0f}).requires_grad_(true);
  StageSgd sgd({param}, SgdOptions{0.1, 0.9, 0, 0, false}, /*separate_real=*/true);
  CATCH_CHECK(sgd.WritePredicted(2) == 0);  // no v before the first update
  CATCH_CHECK(param[0].item<float>() == 1.0f);
  param.mutable_grad() = torch::tensor({0.5f, -1.0f});
  sgd.Step();                                 // v = [0.5, -1]; W = [0.95, 2.1]
  CATCH_REQUIRE(sgd.WritePredicted(2) == 2);  // [0.95 - 0.2 * 0.5, 2.1 + 0.2 * 1]
  CATCH_CHECK(param[0].item<float>() == Approx(0.85).epsilon(1e-6));
  CATCH_CHECK(param[1].item<float>() == Approx(2.3).epsilon(1e-6));
  CATCH_CHECK(sgd.real()[0][0].item<float>() == Approx(0.95).epsilon(1e-6));  // W kept
  sgd.WriteReal();
  CATCH_CHECK(torch::equal(param, sgd.real()[0]));
  sgd.ZeroGrad();
  param.mutable_grad() = torch::tensor({1.0f, 1.0f});
  sgd.Step();  // v = 0.9 * [0.5, -1] + [1, 1] = [1.45, 0.1]; W = [0.805, 2.09]
  CATCH_CHECK(sgd.velocity()[0][0].item<float>() == Approx(1.45).epsilon(1e-6));
  CATCH_REQUIRE(sgd.WritePredicted(3) == 3);  // [0.805 - 0.3 * 1.45, 2.09 - 0.03]
  CATCH_CHECK(param[0].item<float>() == Approx(0.37).epsilon(1e-5));
  CATCH_CHECK(param[1].item<float>() == Approx(2.06).epsilon(1e-5));
  // Bit for bit the same as PredictedWeight() on the real weights.
  CATCH_CHECK(torch::equal(param, PredictedWeight(sgd.real()[0], sgd.velocity()[0], 0.1, 3)));
}

CATCH_TEST_CASE(
    "under a schedule, each update uses its own rate and a prediction the coming ones") {
  // Step schedule halving every update: rates 0.4, 0.2, 0.1, 0.05, ...
  SgdOptions o{0.4, 0.9, 0, 0, false};
  o.schedule.kind = LrScheduleKind::kStep;
  o.schedule.step_size = 1;
  o.schedule.gamma = 0.5;
  torch::Tensor param = torch::tensor({1.0f, 2.0f}).requires_grad_(true);
  StageSgd sgd({param}, o, /*separate_real=*/true);
  CATCH_CHECK(sgd.current_lr() == 0.4);
  param.mutable_grad() = torch::tensor({0.5f, -1.0f});
  sgd.Step();  // v = [0.5, -1]; W = [1 - 0.4 * 0.5, 2 + 0.4] = [0.8, 2.4]
  CATCH_CHECK(sgd.real()[0][0].item<float>() == Approx(0.8).epsilon(1e-6));
  CATCH_CHECK(sgd.real()[0][1].item<float>() == Approx(2.4).epsilon(1e-6));
  CATCH_CHECK(sgd.current_lr() == Approx(0.2).epsilon(1e-15));
  // Two updates ahead at rates 0.2 and 0.1: W - 0.3 * v.
  CATCH_REQUIRE(sgd.WritePredicted(2) == 2);
  CATCH_CHECK(param[0].item<float>() == Approx(0.65).epsilon(1e-6));
  CATCH_CHECK(param[1].item<float>() == Approx(2.7).epsilon(1e-6));
  sgd.WriteReal();
  sgd.ZeroGrad();
  param.mutable_grad() = torch::tensor({1.0f, 1.0f});
  sgd.Step();  // v = [1.45, 0.1]; W = [0.8 - 0.2 * 1.45, 2.4 - 0.02] = [0.51, 2.38]
  CATCH_CHECK(sgd.real()[0][0].item<float>() == Approx(0.51).epsilon(1e-6));
  CATCH_CHECK(sgd.real()[0][1].item<float>() == Approx(2.38).epsilon(1e-6));
}

CATCH_TEST_CASE("weight decay is not part of the prediction beyond what v holds") {
  torch::Tensor param = torch::tensor({2.0f}).requires_grad_(true);
  StageSgd sgd({param}, SgdOptions{0.1, 0.9, 0, 0.5, false}, /*separate_real=*/true);
  param.mutable_grad() = torch::tensor({1.0f});
  sgd.Step();                                 // d = 1 + 0.5 * 2 = 2 = v; W = 2 - 0.2 = 1.8
  CATCH_REQUIRE(sgd.WritePredicted(1) == 1);  // 1.8 - 0.1 * 2 = 1.6 (no extra decay of W)
  CATCH_CHECK(param.item<float>() == Approx(1.6).epsilon(1e-6));
}

CATCH_TEST_CASE("restoring stashed weights before backward gives the stashed version's gradients") {
  // The mechanism PipeDream's stashing (and SpecTrain v2) rests on, for every block
  // of small_cnn and of row_lstm (whose LSTM backward runs through time with its weights):
  // forward with W1, an update changes the values to W2, the stash puts W1 back, backward
  // -> exactly the gradients of a forward and backward with W1.
  for (const std::string name : {"small_cnn", "row_lstm"}) {
    CATCH_CAPTURE(name);
    absl::StatusOr<std::shared_ptr<BlockModel>> made = Zoo(name);
    CATCH_REQUIRE(made.ok());
    BlockModel& model = **made;
    torch::manual_seed(2);
    torch::Tensor x = torch::randn({3, 1, 28, 28});
    for (int64_t b = 0; b < model.num_blocks(); ++b) {
      CATCH_CAPTURE(b);
      std::vector<torch::Tensor> params = model.BlockParameters(b);
      StageSgd sgd(params, SgdOptions{}, /*separate_real=*/true);
      std::vector<torch::Tensor> w1;
      sgd.CopyWorking(&w1);
      std::vector<torch::Tensor> w2;
      for (const torch::Tensor& w : w1) w2.push_back(w + 0.3 * torch::randn_like(w));
      torch::Tensor input = x.detach().requires_grad_(true);
      torch::Tensor y = model.ForwardBlock(b, input);
      torch::Tensor g = torch::randn_like(y);
      sgd.WriteWorking(w2);  // other weights are written between forward and backward
      sgd.WriteWorking(w1);  // the stash is put back
      sgd.ZeroGrad();
      torch::autograd::backward({y}, {g});
      std::vector<torch::Tensor> stashed_grads;
      for (const torch::Tensor& p : params) stashed_grads.push_back(p.grad().clone());
      torch::Tensor stashed_input_grad = input.grad().clone();

      torch::Tensor input2 = x.detach().requires_grad_(true);
      sgd.ZeroGrad();
      torch::autograd::backward({model.ForwardBlock(b, input2)}, {g});
      std::vector<torch::Tensor> fresh_grads;
      for (const torch::Tensor& p : params) fresh_grads.push_back(p.grad().clone());
      CATCH_CHECK(MaxAbsDiff(stashed_grads, fresh_grads) == 0);
      CATCH_CHECK(torch::equal(stashed_input_grad, input2.grad()));
      x = y.detach();
    }
  }
}

CATCH_TEST_CASE("a row_lstm block's backward reads the weights present at backward time") {
  // What stale and SpecTrain v1 rely on (docs/pipeline.md): forward with W1, W2 written,
  // backward -> not W1's gradients (the LSTM keeps no private copy of its weights).
  absl::StatusOr<std::shared_ptr<BlockModel>> made = Zoo("row_lstm");
  CATCH_REQUIRE(made.ok());
  BlockModel& model = **made;
  torch::manual_seed(3);
  torch::Tensor x = torch::randn({2, 1, 28, 28});
  std::vector<torch::Tensor> params = model.BlockParameters(0);
  StageSgd sgd(params, SgdOptions{}, /*separate_real=*/true);
  std::vector<torch::Tensor> w1;
  sgd.CopyWorking(&w1);
  std::vector<torch::Tensor> w2;
  for (const torch::Tensor& w : w1) w2.push_back(w + 0.3 * torch::randn_like(w));
  torch::Tensor input = x.detach().requires_grad_(true);
  torch::Tensor y = model.ForwardBlock(0, input);
  torch::Tensor g = torch::randn_like(y);
  sgd.WriteWorking(w2);
  sgd.ZeroGrad();
  torch::autograd::backward({y}, {g});
  torch::Tensor mixed_input_grad = input.grad().clone();
  sgd.WriteWorking(w1);
  torch::Tensor input2 = x.detach().requires_grad_(true);
  torch::autograd::backward({model.ForwardBlock(0, input2)}, {g});
  CATCH_CHECK(!torch::allclose(mixed_input_grad, input2.grad()));
}

}  // namespace
}  // namespace p3::pipeline
