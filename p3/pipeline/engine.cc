#include "p3/pipeline/engine.h"

#include <c10/core/DeviceGuard.h>

#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "p3/status_macros.h"

namespace p3::pipeline {
namespace {

constexpr int kMaxStages = 64;

std::string PassName(Pass pass) { return pass == Pass::kForward ? "forward" : "backward"; }

absl::Status ValidateOptions(const PipelineOptions& o) {
  if (o.num_stages < 1 || o.num_stages > kMaxStages) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_stages: ", o.num_stages, " is out of range; allowed 1..", kMaxStages));
  }
  if (o.spectrain_version != 1 && o.spectrain_version != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("spectrain_version: ", o.spectrain_version, " is not allowed; allowed: 1, 2"));
  }
  if (!o.devices.empty() && static_cast<int>(o.devices.size()) != o.num_stages) {
    return absl::InvalidArgumentError(absl::StrCat("devices: ", o.devices.size(), " devices for ",
                                                   o.num_stages,
                                                   " stages; give one per stage or none"));
  }
  if (o.threads_per_stage < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("threads_per_stage: ", o.threads_per_stage, " is out of range; allowed >= 0"));
  }
  const SgdOptions& s = o.sgd;
  if (!(s.lr > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("sgd.lr: ", s.lr, "; allowed > 0"));
  }
  if (!(s.momentum >= 0 && s.momentum < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sgd.momentum: ", s.momentum, "; allowed [0, 1)"));
  }
  if (!(s.weight_decay >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sgd.weight_decay: ", s.weight_decay, "; allowed >= 0"));
  }
  if (s.nesterov && (s.momentum <= 0 || s.dampening != 0)) {
    return absl::InvalidArgumentError("sgd.nesterov needs momentum > 0 and dampening 0");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<torch::Device> ParseStageDevice(const std::string& name) {
  if (name == "cpu") return torch::Device(torch::kCPU);
  if (name == "cuda" || absl::StartsWith(name, "cuda:")) {
    int index = 0;
    if (name != "cuda" && (!absl::SimpleAtoi(name.substr(5), &index) || index < 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("device \"", name, "\": expected cuda:<index>, e.g. cuda:0"));
    }
    const int64_t count = static_cast<int64_t>(torch::cuda::device_count());
    if (!torch::cuda::is_available() || count == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "device \"", name, "\": no CUDA GPU is present (torch::cuda::device_count() = ", count,
          at::hasCUDA() ? "; libtorch has CUDA but sees no GPU" : "; this libtorch is CPU-only",
          "); use \"cpu\""));
    }
    if (index >= count) {
      return absl::InvalidArgumentError(
          absl::StrCat("device \"", name, "\": only ", count, " CUDA GPU(s) are present"));
    }
    return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("device \"", name, "\" is not allowed; allowed: cpu, cuda, cuda:<index>"));
}

// One mini-batch between its forward and its backward on a stage.
struct PipelineEngine::InFlight {
  torch::Tensor input;               // the stage's input; a leaf with grad on stages > 0
  torch::Tensor output;              // the stage's output; the loss on the last stage
  std::vector<torch::Tensor> stash;  // the forward's weights (pipedream, spectrain v2)
  int64_t version = 0;               // updates applied when the forward ran
  int prediction = 0;                // s applied in the forward
};

struct PipelineEngine::Stage {
  int index = 0;
  torch::Device device{torch::kCPU};
  std::shared_ptr<models::BlockModel> model;
  StageRange range;
  std::unique_ptr<StageSgd> sgd;
  std::map<int64_t, InFlight> in_flight;  // by mini-batch
  // What the parameters hold (spectrain, pipedream: the optimizer keeps the real weights
  // apart): the real weights after `working_version` updates, predicted
  // `working_prediction` ahead. Writes that would change nothing are skipped.
  int64_t working_version = 0;
  int working_prediction = 0;
  std::vector<std::vector<torch::Tensor>> free_stashes;  // reused weight copies

  // Parameters := the real weights after the current update count, predicted `s` ahead
  // (0: none; nothing before the first update). Returns the s applied.
  int SetWorkingPredicted(int s) {
    const int64_t version = sgd->steps();
    const int applied = version > 0 && !sgd->velocity().empty() ? std::max(s, 0) : 0;
    if (!sgd->separate_real()) return 0;
    if (working_version != version || working_prediction != applied) {
      sgd->WritePredicted(applied);
      working_version = version;
      working_prediction = applied;
    }
    return applied;
  }
  // Parameters := a stash taken when they held (version, prediction).
  void SetWorkingStash(const InFlight& f) {
    if (working_version != f.version || working_prediction != f.prediction) {
      sgd->WriteWorking(f.stash);
      working_version = f.version;
      working_prediction = f.prediction;
    }
  }
};

// data_parallel's all-reduce: every replica hands in its gradients once per round; once
// all have, each replica sums its share of the parameters (j mod N == replica) into
// buffers kept across rounds, in replica order (so every run adds in the same order), and
// once all shares are done every replica reads the whole sum. A replica's gradients and
// the sums stay untouched until everyone has passed: nobody starts the next round's
// reduction before every replica handed in its next gradients, i.e. finished this round.
class PipelineEngine::GradientExchange {
 public:
  struct Result {
    const std::vector<torch::Tensor>* grads = nullptr;  // valid until the next round
    double loss = 0;
  };

  explicit GradientExchange(int n) : n_(n), grads_(n), weights_(n), losses_(n) {}

  // std::nullopt once closed. Throws what libtorch throws while summing.
  std::optional<Result> Reduce(int replica, std::vector<torch::Tensor> grads, double weight,
                               double loss, const torch::Device& device) {
    int64_t round = 0;
    size_t count = 0;
    {
      absl::MutexLock lock(&mu_);
      if (closed_) return std::nullopt;
      round = round_;
      count = grads.size();
      if (sums_.size() != count) sums_.resize(count);
      grads_[replica] = std::move(grads);
      weights_[replica] = weight;
      losses_[replica] = loss;
      if (++arrived_ == n_) all_arrived_ = round + 1;
      auto arrived = [this, round]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return closed_ || all_arrived_ > round;
      };
      mu_.Await(absl::Condition(&arrived));
      if (closed_) return std::nullopt;
    }
    {
      torch::NoGradGuard no_grad;
      for (size_t j = replica; j < count; j += n_) {
        torch::Tensor& sum = sums_[j];
        bool first = true;
        for (int r = 0; r < n_; ++r) {
          const torch::Tensor& g = grads_[r][j];
          if (!g.defined()) continue;
          if (first) {
            if (!sum.defined() || sum.sizes() != g.sizes()) sum = torch::empty_like(g, device);
            torch::mul_out(sum, g.to(device), weights_[r]);
            first = false;
          } else {
            sum.add_(g.to(device), weights_[r]);
          }
        }
        if (first) sum = torch::Tensor();  // no replica has a gradient for it
      }
    }
    absl::MutexLock lock(&mu_);
    if (++reduced_ == n_) {
      loss_ = 0;
      for (int r = 0; r < n_; ++r) {
        loss_ += weights_[r] * losses_[r];
        grads_[r].clear();
      }
      arrived_ = 0;
      reduced_ = 0;
      ++round_;
    } else {
      auto done = [this, round]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return closed_ || round_ > round; };
      mu_.Await(absl::Condition(&done));
      if (round_ == round) return std::nullopt;  // closed before the round completed
    }
    return Result{&sums_, loss_};
  }

  void Close() {
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }

 private:
  const int n_;
  absl::Mutex mu_;
  // Written under mu_ before the round's reduction starts and read (not changed) during
  // it; sums_[j] belongs to replica j mod N during the reduction.
  std::vector<std::vector<torch::Tensor>> grads_;
  std::vector<double> weights_ ABSL_GUARDED_BY(mu_);
  std::vector<double> losses_ ABSL_GUARDED_BY(mu_);
  std::vector<torch::Tensor> sums_;
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
  int reduced_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t all_arrived_ ABSL_GUARDED_BY(mu_) = 0;  // rounds whose gradients are all in
  int64_t round_ ABSL_GUARDED_BY(mu_) = 0;        // rounds completed
  double loss_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

