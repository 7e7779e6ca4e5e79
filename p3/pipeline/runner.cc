#include "p3/pipeline/runner.h"

#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "models/data.h"
#include "models/config/from_config.h"
#include "models/model.h"
#include "models/sampler.h"
#include "models/zoo.h"
#include "p3/pipeline/engine.h"
#include "p3/pipeline/partition.h"
#include "p3/pipeline/profile.h"
#include "p3/pipeline/run_config.h"
#include "p3/pipeline/run_stats.h"
#include "p3/pipeline/schedule.h"
#include "p3/pipeline/torch_errors.h"
#include "p3/base/progress.h"
#include "p3/base/status_macros.h"
#include "p3/base/trace.h"

namespace p3::pipeline {
namespace {

// The data of a run: the training set (its first pipeline.train_samples samples when
// set) in the sampler's order, the test set with training.evaluate.
struct RunData {
  std::shared_ptr<models::Dataset> train;
  std::shared_ptr<models::Dataset> test;  // null without training.evaluate
  models::ShardedSampler sampler;         // one worker: the whole training set
  int64_t train_samples = 0;              // the samples the sampler draws from
};

absl::StatusOr<RunData> LoadData(const config::ExperimentConfig& config) {
  P3_ASSIGN_OR_RETURN(std::shared_ptr<models::Dataset> train,
                      models::CreateDataset(models::DatasetOptionsFromConfig(config, true)));
  std::shared_ptr<models::Dataset> test;
  if (config.training().evaluate()) {
    P3_ASSIGN_OR_RETURN(test,
                        models::CreateDataset(models::DatasetOptionsFromConfig(config, false)));
  }
  const int64_t subset = config.pipeline().train_samples();
  if (subset > train->size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline.train_samples: ", subset, " is more than the training set's ",
                     train->size(), " samples"));
  }
  models::ShardedSamplerOptions so;
  // The sampler draws from indices [0, dataset_size): the first train_samples samples.
  so.dataset_size = subset > 0 ? subset : train->size();
  so.batch_size = config.training().batch_size();
  so.num_workers = 1;
  so.rank = 0;
  so.seed = config.training().seed();
  P3_ASSIGN_OR_RETURN(models::ShardedSampler sampler, models::ShardedSampler::Create(so));
  return RunData{std::move(train), std::move(test), std::move(sampler), so.dataset_size};
}

absl::StatusOr<models::Batch> GetBatch(const models::Dataset& dataset,
                                       const std::vector<int64_t>& indices) {
  models::Batch batch;
  P3_RETURN_IF_ERROR(CatchTorchErrors("reading the data set", [&]() -> absl::Status {
    batch = dataset.Get(indices);
    return absl::OkStatus();
  }));
  return batch;
}

// The run's description as far as the config gives it.
RunResult ResultFromConfig(const config::ExperimentConfig& config, const PipelineOptions& po,
                           int64_t iterations) {
  RunResult result;
  result.name = config.name();
  result.weights = config.pipeline().weights();
  result.spectrain_version = po.spectrain_version;
  result.stages = po.num_stages;
  result.schedule = PipelineScheduleName(po.schedule);
  result.microbatches = po.microbatches;
  result.recompute = po.recompute;
  result.chunks = po.chunks;
  result.devices = po.devices;
  result.batch_size = config.training().batch_size();
  result.iterations = iterations;
  return result;
}

// The boundaries the engine gets: pipeline.boundaries, or (pipelined modes with more
// than one stage) balanced over the blocks' times profiled on this thread, which go to
// result->block_seconds. Also fills result->block_names.
absl::StatusOr<std::vector<int64_t>> ChooseBoundaries(const config::ExperimentConfig& config,
                                                      const PipelineOptions& po,
                                                      const ModelFactory& factory, RunData& data,
                                                      RunResult* result) {
  P3_ASSIGN_OR_RETURN(std::shared_ptr<models::BlockModel> probe, factory());
  for (int64_t b = 0; b < probe->num_blocks(); ++b) {
    result->block_names.push_back(probe->BlockName(b));
  }
  if (po.mode == WeightMode::kDataParallel || !po.boundaries.empty() || VirtualStages(po) <= 1) {
    return po.boundaries;
  }
  const int64_t per_epoch = data.sampler.iterations_per_epoch();
  std::vector<models::Batch> batches;
  for (int64_t i = 0; i <= config.pipeline().profile_batches(); ++i) {
    P3_ASSIGN_OR_RETURN(models::Batch batch,
                        GetBatch(*data.train, data.sampler.Indices(i % per_epoch)));
    batches.push_back(std::move(batch));
  }
  P3_ASSIGN_OR_RETURN(std::vector<BlockProfile> profile, ProfileBlocks(*probe, batches, &po.sgd));
  for (const BlockProfile& b : profile) result->block_seconds.push_back(b.seconds());
  absl::StatusOr<std::vector<int64_t>> balanced =
      BalancedBoundaries(result->block_seconds, VirtualStages(po));
  if (!balanced.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        po.chunks > 1 ? "pipeline.stages * pipeline.chunks: " : "pipeline.stages: ",
        balanced.status().message()));
  }
  return balanced;
}

