#include "proto/config_options.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/status/status.h"

namespace p3 {
namespace {

std::string TempFile(const std::string& name, const std::string& contents) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

bool Contains(const absl::Status& s, const std::string& text) {
  return std::string(s.message()).find(text) != std::string::npos;
}

CATCH_TEST_CASE("the model file is <output_dir>/model.pt unless named, none when not saved") {
  config::ExperimentConfig config;
  config.set_output_dir("out/x");
  config.mutable_output()->set_save_model(true);
  CATCH_CHECK(ModelFileFromConfig(config) == "out/x/model.pt");
  config.mutable_output()->set_model_file("/models/final.pt");
  CATCH_CHECK(ModelFileFromConfig(config) == "/models/final.pt");
  config.mutable_output()->set_save_model(false);
  CATCH_CHECK(ModelFileFromConfig(config).empty());
}

CATCH_TEST_CASE("the optimizer options are the config's optimizer fields") {
  config::ExperimentConfig config;
  config::OptimizerConfig* o = config.mutable_optimizer();
  o->set_name("sgd");
  o->set_lr(0.25);
  o->set_momentum(0.5);
  o->set_weight_decay(0.003);
  o->set_nesterov(true);
  o->set_beta1(0.8);
  o->set_beta2(0.99);
  o->set_eps(1e-6);
  OptimizerOptions got = OptimizerFromConfig(config);
  CATCH_CHECK(got.kind == OptimizerKind::kSgd);
  CATCH_CHECK(got.lr == 0.25);
  CATCH_CHECK(got.momentum == 0.5);
  CATCH_CHECK(got.weight_decay == 0.003);
  CATCH_CHECK(got.nesterov);
  CATCH_CHECK(got.beta1 == 0.8);
  CATCH_CHECK(got.beta2 == 0.99);
  CATCH_CHECK(got.eps == 1e-6);
  // The config has no dampening: libtorch's default.
  CATCH_CHECK(got.dampening == 0.0);

  o->set_name("adam");
  o->set_nesterov(false);
  got = OptimizerFromConfig(config);
  CATCH_CHECK(got.kind == OptimizerKind::kAdam);
  CATCH_CHECK_FALSE(got.nesterov);
  CATCH_CHECK(ValidateOptimizerOptions(got).ok());
}

CATCH_TEST_CASE("no security settings: plaintext and no token") {
  config::ExperimentConfig config;
  absl::StatusOr<SecuritySettings> s = SecurityFromConfig(config);
  CATCH_REQUIRE(s.ok());
  CATCH_CHECK_FALSE(s->tls);
  CATCH_CHECK(s->cert_pem.empty());
  CATCH_CHECK(s->token.empty());
}

CATCH_TEST_CASE("the security settings hold the contents of the files the config names") {
  config::ExperimentConfig config;
  config::SecurityConfig* sec = config.mutable_security();
  sec->set_tls_cert(TempFile("cert.pem", "CERT"));
  sec->set_tls_key(TempFile("key.pem", "KEY"));
  sec->set_tls_ca(TempFile("ca.pem", "CA"));
  sec->set_tls_server_name("p3-server");
  sec->set_token_file(TempFile("token", "s3cret\r\n"));
  absl::StatusOr<SecuritySettings> s = SecurityFromConfig(config);
  CATCH_REQUIRE(s.ok());
  CATCH_CHECK(s->tls);
  CATCH_CHECK(s->cert_pem == "CERT");
  CATCH_CHECK(s->key_pem == "KEY");
  CATCH_CHECK(s->ca_pem == "CA");
  CATCH_CHECK(s->server_name == "p3-server");
  CATCH_CHECK(s->token == "s3cret");  // the line ending is not part of the token
}

CATCH_TEST_CASE("a security file that cannot be read is NotFound naming the field and file") {
  const std::string missing = TempFile("unused", "") + ".missing";
  struct Case {
    const char* field;
    void (config::SecurityConfig::*set)(const std::string&);
  };
  for (const Case& c : {Case{"security.tls_cert", &config::SecurityConfig::set_tls_cert},
                        Case{"security.tls_key", &config::SecurityConfig::set_tls_key},
                        Case{"security.tls_ca", &config::SecurityConfig::set_tls_ca},
                        Case{"security.token_file", &config::SecurityConfig::set_token_file}}) {
    CATCH_CAPTURE(c.field);
    config::ExperimentConfig config;
    config::SecurityConfig* sec = config.mutable_security();
    sec->set_tls_cert(TempFile("cert.pem", "CERT"));
    sec->set_tls_key(TempFile("key.pem", "KEY"));
    (sec->*c.set)(missing);
    absl::StatusOr<SecuritySettings> s = SecurityFromConfig(config);
    CATCH_REQUIRE_FALSE(s.ok());
    CATCH_CHECK(s.status().code() == absl::StatusCode::kNotFound);
    CATCH_CHECK(Contains(s.status(), c.field));
    CATCH_CHECK(Contains(s.status(), missing));
  }
}

CATCH_TEST_CASE("half a TLS setting or an empty token is refused naming the fields") {
  config::ExperimentConfig config;
  config.mutable_security()->set_tls_cert(TempFile("cert.pem", "CERT"));
  absl::StatusOr<SecuritySettings> s = SecurityFromConfig(config);
  CATCH_REQUIRE_FALSE(s.ok());
  CATCH_CHECK(s.status().code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(Contains(s.status(), "security.tls_key"));

  config.Clear();
  config.mutable_security()->set_token_file(TempFile("empty_token", "\n"));
  s = SecurityFromConfig(config);
  CATCH_REQUIRE_FALSE(s.ok());
  CATCH_CHECK(s.status().code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(Contains(s.status(), "security.token_file"));
}

}  // namespace
}  // namespace p3
