#include "worker/trainer.h"

#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "models/data.h"
#include "models/config/from_config.h"
#include "models/model.h"
#include "models/output_pieces.h"
#include "models/sampler.h"
#include "models/zoo.h"
#include "p3/core/lr_schedule.h"
#include "p3/core/mode.h"
#include "p3/base/progress.h"
#include "p3/base/stats.h"
#include "p3/base/status_macros.h"
#include "p3/core/wire_dtype.h"
#include "proto/config.h"
#include "proto/config_options.h"
#include "models/compute_device.h"
#include "worker/elastic_requests.h"
#include "worker/worker.h"

namespace p3 {
namespace {

double ParamL2(models::BlockModel& model) {
  double sum = 0;
  for (const torch::Tensor& p : model.parameters()) {
    sum += p.detach().to(torch::kFloat64).pow(2).sum().item<double>();
  }
  return std::sqrt(sum);
}

double Accuracy(models::BlockModel& model, const models::Dataset& test,
                const torch::Device& device) {
  torch::NoGradGuard no_grad;
  model.eval();
  // Per predicted element: per image for classifiers, per token for sequence models.
  int64_t correct = 0;
  int64_t total = 0;
  constexpr int64_t kChunk = 1000;
  for (int64_t start = 0; start < test.size(); start += kChunk) {
    std::vector<int64_t> idx;
    for (int64_t i = start; i < std::min(test.size(), start + kChunk); ++i) idx.push_back(i);
    models::Batch b = test.Get(idx);
    torch::Tensor pred = model.forward(b.input.to(device)).argmax(-1);
    correct += pred.eq(b.target.to(device)).sum().item<int64_t>();
    total += b.target.numel();
  }
  model.train();
  return total > 0 ? static_cast<double>(correct) / static_cast<double>(total) : 0.0;
}

std::unique_ptr<torch::optim::Optimizer> LocalOptimizer(const OptimizerOptions& o,
                                                        std::vector<torch::Tensor> params) {
  if (o.kind == OptimizerKind::kAdam) {
    return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(o.lr)
                                                            .betas({o.beta1, o.beta2})
                                                            .eps(o.eps)
                                                            .weight_decay(o.weight_decay));
  }
  return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(o.lr)
                                                         .momentum(o.momentum)
                                                         .dampening(o.dampening)
                                                         .weight_decay(o.weight_decay)
                                                         .nesterov(o.nesterov));
}

// The data a worker trains on: its shard of the training set, in batches of the sampler,
// and (rank 0, when training.evaluate) the test set.
struct TrainingData {
  std::shared_ptr<models::Dataset> train;
  std::shared_ptr<models::Dataset> test;  // null unless evaluated
  std::optional<models::ShardedSampler> sampler;
  int64_t iterations = 0;    // training.iterations, else training.epochs whole epochs
  int64_t global_batch = 0;  // samples per iteration over the whole cluster
};

absl::StatusOr<TrainingData> LoadData(const config::ExperimentConfig& config, Mode mode, int rank) {
  TrainingData data;
  const bool local = mode == Mode::kLocal;
  const int workers = config.cluster().workers();
  data.global_batch = static_cast<int64_t>(config.training().batch_size()) * workers;
  P3_ASSIGN_OR_RETURN(data.train,
                      models::CreateDataset(models::DatasetOptionsFromConfig(config, true)));
  if (config.training().evaluate() && rank == 0) {
    P3_ASSIGN_OR_RETURN(data.test,
                        models::CreateDataset(models::DatasetOptionsFromConfig(config, false)));
  }
  // Mode local trains the whole cluster's batch in one process.
  models::ShardedSamplerOptions so;
  so.dataset_size = data.train->size();
  so.batch_size = local ? data.global_batch : config.training().batch_size();
  so.num_workers = local ? 1 : workers;
  // An elastic run reads the sample stream instead (TrainLoop); a rank beyond
  // cluster.workers (a joining one) takes rank 0's place here.
  so.rank = local || rank >= workers ? 0 : rank;
  so.seed = config.training().seed();
  P3_ASSIGN_OR_RETURN(data.sampler, models::ShardedSampler::Create(so));
  data.iterations = config.training().iterations() > 0
                        ? config.training().iterations()
                        : config.training().epochs() * data.sampler->iterations_per_epoch();
  return data;
}

}  // namespace

