#include "proto/config_options.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace p3 {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& field, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(field, ": cannot read \"", path, "\""));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
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
  return o;
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
    absl::StatusOr<std::string> cert = ReadFile("security.tls_cert", c.tls_cert());
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadFile("security.tls_key", c.tls_key());
    if (!key.ok()) return key.status();
    s.cert_pem = *std::move(cert);
    s.key_pem = *std::move(key);
    if (!c.tls_ca().empty()) {
      absl::StatusOr<std::string> ca = ReadFile("security.tls_ca", c.tls_ca());
      if (!ca.ok()) return ca.status();
      s.ca_pem = *std::move(ca);
    }
    s.server_name = c.tls_server_name();
  }
  if (!c.token_file().empty()) {
    absl::StatusOr<std::string> token = ReadFile("security.token_file", c.token_file());
    if (!token.ok()) return token.status();
    s.token = *std::move(token);
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