PipelineEngine::PipelineEngine(const PipelineOptions& options)
    : options_(options), n_(options.num_stages) {}

PipelineEngine::~PipelineEngine() { Shutdown(); }

absl::StatusOr<std::unique_ptr<PipelineEngine>> PipelineEngine::Create(
    const PipelineOptions& options, const ModelFactory& factory) {
  P3_RETURN_IF_ERROR(ValidateOptions(options));
  const int n = options.num_stages;
  std::vector<torch::Device> devices;
  for (int k = 0; k < n; ++k) {
    const std::string name = options.devices.empty() ? "cpu" : options.devices[k];
    absl::StatusOr<torch::Device> device = ParseStageDevice(name);
    if (!device.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("devices[", k, "]: ", device.status().message()));
    }
    devices.push_back(*device);
  }
  std::unique_ptr<PipelineEngine> engine(new PipelineEngine(options));
  const bool data_parallel = options.mode == WeightMode::kDataParallel;
  std::vector<torch::Tensor> reference;  // replica 0's initial parameters
  int64_t num_blocks = 0;
  for (int k = 0; k < n; ++k) {
    absl::StatusOr<std::shared_ptr<models::BlockModel>> model = factory();
    if (!model.ok()) return model.status();
    if (*model == nullptr) return absl::InvalidArgumentError("the model factory returned null");
    auto stage = std::make_unique<Stage>();
    stage->index = k;
    stage->device = devices[k];
    stage->model = *model;
    if (k == 0) {
      num_blocks = stage->model->num_blocks();
      if (data_parallel) {
        engine->ranges_.assign(n, StageRange{0, num_blocks});
      } else {
        std::vector<int64_t> boundaries = options.boundaries;
        if (boundaries.empty()) {
          for (int s = 1; s < n; ++s) boundaries.push_back(s * num_blocks / n);
        }
        absl::Status valid = ValidateBoundaries(boundaries, num_blocks);
        if (!valid.ok()) {
          return absl::InvalidArgumentError(absl::StrCat("boundaries: ", valid.message()));
        }
        engine->ranges_ = StageRanges(boundaries, num_blocks);
      }
    } else if (stage->model->num_blocks() != num_blocks) {
      return absl::InvalidArgumentError("the model factory returned models of different shapes");
    }
    std::vector<torch::Tensor> all;
    for (int64_t b = 0; b < num_blocks; ++b) {
      for (const torch::Tensor& p : stage->model->BlockParameters(b)) all.push_back(p);
    }
    if (k == 0) {
      reference = all;
    } else {
      bool same = all.size() == reference.size();
      for (size_t j = 0; same && j < all.size(); ++j) {
        same = all[j].sizes() == reference[j].sizes() && torch::equal(all[j], reference[j]);
      }
      if (!same) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the model factory returned a replica for stage ", k,
            " whose parameters differ from stage 0's; it must initialise from a fixed seed"));
      }
    }
    try {
      if (!stage->device.is_cpu()) stage->model->to(stage->device);
    } catch (const c10::Error& e) {
      return absl::InternalError(absl::StrCat("moving stage ", k, " to ", stage->device.str(), ": ",
                                              e.what_without_backtrace()));
    }
    stage->model->train();
    stage->range = engine->ranges_[k];
    std::vector<torch::Tensor> params;
    for (int64_t b = stage->range.begin; b < stage->range.end; ++b) {
      for (const torch::Tensor& p : stage->model->BlockParameters(b)) params.push_back(p);
    }
    // SpecTrain and PipeDream put other values than the real weights into the model;
    // the optimizer then keeps the real ones apart.
    const bool separate_real =
        options.mode == WeightMode::kSpecTrain || options.mode == WeightMode::kPipeDream;
    stage->sgd = std::make_unique<StageSgd>(std::move(params), options.sgd, separate_real);
    engine->stages_.push_back(std::move(stage));
  }
  // In 1F1B no stage runs more than N forwards ahead of the next one, so N + 1 slots
  // never block a stage that the schedule lets run.
  for (int k = 0; k < n; ++k) {
    engine->forward_.push_back(std::make_unique<BoundedQueue<Message>>(n + 1));
    engine->backward_.push_back(std::make_unique<BoundedQueue<Message>>(n + 1));
  }
  engine->exchange_ = std::make_unique<GradientExchange>(n);
  for (int k = 0; k < n; ++k) {
    engine->threads_.emplace_back([e = engine.get(), k] { e->StageLoop(k); });
  }
  return engine;
}

