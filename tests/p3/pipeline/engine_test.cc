// The pipeline engine: every weight mode against an independent simulation written out
// by hand, vanilla and data_parallel against single-device training, the 1F1B order of
// operations, weight stashing, failures, bad options, and the profiler. The stage
// optimizer alone is tested in stage_sgd_test.cc.
#include "p3/pipeline/engine.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <catch2/catch.hpp>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "models/block_list_model.h"
#include "models/zoo.h"
#include "p3/pipeline/profile.h"
#include "p3/pipeline/schedule.h"
#include "p3/pipeline/stage_sgd.h"
#include "p3/base/status_macros.h"
#include "p3/base/trace.h"
#include "tests/p3/pipeline/pipeline_test_util.h"

namespace p3::pipeline {
namespace {

using models::Batch;
using models::BlockModel;

std::vector<torch::Tensor> Clones(const std::vector<torch::Tensor>& v) {
  std::vector<torch::Tensor> out;
  for (const torch::Tensor& t : v) out.push_back(t.detach().clone());
  return out;
}

// ---------------------------------------------------------------------------------------
// Every weight mode against a simulation of the Chain model written out by hand: no
// autograd, no weight swapping, each stage's forward and backward weights chosen
// explicitly from the rules in engine.h.

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

absl::StatusOr<std::pair<std::vector<torch::Tensor>, TrainStats>> RunEngine(
    const PipelineOptions& options, const PipelineEngine::ModelFactory& factory,
    const std::vector<Batch>& batches) {
  P3_ASSIGN_OR_RETURN(std::unique_ptr<PipelineEngine> engine,
                      PipelineEngine::Create(options, factory));
  P3_ASSIGN_OR_RETURN(TrainStats stats, engine->Train(batches.size(), SourceOf(batches)));
  return std::make_pair(engine->Parameters(), std::move(stats));
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

// ---------------------------------------------------------------------------------------
// Single-device equivalence.

std::vector<torch::Tensor> TrainSingleDevice(const PipelineEngine::ModelFactory& factory,
                                             const std::vector<Batch>& batches, const SgdOptions& o,
                                             torch::Tensor* probe_output,
                                             const torch::Tensor& probe) {
  std::shared_ptr<BlockModel> model = *factory();
  torch::optim::SGD opt(
      model->parameters(),
      torch::optim::SGDOptions(o.lr).momentum(o.momentum).weight_decay(o.weight_decay));
  int64_t t = 0;
  for (const Batch& b : batches) {
    // The schedule's rate, set as mode `local` sets it (worker/trainer.cc).
    for (auto& group : opt.param_groups()) group.options().set_lr(ScheduledLr(o.schedule, o.lr, t));
    ++t;
    opt.zero_grad();
    model->Loss(model->forward(b.input), b.target).backward();
    opt.step();
  }
  if (probe_output != nullptr) {
    torch::NoGradGuard no_grad;
    model->eval();
    *probe_output = model->forward(probe);
  }
  return Clones(model->parameters());
}

CATCH_TEST_CASE("vanilla equals single-device training bit for bit") {
  const SgdOptions sgd{0.05, 0.9, 0, 1e-4, false};
  {
    const std::vector<Batch> batches = MakeBatches(12, 16, {12}, 10, 23);
    torch::Tensor probe = torch::randn({5, 12});
    torch::Tensor want_out;
    const std::vector<torch::Tensor> want =
        TrainSingleDevice(ZooFactory("mlp"), batches, sgd, &want_out, probe);
    for (int n : {1, 2, 3}) {
      CATCH_CAPTURE(n);
      PipelineOptions options;
      options.mode = WeightMode::kVanilla;
      options.num_stages = n;
      options.sgd = sgd;
      absl::StatusOr<std::unique_ptr<PipelineEngine>> engine =
          PipelineEngine::Create(options, ZooFactory("mlp"));
      CATCH_REQUIRE(engine.ok());
      CATCH_REQUIRE((*engine)->Train(batches.size(), SourceOf(batches)).ok());
      CATCH_CHECK(MaxAbsDiff((*engine)->Parameters(), want) == 0);
      absl::StatusOr<torch::Tensor> out = (*engine)->Infer(probe);
      CATCH_REQUIRE(out.ok());
      CATCH_CHECK(torch::equal(*out, want_out));
    }
  }
  {
    // small_cnn, one block per stage (convolutions, pooling and the flatten hand-over).
    const std::vector<Batch> batches = MakeBatches(4, 8, {1, 28, 28}, 10, 29);
    const std::vector<torch::Tensor> want =
        TrainSingleDevice(ZooFactory("small_cnn"), batches, sgd, nullptr, {});
    PipelineOptions options;
    options.mode = WeightMode::kVanilla;
    options.num_stages = 4;
    options.sgd = sgd;
    auto got = RunEngine(options, ZooFactory("small_cnn"), batches);
    CATCH_REQUIRE(got.ok());
    CATCH_CHECK(MaxAbsDiff(got->first, want) == 0);
  }
}

CATCH_TEST_CASE("data_parallel equals single-device training on the union batch") {
  const SgdOptions sgd{0.05, 0.9, 0, 1e-4, false};
  // 10 samples over 3 replicas: shards of 4, 3 and 3, weighted by size.
  const std::vector<Batch> batches = MakeBatches(8, 10, {12}, 10, 31);
  const std::vector<torch::Tensor> want =
      TrainSingleDevice(ZooFactory("mlp"), batches, sgd, nullptr, {});
  for (int n : {1, 2, 3}) {
    CATCH_CAPTURE(n);
    PipelineOptions options;
    options.mode = WeightMode::kDataParallel;
    options.num_stages = n;
    options.sgd = sgd;
    auto got = RunEngine(options, ZooFactory("mlp"), batches);
    CATCH_REQUIRE(got.ok());
    CATCH_CHECK(MaxAbsDiff(got->first, want) < 1e-5);
  }
}

CATCH_TEST_CASE("with a learning-rate schedule, vanilla and data_parallel equal single-device") {
  SgdOptions sgd{0.05, 0.9, 0, 1e-4, false};
  sgd.schedule.kind = LrScheduleKind::kCosine;
  sgd.schedule.t_max = 8;
  sgd.schedule.eta_min = 0.005;
  sgd.schedule.warmup_iterations = 3;
  sgd.schedule.warmup_start_factor = 0.2;
  const std::vector<Batch> batches = MakeBatches(8, 10, {12}, 10, 37);
  const std::vector<torch::Tensor> want =
      TrainSingleDevice(ZooFactory("mlp"), batches, sgd, nullptr, {});
  const SgdOptions constant{0.05, 0.9, 0, 1e-4, false};
  // The schedule matters, so the comparisons below could fail.
  CATCH_CHECK(MaxAbsDiff(TrainSingleDevice(ZooFactory("mlp"), batches, constant, nullptr, {}),
                         want) > 1e-4);
  for (WeightMode mode : {WeightMode::kVanilla, WeightMode::kDataParallel}) {
    CATCH_CAPTURE(WeightModeName(mode));
    PipelineOptions options;
    options.mode = mode;
    options.num_stages = 2;
    options.sgd = sgd;
    auto got = RunEngine(options, ZooFactory("mlp"), batches);
    CATCH_REQUIRE(got.ok());
    CATCH_CHECK(MaxAbsDiff(got->first, want) < (mode == WeightMode::kVanilla ? 1e-12 : 1e-5));
  }
}

// GPipe's update is single-device training's on the whole mini-batch, but its gradient
// is summed in another order: per micro-batch (each micro-batch's mean loss times its
// share of the samples, back-propagated separately), then accumulated over the
// micro-batches. In float32 that moves a gradient by a few units in the last place;
// after these 4-8 SGD steps the parameters differed by at most 3e-8 (mlp, small_cnn,
// row_lstm; engine_test -s prints each case's difference). 1e-6 bounds that with room
// to spare and is far below what a wrong accumulation does (an update per micro-batch,
// or unweighted micro-batch losses, move parameters by > 1e-3: checked below for the
// first).
constexpr double kGPipeTolerance = 1e-6;

CATCH_TEST_CASE("gpipe equals single-device training on the whole mini-batch") {
  const SgdOptions sgd{0.05, 0.9, 0, 1e-4, false};
  {
    // 10 samples per mini-batch: 3 micro-batches of 4, 3, 3; 4 of 3, 3, 2, 2.
    const std::vector<Batch> batches = MakeBatches(8, 10, {12}, 10, 43);
    const std::vector<torch::Tensor> want =
        TrainSingleDevice(ZooFactory("mlp"), batches, sgd, nullptr, {});
    for (int n : {1, 2, 3}) {
      for (int64_t micro : {1, 2, 3, 4, 10}) {
        CATCH_CAPTURE(n, micro);
        PipelineOptions options;
        options.mode = WeightMode::kVanilla;
        options.schedule = PipelineSchedule::kGPipe;
        options.microbatches = micro;
        options.num_stages = n;
        options.sgd = sgd;
        auto got = RunEngine(options, ZooFactory("mlp"), batches);
        CATCH_REQUIRE(got.ok());
        const double diff = MaxAbsDiff(got->first, want);
        CATCH_INFO("max |gpipe - single device| = " << diff);
        if (micro == 1) {
          CATCH_CHECK(diff == 0);  // one micro-batch: the same sums as single-device
        } else {
          CATCH_CHECK(diff < kGPipeTolerance);
        }
        // The mini-batch's loss: the micro-batches' weighted.
        CATCH_REQUIRE(got->second.losses.size() == batches.size());
        CATCH_CHECK(std::isfinite(got->second.losses[0]));
      }
    }
    // Updating after every micro-batch instead is clearly different: the check above
    // can fail.
    std::vector<Batch> halves;
    for (const Batch& b : batches) {
      halves.push_back({b.input.narrow(0, 0, 5), b.target.narrow(0, 0, 5)});
      halves.push_back({b.input.narrow(0, 5, 5), b.target.narrow(0, 5, 5)});
    }
    CATCH_CHECK(MaxAbsDiff(TrainSingleDevice(ZooFactory("mlp"), halves, sgd, nullptr, {}), want) >
                1e-3);
  }
  for (const std::string name : {"small_cnn", "row_lstm"}) {
    // One block per stage (row_lstm: lstm.3 and fc share the last), 8 samples in 3
    // micro-batches of 3, 3, 2.
    CATCH_CAPTURE(name);
    const std::vector<Batch> batches = MakeBatches(4, 8, {1, 28, 28}, 10, 47);
    const std::vector<torch::Tensor> want =
        TrainSingleDevice(ZooFactory(name), batches, sgd, nullptr, {});
    PipelineOptions options;
    options.mode = WeightMode::kVanilla;
    options.schedule = PipelineSchedule::kGPipe;
    options.microbatches = 3;
    options.num_stages = 4;
    options.sgd = sgd;
    auto got = RunEngine(options, ZooFactory(name), batches);
    CATCH_REQUIRE(got.ok());
    const double diff = MaxAbsDiff(got->first, want);
    CATCH_INFO("max |gpipe - single device| = " << diff);
    CATCH_CHECK(diff < kGPipeTolerance);
  }
}

// ---------------------------------------------------------------------------------------
// Order of operations and stashing, from the events the stages report.

CATCH_TEST_CASE("every stage reports its time by kind of work and traces it on its own track") {
  const std::vector<int64_t> dims{5, 6, 7, 6, 4};
  const int n = 4;
  const int64_t m = 6;
  const std::vector<Batch> batches = MakeBatches(m, 4, {5}, 4, 53);
  for (WeightMode mode : {WeightMode::kSpecTrain, WeightMode::kPipeDream, WeightMode::kStale,
                          WeightMode::kDataParallel}) {
    CATCH_CAPTURE(WeightModeName(mode));
    TraceRecorder trace({.enabled = true, .process_name = "pipeline"});
    PipelineOptions options;
    options.mode = mode;
    options.num_stages = n;
    options.trace = &trace;
    auto got = RunEngine(options, ChainFactory(dims), batches);
    CATCH_REQUIRE(got.ok());
    const TrainStats& stats = got->second;
    CATCH_REQUIRE(stats.stage_times.size() == static_cast<size_t>(n));
    for (int k = 0; k < n; ++k) {
      CATCH_CAPTURE(k);
      const StageTimes& t = stats.stage_times[k];
      CATCH_CHECK(t.forward_seconds > 0);
      CATCH_CHECK(t.backward_seconds > 0);
      CATCH_CHECK(t.update_seconds > 0);
      CATCH_CHECK(t.cpu_seconds > 0);
      CATCH_CHECK(stats.busy_seconds[k] == t.busy_seconds());
      // SpecTrain writes predicted weights on every stage at N = 4; PipeDream stashes on
      // all but the last; stale never touches them.
      if (mode == WeightMode::kStale) CATCH_CHECK(t.weights_seconds == 0);
    }
    // A forward and a backward event per mini-batch and stage, plus waits and updates.
    CATCH_CHECK(trace.size() >= 2 * n * m + n * m);
  }
}

CATCH_TEST_CASE("recompute reruns every stage's forwards but the last stage's under 1F1B") {
  const std::vector<int64_t> dims{5, 6, 7, 6, 4};
  const int n = 4;
  const int64_t m = 5;
  const std::vector<Batch> batches = MakeBatches(m, 4, {5}, 4, 59);
  // Reruns traced per stage track ("recompute <unit>" events, stage_timer.h).
  const auto reruns = [&](PipelineSchedule schedule, int microbatches) {
    TraceRecorder trace({.enabled = true, .process_name = "pipeline"});
    PipelineOptions options;
    options.mode = schedule == PipelineSchedule::kOneFOneB ? WeightMode::kStale
                                                          : WeightMode::kVanilla;
    options.schedule = schedule;
    options.microbatches = microbatches;
    options.num_stages = n;
    options.recompute = true;
    options.trace = &trace;
    CATCH_REQUIRE(RunEngine(options, ChainFactory(dims), batches).ok());
    const char* tmp = std::getenv("TEST_TMPDIR");
    const std::string path = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/recompute_trace.json");
    CATCH_REQUIRE(trace.WriteJson(path).ok());
    std::ifstream in(path);
    const std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::map<int, int> per_track;
    for (size_t at = json.find("\"recompute "); at != std::string::npos;
         at = json.find("\"recompute ", at + 1)) {
      const size_t tid = json.rfind("\"tid\": ", at);  // an event's tid comes before its name
      per_track[std::stoi(json.substr(tid + 7))] += 1;
    }
    return per_track;
  };
  // 1F1B: the last stage's backward follows its forward at once; it keeps the
  // activations of its one mini-batch instead of rerunning.
  const std::map<int, int> one_f_one_b = reruns(PipelineSchedule::kOneFOneB, 1);
  CATCH_CHECK(one_f_one_b.size() == static_cast<size_t>(n - 1));
  for (const auto& [track, count] : one_f_one_b) CATCH_CHECK(count == m);
  // GPipe: every stage holds all micro-batches of a mini-batch, the last one too.
  const std::map<int, int> gpipe = reruns(PipelineSchedule::kGPipe, 2);
  CATCH_CHECK(gpipe.size() == static_cast<size_t>(n));
  for (const auto& [track, count] : gpipe) CATCH_CHECK(count == 2 * m);
}

CATCH_TEST_CASE("each stage runs the 1F1B order and the data flow is respected") {
  const std::vector<int64_t> dims{5, 6, 7, 6, 4};
  const int n = 4;
  const int64_t m = 9;
  const std::vector<Batch> batches = MakeBatches(m, 4, {5}, 4, 37);
  for (WeightMode mode : {WeightMode::kSpecTrain, WeightMode::kStale, WeightMode::kVanilla}) {
    CATCH_CAPTURE(WeightModeName(mode));
    EventLog log;
    PipelineOptions options;
    options.mode = mode;
    options.num_stages = n;
    options.on_event = [&log](const PipelineEvent& e) { log.Add(e); };
    auto got = RunEngine(options, ChainFactory(dims), batches);
    CATCH_REQUIRE(got.ok());
    const std::vector<PipelineEvent> events = log.events();
    CATCH_CHECK(events.size() == static_cast<size_t>(2 * n * m));
    for (int k = 0; k < n; ++k) {
      CATCH_CHECK(ScheduleString(StepsOf(events, k)) ==
                  ScheduleString(OneFOneBSchedule(n, k, m, IsPipelined(mode))));
    }
    // Position of each (stage, pass, mini-batch) in the global record.
    std::map<std::tuple<int, Pass, int64_t>, size_t> at;
    for (size_t j = 0; j < events.size(); ++j) {
      at[{events[j].stage, events[j].pass, events[j].microbatch}] = j;
    }
    for (int64_t i = 0; i < m; ++i) {
      for (int k = 1; k < n; ++k) {
        CATCH_CHECK(at[{k - 1, Pass::kForward, i}] < at[{k, Pass::kForward, i}]);
        CATCH_CHECK(at[{k, Pass::kBackward, i}] < at[{k - 1, Pass::kBackward, i}]);
      }
      CATCH_CHECK(at[{n - 1, Pass::kForward, i}] < at[{n - 1, Pass::kBackward, i}]);
      if (mode == WeightMode::kVanilla && i + 1 < m) {
        // One mini-batch at a time: i is done everywhere before i + 1 starts.
        CATCH_CHECK(at[{0, Pass::kBackward, i}] < at[{0, Pass::kForward, i + 1}]);
      }
    }
    if (mode != WeightMode::kVanilla) {
      // Pipelining: stage 0 starts mini-batch 1 before mini-batch 0 is done.
      CATCH_CHECK(at[{0, Pass::kForward, 1}] < at[{0, Pass::kBackward, 0}]);
    }
  }
}

CATCH_TEST_CASE(
    "pipedream stashes N-k versions on stage k < N-1 and back-propagates with the forward's") {
  const std::vector<int64_t> dims{5, 6, 7, 6, 4};
  const int n = 4;
  const int64_t m = 10;
  const std::vector<Batch> batches = MakeBatches(m, 4, {5}, 4, 41);
  for (WeightMode mode : {WeightMode::kPipeDream, WeightMode::kStale}) {
    EventLog log;
    PipelineOptions options;
    options.mode = mode;
    options.num_stages = n;
    options.on_event = [&log](const PipelineEvent& e) { log.Add(e); };
    CATCH_REQUIRE(RunEngine(options, ChainFactory(dims), batches).ok());
    std::vector<int64_t> max_stashed(n, 0);
    for (const PipelineEvent& e : log.events()) {
      const int64_t behind = n - e.stage - 1;
      const int64_t forward_version = std::max<int64_t>(0, e.microbatch - behind);
      max_stashed[e.stage] = std::max(max_stashed[e.stage], e.stashed);
      CATCH_CHECK(e.prediction == 0);
      if (e.pass == Pass::kForward) {
        CATCH_CHECK(e.weight_version == forward_version);
      } else if (mode == WeightMode::kPipeDream) {
        CATCH_CHECK(e.weight_version == forward_version);  // the stashed version
      } else {
        CATCH_CHECK(e.weight_version == e.microbatch);  // stale: the newest version
      }
    }
    for (int k = 0; k < n; ++k) {
      CATCH_CAPTURE(k);
      // The last stage runs each backward right after its forward: nothing to stash.
      CATCH_CHECK(max_stashed[k] == (mode == WeightMode::kPipeDream && k + 1 < n ? n - k : 0));
    }
  }
}

CATCH_TEST_CASE("spectrain applies s per stage and pass once a velocity exists") {
  const std::vector<int64_t> dims{5, 6, 7, 6, 4};
  const int n = 4;
  const std::vector<Batch> batches = MakeBatches(8, 4, {5}, 4, 43);
  for (int version : {1, 2}) {
    EventLog log;
    PipelineOptions options;
    options.mode = WeightMode::kSpecTrain;
    options.spectrain_version = version;
    options.num_stages = n;
    options.on_event = [&log](const PipelineEvent& e) { log.Add(e); };
    CATCH_REQUIRE(RunEngine(options, ChainFactory(dims), batches).ok());
    for (const PipelineEvent& e : log.events()) {
      const int s = PredictionDistance(WeightMode::kSpecTrain, version, n, e.stage, e.pass);
      const bool has_velocity = e.weight_version > 0;
      CATCH_CHECK(e.prediction == (has_velocity ? s : 0));
    }
  }
}

// ---------------------------------------------------------------------------------------
// Failures.

// Wraps a model; block `fail_block` throws in its forward (or, with `in_backward`, in its
// backward) on its `fail_at`-th call.
class FailingModel : public BlockModel {
 public:
  FailingModel(std::shared_ptr<BlockModel> inner, int64_t fail_block, int fail_at, bool in_backward)
      : inner_(register_module("inner", inner)),
        fail_block_(fail_block),
        fail_at_(fail_at),
        in_backward_(in_backward) {}
  int64_t num_blocks() const override { return inner_->num_blocks(); }
  torch::Tensor ForwardBlock(int64_t i, const torch::Tensor& x) override {
    torch::Tensor y = inner_->ForwardBlock(i, x);
    if (i == fail_block_ && ++calls_ == fail_at_) {
      if (!in_backward_) throw std::runtime_error("injected forward failure");
      y.register_hook([](torch::Tensor) -> torch::Tensor {
        throw std::runtime_error("injected backward failure");
      });
    }
    return y;
  }
  std::vector<torch::Tensor> BlockParameters(int64_t i) override {
    return inner_->BlockParameters(i);
  }
  std::string BlockName(int64_t i) const override { return inner_->BlockName(i); }
  torch::Tensor Loss(const torch::Tensor& out, const torch::Tensor& target) override {
    return inner_->Loss(out, target);
  }

 private:
  std::shared_ptr<BlockModel> inner_;
  int64_t fail_block_;
  int fail_at_;
  bool in_backward_;
  int calls_ = 0;
};

CATCH_TEST_CASE("a failing stage ends the run with an error instead of a deadlock") {
  const std::vector<int64_t> dims{5, 6, 7, 6, 4};
  const std::vector<Batch> batches = MakeBatches(12, 4, {5}, 4, 47);
  for (WeightMode mode : {WeightMode::kSpecTrain, WeightMode::kPipeDream, WeightMode::kVanilla,
                          WeightMode::kDataParallel}) {
    for (int64_t block : {0, 2, 3}) {
      for (bool in_backward : {false, true}) {
        CATCH_CAPTURE(WeightModeName(mode), block, in_backward);
        PipelineOptions options;
        options.mode = mode;
        options.num_stages = 4;
        auto factory = [&]() -> absl::StatusOr<std::shared_ptr<BlockModel>> {
          return std::static_pointer_cast<BlockModel>(
              std::make_shared<FailingModel>(*ChainFactory(dims)(), block, 5, in_backward));
        };
        absl::StatusOr<std::unique_ptr<PipelineEngine>> engine =
            PipelineEngine::Create(options, factory);
        CATCH_REQUIRE(engine.ok());
        absl::StatusOr<TrainStats> stats = (*engine)->Train(batches.size(), SourceOf(batches));
        CATCH_REQUIRE_FALSE(stats.ok());
        CATCH_CHECK(stats.status().code() == absl::StatusCode::kInternal);
        const std::string message(stats.status().message());
        CATCH_CHECK(absl::StrContains(
            message, in_backward ? "injected backward failure" : "injected forward failure"));
        CATCH_CHECK(absl::StrContains(message, "mini-batch 4"));
        CATCH_CHECK(absl::StrContains(message, in_backward ? "backward" : "forward"));
        if (mode != WeightMode::kDataParallel) {
          CATCH_CHECK(absl::StrContains(message, absl::StrCat("stage ", block)));
        }
        // The engine refuses to go on, and shuts down cleanly (twice).
        absl::StatusOr<TrainStats> again = (*engine)->Train(2, SourceOf(batches));
        CATCH_CHECK(again.status().code() == absl::StatusCode::kFailedPrecondition);
        (*engine)->Shutdown();
        (*engine)->Shutdown();
      }
    }
  }
}

CATCH_TEST_CASE("a failing batch source ends the run with its error") {
  const std::vector<int64_t> dims{5, 6, 4};
  const std::vector<Batch> batches = MakeBatches(6, 4, {5}, 4, 53);
  for (WeightMode mode : {WeightMode::kStale, WeightMode::kDataParallel}) {
    PipelineOptions options;
    options.mode = mode;
    options.num_stages = 2;
    absl::StatusOr<std::unique_ptr<PipelineEngine>> engine =
        PipelineEngine::Create(options, ChainFactory(dims));
    CATCH_REQUIRE(engine.ok());
    absl::StatusOr<TrainStats> stats = (*engine)->Train(6, [&](int64_t i) -> absl::StatusOr<Batch> {
      if (i == 3) return absl::DataLossError("corrupt file");
      return batches[i];
    });
    CATCH_REQUIRE_FALSE(stats.ok());
    CATCH_CHECK(stats.status().code() == absl::StatusCode::kDataLoss);
    CATCH_CHECK(absl::StrContains(stats.status().message(), "mini-batch 3: corrupt file"));
  }
}

CATCH_TEST_CASE("bad options and CUDA without a GPU are errors that say why") {
  PipelineOptions options;
  options.num_stages = 5;  // the chain has 2 blocks
  absl::StatusOr<std::unique_ptr<PipelineEngine>> engine =
      PipelineEngine::Create(options, ChainFactory({5, 6, 4}));
  CATCH_CHECK(engine.status().code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(absl::StrContains(engine.status().message(), "boundaries"));

  options.num_stages = 2;
  options.boundaries = {0};
  engine = PipelineEngine::Create(options, ChainFactory({5, 6, 4}));
  CATCH_CHECK(engine.status().code() == absl::StatusCode::kInvalidArgument);

  options.boundaries = {};
  options.devices = {"cpu", "tpu"};
  engine = PipelineEngine::Create(options, ChainFactory({5, 6, 4}));
  CATCH_CHECK(absl::StrContains(engine.status().message(), "devices[1]"));

  // Replicas that differ (no fixed seed) are refused.
  int calls = 0;
  engine = PipelineEngine::Create(PipelineOptions{}, [&]() {
    return ChainFactory({5, 6, 4}, ++calls)();
  });
  CATCH_CHECK(absl::StrContains(engine.status().message(), "fixed seed"));

  if (!torch::cuda::is_available()) {
    absl::StatusOr<torch::Device> device = ParseStageDevice("cuda:0");
    CATCH_CHECK(device.status().code() == absl::StatusCode::kInvalidArgument);
    CATCH_CHECK(absl::StrContains(device.status().message(), "no CUDA GPU is present"));
    options.devices = {"cpu", "cuda:0"};
    engine = PipelineEngine::Create(options, ChainFactory({5, 6, 4}));
    CATCH_CHECK(absl::StrContains(engine.status().message(), "no CUDA GPU is present"));
  }
  CATCH_CHECK(ParseStageDevice("cpu").ok());
  CATCH_CHECK_FALSE(ParseStageDevice("cuda:x").ok());
}

CATCH_TEST_CASE("the profiler times every block and counts its parameters") {
  absl::StatusOr<std::shared_ptr<BlockModel>> model = ZooFactory("mlp")();
  CATCH_REQUIRE(model.ok());
  const std::vector<Batch> batches = MakeBatches(3, 8, {12}, 10, 59);
  absl::StatusOr<std::vector<BlockProfile>> profile = ProfileBlocks(**model, batches);
  CATCH_REQUIRE(profile.ok());
  CATCH_REQUIRE(profile->size() == 3);
  CATCH_CHECK((*profile)[0].name == "fc1");
  CATCH_CHECK((*profile)[0].parameters == 12 * 40 + 40);
  CATCH_CHECK((*profile)[1].output_bytes == static_cast<int64_t>(8 * 30 * sizeof(float)));
  for (const BlockProfile& b : *profile) {
    CATCH_CHECK(b.forward_seconds > 0);
    CATCH_CHECK(b.backward_seconds > 0);
    CATCH_CHECK(b.update_seconds == 0);  // no SGD options: the update is not profiled
  }
  CATCH_CHECK_FALSE(ProfileBlocks(**model, {batches[0]}).ok());
  // With the stages' SGD options each block's update is timed, on copies of the weights.
  std::vector<torch::Tensor> before;
  for (const torch::Tensor& p : (*model)->parameters()) before.push_back(p.detach().clone());
  const SgdOptions sgd{0.05, 0.9, 0, 1e-4, false};
  profile = ProfileBlocks(**model, batches, &sgd);
  CATCH_REQUIRE(profile.ok());
  for (const BlockProfile& b : *profile) {
    CATCH_CHECK(b.update_seconds > 0);
    CATCH_CHECK(b.seconds() == b.forward_seconds + b.backward_seconds + b.update_seconds);
  }
  std::vector<torch::Tensor> after;
  for (const torch::Tensor& p : (*model)->parameters()) after.push_back(p.detach().clone());
  CATCH_CHECK(MaxAbsDiff(before, after) == 0);  // the model's weights are untouched
}

CATCH_TEST_CASE("gpipe runs a mini-batch's forwards, then its backwards, and updates once") {
  const std::vector<int64_t> dims{5, 6, 7, 6, 4};
  const int n = 4;
  const int64_t count = 3;
  const int64_t micro = 5;
  const std::vector<Batch> batches = MakeBatches(count, 10, {5}, 4, 53);
  EventLog log;
  PipelineOptions options;
  options.mode = WeightMode::kVanilla;
  options.schedule = PipelineSchedule::kGPipe;
  options.microbatches = micro;
  options.num_stages = n;
  options.on_event = [&log](const PipelineEvent& e) { log.Add(e); };
  auto got = RunEngine(options, ChainFactory(dims), batches);
  CATCH_REQUIRE(got.ok());
  const std::vector<PipelineEvent> events = log.events();
  CATCH_CHECK(events.size() == static_cast<size_t>(2 * n * count * micro));
  std::map<std::tuple<int, Pass, int64_t>, size_t> at;  // (stage, pass, unit) -> position
  for (int k = 0; k < n; ++k) {
    std::vector<ScheduleStep> steps;
    for (size_t p = 0; p < events.size(); ++p) {
      const PipelineEvent& e = events[p];
      if (e.stage != k) continue;
      const int64_t unit = e.microbatch * micro + e.part;
      steps.push_back({e.pass, unit});
      at[{k, e.pass, unit}] = p;
      // Every micro-batch of mini-batch i, forward and backward, sees the weights after
      // exactly i updates: one synchronous update per mini-batch.
      CATCH_CHECK(e.weight_version == e.microbatch);
      CATCH_CHECK(e.prediction == 0);
      CATCH_CHECK(e.stashed == 0);
    }
    CATCH_CHECK(ScheduleString(steps) == ScheduleString(GPipeSchedule(count, micro)));
  }
  for (int64_t i = 0; i < count; ++i) {
    for (int64_t m = 0; m < micro; ++m) {
      const int64_t j = i * micro + m;
      for (int k = 1; k < n; ++k) {
        CATCH_CHECK(at[{k - 1, Pass::kForward, j}] < at[{k, Pass::kForward, j}]);
        CATCH_CHECK(at[{k, Pass::kBackward, j}] < at[{k - 1, Pass::kBackward, j}]);
      }
    }
    if (i + 1 < count) {
      // Flush: mini-batch i is done everywhere before i + 1 starts.
      CATCH_CHECK(at[{0, Pass::kBackward, i * micro + micro - 1}] <
                  at[{0, Pass::kForward, (i + 1) * micro}]);
    }
  }
  // Busy time is measured per stage; the bubble is a share.
  CATCH_REQUIRE(got->second.busy_seconds.size() == static_cast<size_t>(n));
  for (double b : got->second.busy_seconds) CATCH_CHECK(b > 0);
  CATCH_CHECK(got->second.seconds > 0);
  CATCH_CHECK(BubbleFraction(got->second) >= 0);
  CATCH_CHECK(BubbleFraction(got->second) < 1);
}

CATCH_TEST_CASE("gpipe refuses other weight modes, 1f1b refuses micro-batches") {
  for (WeightMode mode : {WeightMode::kSpecTrain, WeightMode::kPipeDream, WeightMode::kStale,
                          WeightMode::kDataParallel}) {
    CATCH_CAPTURE(WeightModeName(mode));
    PipelineOptions options;
    options.mode = mode;
    options.schedule = PipelineSchedule::kGPipe;
    options.microbatches = 2;
    absl::StatusOr<std::unique_ptr<PipelineEngine>> engine =
        PipelineEngine::Create(options, ChainFactory({5, 6, 4}));
    CATCH_CHECK(engine.status().code() == absl::StatusCode::kInvalidArgument);
    CATCH_CHECK(absl::StrContains(engine.status().message(),
                                  "schedule: gpipe does not combine with mode " +
                                      WeightModeName(mode)));
  }
  PipelineOptions options;
  options.mode = WeightMode::kVanilla;
  options.microbatches = 2;
  absl::StatusOr<std::unique_ptr<PipelineEngine>> engine =
      PipelineEngine::Create(options, ChainFactory({5, 6, 4}));
  CATCH_CHECK(absl::StrContains(engine.status().message(),
                                "microbatches: 2 with schedule 1f1b; allowed: 1"));
  // More micro-batches than samples: an error of the run, naming the mini-batch.
  options.schedule = PipelineSchedule::kGPipe;
  options.microbatches = 4;
  engine = PipelineEngine::Create(options, ChainFactory({5, 6, 4}));
  CATCH_REQUIRE(engine.ok());
  const std::vector<Batch> batches = MakeBatches(1, 3, {5}, 4, 59);
  absl::StatusOr<TrainStats> stats = (*engine)->Train(1, SourceOf(batches));
  CATCH_CHECK(stats.status().code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(absl::StrContains(stats.status().message(),
                                "gpipe splits each mini-batch into 4 micro-batches; mini-batch 0 "
                                "has 3 samples"));
}

}  // namespace
}  // namespace p3::pipeline