absl::StatusOr<WorkerOptions> WorkerOptionsFromConfig(const config::ExperimentConfig& config,
                                                      Mode mode, const TrainerOptions& options) {
  WorkerOptions wo;
  wo.servers = options.servers;
  wo.rank = options.rank;
  // Elastic (cluster.elastic): the servers count every rank that may take part.
  wo.num_workers = config::MaxWorkers(config);
  if (config.cluster().has_elastic()) wo.initial_workers = config.cluster().workers();
  wo.elastic_join = options.elastic_join;
  wo.mode = mode;
  // 0 / -1 (automatic) are resolved by launch_cluster; started without it, every worker
  // takes the defaults and they still agree on the plan.
  wo.slice_params = config::EffectiveSliceParams(config);
  wo.owner_params = config::EffectiveOwnerParams(config);
  wo.pack_params = config::EffectivePackParams(config);
  wo.split_threshold = config.scheduling().split_threshold();
  wo.max_message_params = config.scheduling().max_message_params();
  wo.credit_bytes = config::EffectiveCreditBytes(config);
  wo.stalled_write = config::StalledWriteAfter(config);
  wo.batch_io_threads = config.scheduling().batch_io_threads();
  P3_ASSIGN_OR_RETURN(wo.wire_dtype, ParseWireDType(config.scheduling().wire_dtype()));
  wo.shared_memory_servers = config::SharedMemoryServers(config, options.rank);
  wo.peer_timeout = absl::Seconds(config.cluster().peer_timeout_s());
  wo.stall_report = absl::Seconds(config.cluster().stall_report_s());
  wo.rejoin_timeout = absl::Seconds(config.cluster().rejoin_timeout_s());
  wo.rejoin = options.rejoin;
  wo.trace = options.trace;
  P3_ASSIGN_OR_RETURN(wo.device,
                      ResolveDevice(config.training().device(), options.rank, CudaDeviceCount()));
  P3_ASSIGN_OR_RETURN(const SecuritySettings security, SecurityFromConfig(config));
  wo.tls = security.tls;
  wo.tls_ca_pem = security.ca_pem;
  wo.tls_server_name = security.server_name;
  wo.token = security.token;
  return wo;
}

