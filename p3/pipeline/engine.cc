#include "p3/pipeline/engine.h"

#include <c10/core/DeviceGuard.h>
#include <torch/torch.h>

#include <limits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "p3/pipeline/data_parallel_engine.h"
#include "p3/pipeline/schedule.h"
#include "p3/pipeline/stage_engine.h"
#include "p3/pipeline/stage_streams.h"
#include "p3/pipeline/torch_errors.h"
#include "p3/base/status_macros.h"

namespace p3::pipeline {
namespace {

absl::StatusOr<std::vector<torch::Device>> StageDevices(const PipelineOptions& options) {
  std::vector<torch::Device> devices;
  for (int k = 0; k < options.num_stages; ++k) {
    const std::string name = options.devices.empty() ? "cpu" : options.devices[k];
    absl::StatusOr<torch::Device> device = ParseStageDevice(name);
    if (!device.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("devices[", k, "]: ", device.status().message()));
    }
    devices.push_back(*device);
  }
  return devices;
}

// The block ranges of the stages: every block on every replica (data_parallel), or cut
// at options.boundaries (by default evenly by count).
absl::StatusOr<std::vector<StageRange>> RangesFor(const PipelineOptions& options,
                                                  int64_t num_blocks) {
  if (options.mode == WeightMode::kDataParallel) {
    return std::vector<StageRange>(options.num_stages, StageRange{0, num_blocks});
  }
  const int n = VirtualStages(options);
  if (options.schedule == PipelineSchedule::kInterleaved1F1B && n > num_blocks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_stages * chunks = ", n, " stages for a model of ", num_blocks,
        " blocks; allowed: at most one stage per block"));
  }
  std::vector<int64_t> boundaries = options.boundaries;
  if (boundaries.empty()) {
    for (int s = 1; s < n; ++s) boundaries.push_back(s * num_blocks / n);
  }
  absl::Status valid = ValidateBoundaries(boundaries, num_blocks);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("boundaries: ", valid.message()));
  }
  return StageRanges(boundaries, num_blocks);
}

std::vector<torch::Tensor> AllParameters(models::BlockModel& model, int64_t begin, int64_t end) {
  std::vector<torch::Tensor> all;
  for (int64_t b = begin; b < end; ++b) {
    for (const torch::Tensor& p : model.BlockParameters(b)) all.push_back(p);
  }
  return all;
}

bool SameValues(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t j = 0; j < a.size(); ++j) {
    if (a[j].sizes() != b[j].sizes() || !torch::equal(a[j], b[j])) return false;
  }
  return true;
}

// The models of all stages from `factory`, checked to be identical replicas.
absl::StatusOr<std::vector<std::shared_ptr<models::BlockModel>>> MakeModels(
    int n, const ModelFactory& factory, const std::shared_ptr<MemoryLedger>& memory) {
  std::vector<std::shared_ptr<models::BlockModel>> models;
  std::vector<torch::Tensor> reference;  // replica 0's initial parameters
  for (int k = 0; k < n; ++k) {
    absl::StatusOr<std::shared_ptr<models::BlockModel>> made;
    {
      ScopedMemoryOwner owner(memory, k, MemoryCategory::kModel);
      made = factory();
    }
    P3_ASSIGN_OR_RETURN(std::shared_ptr<models::BlockModel> model, std::move(made));
    if (model == nullptr) return absl::InvalidArgumentError("the model factory returned null");
    const int64_t num_blocks = model->num_blocks();
    if (k > 0 && num_blocks != models[0]->num_blocks()) {
      return absl::InvalidArgumentError("the model factory returned models of different shapes");
    }
    std::vector<torch::Tensor> all = AllParameters(*model, 0, num_blocks);
    if (k == 0) {
      reference = std::move(all);
    } else if (!SameValues(all, reference)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the model factory returned a replica for stage ", k,
          " whose parameters differ from stage 0's; it must initialise from a fixed seed"));
    }
    models.push_back(std::move(model));
  }
  return models;
}

