// Every weight mode of the pipeline engine against a simulation of the Chain model
// written out by hand: no autograd, no weight swapping, each stage's forward and
// backward weights chosen explicitly from the rules in engine.h.
#include "p3/pipeline/engine.h"

#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "models/block_list_model.h"
#include "p3/pipeline/schedule.h"
#include "p3/pipeline/stage_sgd.h"
#include "tests/p3/pipeline/engine_test_util.h"
#include "tests/p3/pipeline/pipeline_test_util.h"

namespace p3::pipeline {
namespace {

using models::Batch;
using models::BlockModel;

struct SimResult {
  std::vector<torch::Tensor> params;  // fc0.weight, fc0.bias, fc1.weight, ...
  std::vector<double> losses;
};

SimResult Simulate(const std::vector<int64_t>& dims, const std::vector<Batch>& batches,
                   WeightMode mode, int version, const SgdOptions& o) {
  const int n = static_cast<int>(dims.size()) - 1;  // one block per stage
  const int64_t m = static_cast<int64_t>(batches.size());
  torch::NoGradGuard no_grad;
  // Initial weights: the same seed as ChainFactory's.
  absl::StatusOr<std::shared_ptr<BlockModel>> init = ChainFactory(dims)();
  std::vector<torch::Tensor> init_params = Clones((*init)->parameters());
  struct StageState {
    torch::Tensor w, b, vw, vb;
    int64_t steps = 0;
    std::map<int64_t, std::tuple<torch::Tensor, torch::Tensor>> io;  // x, z per mini-batch
    std::map<int64_t, std::tuple<torch::Tensor, torch::Tensor>> stash;
    std::vector<ScheduleStep> ops;
    size_t next = 0;
  };
  std::vector<StageState> st(n);
  for (int k = 0; k < n; ++k) {
    st[k].w = init_params[2 * k].clone();
    st[k].b = init_params[2 * k + 1].clone();
    st[k].ops = OneFOneBSchedule(n, k, m, IsPipelined(mode));
  }
  std::map<std::pair<int, int64_t>, torch::Tensor> activation, input_grad;
  std::vector<double> losses(m, 0);
  auto predicted = [&](StageState& s, int dist) {
    if (dist <= 0 || s.steps == 0) return std::make_tuple(s.w.clone(), s.b.clone());
    return std::make_tuple(s.w - dist * o.lr * s.vw, s.b - dist * o.lr * s.vb);
  };
  auto sgd = [&](torch::Tensor& w, torch::Tensor& v, const torch::Tensor& g, int64_t steps) {
    torch::Tensor d = g + o.weight_decay * w;
    v = steps == 0 ? d.clone() : o.momentum * v + d;
    w = w - o.lr * v;
  };
  bool progress = true;
  while (progress) {
    progress = false;
    for (int k = 0; k < n; ++k) {
      StageState& s = st[k];
      if (s.next == s.ops.size()) continue;
      const ScheduleStep step = s.ops[s.next];
      const int64_t i = step.microbatch;
      const bool last = k + 1 == n;
      if (step.pass == Pass::kForward) {
        if (k > 0 && !activation.count({k - 1, i})) continue;
        torch::Tensor x = k == 0 ? batches[i].input : activation[{k - 1, i}];
        auto [wf, bf] = predicted(s, PredictionDistance(mode, version, n, k, Pass::kForward));
        torch::Tensor pre = x.matmul(wf.t()) + bf;
        torch::Tensor z = last ? pre : torch::tanh(pre);
        s.io[i] = {x, z};
        s.stash[i] = {wf, bf};
        activation[{k, i}] = z;
        if (last) {
          losses[i] = torch::nn::functional::cross_entropy(z, batches[i].target).item<double>();
        }
      } else {
        if (!last && !input_grad.count({k + 1, i})) continue;
        auto [x, z] = s.io[i];
        torch::Tensor gz;
        if (last) {
          torch::Tensor onehot = torch::one_hot(batches[i].target, dims.back()).to(torch::kFloat);
          gz = (torch::softmax(z, 1) - onehot) / static_cast<double>(z.size(0));
        } else {
          gz = input_grad[{k + 1, i}];
        }
        torch::Tensor wb;
        if (mode == WeightMode::kPipeDream || (mode == WeightMode::kSpecTrain && version == 2)) {
          wb = std::get<0>(s.stash[i]);
        } else {
          wb = std::get<0>(predicted(s, PredictionDistance(mode, version, n, k, Pass::kBackward)));
        }
        torch::Tensor gpre = last ? gz : gz * (1 - z * z);
        input_grad[{k, i}] = gpre.matmul(wb);
        sgd(s.w, s.vw, gpre.t().matmul(x), s.steps);
        sgd(s.b, s.vb, gpre.sum(0), s.steps);
        ++s.steps;
        s.stash.erase(i);
      }
      ++s.next;
      progress = true;
    }
  }
  SimResult result;
  for (int k = 0; k < n; ++k) {
    CATCH_REQUIRE(st[k].next == st[k].ops.size());  // the schedule cannot deadlock
    result.params.push_back(st[k].w);
    result.params.push_back(st[k].b);
  }
  result.losses = losses;
  return result;
}

CATCH_TEST_CASE("every pipelined weight mode trains as the hand-written simulation says") {
  const SgdOptions sgd{0.1, 0.9, 0, 0.01, false};
  for (const std::vector<int64_t>& dims :
       {std::vector<int64_t>{5, 6, 7, 4}, std::vector<int64_t>{5, 6, 7, 6, 4}}) {
    const int n = static_cast<int>(dims.size()) - 1;
    const std::vector<Batch> batches = MakeBatches(10, 8, {dims[0]}, dims.back(), 17);
    std::map<std::string, std::vector<torch::Tensor>> finals;
    for (auto [mode, version] :
         {std::make_pair(WeightMode::kStale, 1), std::make_pair(WeightMode::kPipeDream, 1),
          std::make_pair(WeightMode::kSpecTrain, 1), std::make_pair(WeightMode::kSpecTrain, 2),
          std::make_pair(WeightMode::kVanilla, 1)}) {
      const std::string label = absl::StrCat(WeightModeName(mode), " v", version, " N=", n);
      CATCH_CAPTURE(label);
      PipelineOptions options;
      options.mode = mode;
      options.spectrain_version = version;
      options.num_stages = n;
      options.sgd = sgd;
      auto got = RunEngine(options, ChainFactory(dims), batches);
      CATCH_REQUIRE(got.ok());
      SimResult want = Simulate(dims, batches, mode, version, sgd);
      CATCH_CHECK(MaxAbsDiff(got->first, want.params) < 2e-5);
      for (size_t i = 0; i < batches.size(); ++i) {
        CATCH_CHECK(got->second.losses[i] == Approx(want.losses[i]).epsilon(1e-4));
      }
      finals[label.substr(0, label.find(" N="))] = got->first;
    }
    // The modes really differ, so the comparisons above could fail.
    CATCH_CHECK(MaxAbsDiff(finals["stale v1"], finals["pipedream v1"]) > 1e-4);
    CATCH_CHECK(MaxAbsDiff(finals["stale v1"], finals["spectrain v1"]) > 1e-4);
    CATCH_CHECK(MaxAbsDiff(finals["spectrain v1"], finals["spectrain v2"]) > 1e-4);
    CATCH_CHECK(MaxAbsDiff(finals["vanilla v1"], finals["stale v1"]) > 1e-4);
  }
}

}  // namespace
}  // namespace p3::pipeline
