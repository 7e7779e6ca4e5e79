#include "tools/config.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/text_format.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace p3::config {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using google::protobuf::TextFormat;

// Defaults, as documented in proto/config.proto and docs/config.md.
constexpr int kDefaultWorkers = 2;
constexpr int kDefaultServers = 2;
constexpr char kDefaultHost[] = "127.0.0.1";
constexpr double kDefaultPeerTimeoutS = 60;
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
constexpr double kMaxBandwidthGbps = 100;
constexpr int kMaxMachines = 2 * kMaxProcesses;
constexpr char kDefaultPipelineWeights[] = "spectrain";
constexpr int kDefaultSpecTrainVersion = 1;
constexpr int kDefaultPipelineStages = 2;
constexpr int kDefaultProfileBatches = 3;

// Keeps the parser's errors; the text-format parser stops at its first error, but a
// tokenizer error may precede it.
class CollectingErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  struct Error {
    int line;    // 0-based.
    int column;  // 0-based.
    std::string message;
  };

  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    errors_.push_back({line, column, message});
  }

  const std::vector<Error>& errors() const { return errors_; }

 private:
  std::vector<Error> errors_;
};

class SilentErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
};

// Comma-separated names of the fields of `descriptor`, in declaration order.
std::string FieldNames(const Descriptor& descriptor) {
  std::vector<std::string> names;
  for (int i = 0; i < descriptor.field_count(); ++i) {
    names.push_back(descriptor.field(i)->name());
  }
  return absl::StrJoin(names, ", ");
}

// The message type reached by following `path` (field names) from `root`, or null when
// a component is unknown or not a message.
const Descriptor* DescriptorAt(const Descriptor* root, const std::vector<std::string>& path) {
  const Descriptor* descriptor = root;
  for (const std::string& name : path) {
    const FieldDescriptor* field = descriptor->FindFieldByName(name);
    if (field == nullptr || field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) {
      return nullptr;
    }
    descriptor = field->message_type();
  }
  return descriptor;
}

struct FieldAtPosition {
  std::vector<std::string> path;  // Field names from the root.
  int name_line = -1;             // Where the last name of `path` starts, 0-based.
  int name_column = -1;
};

// The dotted path of the field that the text-format parser was reading when it stopped
// at (line, column), 0-based: the enclosing message fields plus the name of the field
// whose name or value was being read. Best effort: it follows the token structure of
// text format, which is all that is needed to name the field in an error message.
FieldAtPosition FieldPathAt(const std::string& text, int line, int column) {
  google::protobuf::io::ArrayInputStream input(text.data(), static_cast<int>(text.size()));
  SilentErrorCollector silent;
  google::protobuf::io::Tokenizer tokenizer(&input, &silent);
  using Tokenizer = google::protobuf::io::Tokenizer;

  std::vector<std::string> stack;
  std::string name;
  int name_line = -1;
  int name_column = -1;
  bool expecting_name = true;
  int list_depth = 0;
  while (tokenizer.Next()) {
    const Tokenizer::Token& token = tokenizer.current();
    if (token.line > line || (token.line == line && token.column >= column)) break;
    switch (token.type) {
      case Tokenizer::TYPE_IDENTIFIER:
        if (expecting_name && list_depth == 0) {
          name = token.text;
          name_line = token.line;
          name_column = token.column;
          expecting_name = false;
        } else if (list_depth == 0) {
          expecting_name = true;  // An identifier value: true, an enum, inf.
        }
        break;
      case Tokenizer::TYPE_INTEGER:
      case Tokenizer::TYPE_FLOAT:
      case Tokenizer::TYPE_STRING:
        if (list_depth == 0) expecting_name = true;
        break;
      case Tokenizer::TYPE_SYMBOL:
        if (token.text == "{" || token.text == "<") {
          stack.push_back(name);
          name.clear();
          expecting_name = true;
        } else if (token.text == "}" || token.text == ">") {
          if (!stack.empty()) {
            name = stack.back();
            stack.pop_back();
          }
          expecting_name = true;
        } else if (token.text == "[") {
          ++list_depth;
        } else if (token.text == "]") {
          if (list_depth > 0) --list_depth;
          expecting_name = list_depth == 0;
        }
        break;
      default:
        break;
    }
  }
  FieldAtPosition result;
  result.path = std::move(stack);
  if (!name.empty() && !expecting_name) {
    result.path.push_back(name);
    result.name_line = name_line;
    result.name_column = name_column;
  }
  return result;
}

