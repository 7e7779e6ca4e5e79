#include "p3/pipeline/runner.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "models/data.h"
#include "models/from_config.h"
#include "models/model.h"
#include "models/sampler.h"
#include "models/zoo.h"
#include "p3/pipeline/engine.h"
#include "p3/pipeline/partition.h"
#include "p3/pipeline/profile.h"
#include "p3/pipeline/schedule.h"
#include "p3/status_macros.h"

namespace p3::pipeline {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

absl::StatusOr<double> Accuracy(PipelineEngine& engine, const models::Dataset& test) {
  int64_t correct = 0;
  constexpr int64_t kChunk = 1000;
  for (int64_t start = 0; start < test.size(); start += kChunk) {
    std::vector<int64_t> indices;
    for (int64_t i = start; i < std::min(test.size(), start + kChunk); ++i) indices.push_back(i);
    models::Batch batch = test.Get(indices);
    P3_ASSIGN_OR_RETURN(torch::Tensor logits, engine.Infer(batch.input));
    correct += logits.argmax(-1).eq(batch.target).sum().item<int64_t>();
  }
  return static_cast<double>(correct) / static_cast<double>(test.size());
}

// Samples per second of the mini-batches after the first `warmup` (the pipeline's fill
// and the first iterations' allocations), measured between their completion times.
double SteadyRate(const std::vector<double>& done_seconds, int64_t batch, int64_t warmup) {
  const int64_t n = static_cast<int64_t>(done_seconds.size());
  if (n == 0) return 0;
  const int64_t w = std::min<int64_t>(std::max<int64_t>(warmup, 0), n - 2);
  if (w < 0) return done_seconds[0] > 0 ? batch / done_seconds[0] : 0;
  const double span = done_seconds[n - 1] - done_seconds[w];
  return span > 0 ? static_cast<double>(batch * (n - 1 - w)) / span : 0;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string OptionalNumber(const std::optional<double>& v) {
  return v ? absl::StrFormat("%.4f", *v) : "null";
}

// JSON has no NaN or infinity: a diverged run's loss is written as null.
std::string Number(double v) { return std::isfinite(v) ? absl::StrFormat("%.6f", v) : "null"; }

}  // namespace

std::string RunResult::ToJson() const {
  std::vector<std::string> epoch_json;
  for (const EpochRecord& e : epochs) {
    epoch_json.push_back(absl::StrFormat(
        "{\"epoch\": %d, \"iterations\": %d, \"train_loss\": %s, \"seconds\": %.3f, "
        "\"samples_per_second\": %.3f, \"test_accuracy\": %s}",
        e.epoch, e.iterations, Number(e.train_loss), e.seconds, e.samples_per_second,
        OptionalNumber(e.test_accuracy)));
  }
  std::vector<std::string> quoted_devices, quoted_stages, quoted_blocks, seconds;
  for (const std::string& d : devices) quoted_devices.push_back(JsonString(d));
  for (const std::string& s : stage_blocks) quoted_stages.push_back(JsonString(s));
  for (const std::string& b : block_names) quoted_blocks.push_back(JsonString(b));
  for (double s : block_seconds) seconds.push_back(absl::StrFormat("%.6f", s));
  return absl::StrFormat(
      "{\"name\": %s, \"weights\": %s, \"spectrain_version\": %d, \"stages\": %d, "
      "\"devices\": [%s], \"boundaries\": [%s], \"stage_blocks\": [%s], \"block_names\": [%s], "
      "\"block_seconds\": [%s], \"batch_size\": %d, \"iterations\": %d, "
      "\"samples_per_second\": %.3f, \"final_loss\": %s, \"test_accuracy\": %s, "
      "\"wall_seconds\": %.3f, \"epochs\": [%s]}",
      JsonString(name), JsonString(weights), spectrain_version, stages,
      absl::StrJoin(quoted_devices, ", "), absl::StrJoin(boundaries, ", "),
      absl::StrJoin(quoted_stages, ", "), absl::StrJoin(quoted_blocks, ", "),
      absl::StrJoin(seconds, ", "), batch_size, iterations, samples_per_second, Number(final_loss),
      OptionalNumber(test_accuracy), wall_seconds, absl::StrJoin(epoch_json, ", "));
}

std::string RunResult::EpochsCsv() const {
  std::string csv = "epoch,iterations,train_loss,seconds,samples_per_second,test_accuracy\n";
  for (const EpochRecord& e : epochs) {
    absl::StrAppendFormat(&csv, "%d,%d,%.6f,%.3f,%.3f,%s\n", e.epoch, e.iterations, e.train_loss,
                          e.seconds, e.samples_per_second,
                          e.test_accuracy ? absl::StrFormat("%.4f", *e.test_accuracy) : "");
  }
  return csv;
}

absl::StatusOr<RunResult> RunPipeline(const config::ExperimentConfig& config,
                                      const RunOptions& options) {
  const absl::Time start = absl::Now();
  if (config.mode() != "pipeline") {
    return absl::InvalidArgumentError(
        absl::StrCat("mode: \"", config.mode(), "\"; the pipeline runs only mode \"pipeline\""));
  }
  const config::PipelineConfig& pc = config.pipeline();
  P3_ASSIGN_OR_RETURN(const WeightMode mode, ParseWeightMode(pc.weights()));
  if (config.training().threads() > 0) torch::set_num_threads(config.training().threads());

  const models::ModelOptions mo = models::ModelOptionsFromConfig(config);
  const PipelineEngine::ModelFactory factory = [mo] { return models::CreateModel(mo); };

  P3_ASSIGN_OR_RETURN(std::shared_ptr<models::Dataset> train,
                      models::CreateDataset(models::DatasetOptionsFromConfig(config, true)));
  std::shared_ptr<models::Dataset> test;
  const bool evaluate = config.training().evaluate();
  if (evaluate) {
    P3_ASSIGN_OR_RETURN(test,
                        models::CreateDataset(models::DatasetOptionsFromConfig(config, false)));
  }

  const int64_t batch_size = config.training().batch_size();
  models::ShardedSamplerOptions so;
  so.dataset_size = train->size();
  so.batch_size = batch_size;
  so.num_workers = 1;
  so.rank = 0;
  so.seed = config.training().seed();
  P3_ASSIGN_OR_RETURN(models::ShardedSampler sampler, models::ShardedSampler::Create(so));
  const int64_t per_epoch = sampler.iterations_per_epoch();
  const int64_t iterations = config.training().iterations() > 0
                                 ? config.training().iterations()
                                 : config.training().epochs() * per_epoch;

  RunResult result;
  result.name = config.name();
  result.weights = pc.weights();
  result.spectrain_version = pc.spectrain_version();
  result.stages = pc.stages();
  result.batch_size = batch_size;
  result.iterations = iterations;
  for (int k = 0; k < pc.stages(); ++k) {
    result.devices.push_back(pc.devices_size() > 0 ? pc.devices(k) : "cpu");
  }

  // The partition: given, or balanced over the profiled blocks.
  std::vector<int64_t> boundaries(pc.boundaries().begin(), pc.boundaries().end());
  {
    P3_ASSIGN_OR_RETURN(std::shared_ptr<models::BlockModel> probe, factory());
    for (int64_t b = 0; b < probe->num_blocks(); ++b)
      result.block_names.push_back(probe->BlockName(b));
    if (mode != WeightMode::kDataParallel && boundaries.empty() && pc.stages() > 1) {
      std::vector<models::Batch> batches;
      for (int64_t i = 0; i <= pc.profile_batches(); ++i) {
        batches.push_back(train->Get(sampler.Indices(i % per_epoch)));
      }
      P3_ASSIGN_OR_RETURN(std::vector<BlockProfile> profile, ProfileBlocks(*probe, batches));
      for (const BlockProfile& b : profile) result.block_seconds.push_back(b.seconds());
      absl::StatusOr<std::vector<int64_t>> balanced =
          BalancedBoundaries(result.block_seconds, pc.stages());
      if (!balanced.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("pipeline.stages: ", balanced.status().message()));
      }
      boundaries = *balanced;
    }
  }

