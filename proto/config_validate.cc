// Validation of experiment configs (proto/config.h): every error names the field.
#include <arpa/inet.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "p3/core/lr_schedule.h"
#include "p3/core/mode.h"
#include "p3/core/optimizer.h"
#include "proto/config.h"
#include "proto/config_options.h"

namespace p3::config {
namespace {

constexpr double kMaxBandwidthGbps = 100;
constexpr int kMaxMachines = 2 * kMaxProcesses;

template <typename Range>
std::string QuotedList(const Range& allowed) {
  std::vector<std::string> quoted;
  for (const char* name : allowed) quoted.push_back(absl::StrCat("\"", name, "\""));
  return absl::StrJoin(quoted, ", ");
}

template <typename Range>
bool IsOneOf(const std::string& value, const Range& allowed) {
  for (const char* candidate : allowed) {
    if (value == candidate) return true;
  }
  return false;
}

// Collects validation errors, one line each.
// "" if `subnet` is an IPv4 "a.b.c.d/len" with len in 8..30, else what is wrong.
std::string SubnetProblem(const std::string& subnet) {
  const std::vector<std::string> parts = absl::StrSplit(subnet, '/');
  int prefix = -1;
  in_addr address{};
  if (parts.size() != 2 || inet_pton(AF_INET, parts[0].c_str(), &address) != 1 ||
      !absl::SimpleAtoi(parts[1], &prefix) || prefix < 8 || prefix > 30) {
    return absl::StrCat("\"", absl::CEscape(subnet),
                        "\" is not allowed; allowed: an IPv4 subnet a.b.c.d/len with len in "
                        "8..30, e.g. \"10.77.0.0/24\"");
  }
  return "";
}

class Checker {
 public:
  // `allowed`: any range of C strings (an array, a vector).
  template <typename Range>
  void OneOf(const std::string& field, const std::string& value, const Range& allowed) {
    if (!IsOneOf(value, allowed)) {
      Add(field, absl::StrCat("\"", absl::CEscape(value),
                              "\" is not allowed; allowed: ", QuotedList(allowed)));
    }
  }

  void IntRange(const std::string& field, int64_t value, int64_t min, int64_t max) {
    if (value < min || value > max) {
      Add(field, absl::StrCat(value, " is out of range; allowed ", min, "..", max));
    }
  }

  void IntAtLeast(const std::string& field, int64_t value, int64_t min) {
    if (value < min) Add(field, absl::StrCat(value, " is out of range; allowed >= ", min));
  }

  void Positive(const std::string& field, double value) {
    if (!(value > 0) || !std::isfinite(value)) {
      Add(field, absl::StrCat(value, " is out of range; allowed > 0 (finite)"));
    }
  }

  void NonNegative(const std::string& field, double value) {
    if (!(value >= 0) || !std::isfinite(value)) {
      Add(field, absl::StrCat(value, " is out of range; allowed >= 0 (finite)"));
    }
  }

  // [0, 1).
  void UnitInterval(const std::string& field, double value) {
    if (!(value >= 0 && value < 1)) {
      Add(field, absl::StrCat(value, " is out of range; allowed [0, 1)"));
    }
  }

  // Non-empty and made only of `allowed_chars` plus ASCII letters and digits.
  void Word(const std::string& field, const std::string& value, absl::string_view allowed_chars,
            absl::string_view description) {
    bool ok = !value.empty();
    for (char c : value) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) &&
          allowed_chars.find(c) == absl::string_view::npos) {
        ok = false;
      }
    }
    if (!ok) {
      Add(field,
          absl::StrCat("\"", absl::CEscape(value), "\" is not allowed; allowed: ", description));
    }
  }

  // Lines that already name their field ("field: problem").
  void AddLines(const std::string& lines) {
    for (absl::string_view line : absl::StrSplit(lines, '\n')) errors_.emplace_back(line);
  }

  void Add(const std::string& field, const std::string& problem) {
    errors_.push_back(absl::StrCat(field, ": ", problem));
  }

  absl::Status status() const {
    if (errors_.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrJoin(errors_, "\n"));
  }

 private:
  std::vector<std::string> errors_;
};

}  // namespace