// Rewrites one parser error into "<line>:<column>: <field path>: <what is wrong>".
std::string DescribeParseError(const std::string& text,
                               const CollectingErrorCollector::Error& error) {
  const FieldAtPosition field = FieldPathAt(text, error.line, error.column);
  const std::vector<std::string>& path = field.path;
  const std::string dotted = absl::StrJoin(path, ".");

  // "Message type "p3.config.TrainingConfig" has no field named "batch_sizee"." The
  // parser reports it at the token after the name; point at the name instead.
  if (absl::StrContains(error.message, "has no field named")) {
    const bool at_name = field.name_line >= 0;
    const std::string location =
        absl::StrCat((at_name ? field.name_line : error.line) + 1, ":",
                     (at_name ? field.name_column : error.column) + 1, ": ");
    std::vector<std::string> parent(path.begin(), path.empty() ? path.end() : path.end() - 1);
    const Descriptor* descriptor = DescriptorAt(ExperimentConfig::descriptor(), parent);
    if (descriptor != nullptr) {
      return absl::StrCat(location, dotted.empty() ? "" : dotted + ": ", "unknown field; allowed",
                          parent.empty() ? "" : absl::StrCat(" in ", absl::StrJoin(parent, ".")),
                          ": ", FieldNames(*descriptor));
    }
  }
  const std::string location = absl::StrCat(error.line + 1, ":", error.column + 1, ": ");
  std::string message = error.message;
  if (absl::EndsWith(message, "got: ")) message += "end of input";
  return absl::StrCat(location, dotted.empty() ? "" : dotted + ": ", message);
}

// Parses `text` into `config` (merging), turning parser errors into a Status.
absl::Status ParseText(const std::string& text, ExperimentConfig* config) {
  CollectingErrorCollector errors;
  TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (parser.ParseFromString(text, config)) return absl::OkStatus();
  if (errors.errors().empty()) {
    return absl::InvalidArgumentError("the config is not valid text format");
  }
  std::vector<std::string> messages;
  for (const CollectingErrorCollector::Error& error : errors.errors()) {
    messages.push_back(DescribeParseError(text, error));
  }
  return absl::InvalidArgumentError(absl::StrJoin(messages, "\n"));
}

std::string QuotedList(const char* const* begin, const char* const* end) {
  std::vector<std::string> quoted;
  for (const char* const* it = begin; it != end; ++it)
    quoted.push_back(absl::StrCat("\"", *it, "\""));
  return absl::StrJoin(quoted, ", ");
}

