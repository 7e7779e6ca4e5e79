#include "worker/trainer.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "models/data.h"
#include "models/from_config.h"
#include "models/model.h"
#include "models/sampler.h"
#include "models/zoo.h"
#include "p3/mode.h"
#include "p3/status_macros.h"
#include "proto/config_options.h"
#include "worker/worker.h"

namespace p3 {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double ParamL2(models::BlockModel& model) {
  double sum = 0;
  for (const torch::Tensor& p : model.parameters()) {
    sum += p.detach().to(torch::kFloat64).pow(2).sum().item<double>();
  }
  return std::sqrt(sum);
}

double Accuracy(models::BlockModel& model, const models::Dataset& test) {
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
    torch::Tensor pred = model.forward(b.input).argmax(-1);
    correct += pred.eq(b.target).sum().item<int64_t>();
    total += b.target.numel();
  }
  model.train();
  return total > 0 ? static_cast<double>(correct) / static_cast<double>(total) : 0.0;
}

std::unique_ptr<torch::optim::Optimizer> LocalOptimizer(const OptimizerOptions& o,
                                                        std::vector<torch::Tensor> params) {
  if (o.kind == OptimizerKind::kAdam) {
    return std::make_unique<torch::optim::Adam>(
        params, torch::optim::AdamOptions(o.lr)
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

}  // namespace

// JSON has no NaN or infinity: a diverged run's loss is written as null.
namespace {
std::string JsonNumber(double v) { return std::isfinite(v) ? absl::StrFormat("%.6f", v) : "null"; }
}  // namespace

std::string TrainResult::ToJson() const {
  std::ostringstream out;
  out << absl::StrFormat(
      "{\"rank\": %d, \"iterations\": %d, \"samples_per_second\": %.3f, \"final_loss\": %s, "
      "\"test_accuracy\": %s, \"param_l2\": %s, \"wall_seconds\": %.3f, \"bytes_sent\": %d, "
      "\"bytes_received\": %d, \"forward_wait_seconds\": %.3f}",
      rank, iterations, samples_per_second, JsonNumber(final_loss),
      test_accuracy ? absl::StrFormat("%.4f", *test_accuracy) : "null", JsonNumber(param_l2),
      wall_seconds,
      bytes_sent, bytes_received, forward_wait_seconds);
  return out.str();
}

std::string TrainResult::RecordsCsv() const {
  std::string csv = "iteration,loss,iteration_seconds,samples_per_second\n";
  for (const IterationRecord& r : records) {
    absl::StrAppendFormat(&csv, "%d,%.6f,%.6f,%.3f\n", r.iteration, r.loss, r.seconds,
                          r.samples_per_second);
  }
  return csv;
}

absl::StatusOr<TrainResult> RunTraining(const config::ExperimentConfig& config,
                                        const TrainerOptions& options) {
  const absl::Time start = absl::Now();
  P3_ASSIGN_OR_RETURN(const Mode mode, ParseMode(config.mode()));
  const bool local = mode == Mode::kLocal;
  const int workers = config.cluster().workers();
  const int64_t global_batch = static_cast<int64_t>(config.training().batch_size()) * workers;
  if (config.training().threads() > 0) torch::set_num_threads(config.training().threads());

  const models::ModelOptions mo = models::ModelOptionsFromConfig(config);
  P3_ASSIGN_OR_RETURN(std::shared_ptr<models::BlockModel> model, models::CreateModel(mo));

  P3_ASSIGN_OR_RETURN(std::shared_ptr<models::Dataset> train,
                      models::CreateDataset(models::DatasetOptionsFromConfig(config, true)));
  std::shared_ptr<models::Dataset> test;
  const bool evaluate = config.training().evaluate() && options.rank == 0;
  if (evaluate) {
    P3_ASSIGN_OR_RETURN(test,
                        models::CreateDataset(models::DatasetOptionsFromConfig(config, false)));
  }

  models::ShardedSamplerOptions so;
  so.dataset_size = train->size();
  so.batch_size = local ? global_batch : config.training().batch_size();
  so.num_workers = local ? 1 : workers;
  so.rank = local ? 0 : options.rank;
  so.seed = config.training().seed();
  P3_ASSIGN_OR_RETURN(models::ShardedSampler sampler, models::ShardedSampler::Create(so));
  const int64_t iterations = config.training().iterations() > 0
                                 ? config.training().iterations()
                                 : config.training().epochs() * sampler.iterations_per_epoch();

  const OptimizerOptions opt_options = OptimizerFromConfig(config);
  std::unique_ptr<Worker> worker;
  std::unique_ptr<torch::optim::Optimizer> local_opt;
  if (local) {
    local_opt = LocalOptimizer(opt_options, model->parameters());
  } else {
    WorkerOptions wo;
    wo.servers = options.servers;
    wo.rank = options.rank;
    wo.num_workers = workers;
    wo.mode = mode;
    wo.slice_params = config.scheduling().slice_params();
    wo.split_threshold = config.scheduling().split_threshold();
    wo.max_message_params = config.scheduling().max_message_params();
    wo.peer_timeout = absl::Seconds(config.cluster().peer_timeout_s());
    wo.trace = options.trace;
    P3_ASSIGN_OR_RETURN(const SecuritySettings security, SecurityFromConfig(config));
    wo.tls = security.tls;
    wo.tls_ca_pem = security.ca_pem;
    wo.tls_server_name = security.server_name;
    wo.token = security.token;
    P3_ASSIGN_OR_RETURN(worker, Worker::Create(wo, model));
  }

  TrainResult result;
  result.rank = options.rank;
  result.iterations = iterations;
  const int log_every = std::max(1, config.training().log_every());
  // For the traffic rates of the progress lines.
  absl::Time last_log = absl::Now();
  WorkerStats last_stats;
  const int64_t first = worker != nullptr ? std::min(worker->iteration(), iterations) : 0;
  if (first > 0 && options.progress != nullptr) {
    *options.progress << "RESUMED iteration=" << first << std::endl;
  }
  for (int64_t it = first; it < iterations; ++it) {
    models::Batch batch = train->Get(sampler.Indices(it));
    const absl::Time t0 = absl::Now();
    torch::Tensor loss;
    try {
      if (local) {
        local_opt->zero_grad();
        loss = model->Loss(model->forward(batch.input), batch.target);
        loss.backward();
        local_opt->step();
      } else {
        P3_ASSIGN_OR_RETURN(torch::Tensor out, worker->Forward(batch.input));
        loss = model->Loss(out, batch.target);
        P3_RETURN_IF_ERROR(worker->Backward(loss));
      }
    } catch (const c10::Error& e) {
      return absl::InternalError(absl::StrCat("iteration ", it, ": ", e.what_without_backtrace()));
    }
    const double seconds = absl::ToDoubleSeconds(absl::Now() - t0);
    IterationRecord rec;
    rec.iteration = it;
    rec.loss = loss.item<double>();
    rec.seconds = seconds;
    rec.samples_per_second = seconds > 0 ? global_batch / seconds : 0;
    result.records.push_back(rec);
    if (options.progress != nullptr && ((it + 1) % log_every == 0 || it + 1 == iterations)) {
      const absl::Time now = absl::Now();
      const WorkerStats stats = worker != nullptr ? worker->stats() : WorkerStats();
      const double interval = std::max(1e-9, absl::ToDoubleSeconds(now - last_log));
      *options.progress << absl::StrFormat(
                               "PROGRESS iteration=%d total=%d loss=%.4f samples_per_second=%.1f "
                               "sent_mbps=%.1f received_mbps=%.1f",
                               it + 1, iterations, rec.loss, rec.samples_per_second,
                               (stats.bytes_sent - last_stats.bytes_sent) * 8e-6 / interval,
                               (stats.bytes_received - last_stats.bytes_received) * 8e-6 / interval)
                        << std::endl;
      last_log = now;
      last_stats = stats;
    }
  }
  if (worker != nullptr) {
    P3_RETURN_IF_ERROR(worker->Finish());
    const WorkerStats stats = worker->stats();
    result.bytes_sent = stats.bytes_sent;
    result.bytes_received = stats.bytes_received;
    result.forward_wait_seconds = absl::ToDoubleSeconds(stats.forward_wait);
  }
  // Records hold the iterations run by this process (from `first` on, after a resume).
  std::vector<double> rates;
  const size_t warmup = static_cast<size_t>(std::max<int64_t>(
      0, std::min<int64_t>(config.training().warmup_iterations(),
                           static_cast<int64_t>(result.records.size()) - 1)));
  for (size_t i = warmup; i < result.records.size(); ++i) {
    rates.push_back(result.records[i].samples_per_second);
  }
  result.samples_per_second = Median(rates);
  // Mean of the last (up to) 20 iterations: one batch's loss is too noisy to compare.
  const size_t tail = std::min<size_t>(20, result.records.size());
  for (size_t i = result.records.size() - tail; i < result.records.size(); ++i) {
    result.final_loss += result.records[i].loss / static_cast<double>(tail);
  }
  result.param_l2 = ParamL2(*model);
  if (evaluate) result.test_accuracy = Accuracy(*model, *test);
  result.wall_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return result;
}

}  // namespace p3