void PipelineEngine::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    shutdown_ = true;
  }
  for (auto& q : forward_) q->Close();
  for (auto& q : backward_) q->Close();
  if (exchange_ != nullptr) exchange_->Close();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

void PipelineEngine::Fail(const absl::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    if (error_.ok()) error_ = status;
  }
  for (auto& q : forward_) q->Close();
  for (auto& q : backward_) q->Close();
  exchange_->Close();
}

void PipelineEngine::Emit(const PipelineEvent& event) const {
  if (options_.on_event) options_.on_event(event);
}

void PipelineEngine::StageLoop(int k) {
  if (options_.threads_per_stage > 0) torch::set_num_threads(options_.threads_per_stage);
  c10::OptionalDeviceGuard device_guard;
  if (!stages_[k]->device.is_cpu()) device_guard.reset_device(stages_[k]->device);
  int64_t seen = 0;
  while (true) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return shutdown_ || generation_ > seen;
      };
      mu_.Await(absl::Condition(&ready));
      if (shutdown_) return;
      seen = generation_;
      job = job_;
    }
    absl::Status status = options_.mode == WeightMode::kDataParallel ? RunDataParallelJob(k, job)
                                                                     : RunPipelineJob(k, job);
    if (!status.ok()) Fail(status);
    Stage& stage = *stages_[k];
    for (auto& entry : stage.in_flight) {
      if (!entry.second.stash.empty()) stage.free_stashes.push_back(std::move(entry.second.stash));
    }
    stage.in_flight.clear();
    // The model holds the real weights between runs (for Infer(), Parameters()).
    try {
      stage.SetWorkingPredicted(0);
    } catch (const c10::Error& e) {
      Fail(absl::InternalError(absl::StrCat("stage ", k, ": ", e.what_without_backtrace())));
    }
    absl::MutexLock lock(&mu_);
    ++stages_done_;
  }
}