// Stage k's replica: its model moved to its device, in train() mode, with an optimizer
// over the parameters of its blocks. Under interleaved 1F1B, k is a virtual stage and the
// replicas of one thread's chunks share its model (moved once, with its first chunk).
absl::StatusOr<std::unique_ptr<StageReplica>> MakeReplica(const PipelineOptions& options, int k,
                                                          std::shared_ptr<models::BlockModel> model,
                                                          const torch::Device& device,
                                                          const StageRange& range) {
  auto replica = std::make_unique<StageReplica>();
  replica->index = k;
  replica->device = device;
  replica->model = std::move(model);
  replica->range = range;
  const bool first_chunk = k < options.num_stages;
  P3_RETURN_IF_ERROR(CatchTorchErrors(absl::StrCat("moving stage ", k, " to ", device.str()),
                                      [&]() -> absl::Status {
                                        if (!device.is_cpu() && first_chunk) {
                                          replica->model->to(device);
                                        }
                                        return absl::OkStatus();
                                      }));
  replica->model->train();
  // SpecTrain and PipeDream put other values than the real weights into the model, and
  // stale does to recompute a forward with its stashed weights; the optimizer then keeps
  // the real ones apart. Not on a last stage, whose backward follows its forward with no
  // update between: it needs neither (KeepsRealWeightsApart()).
  const int stages = VirtualStages(options);
  const bool separate_real =
      options.mode != WeightMode::kDataParallel &&
      (KeepsRealWeightsApart(options.mode, options.spectrain_version, stages, k) ||
       (options.recompute && IsPipelined(options.mode) && k + 1 < stages));
  replica->sgd = std::make_unique<StageSgd>(AllParameters(*replica->model, range.begin, range.end),
                                            options.sgd, separate_real);
  return replica;
}

}  // namespace

int VirtualStages(const PipelineOptions& options) {
  return options.schedule == PipelineSchedule::kInterleaved1F1B
             ? options.num_stages * options.chunks
             : options.num_stages;
}

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

absl::StatusOr<std::unique_ptr<PipelineEngine>> PipelineEngine::Create(
    const PipelineOptions& options, const ModelFactory& factory) {
  P3_RETURN_IF_ERROR(ValidatePipelineOptions(options));
  const int n = options.num_stages;
  P3_ASSIGN_OR_RETURN(const std::vector<torch::Device> devices, StageDevices(options));
  std::shared_ptr<MemoryLedger> memory;
  if (options.measure_memory) {
    P3_RETURN_IF_ERROR(InstallCpuMemoryTracking());
    memory = std::make_shared<MemoryLedger>(n);
  }
  P3_ASSIGN_OR_RETURN(std::vector<std::shared_ptr<models::BlockModel>> models,
                      MakeModels(n, factory, memory));
  P3_ASSIGN_OR_RETURN(std::vector<StageRange> ranges, RangesFor(options, models[0]->num_blocks()));
  std::vector<std::unique_ptr<StageReplica>> replicas;
  // One per stage; under interleaved 1F1B one per virtual stage v, on thread v mod n.
  for (size_t v = 0; v < ranges.size(); ++v) {
    const int k = static_cast<int>(v) % n;
    ScopedMemoryOwner owner(memory, k, MemoryCategory::kOptimizer);
    P3_ASSIGN_OR_RETURN(std::unique_ptr<StageReplica> replica,
                        MakeReplica(options, static_cast<int>(v), models[k], devices[k], ranges[v]));
    replicas.push_back(std::move(replica));
  }
  return std::unique_ptr<PipelineEngine>(
      new PipelineEngine(options, std::move(ranges), std::move(replicas), std::move(memory)));
}

PipelineEngine::PipelineEngine(const PipelineOptions& options, std::vector<StageRange> ranges,
                               std::vector<std::unique_ptr<StageReplica>> replicas,
                               std::shared_ptr<MemoryLedger> memory)
    : options_(options),
      n_(options.num_stages),
      ranges_(std::move(ranges)),
      replicas_(std::move(replicas)),
      memory_(std::move(memory)) {
  std::vector<StageReplica*> stages;
  for (const auto& replica : replicas_) stages.push_back(replica.get());
  if (options_.mode == WeightMode::kDataParallel) {
    mode_ = std::make_unique<DataParallelEngine>(options_, std::move(stages));
  } else {
    mode_ = std::make_unique<StageEngine>(options_, std::move(stages));
  }
  for (int k = 0; k < n_; ++k) threads_.emplace_back([this, k] { StageLoop(k); });
}

PipelineEngine::~PipelineEngine() { Shutdown(); }

