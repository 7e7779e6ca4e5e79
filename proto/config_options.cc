#include "proto/config_options.h"

#include "absl/strings/str_cat.h"
#include "p3/base/file_util.h"
#include "p3/base/status_macros.h"

namespace p3 {
namespace {

// The file named by config field `field`; errors name the field, then the file.
absl::StatusOr<std::string> ReadFile(const std::string& field, const std::string& path) {
  absl::StatusOr<std::string> contents = p3::ReadFile(path);
  if (!contents.ok()) {
    return absl::Status(contents.status().code(),
                        absl::StrCat(field, ": ", contents.status().message()));
  }
  return contents;
}

}  // namespace

OptimizerOptions OptimizerFromConfig(const config::ExperimentConfig& config) {
  const config::OptimizerConfig& c = config.optimizer();
  OptimizerOptions o;
  o.kind = c.name() == "adam" ? OptimizerKind::kAdam : OptimizerKind::kSgd;
  o.lr = c.lr();
  o.momentum = c.momentum();
  o.weight_decay = c.weight_decay();
  o.nesterov = c.nesterov();
  o.beta1 = c.beta1();
  o.beta2 = c.beta2();
  o.eps = c.eps();
  if (c.has_schedule()) {
    const config::LrScheduleConfig& sc = c.schedule();
    // An unknown name stays constant here; the validator names it.
    for (size_t k = 0; k < kLrScheduleNames.size(); ++k) {
      if (sc.name() == kLrScheduleNames[k]) o.schedule.kind = static_cast<LrScheduleKind>(k);
    }
    o.schedule.step_size = sc.step_size();
    o.schedule.milestones.assign(sc.milestones().begin(), sc.milestones().end());
    if (sc.has_gamma()) o.schedule.gamma = sc.gamma();
    o.schedule.t_max = sc.t_max();
    o.schedule.eta_min = sc.eta_min();
    o.schedule.warmup_iterations = sc.warmup_iterations();
    if (sc.has_warmup_start_factor()) o.schedule.warmup_start_factor = sc.warmup_start_factor();
  }
  return o;
}

std::string ModelFileFromConfig(const config::ExperimentConfig& config) {
  if (!config.output().save_model()) return "";
  if (!config.output().model_file().empty()) return config.output().model_file();
  return config.output_dir() + "/model.pt";
}

absl::StatusOr<SecuritySettings> SecurityFromConfig(const config::ExperimentConfig& config) {
  const config::SecurityConfig& c = config.security();
  SecuritySettings s;
  if (c.tls_cert().empty() != c.tls_key().empty()) {
    return absl::InvalidArgumentError(
        "security.tls_cert, security.tls_key: give both (TLS) or neither (plaintext)");
  }
  s.tls = !c.tls_cert().empty();
  if (s.tls) {
    P3_ASSIGN_OR_RETURN(s.cert_pem, ReadFile("security.tls_cert", c.tls_cert()));
    P3_ASSIGN_OR_RETURN(s.key_pem, ReadFile("security.tls_key", c.tls_key()));
    if (!c.tls_ca().empty()) {
      P3_ASSIGN_OR_RETURN(s.ca_pem, ReadFile("security.tls_ca", c.tls_ca()));
    }
    s.server_name = c.tls_server_name();
  }
  if (!c.token_file().empty()) {
    P3_ASSIGN_OR_RETURN(s.token, ReadFile("security.token_file", c.token_file()));
    while (!s.token.empty() && (s.token.back() == '\n' || s.token.back() == '\r')) {
      s.token.pop_back();
    }
    if (s.token.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("security.token_file: \"", c.token_file(), "\" is empty"));
    }
  }
  return s;
}

}  // namespace p3