absl::Status PipelineEngine::RunPipelineJob(int k, const Job& job) {
  Stage& stage = *stages_[k];
  const auto stopped = [k] {
    return absl::CancelledError(absl::StrCat("stage ", k, " stopped: another part failed"));
  };
  for (const ScheduleStep& step : OneFOneBSchedule(n_, k, job.count, IsPipelined(options_.mode))) {
    std::optional<Message> message;
    if (step.pass == Pass::kForward || k + 1 < n_) {
      message = (step.pass == Pass::kForward ? forward_[k] : backward_[k])->Pop();
      if (!message) return stopped();
      if (message->microbatch != step.microbatch) {
        return absl::InternalError(absl::StrCat("stage ", k, ": expected ", StepName(step),
                                                ", received mini-batch ", message->microbatch));
      }
    }
    if (step.pass == Pass::kForward) {
      P3_RETURN_IF_ERROR(Forward(stage, std::move(*message), job));
    } else {
      P3_RETURN_IF_ERROR(
          Backward(stage, step.microbatch, message ? message->tensor : torch::Tensor(), job));
    }
  }
  return absl::OkStatus();
}

absl::Status PipelineEngine::Forward(Stage& stage, Message message, const Job& job) {
  const int k = stage.index;
  const int64_t i = message.microbatch;
  const bool stash = options_.mode == WeightMode::kPipeDream ||
                     (options_.mode == WeightMode::kSpecTrain && options_.spectrain_version == 2);
  bool pushed = true;
  try {
    InFlight f;
    torch::Tensor x = message.tensor.to(stage.device);
    if (k > 0) x = x.detach().requires_grad_(true);
    // The weights of this forward: the real ones (stale, vanilla: they are the
    // parameters), or predicted s ahead (spectrain; pipedream: s = 0).
    f.prediction = stage.SetWorkingPredicted(
        PredictionDistance(options_.mode, options_.spectrain_version, n_, k, Pass::kForward));
    f.version = stage.sgd->steps();
    if (stash) {
      if (!stage.free_stashes.empty()) {
        f.stash = std::move(stage.free_stashes.back());
        stage.free_stashes.pop_back();
      }
      stage.sgd->CopyWorking(&f.stash);
    }
    torch::Tensor y = x;
    for (int64_t b = stage.range.begin; b < stage.range.end; ++b) {
      y = stage.model->ForwardBlock(b, y);
    }
    if (k + 1 == n_) {
      torch::Tensor loss = stage.model->Loss(y, message.target.to(stage.device));
      job.stats->losses[i] = loss.item<double>();
      f.output = loss;
    } else {
      f.output = y;
    }
    f.input = x;
    PipelineEvent event{k, Pass::kForward, i, f.version, f.prediction, 0};
    stage.in_flight.emplace(i, std::move(f));
    for (const auto& entry : stage.in_flight) event.stashed += entry.second.stash.empty() ? 0 : 1;
    // Before the hand-over, so that events are recorded in an order consistent with the
    // data flow (the next stage's forward of i comes after this one).
    Emit(event);
    if (k + 1 < n_) pushed = forward_[k + 1]->Push(Message{i, y.detach(), message.target, 1});
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("stage ", k, ": forward of mini-batch ", i, ": ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("stage ", k, ": forward of mini-batch ", i, ": ", e.what()));
  }
  if (!pushed) {
    return absl::CancelledError(absl::StrCat("stage ", k, " stopped: another part failed"));
  }
  return absl::OkStatus();
}

absl::Status PipelineEngine::Backward(Stage& stage, int64_t i, const torch::Tensor& grad,
                                      const Job& job) {
  const int k = stage.index;
  auto it = stage.in_flight.find(i);
  if (it == stage.in_flight.end()) {
    return absl::InternalError(
        absl::StrCat("stage ", k, ": backward of mini-batch ", i, " before its forward"));
  }
  InFlight& f = it->second;
  bool pushed = true;
  PipelineEvent event{k, Pass::kBackward, i, stage.sgd->steps(), 0, 0};
  try {
    if (!f.stash.empty()) {
      // The forward's weights: stashed (pipedream) or predicted (spectrain v2).
      event.weight_version = f.version;
      event.prediction = f.prediction;
      stage.SetWorkingStash(f);
    } else {
      // The current real weights (stale, vanilla: they are the parameters), or predicted
      // s ahead (spectrain v1).
      event.prediction = stage.SetWorkingPredicted(
          PredictionDistance(options_.mode, options_.spectrain_version, n_, k, Pass::kBackward));
    }
    stage.sgd->ZeroGrad();
    if (k + 1 == n_) {
      f.output.backward();
    } else {
      torch::autograd::backward({f.output}, {grad.to(stage.device)});
    }
    for (const auto& entry : stage.in_flight) {
      if (entry.first != i && !entry.second.stash.empty()) ++event.stashed;
    }
    Emit(event);
    // Hand the input's gradient on before updating, so that the previous stage can start
    // its backward during this stage's update.
    if (k > 0) pushed = backward_[k - 1]->Push(Message{i, f.input.grad(), {}, 1});
    stage.sgd->Step();
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("stage ", k, ": backward of mini-batch ", i, ": ",
                                            e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("stage ", k, ": backward of mini-batch ", i, ": ", e.what()));
  }
  if (!f.stash.empty()) stage.free_stashes.push_back(std::move(f.stash));
  stage.in_flight.erase(it);
  if (k == 0) {
    job.stats->done_seconds[i] = absl::ToDoubleSeconds(absl::Now() - job.start);
    if (options_.on_done) options_.on_done(i, job.stats->losses[i]);
  }
  if (!pushed) {
    return absl::CancelledError(absl::StrCat("stage ", k, " stopped: another part failed"));
  }
  return absl::OkStatus();
}

absl::Status PipelineEngine::RunDataParallelJob(int k, const Job& job) {
  Stage& stage = *stages_[k];
  const std::vector<torch::Tensor>& params = stage.sgd->params();
  for (int64_t i = 0; i < job.count; ++i) {
    std::optional<Message> message = forward_[k]->Pop();
    if (!message) {
      return absl::CancelledError(absl::StrCat("replica ", k, " stopped: another part failed"));
    }
    std::vector<torch::Tensor> grads;
    double loss_value = 0;
    const int64_t version = stage.sgd->steps();
    Pass pass = Pass::kForward;
    try {
      torch::Tensor y = message->tensor.to(stage.device);
      stage.sgd->ZeroGrad();
      for (int64_t b = stage.range.begin; b < stage.range.end; ++b) {
        y = stage.model->ForwardBlock(b, y);
      }
      torch::Tensor loss = stage.model->Loss(y, message->target.to(stage.device));
      loss_value = loss.item<double>();
      Emit({k, Pass::kForward, i, version, 0, 0});
      pass = Pass::kBackward;
      loss.backward();
      for (const torch::Tensor& p : params) grads.push_back(p.grad());
    } catch (const c10::Error& e) {
      return absl::InternalError(absl::StrCat("replica ", k, ": ", PassName(pass),
                                              " of mini-batch ", i, ": ",
                                              e.what_without_backtrace()));
    } catch (const std::exception& e) {
      return absl::InternalError(
          absl::StrCat("replica ", k, ": ", PassName(pass), " of mini-batch ", i, ": ", e.what()));
    }
    std::optional<GradientExchange::Result> sum;
    try {
      sum = exchange_->Reduce(k, std::move(grads), message->weight, loss_value, stages_[0]->device);
    } catch (const c10::Error& e) {
      return absl::InternalError(absl::StrCat("replica ", k, ": averaging mini-batch ", i,
                                              "'s gradients: ", e.what_without_backtrace()));
    }
    if (!sum) {
      return absl::CancelledError(absl::StrCat("replica ", k, " stopped: another part failed"));
    }
    try {
      if (stage.device == stages_[0]->device) {
        stage.sgd->Step(*sum->grads);
      } else {
        std::vector<torch::Tensor> moved;
        for (const torch::Tensor& g : *sum->grads) {
          moved.push_back(g.defined() ? g.to(stage.device) : g);
        }
        stage.sgd->Step(moved);
      }
    } catch (const c10::Error& e) {
      return absl::InternalError(absl::StrCat("replica ", k, ": update of mini-batch ", i, ": ",
                                              e.what_without_backtrace()));
    }
    if (k == 0) {
      job.stats->losses[i] = sum->loss;
      job.stats->done_seconds[i] = absl::ToDoubleSeconds(absl::Now() - job.start);
      if (options_.on_done) options_.on_done(i, sum->loss);
    }
    Emit({k, Pass::kBackward, i, version, 0, 0});
  }
  return absl::OkStatus();
}

absl::Status PipelineEngine::Feed(int64_t count, const BatchSource& source) {
  for (int64_t i = 0; i < count; ++i) {
    absl::StatusOr<models::Batch> batch = source(i);
    if (!batch.ok()) {
      return absl::Status(batch.status().code(),
                          absl::StrCat("loading mini-batch ", i, ": ", batch.status().message()));
    }
    if (options_.mode != WeightMode::kDataParallel) {
      if (!forward_[0]->Push(Message{i, batch->input, batch->target, 1})) {
        return absl::OkStatus();  // a stage failed; its error is already recorded
      }
      continue;
    }
    const int64_t size = batch->input.size(0);
    if (size < n_) {
      return absl::InvalidArgumentError(absl::StrCat("data_parallel splits each mini-batch over ",
                                                     n_, " replicas; mini-batch ", i, " has ", size,
                                                     " samples"));
    }
    int64_t offset = 0;
    for (int r = 0; r < n_; ++r) {
      const int64_t shard = size / n_ + (r < size % n_ ? 1 : 0);
      Message m{i, batch->input.narrow(0, offset, shard), batch->target.narrow(0, offset, shard),
                static_cast<double>(shard) / static_cast<double>(size)};
      offset += shard;
      if (!forward_[r]->Push(std::move(m))) return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TrainStats> PipelineEngine::Train(int64_t count, const BatchSource& source) {
  if (count < 0) {
    return absl::InvalidArgumentError(absl::StrCat("count: ", count, "; allowed >= 0"));
  }
  TrainStats stats;
  stats.losses.assign(count, std::numeric_limits<double>::quiet_NaN());
  stats.done_seconds.assign(count, 0);
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return absl::FailedPreconditionError("the pipeline engine was shut down");
    if (!error_.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("an earlier run of the pipeline failed: ", error_.message()));
    }
    job_ = Job{count, absl::Now(), &stats};
    stages_done_ = 0;
    ++generation_;
  }
  absl::Status fed = Feed(count, source);
  if (!fed.ok()) Fail(fed);
  absl::MutexLock lock(&mu_);
  auto all_done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stages_done_ == n_; };
  mu_.Await(absl::Condition(&all_done));
  if (!error_.ok()) return error_;
  return stats;
}

absl::StatusOr<torch::Tensor> PipelineEngine::Infer(const torch::Tensor& input) {
  torch::NoGradGuard no_grad;
  const bool data_parallel = options_.mode == WeightMode::kDataParallel;
  const int used = data_parallel ? 1 : n_;
  for (int k = 0; k < used; ++k) stages_[k]->model->eval();
  absl::StatusOr<torch::Tensor> result;
  try {
    torch::Tensor x = input;
    for (int k = 0; k < used; ++k) {
      Stage& stage = *stages_[k];
      x = x.to(stage.device);
      for (int64_t b = stage.range.begin; b < stage.range.end; ++b) {
        x = stage.model->ForwardBlock(b, x);
      }
    }
    result = x.to(torch::kCPU);
  } catch (const c10::Error& e) {
    result = absl::InternalError(absl::StrCat("inference: ", e.what_without_backtrace()));
  }
  for (int k = 0; k < used; ++k) stages_[k]->model->train();
  return result;
}

std::vector<torch::Tensor> PipelineEngine::Parameters() {
  std::vector<torch::Tensor> out;
  const int used = options_.mode == WeightMode::kDataParallel ? 1 : n_;
  for (int k = 0; k < used; ++k) {
    for (const torch::Tensor& p : stages_[k]->sgd->real()) {
      out.push_back(p.detach().to(torch::kCPU).clone());
    }
  }
  return out;
}

}  // namespace p3::pipeline