template <size_t N>
bool IsOneOf(const std::string& value, const char* const (&allowed)[N]) {
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
  template <size_t N>
  void OneOf(const std::string& field, const std::string& value, const char* const (&allowed)[N]) {
    if (!IsOneOf(value, allowed)) {
      Add(field, absl::StrCat("\"", absl::CEscape(value), "\" is not allowed; allowed: ",
                              QuotedList(std::begin(allowed), std::end(allowed))));
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

absl::StatusOr<ExperimentConfig> LoadConfig(const std::string& path,
                                            const std::vector<std::string>& overrides) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    const int error = errno;
    const std::string message =
        absl::StrCat(path, ": cannot open the config file: ", std::strerror(error));
    if (error == EACCES) return absl::PermissionDeniedError(message);
    return absl::NotFoundError(message);
  }
  std::stringstream contents;
  contents << file.rdbuf();
  if (file.bad()) return absl::DataLossError(absl::StrCat(path, ": read error"));
  absl::StatusOr<ExperimentConfig> config = ParseConfig(contents.str(), overrides);
  if (!config.ok()) {
    // "path:3:5: ..." for syntax errors (as compilers print them), "path: field: ..." else.
    std::vector<std::string> lines;
    for (absl::string_view line : absl::StrSplit(config.status().message(), '\n')) {
      const bool located =
          !line.empty() && absl::ascii_isdigit(static_cast<unsigned char>(line[0]));
      lines.push_back(absl::StrCat(path, located ? ":" : ": ", line));
    }
    return absl::Status(config.status().code(), absl::StrJoin(lines, "\n"));
  }
  return config;
}

absl::StatusOr<ExperimentConfig> ParseConfig(const std::string& text,
                                             const std::vector<std::string>& overrides) {
  ExperimentConfig config;
  absl::Status status = ParseText(text, &config);
  if (!status.ok()) return status;
  for (const std::string& override_text : overrides) {
    status = ApplyOverride(override_text, &config);
    if (!status.ok()) return status;
  }
  FillDefaults(&config);
  status = ValidateConfig(config);
  if (!status.ok()) return status;
  return config;
}

absl::Status ApplyOverride(const std::string& override_text, ExperimentConfig* config) {
  const std::string context = absl::StrCat("override '", override_text, "'");
  const size_t equals = override_text.find('=');
  if (equals == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(context, ": expected field.path=value, e.g. training.batch_size=64"));
  }
  const std::string path(absl::StripAsciiWhitespace(override_text.substr(0, equals)));
  std::string value(absl::StripAsciiWhitespace(override_text.substr(equals + 1)));

  std::vector<std::string> names;
  for (absl::string_view part : absl::StrSplit(path, '.')) names.emplace_back(part);

  Message* message = config;
  std::string walked;  // Dotted path of `message` from the root.
  for (size_t i = 0; i < names.size(); ++i) {
    const Descriptor* descriptor = message->GetDescriptor();
    const std::string field_path = walked.empty() ? names[i] : walked + "." + names[i];
    const FieldDescriptor* field = descriptor->FindFieldByName(names[i]);
    if (field == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(context, ": ", field_path, ": unknown field; allowed",
                       walked.empty() ? "" : " in " + walked, ": ", FieldNames(*descriptor)));
    }
    if (field->is_repeated()) {
      return absl::InvalidArgumentError(absl::StrCat(
          context, ": ", field_path, " is a repeated field; overrides set single fields"));
    }
    const bool last = i + 1 == names.size();
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (last) {
        return absl::InvalidArgumentError(absl::StrCat(
            context, ": ", field_path, " is a message; set one of its fields (", field_path,
            ".<field>=value); allowed: ", FieldNames(*field->message_type())));
      }
      message = message->GetReflection()->MutableMessage(message, field);
      walked = field_path;
      continue;
    }
    if (!last) {
      return absl::InvalidArgumentError(
          absl::StrCat(context, ": ", field_path, " is a ", field->type_name(),
                       ", not a message; it has no field \"", names[i + 1], "\""));
    }
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_STRING &&
        !(value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
          value.back() == value.front())) {
      value = absl::StrCat("\"", absl::CEscape(value), "\"");
    }
    CollectingErrorCollector errors;
    TextFormat::Parser parser;
    parser.RecordErrorsTo(&errors);
    if (!parser.ParseFieldValueFromString(value, field, message)) {
      const std::string reason =
          errors.errors().empty() ? "cannot parse the value" : errors.errors().front().message;
      return absl::InvalidArgumentError(
          absl::StrCat(context, ": ", field_path, " (", field->type_name(), "): ", reason));
    }
  }
  return absl::OkStatus();
}