  PipelineOptions po;
  po.mode = mode;
  po.spectrain_version = pc.spectrain_version();
  po.num_stages = pc.stages();
  po.devices = result.devices;
  if (mode != WeightMode::kDataParallel) po.boundaries = boundaries;
  po.sgd.lr = config.optimizer().lr();
  po.sgd.momentum = config.optimizer().momentum();
  po.sgd.weight_decay = config.optimizer().weight_decay();
  po.sgd.nesterov = config.optimizer().nesterov();
  po.threads_per_stage = config.training().threads();
  int64_t offset = 0;  // mini-batches of earlier epochs; written only between Train() calls
  const int log_every = std::max(1, config.training().log_every());
  if (options.progress != nullptr) {
    po.on_done = [&offset, &options, iterations, log_every](int64_t i, double loss) {
      const int64_t done = offset + i + 1;
      if (done % log_every == 0 || done == iterations) {
        *options.progress << absl::StrFormat("PROGRESS iteration=%d total=%d loss=%.4f", done,
                                             iterations, loss)
                          << std::endl;
      }
    };
  }
  absl::StatusOr<std::unique_ptr<PipelineEngine>> engine = PipelineEngine::Create(po, factory);
  if (!engine.ok()) {
    return absl::Status(engine.status().code(),
                        absl::StrCat("pipeline: ", engine.status().message()));
  }
  if (mode != WeightMode::kDataParallel) {
    result.boundaries = boundaries;
    if (result.boundaries.empty()) {
      for (size_t k = 1; k < (*engine)->stage_ranges().size(); ++k) {
        result.boundaries.push_back((*engine)->stage_ranges()[k].begin);
      }
    }
  }
  for (const StageRange& range : (*engine)->stage_ranges()) {
    std::vector<std::string> names(result.block_names.begin() + range.begin,
                                   result.block_names.begin() + range.end);
    result.stage_blocks.push_back(absl::StrJoin(names, "+"));
  }

