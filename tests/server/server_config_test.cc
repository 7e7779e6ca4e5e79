#include "server/server_config.h"

#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "p3/base/file_util.h"
#include "p3/core/checkpoint.h"
#include "proto/config.h"
#include "tests/testing/temp_dir.h"

namespace p3 {
namespace {

config::ExperimentConfig Config(const std::string& text) {
  absl::StatusOr<config::ExperimentConfig> config = config::ParseConfig(text, {});
  CATCH_REQUIRE(config.ok());
  return *config;
}

ShardCheckpoint Checkpoint(int server, uint64_t iteration) {
  ShardCheckpoint c;
  c.server_index = server;
  c.iteration = iteration;
  c.slices.push_back({.slice_id = 0, .params = {1.0f, 2.0f}});
  return c;
}

CATCH_TEST_CASE("a server's options are the config's cluster, optimizer and scheduling fields") {
  const config::ExperimentConfig config = Config(
      "cluster { workers: 3 servers: 2 host: \"10.0.0.7\" peer_timeout_s: 7 stall_report_s: 0 "
      "rejoin_timeout_s: 30 }\n"
      "optimizer { name: \"adam\" lr: 0.002 }\n"
      "scheduling { max_message_params: 4096 credit_bytes: 65536 shared_memory: false "
      "wire_dtype: \"bfloat16\" }\n");
  absl::StatusOr<ServerOptions> options =
      ServerOptionsFromConfig(config, {.index = 1, .port = 4001});
  CATCH_REQUIRE(options.ok());
  CATCH_CHECK(options->address == "10.0.0.7:4001");
  CATCH_CHECK(options->shard.server_index == 1);
  CATCH_CHECK(options->shard.num_workers == 3);
  CATCH_CHECK(options->shard.optimizer.kind == OptimizerKind::kAdam);
  CATCH_CHECK(options->shard.optimizer.lr == 0.002);
  CATCH_CHECK(options->shard.wire_dtype == WireDType::kBFloat16);
  CATCH_CHECK(options->peer_timeout == absl::Seconds(7));
  CATCH_CHECK(options->stall_report == absl::ZeroDuration());
  CATCH_CHECK(options->rejoin_timeout == absl::Seconds(30));
  CATCH_CHECK(options->max_message_params == 4096);
  CATCH_CHECK(options->credit_bytes == 65536);
  CATCH_CHECK(!options->shared_memory);
  CATCH_CHECK(options->tls_cert_pem.empty());
  CATCH_CHECK(options->token.empty());
  CATCH_CHECK(options->shard.checkpoint_every == 0);
  CATCH_CHECK(!options->shard.on_checkpoint);
  CATCH_CHECK(!options->shard.restore.has_value());
  CATCH_CHECK(options->trace == nullptr);
}

CATCH_TEST_CASE("an IPv6 host is bracketed; an automatic credit nobody resolved is 0") {
  const config::ExperimentConfig config =
      Config("cluster { host: \"::1\" } scheduling { credit_bytes: -1 }");
  absl::StatusOr<ServerOptions> options = ServerOptionsFromConfig(config, {.port = 0});
  CATCH_REQUIRE(options.ok());
  CATCH_CHECK(options->address == "[::1]:0");
  CATCH_CHECK(options->credit_bytes == 0);
}

CATCH_TEST_CASE("a server index outside the cluster is refused with the number of servers") {
  const config::ExperimentConfig config = Config("cluster { servers: 2 }");
  for (int index : {-1, 2}) {
    const absl::StatusOr<ServerOptions> options =
        ServerOptionsFromConfig(config, {.index = index});
    CATCH_CHECK(absl::IsInvalidArgument(options.status()));
    CATCH_CHECK(options.status().message() ==
                absl::StrCat("server index ", index, " is out of range for 2 servers"));
  }
}

CATCH_TEST_CASE("the token is read from its file; a missing file is named by its field") {
  const std::string dir = testing::FreshDir("server_config_token");
  CATCH_REQUIRE(WriteFileAtomically(dir + "/token", "s3cret\n").ok());
  absl::StatusOr<ServerOptions> options = ServerOptionsFromConfig(
      Config(absl::StrCat("security { token_file: \"", dir, "/token\" }")), {});
  CATCH_REQUIRE(options.ok());
  CATCH_CHECK(options->token == "s3cret");

  const absl::StatusOr<ServerOptions> missing = ServerOptionsFromConfig(
      Config(absl::StrCat("security { token_file: \"", dir, "/none\" }")), {});
  CATCH_CHECK(absl::IsNotFound(missing.status()));
  CATCH_CHECK(absl::StartsWith(missing.status().message(), "security.token_file: "));
}

CATCH_TEST_CASE("checkpoints go to <dir>/server_<index>, keeping checkpoint.keep, and are said") {
  const std::string dir = testing::FreshDir("server_config_ckpt");
  std::ostringstream out, err;
  absl::StatusOr<ServerOptions> options = ServerOptionsFromConfig(
      Config(absl::StrCat("checkpoint { dir: \"", dir, "\" every: 5 }")),
      {.index = 1, .out = &out, .err = &err});
  CATCH_REQUIRE(options.ok());
  CATCH_CHECK(options->shard.checkpoint_every == 5);
  CATCH_REQUIRE(options->shard.on_checkpoint);
  for (uint64_t it : {5, 10, 15}) options->shard.on_checkpoint(Checkpoint(1, it));
  CATCH_CHECK(out.str() ==
              "p3_server 1: checkpoint of iteration 5 saved\n"
              "p3_server 1: checkpoint of iteration 10 saved\n"
              "p3_server 1: checkpoint of iteration 15 saved\n");
  CATCH_CHECK(err.str().empty());
  // The default keep is 2: iteration 5's file is gone.
  CATCH_CHECK(ReadLatestCheckpoint(dir + "/server_1", 15).ok());
  CATCH_CHECK(ReadLatestCheckpoint(dir + "/server_1", 10).ok());
  CATCH_CHECK(absl::IsNotFound(ReadLatestCheckpoint(dir + "/server_1", 5).status()));
}

CATCH_TEST_CASE("a checkpoint that cannot be written is said on err, and training goes on") {
  const std::string dir = testing::FreshDir("server_config_ckpt_fail");
  // A file where the server's folder should be.
  CATCH_REQUIRE(WriteFileAtomically(dir + "/server_0", "not a folder").ok());
  std::ostringstream out, err;
  absl::StatusOr<ServerOptions> options = ServerOptionsFromConfig(
      Config(absl::StrCat("checkpoint { dir: \"", dir, "\" every: 1 }")),
      {.out = &out, .err = &err});
  CATCH_REQUIRE(options.ok());
  options->shard.on_checkpoint(Checkpoint(0, 1));
  CATCH_CHECK(out.str().empty());
  CATCH_CHECK(absl::StartsWith(err.str(), "p3_server 0: checkpoint of iteration 1 failed: "));
}

CATCH_TEST_CASE("no checkpoint writer without checkpoint.every, none to resume without resume") {
  const std::string dir = testing::FreshDir("server_config_no_ckpt");
  CATCH_REQUIRE(WriteCheckpoint(Checkpoint(0, 4), dir + "/server_0").ok());
  const config::ExperimentConfig config =
      Config(absl::StrCat("checkpoint { dir: \"", dir, "\" }"));
  absl::StatusOr<ServerOptions> options = ServerOptionsFromConfig(config, {});
  CATCH_REQUIRE(options.ok());
  CATCH_CHECK(!options->shard.on_checkpoint);
  absl::StatusOr<std::optional<ShardCheckpoint>> restore = CheckpointToResume(config, {});
  CATCH_REQUIRE(restore.ok());
  CATCH_CHECK(!restore->has_value());
}

CATCH_TEST_CASE("a resume takes this server's newest checkpoint, or starts fresh without one") {
  const std::string dir = testing::FreshDir("server_config_resume");
  const config::ExperimentConfig config =
      Config(absl::StrCat("checkpoint { dir: \"", dir, "\" resume: true }"));
  std::ostringstream out;
  absl::StatusOr<std::optional<ShardCheckpoint>> fresh = CheckpointToResume(config, {.out = &out});
  CATCH_REQUIRE(fresh.ok());
  CATCH_CHECK(!fresh->has_value());
  CATCH_CHECK(absl::StartsWith(out.str(),
                               "p3_server 0: no checkpoint to resume from; starting fresh ("));

  CATCH_REQUIRE(WriteCheckpoint(Checkpoint(0, 4), dir + "/server_0", 5).ok());
  CATCH_REQUIRE(WriteCheckpoint(Checkpoint(0, 8), dir + "/server_0", 5).ok());
  out.str("");
  absl::StatusOr<std::optional<ShardCheckpoint>> newest =
      CheckpointToResume(config, {.out = &out});
  CATCH_REQUIRE(newest.ok());
  CATCH_REQUIRE(newest->has_value());
  CATCH_CHECK((*newest)->iteration == 8);
  CATCH_CHECK(out.str() == "p3_server 0: resuming from iteration 8\n");
}

CATCH_TEST_CASE("a checkpoint asked for by its iteration must be there") {
  const std::string dir = testing::FreshDir("server_config_resume_at");
  CATCH_REQUIRE(WriteCheckpoint(Checkpoint(0, 4), dir + "/server_0").ok());
  const std::string text =
      absl::StrCat("checkpoint { dir: \"", dir, "\" resume: true resume_iteration: ");
  absl::StatusOr<std::optional<ShardCheckpoint>> at4 =
      CheckpointToResume(Config(text + "4 }"), {});
  CATCH_REQUIRE(at4.ok());
  CATCH_CHECK((*at4)->iteration == 4);
  const absl::StatusOr<std::optional<ShardCheckpoint>> at6 =
      CheckpointToResume(Config(text + "6 }"), {});
  CATCH_CHECK(absl::IsNotFound(at6.status()));
}

CATCH_TEST_CASE("resume_iteration -1 takes the newest iteration every server has") {
  const std::string dir = testing::FreshDir("server_config_common");
  for (uint64_t it : {4, 8}) {
    CATCH_REQUIRE(WriteCheckpoint(Checkpoint(0, it), dir + "/server_0", 5).ok());
  }
  for (uint64_t it : {4, 12}) {
    CATCH_REQUIRE(WriteCheckpoint(Checkpoint(1, it), dir + "/server_1", 5).ok());
  }
  const config::ExperimentConfig config = Config(absl::StrCat(
      "cluster { servers: 2 } checkpoint { dir: \"", dir, "\" resume: true resume_iteration: -1 }"));
  std::ostringstream out;
  absl::StatusOr<std::optional<ShardCheckpoint>> restore =
      CheckpointToResume(config, {.index = 1, .out = &out});
  CATCH_REQUIRE(restore.ok());
  CATCH_REQUIRE(restore->has_value());
  CATCH_CHECK((*restore)->iteration == 4);
  CATCH_CHECK((*restore)->server_index == 1);
  CATCH_CHECK(out.str() ==
              "p3_server 1: the newest checkpoint that all 2 servers have is iteration 4\n"
              "p3_server 1: resuming from iteration 4\n");

  const std::string empty = testing::FreshDir("server_config_common_none");
  out.str("");
  absl::StatusOr<std::optional<ShardCheckpoint>> none = CheckpointToResume(
      Config(absl::StrCat("cluster { servers: 2 } checkpoint { dir: \"", empty,
                          "\" resume: true resume_iteration: -1 }")),
      {.out = &out});
  CATCH_REQUIRE(none.ok());
  CATCH_CHECK(!none->has_value());
  CATCH_CHECK(out.str() == absl::StrCat("p3_server 0: no checkpoint that all 2 servers have in ",
                                        empty, "; starting fresh\n"));
}

}  // namespace
}  // namespace p3