void FillDefaults(ExperimentConfig* config) {
  if (config->name().empty()) config->set_name(kDefaultName);
  if (config->mode().empty()) config->set_mode("p3");
  if (config->output_dir().empty()) config->set_output_dir("out/" + config->name());

  ClusterConfig* cluster = config->mutable_cluster();
  if (cluster->workers() == 0) cluster->set_workers(kDefaultWorkers);
  if (cluster->servers() == 0) cluster->set_servers(kDefaultServers);
  if (cluster->host().empty()) cluster->set_host(kDefaultHost);
  if (cluster->peer_timeout_s() == 0) cluster->set_peer_timeout_s(kDefaultPeerTimeoutS);

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

  SchedulingConfig* scheduling = config->mutable_scheduling();
  if (scheduling->slice_params() == 0) scheduling->set_slice_params(kDefaultSliceParams);
  if (scheduling->split_threshold() == 0) {
    scheduling->set_split_threshold(kDefaultSplitThreshold);
  }
  if (scheduling->max_message_params() == 0) {
    scheduling->set_max_message_params(kDefaultMaxMessageParams);
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
  if (config->mode() == "pipeline") {
    PipelineConfig* pipeline = config->mutable_pipeline();
    if (pipeline->weights().empty()) pipeline->set_weights(kDefaultPipelineWeights);
    if (pipeline->spectrain_version() == 0) {
      pipeline->set_spectrain_version(kDefaultSpecTrainVersion);
    }
    if (pipeline->stages() == 0) pipeline->set_stages(kDefaultPipelineStages);
    if (pipeline->profile_batches() == 0) pipeline->set_profile_batches(kDefaultProfileBatches);
  }
}

absl::Status ValidateConfig(const ExperimentConfig& config) {
  Checker check;
  check.Word("name", config.name(), "_-.", "letters, digits, '_', '-', '.'");
  check.OneOf("mode", config.mode(), kModes);
  if (config.output_dir().empty()) check.Add("output_dir", "must not be empty");

  const ClusterConfig& cluster = config.cluster();
  check.IntRange("cluster.workers", cluster.workers(), 1, kMaxProcesses);
  check.IntRange("cluster.servers", cluster.servers(), 1, kMaxProcesses);
  check.Word("cluster.host", cluster.host(), "_-.:", "a host name or IP address");
  check.Positive("cluster.peer_timeout_s", cluster.peer_timeout_s());

  const ModelConfig& model = config.model();
  check.Word("model.name", model.name(), "_", "a model name of the zoo (letters, digits, '_')");
  check.IntAtLeast("model.num_classes", model.num_classes(), 2);
  check.IntAtLeast("model.image_size", model.image_size(), 0);
  check.IntAtLeast("model.in_channels", model.in_channels(), 0);
  check.IntAtLeast("model.vocab_size", model.vocab_size(), 0);
  check.IntAtLeast("model.seq_len", model.seq_len(), 0);

  const DataConfig& data = config.data();
  check.OneOf("data.dataset", data.dataset(), kDatasets);
  if (data.path().empty()) check.Add("data.path", "must not be empty");
  check.IntAtLeast("data.synthetic_size", data.synthetic_size(), 1);

  const OptimizerConfig& optimizer = config.optimizer();
  check.OneOf("optimizer.name", optimizer.name(), kOptimizers);
  check.Positive("optimizer.lr", optimizer.lr());
  check.UnitInterval("optimizer.momentum", optimizer.momentum());
  check.NonNegative("optimizer.weight_decay", optimizer.weight_decay());
  if (optimizer.nesterov() && (optimizer.name() != "sgd" || !(optimizer.momentum() > 0))) {
    check.Add("optimizer.nesterov",
              "true requires optimizer.name \"sgd\" and optimizer.momentum > 0");
  }
  check.UnitInterval("optimizer.beta1", optimizer.beta1());
  check.UnitInterval("optimizer.beta2", optimizer.beta2());
  check.Positive("optimizer.eps", optimizer.eps());

  const TrainingConfig& training = config.training();
  check.IntAtLeast("training.batch_size", training.batch_size(), 1);
  check.IntAtLeast("training.epochs", training.epochs(), 1);
  check.IntAtLeast("training.iterations", training.iterations(), 0);
  check.IntAtLeast("training.warmup_iterations", training.warmup_iterations(), 0);
  check.IntAtLeast("training.log_every", training.log_every(), 1);
  check.IntAtLeast("training.threads", training.threads(), 0);

  const SchedulingConfig& scheduling = config.scheduling();
  check.IntAtLeast("scheduling.slice_params", scheduling.slice_params(), 1);
  check.IntAtLeast("scheduling.split_threshold", scheduling.split_threshold(), 1);
  check.IntAtLeast("scheduling.max_message_params", scheduling.max_message_params(), 1);

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
  if (emulated || network.tbf_latency_ms() != 0) {
    check.Positive("network.tbf_latency_ms", network.tbf_latency_ms());
  }
  if (emulated || network.check_seconds() != 0) {
    if (!(network.check_seconds() > 0 && network.check_seconds() <= 60)) {
      check.Add("network.check_seconds",
                absl::StrCat(network.check_seconds(), " is out of range; allowed (0, 60]"));
    }
  }

  if (config.mode() == "pipeline") {
    const PipelineConfig& pipeline = config.pipeline();
    check.OneOf("pipeline.weights", pipeline.weights(), kPipelineWeights);
    check.IntRange("pipeline.spectrain_version", pipeline.spectrain_version(), 1, 2);
    check.IntRange("pipeline.stages", pipeline.stages(), 1, kMaxProcesses);
    check.IntRange("pipeline.profile_batches", pipeline.profile_batches(), 1, 1000);
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
        check.Add("pipeline.boundaries", "data_parallel runs every block on every replica; "
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

std::string ConfigToText(const ExperimentConfig& config) {
  std::string text;
  TextFormat::Printer printer;
  printer.PrintToString(config, &text);
  return text;
}

int64_t GlobalBatchSize(const ExperimentConfig& config) {
  return static_cast<int64_t>(config.training().batch_size()) * config.cluster().workers();
}

int DefaultMachineCount(const ExperimentConfig& config) {
  const int workers = config.cluster().workers();
  const int servers = config.cluster().servers();
  return config.network().placement() == "separate" ? workers + servers
                                                    : std::max(workers, servers);
}

int MachineCount(const ExperimentConfig& config) {
  return config.network().machines() > 0 ? config.network().machines()
                                         : DefaultMachineCount(config);
}

int WorkerMachine(const ExperimentConfig& config, int rank, int machines) {
  return machines > 0 ? rank % machines : 0;
}

int ServerMachine(const ExperimentConfig& config, int index, int machines) {
  if (machines <= 0) return 0;
  const int first = config.network().placement() == "separate" ? config.cluster().workers() : 0;
  return (first + index) % machines;
}

bool NetworkEmulated(const ExperimentConfig& config) {
  return config.network().bandwidth_gbps() > 0 && ServerProcessCount(config) > 0;
}

int ServerProcessCount(const ExperimentConfig& config) {
  return config.mode() == "local" ? 0 : config.cluster().servers();
}

int WorkerProcessCount(const ExperimentConfig& config) {
  return config.mode() == "local" ? 1 : config.cluster().workers();
}

std::vector<std::string> TakeOverrideFlags(int* argc, char** argv) {
  std::vector<std::string> overrides;
  int kept = 1;
  for (int i = 1; i < *argc; ++i) {
    const absl::string_view arg = argv[i];
    if (absl::StartsWith(arg, "--set=")) {
      overrides.emplace_back(arg.substr(6));
    } else {
      argv[kept++] = argv[i];
    }
  }
  *argc = kept;
  return overrides;
}

}  // namespace p3::config