  std::vector<double> all_losses;
  std::vector<double> rates;
  for (int epoch = 1; offset < iterations; ++epoch) {
    const int64_t count = std::min(per_epoch, iterations - offset);
    const int64_t first = offset;
    absl::StatusOr<TrainStats> stats =
        (*engine)->Train(count, [&](int64_t i) -> absl::StatusOr<models::Batch> {
          try {
            return train->Get(sampler.Indices(first + i));
          } catch (const c10::Error& e) {
            return absl::InternalError(e.what_without_backtrace());
          }
        });
    if (!stats.ok()) return stats.status();
    EpochRecord record;
    record.epoch = epoch;
    record.iterations = count;
    double sum = 0;
    for (double loss : stats->losses) sum += loss;
    record.train_loss = count > 0 ? sum / static_cast<double>(count) : 0;
    record.seconds = count > 0 ? stats->done_seconds.back() : 0;
    record.samples_per_second =
        SteadyRate(stats->done_seconds, batch_size, config.training().warmup_iterations());
    rates.push_back(record.samples_per_second);
    all_losses.insert(all_losses.end(), stats->losses.begin(), stats->losses.end());
    offset += count;
    if (evaluate) {
      P3_ASSIGN_OR_RETURN(record.test_accuracy, Accuracy(**engine, *test));
      result.test_accuracy = record.test_accuracy;
    }
    if (options.progress != nullptr) {
      *options.progress << absl::StrFormat(
                               "EPOCH epoch=%d train_loss=%.4f seconds=%.2f "
                               "samples_per_second=%.1f test_accuracy=%s",
                               epoch, record.train_loss, record.seconds, record.samples_per_second,
                               OptionalNumber(record.test_accuracy))
                        << std::endl;
    }
    result.epochs.push_back(record);
  }
  (*engine)->Shutdown();
  result.samples_per_second = Median(rates);
  const size_t tail = std::min<size_t>(20, all_losses.size());
  for (size_t i = all_losses.size() - tail; i < all_losses.size(); ++i) {
    result.final_loss += all_losses[i] / static_cast<double>(tail);
  }
  result.wall_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return result;
}

}  // namespace p3::pipeline