// result->boundaries (pipelined modes) and result->stage_blocks from the engine's stages.
void DescribeStages(const PipelineEngine& engine, RunResult* result) {
  const std::vector<StageRange>& ranges = engine.stage_ranges();
  if (engine.options().mode != WeightMode::kDataParallel) {
    for (size_t k = 1; k < ranges.size(); ++k) result->boundaries.push_back(ranges[k].begin);
  }
  for (const StageRange& range : ranges) {
    std::vector<std::string> names(result->block_names.begin() + range.begin,
                                   result->block_names.begin() + range.end);
    result->stage_blocks.push_back(absl::StrJoin(names, "+"));
  }
}

// PipelineOptions::on_done writing a PROGRESS line every `log_every` mini-batches and
// after the last of `total`. `*offset` (mini-batches of earlier epochs) is read on stage
// 0's thread during Train() and written by the caller between Train() calls only.
std::function<void(int64_t, double)> ProgressCallback(std::ostream* out, const int64_t* offset,
                                                      int64_t total, int log_every) {
  return [out, offset, total, log_every](int64_t i, double loss) {
    const int64_t done = *offset + i + 1;
    if (done % log_every != 0 && done != total) return;
    ProgressLine line;
    line.iteration = done;
    line.total = total;
    line.loss = loss;
    *out << FormatProgressLine(line) << std::endl;
  };
}

absl::StatusOr<double> Accuracy(PipelineEngine& engine, const models::Dataset& test) {
  int64_t correct = 0;
  constexpr int64_t kChunk = 1000;
  for (int64_t start = 0; start < test.size(); start += kChunk) {
    std::vector<int64_t> indices;
    for (int64_t i = start; i < std::min(test.size(), start + kChunk); ++i) indices.push_back(i);
    P3_ASSIGN_OR_RETURN(models::Batch batch, GetBatch(test, indices));
    P3_ASSIGN_OR_RETURN(torch::Tensor logits, engine.Infer(batch.input));
    correct += logits.argmax(-1).eq(batch.target).sum().item<int64_t>();
  }
  return static_cast<double>(correct) / static_cast<double>(test.size());
}

// Trains epoch after epoch until `total` mini-batches are done, evaluating after each
// epoch when there is a test set; appends the epochs to result->epochs and returns every
// mini-batch's loss in order.
absl::StatusOr<std::vector<double>> TrainEpochs(const config::ExperimentConfig& config,
                                                RunData& data, int64_t total,
                                                std::ostream* progress, PipelineEngine& engine,
                                                int64_t* offset, RunResult* result) {
  const int64_t per_epoch = data.sampler.iterations_per_epoch();
  std::vector<double> all_losses;
  double busy = 0;
  double stage_seconds = 0;
  for (int epoch = 1; *offset < total; ++epoch) {
    const int64_t count = std::min(per_epoch, total - *offset);
    const int64_t first = *offset;
    const BatchSource source = [&](int64_t i) -> absl::StatusOr<models::Batch> {
      return GetBatch(*data.train, data.sampler.Indices(first + i));
    };
    P3_ASSIGN_OR_RETURN(TrainStats stats, engine.Train(count, source));
    EpochRecord record =
        EpochRecordFromStats(epoch, stats.losses, stats.done_seconds,
                             config.training().batch_size(), config.training().warmup_iterations());
    record.bubble_fraction = BubbleFraction(stats);
    for (double b : stats.busy_seconds) busy += b;
    result->stage_times.resize(stats.stage_times.size());
    for (size_t k = 0; k < stats.stage_times.size(); ++k) {
      result->stage_times[k] += stats.stage_times[k];
    }
    stage_seconds += stats.seconds * static_cast<double>(stats.busy_seconds.size());
    all_losses.insert(all_losses.end(), stats.losses.begin(), stats.losses.end());
    *offset += count;
    if (data.test != nullptr) {
      P3_ASSIGN_OR_RETURN(record.test_accuracy, Accuracy(engine, *data.test));
      result->test_accuracy = record.test_accuracy;
    }
    if (progress != nullptr) *progress << FormatEpochLine(record) << std::endl;
    result->epochs.push_back(record);
  }
  result->bubble_fraction = stage_seconds > 0 ? 1.0 - busy / stage_seconds : 0;
  return all_losses;
}