namespace {

// What runs a step: a libtorch optimizer in mode local, the cluster otherwise.
struct Backend {
  std::shared_ptr<models::BlockModel> model;
  torch::Device device = torch::kCPU;          // training.device, resolved for this rank
  Precision precision = Precision::kFp32;     // training.precision
  DynamicLossScale loss_scale;                 // fp16 only
  std::unique_ptr<Worker> worker;                            // cluster modes
  std::unique_ptr<torch::optim::Optimizer> local_optimizer;  // mode local
  OptimizerOptions local_options;                            // mode local: base rate, schedule
};

// Connects to the cluster (rank 0 sends the model's initial values), or makes the local
// optimizer.
absl::StatusOr<Backend> CreateBackend(const config::ExperimentConfig& config, Mode mode,
                                      const TrainerOptions& options,
                                      std::shared_ptr<models::BlockModel> model) {
  Backend backend;
  backend.model = std::move(model);
  P3_ASSIGN_OR_RETURN(backend.device,
                      ResolveDevice(config.training().device(), options.rank, CudaDeviceCount()));
  P3_ASSIGN_OR_RETURN(backend.precision, ParsePrecision(config.training().precision()));
  if (backend.precision == Precision::kFp16 && !backend.device.is_cuda()) {
    // libtorch's CPU autocast computes in bfloat16 only.
    return absl::FailedPreconditionError(
        "training.precision: \"fp16\" needs a GPU (training.device cuda); on the CPU use "
        "\"bf16\"");
  }
  if (mode == Mode::kLocal) {
    try {
      backend.model->to(backend.device);
    } catch (const c10::Error& e) {
      return absl::FailedPreconditionError(absl::StrCat(
          "training.device: cannot put the model on ", backend.device.str(), ": ",
          e.what_without_backtrace()));
    }
    backend.local_options = OptimizerFromConfig(config);
    backend.local_optimizer = LocalOptimizer(backend.local_options, backend.model->parameters());
  } else {
    P3_ASSIGN_OR_RETURN(const WorkerOptions wo, WorkerOptionsFromConfig(config, mode, options));
    P3_ASSIGN_OR_RETURN(backend.worker, Worker::Create(wo, backend.model));
  }
  return backend;
}

// One iteration on `batch`; returns its loss. libtorch's errors become a Status.
absl::StatusOr<double> Step(Backend& backend, const models::Batch& batch, int64_t iteration) {
  models::BlockModel& model = *backend.model;
  try {
    torch::Tensor loss;
    const torch::Tensor input = batch.input.to(backend.device);
    const torch::Tensor target = batch.target.to(backend.device);
    if (backend.worker == nullptr) {
      // The rate of this iteration, as the servers compute it (p3/core/lr_schedule.h).
      const double lr =
          ScheduledLr(backend.local_options.schedule, backend.local_options.lr, iteration);
      for (torch::optim::OptimizerParamGroup& group : backend.local_optimizer->param_groups()) {
        group.options().set_lr(lr);
      }
      backend.local_optimizer->zero_grad();
      {
        Autocast autocast(backend.device, backend.precision);
        loss = model.Loss(model.forward(input), target);
      }
      if (backend.precision != Precision::kFp16) {
        loss.backward();
        backend.local_optimizer->step();
      } else {
        // As PyTorch's GradScaler: backward from the scaled loss, the gradients unscaled, the
        // step skipped when any is not finite.
        const double scale = backend.loss_scale.scale();
        (loss * scale).backward();
        bool finite = true;
        {
          torch::NoGradGuard no_grad;
          torch::Tensor all = torch::ones({}, torch::TensorOptions().dtype(torch::kBool)
                                                  .device(backend.device));
          for (torch::Tensor& p : model.parameters()) {
            if (!p.grad().defined()) continue;
            p.mutable_grad().mul_(1.0 / scale);
            all.logical_and_(torch::isfinite(p.grad()).all());
          }
          finite = all.item<bool>();  // one wait for the device per iteration
        }
        if (finite) backend.local_optimizer->step();
        backend.loss_scale.Update(finite);
      }
    } else {
      {
        Autocast autocast(backend.device, backend.precision);
        P3_ASSIGN_OR_RETURN(torch::Tensor out, backend.worker->Forward(input));
        loss = model.Loss(out, target);
      }
      if (backend.precision != Precision::kFp16) {
        P3_RETURN_IF_ERROR(backend.worker->Backward(loss));
      } else {
        P3_RETURN_IF_ERROR(backend.worker->Backward(loss, backend.loss_scale.scale()));
        backend.loss_scale.Update(backend.worker->gradients_finite());
      }
    }
    return loss.item<double>();
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("iteration ", iteration, ": ", e.what_without_backtrace()));
  }
}

// Writes the PROGRESS line (p3/base/progress.h) every `log_every` iterations and after the
// last, with this process's traffic since the previous line.
class ProgressReporter {
 public:
  ProgressReporter(std::ostream* out, int log_every, int64_t total)
      : out_(out), log_every_(std::max(1, log_every)), total_(total) {}