void PipelineEngine::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    shutdown_ = true;
  }
  mode_->Close();
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
  mode_->Close();
}

void PipelineEngine::StageLoop(int k) {
  ScopedMemoryOwner memory_owner(memory_, k, MemoryCategory::kOther);
  if (options_.threads_per_stage > 0) torch::set_num_threads(options_.threads_per_stage);
  c10::OptionalDeviceGuard device_guard;
  if (!replicas_[k]->device.is_cpu()) device_guard.reset_device(replicas_[k]->device);
  // A stream of this stage's own on its device: stages sharing a GPU overlap.
  const StageStream stream(replicas_[k]->device);
  int64_t seen = 0;
  while (true) {
    TrainJob job;
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
    absl::Status status = mode_->RunJob(k, job);
    if (!status.ok()) Fail(status);
    status = mode_->EndJob(k);
    if (!status.ok()) Fail(status);
    absl::MutexLock lock(&mu_);
    ++stages_done_;
  }
}

absl::StatusOr<TrainStats> PipelineEngine::Train(int64_t count, const BatchSource& source) {
  if (count < 0) {
    return absl::InvalidArgumentError(absl::StrCat("count: ", count, "; allowed >= 0"));
  }
  TrainStats stats;
  stats.losses.assign(count, std::numeric_limits<double>::quiet_NaN());
  stats.done_seconds.assign(count, 0);
  stats.busy_seconds.assign(n_, 0);
  stats.stage_times.assign(n_, StageTimes{});
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return absl::FailedPreconditionError("the pipeline engine was shut down");
    if (!error_.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("an earlier run of the pipeline failed: ", error_.message()));
    }
    job_ = TrainJob{count, absl::Now(), &stats};
    stages_done_ = 0;
    ++generation_;
  }
  absl::Status fed = mode_->Feed(count, source);
  if (!fed.ok()) Fail(fed);
  absl::MutexLock lock(&mu_);
  auto all_done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stages_done_ == n_; };
  mu_.Await(absl::Condition(&all_done));
  if (!error_.ok()) return error_;
  stats.seconds = absl::ToDoubleSeconds(absl::Now() - job_.start);
  return stats;
}

int PipelineEngine::ModelStages() const {
  return options_.mode == WeightMode::kDataParallel ? 1 : static_cast<int>(replicas_.size());
}

absl::StatusOr<torch::Tensor> PipelineEngine::Infer(const torch::Tensor& input) {
  torch::NoGradGuard no_grad;
  const int used = ModelStages();
  for (int k = 0; k < used; ++k) replicas_[k]->model->eval();
  torch::Tensor x = input;
  absl::Status status = CatchTorchErrors("inference", [&]() -> absl::Status {
    for (int k = 0; k < used; ++k) {
      const StageReplica& replica = *replicas_[k];
      x = x.to(replica.device);
      for (int64_t b = replica.range.begin; b < replica.range.end; ++b) {
        x = replica.model->ForwardBlock(b, x);
      }
    }
    x = x.to(torch::kCPU);
    return absl::OkStatus();
  });
  for (int k = 0; k < used; ++k) replicas_[k]->model->train();
  P3_RETURN_IF_ERROR(status);
  return x;
}

std::vector<StageMemoryStats> PipelineEngine::MemoryStats() const {
  std::vector<StageMemoryStats> stats;
  if (memory_ == nullptr) return stats;
  for (int k = 0; k < n_; ++k) stats.push_back(memory_->Stats(k));
  return stats;
}

void PipelineEngine::ResetMemoryPeaks() {
  if (memory_ != nullptr) memory_->ResetPeaks();
}

std::vector<int64_t> PipelineEngine::StageParameterBytes() const {
  std::vector<int64_t> bytes(n_, 0);
  for (size_t v = 0; v < replicas_.size(); ++v) {
    for (const torch::Tensor& p : replicas_[v]->sgd->params()) {
      bytes[v % n_] += p.numel() * p.element_size();
    }
  }
  return bytes;
}

std::vector<torch::Tensor> PipelineEngine::Parameters() {
  std::vector<torch::Tensor> out;
  for (int k = 0; k < ModelStages(); ++k) {
    for (const torch::Tensor& p : replicas_[k]->sgd->real()) {
      out.push_back(p.detach().to(torch::kCPU).clone());
    }
  }
  return out;
}

}  // namespace p3::pipeline