// result->memory from the engine's ledger (peaks over the whole run), and a MEMORY line
// per stage.
void ReportMemory(const PipelineEngine& engine, std::ostream* progress, RunResult* result) {
  const std::vector<StageMemoryStats> stats = engine.MemoryStats();
  const std::vector<int64_t> parameter_bytes = engine.StageParameterBytes();
  for (size_t k = 0; k < stats.size(); ++k) {
    StageMemoryRecord record;
    record.stage = static_cast<int>(k);
    record.parameter_bytes = parameter_bytes[k];
    record.peak_bytes = stats[k].peak_bytes;
    for (int c = 0; c < kNumMemoryCategories; ++c) {
      const std::string name = MemoryCategoryName(static_cast<MemoryCategory>(c));
      record.at_peak.emplace_back(name, stats[k].at_peak[c]);
      record.category_peak.emplace_back(name, stats[k].category_peak[c]);
    }
    if (progress != nullptr) *progress << FormatMemoryLine(record) << std::endl;
    result->memory.push_back(std::move(record));
  }
}

}  // namespace

absl::StatusOr<RunResult> RunPipeline(const config::ExperimentConfig& config,
                                      const RunOptions& options) {
  const absl::Time start = absl::Now();
  if (config.mode() != "pipeline") {
    return absl::InvalidArgumentError(
        absl::StrCat("mode: \"", config.mode(), "\"; the pipeline runs only mode \"pipeline\""));
  }
  P3_ASSIGN_OR_RETURN(PipelineOptions po, PipelineOptionsFromConfig(config));
  const models::ModelOptions mo = models::ModelOptionsFromConfig(config);
  const ModelFactory factory = [mo] { return models::CreateModel(mo); };
  P3_ASSIGN_OR_RETURN(RunData data, LoadData(config));
  const int64_t total = RunIterations(config, data.sampler.iterations_per_epoch());
  RunResult result = ResultFromConfig(config, po, total);
  result.train_samples = data.train_samples;
  P3_ASSIGN_OR_RETURN(po.boundaries, ChooseBoundaries(config, po, factory, data, &result));

  po.measure_memory = true;
  int64_t offset = 0;  // mini-batches of earlier epochs
  if (options.progress != nullptr) {
    po.on_done = ProgressCallback(options.progress, &offset, total,
                                  std::max(1, config.training().log_every()));
  }
  TraceRecorder trace({.enabled = config.trace(),
                       .process_name = absl::StrCat("pipeline ", config.name())});
  po.trace = &trace;
  absl::StatusOr<std::unique_ptr<PipelineEngine>> engine = PipelineEngine::Create(po, factory);
  if (!engine.ok()) {
    return absl::Status(engine.status().code(),
                        absl::StrCat("pipeline: ", engine.status().message()));
  }
  DescribeStages(**engine, &result);
  P3_ASSIGN_OR_RETURN(
      const std::vector<double> all_losses,
      TrainEpochs(config, data, total, options.progress, **engine, &offset, &result));
  (*engine)->Shutdown();
  if (trace.enabled()) {
    const std::string folder = absl::StrCat(config.output_dir(), "/traces");
    std::error_code error;
    std::filesystem::create_directories(folder, error);
    if (error) {
      return absl::InternalError(absl::StrCat("cannot create ", folder, ": ", error.message()));
    }
    result.trace_file = folder + "/pipeline_stages.json";
    P3_RETURN_IF_ERROR(trace.WriteJson(result.trace_file));
  }
  ReportMemory(**engine, options.progress, &result);
  SummarizeRun(all_losses, &result);
  result.wall_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return result;
}

}  // namespace p3::pipeline