  void Report(const IterationRecord& rec, const Worker* worker) {
    const int64_t done = rec.iteration + 1;
    if (out_ == nullptr || (done % log_every_ != 0 && done != total_)) return;
    const absl::Time now = absl::Now();
    const WorkerStats stats = worker != nullptr ? worker->stats() : WorkerStats();
    const double seconds = std::max(1e-9, absl::ToDoubleSeconds(now - last_time_));
    ProgressLine line;
    line.iteration = done;
    line.total = total_;
    line.loss = rec.loss;
    line.samples_per_second = rec.samples_per_second;
    line.sent_mbps =
        static_cast<double>(stats.bytes_sent - last_stats_.bytes_sent) * 8e-6 / seconds;
    line.received_mbps =
        static_cast<double>(stats.bytes_received - last_stats_.bytes_received) * 8e-6 / seconds;
    *out_ << FormatProgressLine(line) << std::endl;
    last_time_ = now;
    last_stats_ = stats;
  }

 private:
  std::ostream* const out_;
  const int log_every_;
  const int64_t total_;
  absl::Time last_time_ = absl::Now();
  WorkerStats last_stats_;
};

// What the summary needs of the iterations' records, taken as they come, in memory that
// does not grow with the iterations (TrainerOptions::records): the median rate after the
// first `warmup` records (all but the last at most), the last 20 losses.
class RunningFigures {
 public:
  explicit RunningFigures(int64_t warmup) : warmup_(warmup) {}

  void Add(const IterationRecord& r) {
    if (seen_ >= warmup_) rates_.Add(r.samples_per_second);
    last_rate_ = r.samples_per_second;
    last_losses_[static_cast<size_t>(seen_ % kLosses)] = r.loss;
    ++seen_;
  }

  // The iterations this process ran (a worker that joined or left an elastic run runs
  // fewer than the run's total).
  int64_t seen() const { return seen_; }

  void Summarize(TrainResult* result) const {
    result->samples_per_second =
        seen_ == 0 ? 0 : (seen_ > warmup_ ? rates_.Median() : last_rate_);
    // One batch's loss is too noisy to compare.
    const int64_t tail = std::min(kLosses, seen_);
    result->final_loss = 0;
    for (int64_t i = seen_ - tail; i < seen_; ++i) {
      result->final_loss += last_losses_[static_cast<size_t>(i % kLosses)] /
                            static_cast<double>(tail);
    }
  }

 private:
  static constexpr int64_t kLosses = 20;
  const int64_t warmup_;
  int64_t seen_ = 0;
  double last_rate_ = 0;
  StreamingMedian rates_;
  std::array<double, kLosses> last_losses_{};
};

