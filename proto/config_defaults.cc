// Defaults of experiment configs (proto/config.h), as documented in proto/config.proto
// and docs/config.md; tests/proto/config_defaults_agree_test names every field where the three
// disagree.
#include <algorithm>
#include <cstdint>

#include "proto/config.h"

#include "absl/strings/str_cat.h"
#include "p3/core/mode.h"
#include "p3/core/slice_plan.h"
#include "p3/core/slice_search.h"

namespace p3::config {
namespace {

constexpr int kDefaultWorkers = 2;
constexpr int kDefaultServers = 2;
constexpr char kDefaultHost[] = "127.0.0.1";
constexpr double kDefaultPeerTimeoutS = 60;
constexpr double kDefaultStallReportS = 10;
constexpr double kDefaultStalledWriteS = 1;
constexpr char kDefaultModel[] = "small_cnn";
constexpr int kDefaultNumClasses = 10;
constexpr char kDefaultDataset[] = "fashion_mnist";
constexpr char kDefaultDataPath[] = "/usr/share/datasets/fashion-mnist";
constexpr int64_t kDefaultSyntheticSize = 4096;
constexpr char kDefaultOptimizer[] = "sgd";
constexpr double kDefaultSgdLr = 0.05;
constexpr double kDefaultAdamLr = 0.001;
constexpr double kDefaultMomentum = 0.9;
constexpr double kDefaultWeightDecay = 1e-4;
constexpr double kDefaultBeta1 = 0.9;
constexpr double kDefaultBeta2 = 0.999;
constexpr double kDefaultEps = 1e-8;
constexpr char kDefaultSchedule[] = "constant";
constexpr double kDefaultScheduleGamma = 0.1;            // step, multi_step
constexpr double kDefaultWarmupStartFactor = 1.0 / 3.0;  // PyTorch's LinearLR
constexpr int kDefaultBatchSize = 32;
constexpr int kDefaultEpochs = 1;
constexpr uint64_t kDefaultSeed = 1;
constexpr int kDefaultWarmupIterations = 5;
constexpr bool kDefaultEvaluate = true;
constexpr int kDefaultLogEvery = 20;
constexpr int kDefaultThreads = 1;
constexpr int64_t kDefaultSliceParams = 40000;
constexpr int64_t kDefaultSplitThreshold = 1000000;
constexpr int64_t kDefaultMaxMessageParams = int64_t{1} << 20;
constexpr char kDefaultName[] = "experiment";
constexpr char kDefaultPlacement[] = "colocated";
constexpr char kDefaultSubnet[] = "10.77.0.0/24";
constexpr double kDefaultTbfLatencyMs = 20;
constexpr double kDefaultCheckSeconds = 2;
constexpr char kDefaultPipelineWeights[] = "spectrain";
constexpr int kDefaultSpecTrainVersion = 1;
constexpr int kDefaultPipelineStages = 2;
constexpr int kDefaultProfileBatches = 3;
constexpr char kDefaultPipelineSchedule[] = "1f1b";
constexpr int kDefaultCheckpointKeep = 2;

}  // namespace

void FillDefaults(ExperimentConfig* config) {
  if (config->name().empty()) config->set_name(kDefaultName);
  if (config->mode().empty()) config->set_mode("p3");
  if (config->output_dir().empty()) config->set_output_dir("out/" + config->name());

  ClusterConfig* cluster = config->mutable_cluster();
  if (cluster->workers() == 0) cluster->set_workers(kDefaultWorkers);
  if (cluster->servers() == 0) cluster->set_servers(kDefaultServers);
  if (cluster->host().empty()) cluster->set_host(kDefaultHost);
  if (cluster->peer_timeout_s() == 0) cluster->set_peer_timeout_s(kDefaultPeerTimeoutS);
  if (!cluster->has_stall_report_s()) cluster->set_stall_report_s(kDefaultStallReportS);

  ModelConfig* model = config->mutable_model();
  if (model->name().empty()) model->set_name(kDefaultModel);
  if (model->num_classes() == 0) model->set_num_classes(kDefaultNumClasses);
  // image_size, in_channels, vocab_size and seq_len stay 0: "the model's own".

  DataConfig* data = config->mutable_data();
  if (data->dataset().empty()) data->set_dataset(kDefaultDataset);
  if (data->path().empty()) data->set_path(kDefaultDataPath);
  if (data->synthetic_size() == 0) data->set_synthetic_size(kDefaultSyntheticSize);

  OptimizerConfig* optimizer = config->mutable_optimizer();
  if (optimizer->name().empty()) optimizer->set_name(kDefaultOptimizer);
  if (optimizer->lr() == 0) {
    optimizer->set_lr(optimizer->name() == "adam" ? kDefaultAdamLr : kDefaultSgdLr);
  }
  if (!optimizer->has_momentum()) optimizer->set_momentum(kDefaultMomentum);
  if (!optimizer->has_weight_decay()) optimizer->set_weight_decay(kDefaultWeightDecay);
  if (optimizer->beta1() == 0) optimizer->set_beta1(kDefaultBeta1);
  if (optimizer->beta2() == 0) optimizer->set_beta2(kDefaultBeta2);
  if (optimizer->eps() == 0) optimizer->set_eps(kDefaultEps);
  // Only a schedule section that is there is filled in, so a run without one has none in
  // its resolved config (as for `network`).
  if (optimizer->has_schedule()) {
    LrScheduleConfig* schedule = optimizer->mutable_schedule();
    if (schedule->name().empty()) schedule->set_name(kDefaultSchedule);
    if (!schedule->has_gamma() &&
        (schedule->name() == "step" || schedule->name() == "multi_step")) {
      schedule->set_gamma(kDefaultScheduleGamma);
    }
    if (!schedule->has_warmup_start_factor() && schedule->warmup_iterations() > 0) {
      schedule->set_warmup_start_factor(kDefaultWarmupStartFactor);
    }
  }

  TrainingConfig* training = config->mutable_training();
  if (training->batch_size() == 0) training->set_batch_size(kDefaultBatchSize);
  if (training->epochs() == 0) training->set_epochs(kDefaultEpochs);
  if (training->seed() == 0) training->set_seed(kDefaultSeed);
  if (training->warmup_iterations() == 0) {
    training->set_warmup_iterations(kDefaultWarmupIterations);
  }
  if (!training->has_evaluate()) training->set_evaluate(kDefaultEvaluate);
  if (training->log_every() == 0) training->set_log_every(kDefaultLogEvery);
  if (!training->has_threads()) training->set_threads(kDefaultThreads);
  if (training->device().empty()) training->set_device("cpu");
  if (training->precision().empty()) training->set_precision("fp32");

  SchedulingConfig* scheduling = config->mutable_scheduling();
  // slice_params stays absent (automatic, resolved by launch_cluster; a process started
  // without it reads absent as kDefaultSliceParams: EffectiveSliceParams).
  if (scheduling->split_threshold() == 0) {
    scheduling->set_split_threshold(kDefaultSplitThreshold);
  }
  if (scheduling->max_message_params() == 0) {
    scheduling->set_max_message_params(kDefaultMaxMessageParams);
  }
  // credit_bytes stays 0, its default: one message at a time (-1, automatic, is kept).
  if (!scheduling->has_shared_memory()) scheduling->set_shared_memory(true);
  if (!scheduling->has_batch_io_threads()) scheduling->set_batch_io_threads(true);
  if (!scheduling->has_sized_reads()) scheduling->set_sized_reads(true);
  if (!scheduling->has_stalled_write_s()) scheduling->set_stalled_write_s(kDefaultStalledWriteS);
  if (scheduling->wire_dtype().empty()) scheduling->set_wire_dtype("float32");

  // output.model_file stays "": "<output_dir>/model.pt", resolved where it is written, so
  // that a launcher back end that moves output_dir moves it too.
  OutputConfig* output = config->mutable_output();
  if (!output->has_save_model()) output->set_save_model(true);

  // Only with checkpoints, so that other resolved configs stay as they were.
  if (!config->checkpoint().dir().empty()) {
    CheckpointConfig* checkpoint = config->mutable_checkpoint();
    if (checkpoint->keep() == 0) checkpoint->set_keep(kDefaultCheckpointKeep);
  }

  // Only when the network is emulated, so that other resolved configs stay as they were.
  if (config->network().bandwidth_gbps() > 0) {
    NetworkConfig* network = config->mutable_network();
    if (network->placement().empty()) network->set_placement(kDefaultPlacement);
    if (network->machines() == 0) network->set_machines(DefaultMachineCount(*config));
    if (network->subnet().empty()) network->set_subnet(kDefaultSubnet);
    if (network->tbf_latency_ms() == 0) network->set_tbf_latency_ms(kDefaultTbfLatencyMs);
    if (network->check_seconds() == 0) network->set_check_seconds(kDefaultCheckSeconds);
  }

  // Only in mode "pipeline", so that the other modes' resolved configs stay as they were.
  if (config->mode() == kPipelineMode) {
    PipelineConfig* pipeline = config->mutable_pipeline();
    if (pipeline->schedule().empty()) pipeline->set_schedule(kDefaultPipelineSchedule);
    const bool interleaved = pipeline->schedule() == "interleaved_1f1b";
    // Both split mini-batches into micro-batches and update once per mini-batch.
    const bool gpipe = pipeline->schedule() == "gpipe" || interleaved;
    // GPipe and interleaved 1F1B have no stale weights to treat: their weight handling is
    // vanilla's.
    if (pipeline->weights().empty()) {
      pipeline->set_weights(gpipe ? "vanilla" : kDefaultPipelineWeights);
    }
    if (pipeline->spectrain_version() == 0) {
      pipeline->set_spectrain_version(kDefaultSpecTrainVersion);
    }
    if (pipeline->stages() == 0) pipeline->set_stages(kDefaultPipelineStages);
    if (pipeline->profile_batches() == 0) pipeline->set_profile_batches(kDefaultProfileBatches);
    if (pipeline->microbatches() == 0) pipeline->set_microbatches(gpipe ? pipeline->stages() : 1);
    if (pipeline->chunks() == 0) pipeline->set_chunks(interleaved ? 2 : 1);
  }
}

bool SliceParamsAuto(const ExperimentConfig& config) {
  return !config.scheduling().has_slice_params() ||
         config.scheduling().slice_params() == kAutoSliceParams;
}

bool SliceParamsAbsent(const ExperimentConfig& config) {
  return !config.scheduling().has_slice_params();
}

bool CreditBytesAuto(const ExperimentConfig& config) {
  return config.scheduling().credit_bytes() == kAutoCreditBytes;
}

int64_t EffectivePackParams(const ExperimentConfig& config) {
  return config.scheduling().has_pack_params() ? config.scheduling().pack_params()
                                               : kDefaultPackParams;
}

int64_t EffectiveSliceParams(const ExperimentConfig& config) {
  return config.scheduling().slice_params() > 0 ? config.scheduling().slice_params()
                                                : kDefaultSliceParams;
}

int64_t EffectiveOwnerParams(const ExperimentConfig& config) {
  if (config.scheduling().owner_params() > 0) return config.scheduling().owner_params();
  if (config.scheduling().online_search()) {
    return SliceSearchOwnerParams(EffectiveSliceParams(config));
  }
  return 0;
}

std::string OnlineSearchRuledOutBy(const ExperimentConfig& config) {
  const absl::StatusOr<Mode> mode = ParseMode(config.mode());
  if (!mode.ok() || *mode == Mode::kLocal || !TraitsOf(*mode).sliced ||
      !TraitsOf(*mode).values_on_push) {
    return absl::StrCat("mode ", config.mode(),
                        " has no slices returned with their values on the push to re-plan; "
                        "allowed in p3, no_overlap, no_backward_overlap, no_forward_overlap");
  }
  if (config.scheduling().wire_dtype() == "float16") {
    return "a float16 wire scales per slice: another slice size would round differently";
  }
  return "";
}

int64_t EffectiveCreditBytes(const ExperimentConfig& config) {
  return std::max<int64_t>(0, config.scheduling().credit_bytes());
}

absl::Duration StalledWriteAfter(const ExperimentConfig& config) {
  const double s = config.scheduling().stalled_write_s();
  return s > 0 ? absl::Seconds(s) : absl::InfiniteDuration();
}

}  // namespace p3::config