absl::Status ValidateConfig(const ExperimentConfig& config) {
  Checker check;
  check.Word("name", config.name(), "_-.", "letters, digits, '_', '-', '.'");
  std::vector<const char*> modes(std::begin(kModeNames), std::end(kModeNames));
  modes.push_back(kPipelineMode);
  check.OneOf("mode", config.mode(), modes);
  if (config.output_dir().empty()) check.Add("output_dir", "must not be empty");

  const ClusterConfig& cluster = config.cluster();
  check.IntRange("cluster.workers", cluster.workers(), 1, kMaxProcesses);
  check.IntRange("cluster.servers", cluster.servers(), 1, kMaxProcesses);
  check.Word("cluster.host", cluster.host(), "_-.:", "a host name or IP address");
  check.Positive("cluster.peer_timeout_s", cluster.peer_timeout_s());
  if (!(cluster.stall_report_s() >= 0) || std::isinf(cluster.stall_report_s())) {
    check.Add("cluster.stall_report_s",
              absl::StrCat("must be 0 (no reports) or a positive number of seconds, got ",
                           cluster.stall_report_s()));
  }
  check.NonNegative("cluster.rejoin_timeout_s", cluster.rejoin_timeout_s());
  if (cluster.has_elastic()) {
    const int64_t max_workers = cluster.elastic().max_workers();
    if (max_workers != 0) {
      check.IntRange("cluster.elastic.max_workers", max_workers, cluster.workers(),
                     kMaxProcesses);
    }
    auto not_with = [&](const std::string& field, const std::string& what) {
      check.Add(field, absl::StrCat(what, " cannot be combined with cluster.elastic ",
                                    "(docs/reliability.md, \"Elastic membership\")"));
    };
    if (cluster.rejoin_timeout_s() > 0) {
      not_with("cluster.rejoin_timeout_s", "> 0 (rejoins of dead workers)");
    }
    if (config.scheduling().has_online_search() && config.scheduling().online_search()) {
      not_with("scheduling.online_search", "true (re-plans)");
    }
    if (config.mode() == kPipelineMode) {
      not_with("mode", "\"pipeline\" (no servers)");
    } else if (absl::StatusOr<Mode> mode = ParseMode(config.mode());
               mode.ok() && *mode != Mode::kLocal && !TraitsOf(*mode).values_on_push) {
      // A joining worker takes its first values from the push (protocol.md, "Membership").
      not_with("mode", absl::StrCat("\"", config.mode(), "\" (values are pulled)"));
    }
    if (config.mode() == "local") {
      // Mode local replays a membership (docs/reliability.md, "Elastic membership").
      if (absl::StatusOr<MembershipSchedule> s = ElasticSchedule(config); !s.ok()) {
        check.AddLines(std::string(s.status().message()));
      }
    } else if (cluster.elastic().change_size() > 0) {
      check.Add("cluster.elastic.change",
                "is a membership for mode \"local\" to replay; a cluster's changes come from "
                "launch_cluster --elastic_control or Worker::RequestMembership "
                "(docs/reliability.md, \"Elastic membership\")");
    }
  }

  const ModelConfig& model = config.model();
  check.Word("model.name", model.name(), "_", "a model name of the zoo (letters, digits, '_')");
  check.IntAtLeast("model.num_classes", model.num_classes(), 2);
  check.IntAtLeast("model.image_size", model.image_size(), 0);
  check.IntAtLeast("model.in_channels", model.in_channels(), 0);
  check.IntAtLeast("model.vocab_size", model.vocab_size(), 0);
  check.IntAtLeast("model.seq_len", model.seq_len(), 0);
  check.IntAtLeast("model.output_pieces", model.output_pieces(), 0);
  if (model.output_pieces() > 1 && model.name() != "seq2seq_lstm" &&
      model.name() != "transformer") {
    check.Add("model.output_pieces",
              "applies to the sequence models only (seq2seq_lstm, transformer); 0 or 1 for \"" +
                  model.name() + "\"");
  }
  if (!model.init_from().empty() && config.mode() == kPipelineMode) {
    check.Add("model.init_from", "is not supported in mode \"pipeline\" (leave it empty)");
  }

  const DataConfig& data = config.data();
  check.OneOf("data.dataset", data.dataset(), kDatasets);
  if (data.path().empty()) check.Add("data.path", "must not be empty");
  check.IntAtLeast("data.synthetic_size", data.synthetic_size(), 1);

  const OptimizerConfig& optimizer = config.optimizer();
  check.OneOf("optimizer.name", optimizer.name(), kOptimizers);
  // The ranges are the optimizer's own (p3/core/optimizer.h), checked in one place.
  OptimizerOptions optimizer_options = OptimizerFromConfig(config);
  // An unknown schedule name is reported alone, not with its fields judged as "constant".
  if (!IsOneOf(optimizer.schedule().name(), kLrScheduleNames)) {
    optimizer_options.schedule = LrScheduleOptions();
  }
  const absl::Status optimizer_ranges = ValidateOptimizerOptions(optimizer_options);
  if (!optimizer_ranges.ok()) check.AddLines(std::string(optimizer_ranges.message()));
  if (optimizer.has_schedule()) {
    // The ranges are the schedule's own (p3/core/lr_schedule.h, through the optimizer's
    // validation above); here what only the config can tell: the name, and which
    // optional fields were given.
    const LrScheduleConfig& schedule = optimizer.schedule();
    check.OneOf("optimizer.schedule.name", schedule.name(), kLrScheduleNames);
    const bool uses_gamma = schedule.name() == "step" || schedule.name() == "multi_step" ||
                            schedule.name() == "exponential";
    if (schedule.name() == "exponential" && !schedule.has_gamma()) {
      check.Add("optimizer.schedule.gamma", "required for \"exponential\"");
    }
    if (schedule.has_gamma() && !uses_gamma && IsOneOf(schedule.name(), kLrScheduleNames)) {
      check.Add("optimizer.schedule.gamma",
                absl::StrCat("used only by \"step\", \"multi_step\", \"exponential\"; the "
                             "schedule is \"",
                             schedule.name(), "\""));
    }
    if (schedule.has_warmup_start_factor() && schedule.warmup_iterations() == 0) {
      check.Add("optimizer.schedule.warmup_start_factor",
                "used only with optimizer.schedule.warmup_iterations > 0");
    }
  }

  const TrainingConfig& training = config.training();
  check.IntAtLeast("training.batch_size", training.batch_size(), 1);
  check.IntAtLeast("training.epochs", training.epochs(), 1);
  check.IntAtLeast("training.iterations", training.iterations(), 0);
  check.IntAtLeast("training.warmup_iterations", training.warmup_iterations(), 0);
  check.IntAtLeast("training.log_every", training.log_every(), 1);
  check.IntAtLeast("training.threads", training.threads(), 0);
  // The device's index is checked where the worker runs (how many GPUs it sees).
  if (training.device() != "cpu" && training.device() != "cuda" &&
      !(absl::StartsWith(training.device(), "cuda:") && training.device().size() > 5 &&
        training.device().find_first_not_of("0123456789", 5) == std::string::npos)) {
    check.Add("training.device", absl::StrCat("\"", training.device(),
                                              "\" is not a device; allowed: cpu, cuda, cuda:<index>"));
  }
  check.OneOf("training.precision", training.precision(), kPrecisions);

  const CheckpointConfig& checkpoint = config.checkpoint();
  check.IntAtLeast("checkpoint.every", checkpoint.every(), 0);
  check.IntAtLeast("checkpoint.keep", checkpoint.keep(), 0);
  if (checkpoint.resume_iteration() < kResumeNewestCommon) {
    check.Add("checkpoint.resume_iteration",
              absl::StrCat(checkpoint.resume_iteration(),
                           " is out of range; allowed >= -1 (0: this server's newest, -1: the "
                           "newest that every server has)"));
  }
  if (checkpoint.resume_iteration() == kResumeNewestCommon &&
      (!checkpoint.resume() || checkpoint.dir().empty())) {
    check.Add("checkpoint.resume_iteration",
              "-1 (the newest checkpoint every server has) needs checkpoint.resume and "
              "checkpoint.dir");
  }

  const WorkerProgramConfig& worker = config.worker();
  if (worker.has_command()) {
    if (absl::StripAsciiWhitespace(worker.command()).empty()) {
      check.Add("worker.command",
                "is empty; give a shell command (e.g. \"python3 train.py\"), or leave the worker "
                "section out to run p3_worker");
    } else if (worker.command().find('\0') != std::string::npos) {
      check.Add("worker.command", "contains a NUL character, which no shell command can");
    }
    if (config.mode() == "local" || config.mode() == kPipelineMode) {
      check.Add("worker.command",
                absl::StrCat("needs servers for the program to train against; mode \"",
                             config.mode(),
                             "\" has none (allowed in every mode but \"local\" and \"pipeline\")"));
    }
  }

  const SchedulingConfig& scheduling = config.scheduling();
  if (scheduling.slice_params() < 0) {
    check.Add("scheduling.slice_params",
              absl::StrCat(scheduling.slice_params(),
                           " is out of range; allowed >= 0 (0: automatic, chosen by "
                           "launch_cluster with the simulator)"));
  }
  check.IntAtLeast("scheduling.split_threshold", scheduling.split_threshold(), 1);
  check.IntAtLeast("scheduling.max_message_params", scheduling.max_message_params(), 1);
  if (scheduling.credit_bytes() < kAutoCreditBytes) {
    check.Add("scheduling.credit_bytes",
              absl::StrCat(scheduling.credit_bytes(),
                           " is out of range; allowed >= -1 (0: one message at a time, -1: "
                           "automatic, chosen by launch_cluster with the simulator)"));
  }
  check.OneOf("scheduling.wire_dtype", scheduling.wire_dtype(), kWireDTypes);
  check.IntAtLeast("scheduling.owner_params", scheduling.owner_params(), 0);
  check.IntAtLeast("scheduling.pack_params", scheduling.pack_params(), 0);
  if (!(scheduling.stalled_write_s() >= 0) || std::isinf(scheduling.stalled_write_s())) {
    check.Add("scheduling.stalled_write_s",
              absl::StrCat("must be 0 (never) or a positive number of seconds, got ",
                           scheduling.stalled_write_s()));
  }
  if (scheduling.has_online_search() && scheduling.online_search()) {
    if (const std::string why = OnlineSearchRuledOutBy(config); !why.empty()) {
      check.Add("scheduling.online_search", why);
    }
  }


  // Fields left at zero / empty are checked only when the network is emulated (they are
  // then filled).
  const NetworkConfig& network = config.network();
  if (!(network.bandwidth_gbps() >= 0 && network.bandwidth_gbps() <= kMaxBandwidthGbps)) {
    check.Add("network.bandwidth_gbps",
              absl::StrCat(network.bandwidth_gbps(), " is out of range; allowed 0..",
                           kMaxBandwidthGbps, " (0: no emulation)"));
  }
  const bool emulated = network.bandwidth_gbps() > 0;
  if (emulated || !network.placement().empty()) {
    check.OneOf("network.placement", network.placement(), kPlacements);
  }
  if (emulated || network.machines() != 0) {
    check.IntRange("network.machines", network.machines(), 1, kMaxMachines);
    if (network.placement() == "separate" && network.machines() != DefaultMachineCount(config)) {
      check.Add("network.machines",
                absl::StrCat(network.machines(), " does not fit placement \"separate\"; allowed: ",
                             DefaultMachineCount(config),
                             " (cluster.workers + cluster.servers), or 0 for that default"));
    }
  }
  if (emulated || !network.subnet().empty()) {
    const std::string problem = SubnetProblem(network.subnet());
    if (!problem.empty()) check.Add("network.subnet", problem);
  }
  check.IntAtLeast("network.tbf_burst_bytes", network.tbf_burst_bytes(), 0);
  check.IntAtLeast("network.tcp_notsent_lowat", network.tcp_notsent_lowat(), 0);
  if (!network.congestion_control().empty()) {
    // Which names the host has is checked where the network is built (the launcher).
    check.Word("network.congestion_control", network.congestion_control(), "_",
               "a TCP congestion control name such as \"cubic\" or \"bbr\" (letters, digits, "
               "_), or empty for the host's");
  }
  if (emulated || network.tbf_latency_ms() != 0) {
    check.Positive("network.tbf_latency_ms", network.tbf_latency_ms());
  }
  if (emulated || network.check_seconds() != 0) {
    if (!(network.check_seconds() > 0 && network.check_seconds() <= 60)) {
      check.Add("network.check_seconds",
                absl::StrCat(network.check_seconds(), " is out of range; allowed (0, 60]"));
    }
  }

  if (config.mode() == kPipelineMode) {
    const PipelineConfig& pipeline = config.pipeline();
    check.OneOf("pipeline.weights", pipeline.weights(), kPipelineWeights);
    check.IntRange("pipeline.spectrain_version", pipeline.spectrain_version(), 1, 2);
    check.IntRange("pipeline.stages", pipeline.stages(), 1, kMaxProcesses);
    check.IntRange("pipeline.profile_batches", pipeline.profile_batches(), 1, 1000);
    check.IntAtLeast("pipeline.train_samples", pipeline.train_samples(), 0);
    check.OneOf("pipeline.schedule", pipeline.schedule(), kPipelineSchedules);
    check.IntRange("pipeline.microbatches", pipeline.microbatches(), 1,
                   std::max(1, config.training().batch_size()));
    if (pipeline.schedule() == "interleaved_1f1b") {
      if (pipeline.weights() != "vanilla") {
        check.Add("pipeline.weights",
                  absl::StrCat("\"", pipeline.weights(),
                               "\" does not combine with schedule \"interleaved_1f1b\": it "
                               "updates once per mini-batch after draining, so no weights are "
                               "stale (and data_parallel has no stages); allowed: \"vanilla\" "
                               "(the default under interleaved_1f1b)"));
      }
      check.IntRange("pipeline.chunks", pipeline.chunks(), 2, 64);
      if (pipeline.stages() > 0 && pipeline.microbatches() % pipeline.stages() != 0) {
        check.Add("pipeline.microbatches",
                  absl::StrCat(pipeline.microbatches(), " is not a multiple of pipeline.stages (",
                               pipeline.stages(),
                               "); interleaved_1f1b runs micro-batches in groups of one per "
                               "stage (as Megatron-LM)"));
      }
    } else if (pipeline.schedule() == "gpipe" && pipeline.weights() != "vanilla") {
      check.Add("pipeline.weights",
                absl::StrCat("\"", pipeline.weights(),
                             "\" does not combine with schedule \"gpipe\": GPipe updates once per "
                             "mini-batch after draining, so no weights are stale; allowed: "
                             "\"vanilla\" (the default under gpipe)"));
    }
    if (pipeline.schedule() != "interleaved_1f1b" && pipeline.chunks() != 1) {
      check.Add("pipeline.chunks",
                absl::StrCat(pipeline.chunks(), " with schedule \"", pipeline.schedule(),
                             "\"; allowed: 1 (model chunks need schedule \"interleaved_1f1b\")"));
    }
    if (pipeline.schedule() == "1f1b" && pipeline.microbatches() != 1) {
      check.Add("pipeline.microbatches",
                absl::StrCat(pipeline.microbatches(),
                             " with schedule \"1f1b\"; allowed: 1 (1F1B pipelines whole "
                             "mini-batches, one update each; micro-batches need schedule "
                             "\"gpipe\")"));
    }
    if (pipeline.recompute() && pipeline.weights() == "data_parallel") {
      check.Add("pipeline.recompute",
                "true does not combine with weights \"data_parallel\" (each replica's backward "
                "follows its forward at once: no kept activations to recompute); allowed with "
                "\"spectrain\", \"pipedream\", \"stale\", \"vanilla\"");
    }
    if (pipeline.devices_size() != 0 && pipeline.devices_size() != pipeline.stages()) {
      check.Add("pipeline.devices",
                absl::StrCat(pipeline.devices_size(), " devices for ", pipeline.stages(),
                             " stages; allowed: none (all \"cpu\") or one per stage"));
    }
    for (int i = 0; i < pipeline.devices_size(); ++i) {
      const std::string& device = pipeline.devices(i);
      int index = 0;
      if (device != "cpu" && device != "cuda" &&
          !(absl::StartsWith(device, "cuda:") && absl::SimpleAtoi(device.substr(5), &index) &&
            index >= 0)) {
        check.Add(absl::StrCat("pipeline.devices[", i, "]"),
                  absl::StrCat("\"", absl::CEscape(device),
                               "\" is not allowed; allowed: \"cpu\", \"cuda\", \"cuda:<index>\""));
      }
    }
    if (pipeline.boundaries_size() != 0) {
      if (pipeline.weights() == "data_parallel") {
        check.Add("pipeline.boundaries",
                  "data_parallel runs every block on every replica; "
                  "leave the boundaries out");
      } else if (pipeline.boundaries_size() != pipeline.stages() - 1) {
        check.Add("pipeline.boundaries",
                  absl::StrCat(pipeline.boundaries_size(), " boundaries for ", pipeline.stages(),
                               " stages; allowed: none (balanced) or stages - 1"));
      }
      for (int i = 0; i < pipeline.boundaries_size(); ++i) {
        const int64_t previous = i == 0 ? 0 : pipeline.boundaries(i - 1);
        if (pipeline.boundaries(i) <= previous) {
          check.Add(absl::StrCat("pipeline.boundaries[", i, "]"),
                    absl::StrCat(pipeline.boundaries(i), " is out of range; allowed > ", previous,
                                 " (strictly increasing block indices)"));
        }
      }
    }
    if (optimizer.name() != "sgd") {
      check.Add("optimizer.name", "mode \"pipeline\" supports only \"sgd\"");
    }
  }
  return check.status();
}

}  // namespace p3::config