// Runs iterations [first, data.iterations) and appends their records to `result` (and
// `figures`); with TrainerOptions::records, writes each epoch's rows once it has ended
// (the last epoch's are the caller's) and keeps only those not yet written.
absl::Status TrainLoop(const config::ExperimentConfig& config, const TrainerOptions& options,
                       TrainingData& data, Backend& backend, RunningFigures* figures,
                       TrainResult* result) {
  const int64_t first =
      backend.worker != nullptr ? std::min(backend.worker->iteration(), data.iterations) : 0;
  if (first > 0 && options.progress != nullptr) {
    *options.progress << "RESUMED iteration=" << first << std::endl;
  }
  ProgressReporter progress(options.progress, config.training().log_every(), data.iterations);
  // Worker 0 searches the slice size online (scheduling.online_search). A restarted
  // worker 0 (rejoin) does not: it resumes in the plan the servers are on, and the dead
  // process's search, its timings gone with it, is not taken up again.
  std::optional<SliceSearch> search;
  if (backend.worker != nullptr && options.rank == 0 && config.scheduling().online_search() &&
      !options.rejoin) {
    const int64_t start = backend.worker->plan().options().slice_params;
    search.emplace(
        SliceSearchOptions{.candidates = SliceSearchCandidates(
                               start, backend.worker->plan().options().owner_params)},
        first);
  }
  const int64_t per_epoch = std::max<int64_t>(1, data.sampler->iterations_per_epoch());
  // Resuming at an epoch's end (a restarted worker, or servers resumed from a checkpoint):
  // take part in that epoch's exchange of buffers, which may still be waiting for this
  // rank, or get its mean (docs/protocol.md, "Buffers").
  if (first > 0 && first < data.iterations && first % per_epoch == 0 &&
      config.training().evaluate() && backend.worker != nullptr) {
    P3_RETURN_IF_ERROR(backend.worker->AverageBuffers());
  }
  double epoch_loss_sum = 0;
  int64_t epoch_count = 0;
  // Elastic (docs/reliability.md): rank 0 turns the requests file's lines into changes;
  // every worker reads its place's batch of the sample stream; epochs end by samples.
  // Mode local replays cluster.elastic.change: each iteration's global batch is the
  // stream's next |P(t)| * batch_size positions, the present ranks' batches in rank order.
  const bool elastic = config.cluster().has_elastic();
  const bool cluster_elastic = elastic && backend.worker != nullptr;
  std::optional<MembershipSchedule> replay;
  if (elastic && backend.worker == nullptr) {
    P3_ASSIGN_OR_RETURN(replay, config::ElasticSchedule(config));
    result->membership = replay->changes();
  }
  std::optional<MembershipRequests> requests;
  // What rank 0 has asked for so far: the newest set it knows, read once its first
  // iteration's values are in. After a resume from checkpoints the servers' changes
  // (sent after the Welcome, ahead of any value on each stream) may still be on the way
  // when this loop starts: read before, a resumed rank 0 refused `leave 2` as "not present".
  std::optional<std::vector<int>> requested;
  if (cluster_elastic && options.rank == 0 && !options.membership_requests.empty()) {
    requests.emplace(options.membership_requests);
  }
  if (cluster_elastic && options.elastic_join && !options.membership_requests.empty()) {
    P3_RETURN_IF_ERROR(
        AppendRequestLine(options.membership_requests, absl::StrCat("join ", options.rank)));
  }
  SampleStream stream(data.train->size(), config.training().seed());
  const int64_t batch_size = config.training().batch_size();
  for (int64_t it = first; it < data.iterations; ++it) {
    models::Batch batch;
    int64_t global_batch = data.global_batch;
    if (replay.has_value()) {
      global_batch = static_cast<int64_t>(replay->PresentAt(it).size()) * batch_size;
      batch = data.train->Get(stream.Indices(replay->SamplesBefore(it, batch_size), global_batch));
      result->samples_trained = replay->SamplesBefore(it + 1, batch_size);
    } else if (cluster_elastic) {
      P3_ASSIGN_OR_RETURN(const std::vector<int> present, backend.worker->Present());
      it = backend.worker->iteration();  // a joining worker's first iteration
      MembershipSchedule schedule(config::MaxWorkers(config), config.cluster().workers());
      for (const MembershipChange& c : backend.worker->MembershipChanges()) {
        if (c.from_iteration > 0) P3_RETURN_IF_ERROR(schedule.Add(c.from_iteration, c.present));
      }
      if (requests.has_value()) {
        // A change asked for now takes effect at the next iteration, as before Present().
        if (!requested.has_value()) requested = schedule.latest();
        P3_ASSIGN_OR_RETURN(std::optional<std::vector<int>> next,
                            requests->Poll(*requested, options.progress));
        if (next.has_value()) {
          P3_ASSIGN_OR_RETURN(const uint64_t from, backend.worker->RequestMembership(*next));
          requested = *next;
          if (options.progress != nullptr) {
            *options.progress << "MEMBERSHIP from_iteration=" << from << " present="
                              << DescribeRanks(*requested) << std::endl;
          }
        }
      }
      result->membership = schedule.changes();
      const auto place = std::find(present.begin(), present.end(), options.rank);
      if (place == present.end() || it >= data.iterations) break;  // this worker has left
      const int64_t start = schedule.SamplesBefore(it, batch_size) +
                            static_cast<int64_t>(place - present.begin()) * batch_size;
      batch = data.train->Get(stream.Indices(start, batch_size));
      global_batch = static_cast<int64_t>(present.size()) * batch_size;
      result->samples_trained = schedule.SamplesBefore(it + 1, batch_size);
    } else {
      batch = data.train->Get(data.sampler->Indices(it));
    }
    if (search.has_value()) {
      if (std::optional<int64_t> size = search->Before(it)) {
        P3_ASSIGN_OR_RETURN(const uint64_t from, backend.worker->RequestReplan(*size));
        if (options.progress != nullptr) {
          *options.progress << "SEARCH slice_params=" << *size << " from_iteration=" << from
                            << (search->done() ? " final" : "") << std::endl;
        }
      }
      if (search->done() && !result->search.has_value()) {
        result->search = search->report();
        if (options.progress != nullptr) {
          *options.progress << "SEARCH chosen slice_params=" << search->report().chosen
                            << " in effect from iteration " << search->report().done_iteration
                            << ": " << search->report().reason << std::endl;
        }
      }
    }
    const absl::Time start = absl::Now();
    P3_ASSIGN_OR_RETURN(const double loss, Step(backend, batch, it));
    IterationRecord rec;
    rec.iteration = it;
    rec.loss = loss;
    rec.seconds = absl::ToDoubleSeconds(absl::Now() - start);
    rec.samples_per_second =
        rec.seconds > 0 ? static_cast<double>(global_batch) / rec.seconds : 0;
    result->records.push_back(rec);
    figures->Add(rec);
    if (search.has_value()) search->After(it, rec.seconds);
    progress.Report(rec, backend.worker.get());
    epoch_loss_sum += loss;
    ++epoch_count;
    const bool epoch_end =
        elastic ? result->samples_trained / data.train->size() !=
                      (result->samples_trained - global_batch) / data.train->size()
                : (it + 1) % per_epoch == 0;
    if (epoch_end || it + 1 == data.iterations) {
      EpochRecord epoch;
      // An elastic run's epoch k ends at the iteration whose global batch crosses sample
      // k * dataset_size, which need not be the epoch of its last sample.
      epoch.epoch = !elastic   ? it / per_epoch + 1
                    : epoch_end ? result->samples_trained / data.train->size()
                                : (result->samples_trained - 1) / data.train->size() + 1;
      epoch.end_iteration = it + 1;
      epoch.train_loss = epoch_loss_sum / static_cast<double>(epoch_count);
      // The last epoch's accuracy is the run's, measured after Finish (RunTraining).
      // Others: every worker takes the mean of the workers' buffers (BatchNorm's running
      // statistics), then rank 0 evaluates with every parameter at the current version;
      // the other workers wait for its next gradients meanwhile.
      // Elastic runs evaluate at the end only.
      if (config.training().evaluate() && it + 1 < data.iterations && !elastic &&
          backend.worker != nullptr) {
        P3_RETURN_IF_ERROR(backend.worker->AverageBuffers());
      }
      if (data.test != nullptr && it + 1 < data.iterations && !elastic) {
        if (backend.worker != nullptr) P3_RETURN_IF_ERROR(backend.worker->Sync());
        try {
          epoch.test_accuracy = Accuracy(*backend.model, *data.test, backend.device);
        } catch (const c10::Error& e) {
          return absl::InternalError(absl::StrCat("evaluation after epoch ", epoch.epoch, ": ",
                                                  e.what_without_backtrace()));
        }
      }
      result->epochs.push_back(epoch);
      epoch_loss_sum = 0;
      epoch_count = 0;
      if (options.records != nullptr && it + 1 < data.iterations) {
        result->WriteRecordsCsvRows(*options.records, result->epochs.size() - 1);
        options.records->flush();
        result->records.clear();
      }
    }
  }
  return absl::OkStatus();
}

