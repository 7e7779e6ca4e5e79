#include "proto/config_options.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

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

CATCH_TEST_CASE("the schedule options are the config's schedule fields") {
  config::ExperimentConfig config;
  CATCH_CHECK(OptimizerFromConfig(config).schedule.kind == LrScheduleKind::kConstant);
  config::LrScheduleConfig* s = config.mutable_optimizer()->mutable_schedule();
  s->set_name("multi_step");
  s->add_milestones(10);
  s->add_milestones(20);
  s->set_gamma(0.5);
  s->set_warmup_iterations(7);
  s->set_warmup_start_factor(0.2);
  LrScheduleOptions got = OptimizerFromConfig(config).schedule;
  CATCH_CHECK(got.kind == LrScheduleKind::kMultiStep);
  CATCH_CHECK(got.milestones == std::vector<int64_t>{10, 20});
  CATCH_CHECK(got.gamma == 0.5);
  CATCH_CHECK(got.warmup_iterations == 7);
  CATCH_CHECK(got.warmup_start_factor == 0.2);
  s->Clear();
  s->set_name("cosine");
  s->set_t_max(937);
  s->set_eta_min(1e-4);
  got = OptimizerFromConfig(config).schedule;
  CATCH_CHECK(got.kind == LrScheduleKind::kCosine);
  CATCH_CHECK(got.t_max == 937);
  CATCH_CHECK(got.eta_min == 1e-4);
  CATCH_CHECK(got.milestones.empty());
  s->set_name("step");
  s->set_step_size(3);
  CATCH_CHECK(OptimizerFromConfig(config).schedule.step_size == 3);
  s->set_name("exponential");
  CATCH_CHECK(OptimizerFromConfig(config).schedule.kind == LrScheduleKind::kExponential);
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