// Writes the state dict to `path` (creating its folder) and records where; output pieces
// under the whole layer's names (models/output_pieces.h).
absl::Status SaveModel(const std::string& path, int64_t output_pieces, models::BlockModel& model,
                       TrainResult* result) {
  std::error_code error;
  const std::filesystem::path file = std::filesystem::absolute(path, error);
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path(), error);
  absl::Status saved = models::SaveJoinedStateDict(model, output_pieces, file.string());
  if (!saved.ok()) {
    return absl::Status(saved.code(), absl::StrCat("output.model_file: ", saved.message()));
  }
  result->model_file = file.string();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TrainResult> RunTraining(const config::ExperimentConfig& config,
                                        const TrainerOptions& options) {
  const absl::Time start = absl::Now();
  P3_ASSIGN_OR_RETURN(const Mode mode, ParseMode(config.mode()));
  // The cluster is joined last: a missing data set fails before the handshake.
  P3_ASSIGN_OR_RETURN(std::shared_ptr<models::BlockModel> model,
                      models::CreateModel(models::ModelOptionsFromConfig(config)));
  if (!config.model().init_from().empty()) {
    absl::Status loaded = models::LoadStateDictIntoPieces(config.model().init_from(),
                                                          config.model().output_pieces(), *model);
    if (!loaded.ok()) {
      return absl::Status(loaded.code(), absl::StrCat("model.init_from: ", loaded.message()));
    }
  }
  P3_ASSIGN_OR_RETURN(TrainingData data, LoadData(config, mode, options.rank));
  P3_ASSIGN_OR_RETURN(Backend backend, CreateBackend(config, mode, options, std::move(model)));
  TrainResult result;
  result.rank = options.rank;
  result.iterations = data.iterations;
  RunningFigures figures(config.training().warmup_iterations());
  if (options.records != nullptr) *options.records << TrainResult::kRecordsCsvHeader;
  P3_RETURN_IF_ERROR(TrainLoop(config, options, data, backend, &figures, &result));
  result.iterations_trained = figures.seen();
  if (backend.worker != nullptr) {
    // The model evaluated, measured and exported is the cluster's: its buffers too. A
    // worker that left an elastic run takes no part in the last round.
    const std::vector<int> last = result.membership.empty() ? std::vector<int>{options.rank}
                                                            : result.membership.back().present;
    if (std::count(last.begin(), last.end(), options.rank) > 0) {
      P3_RETURN_IF_ERROR(backend.worker->AverageBuffers());
    }
    P3_RETURN_IF_ERROR(backend.worker->Finish());
    const WorkerStats stats = backend.worker->stats();
    result.bytes_sent = stats.bytes_sent;
    result.bytes_received = stats.bytes_received;
    result.bytes_shared = stats.bytes_shared;
    result.forward_wait_seconds = absl::ToDoubleSeconds(stats.forward_wait);
  }
  figures.Summarize(&result);
  result.param_l2 = ParamL2(*backend.model);
  if (data.test != nullptr) {
    result.test_accuracy = Accuracy(*backend.model, *data.test, backend.device);
  }
  if (!result.epochs.empty() && result.test_accuracy) {
    result.epochs.back().test_accuracy = result.test_accuracy;
  }
  if (options.records != nullptr) {
    result.WriteRecordsCsvRows(*options.records,
                               result.epochs.empty() ? 0 : result.epochs.size() - 1);
    options.records->flush();
    result.records.clear();
  }
  if (!options.model_file.empty()) {
    P3_RETURN_IF_ERROR(
        SaveModel(options.model_file, config.model().output_pieces(), *backend.model, &result));
  }
  result.wall_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return result;
}

}  // namespace p3
