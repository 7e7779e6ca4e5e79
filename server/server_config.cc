#include "server/server_config.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "p3/base/status_macros.h"
#include "p3/core/wire_dtype.h"
#include "proto/config.h"
#include "proto/config_options.h"

namespace p3 {
namespace {

// Server `index`'s own folder of checkpoints; "" without checkpoint.dir.
std::string CheckpointDir(const config::ExperimentConfig& config, int index) {
  const std::string& dir = config.checkpoint().dir();
  return dir.empty() ? "" : absl::StrCat(dir, "/server_", index);
}

// Writes "p3_server <index>: <line>" to `stream` unless it is null.
void Say(std::ostream* stream, int index, const std::string& line) {
  if (stream != nullptr) *stream << "p3_server " << index << ": " << line << std::endl;
}

}  // namespace

absl::StatusOr<ServerOptions> ServerOptionsFromConfig(const config::ExperimentConfig& config,
                                                      const ServerProcess& process) {
  const int index = process.index;
  if (index < 0 || index >= config.cluster().servers()) {
    return absl::InvalidArgumentError(absl::StrCat("server index ", index,
                                                   " is out of range for ",
                                                   config.cluster().servers(), " servers"));
  }
  ServerOptions options;
  const std::string& host = config.cluster().host();
  const bool ipv6 = absl::StrContains(host, ':');
  options.address = absl::StrCat(ipv6 ? "[" : "", host, ipv6 ? "]" : "", ":", process.port);
  options.shard.server_index = index;
  // Elastic runs: every rank that may take part, ranks 0..workers-1 from the start.
  options.shard.num_workers = config::MaxWorkers(config);
  if (config.cluster().has_elastic()) options.shard.initial_workers = config.cluster().workers();
  options.shard.optimizer = OptimizerFromConfig(config);
  P3_ASSIGN_OR_RETURN(options.shard.wire_dtype, ParseWireDType(config.scheduling().wire_dtype()));
  // fp16's dynamic loss scaling: a slice whose gradients overflowed is not updated.
  options.shard.skip_nonfinite = config.training().precision() == "fp16";
  options.peer_timeout = absl::Seconds(config.cluster().peer_timeout_s());
  options.stall_report = absl::Seconds(config.cluster().stall_report_s());
  options.rejoin_timeout = absl::Seconds(config.cluster().rejoin_timeout_s());
  options.max_message_params = config.scheduling().max_message_params();
  // -1 (automatic) is resolved by launch_cluster; started without it: 0.
  options.credit_bytes = config::EffectiveCreditBytes(config);
  options.stalled_write = config::StalledWriteAfter(config);
  options.shared_memory = config.scheduling().shared_memory();
  P3_ASSIGN_OR_RETURN(const SecuritySettings security, SecurityFromConfig(config));
  options.tls_cert_pem = security.cert_pem;
  options.tls_key_pem = security.key_pem;
  options.token = security.token;

  const std::string dir = CheckpointDir(config, index);
  if (config.checkpoint().every() > 0 && !dir.empty()) {
    options.shard.checkpoint_every = static_cast<uint64_t>(config.checkpoint().every());
    const int keep = config.checkpoint().keep();
    options.shard.on_checkpoint = [dir, keep, index, out = process.out,
                                   err = process.err](ShardCheckpoint c) {
      const uint64_t iteration = c.iteration;
      const absl::Status s = WriteCheckpoint(c, dir, keep);
      if (s.ok()) {
        Say(out, index, absl::StrCat("checkpoint of iteration ", iteration, " saved"));
      } else {
        Say(err, index, absl::StrCat("checkpoint of iteration ", iteration, " failed: ",
                                     s.ToString()));
      }
    };
  }
  return options;
}

absl::StatusOr<std::optional<ShardCheckpoint>> CheckpointToResume(
    const config::ExperimentConfig& config, const ServerProcess& process) {
  const config::CheckpointConfig& ckpt = config.checkpoint();
  const int index = process.index;
  const std::string dir = CheckpointDir(config, index);
  if (!ckpt.resume() || dir.empty()) return std::nullopt;
  const bool newest_common = ckpt.resume_iteration() == config::kResumeNewestCommon;
  const int servers = config.cluster().servers();
  int64_t iteration = std::max<int64_t>(0, ckpt.resume_iteration());
  if (newest_common) {
    // Every server of a restarted cluster runs this with the same folder and finds the
    // same iteration (docs/checkpoints.md): no coordinator needed.
    std::string passed_over;
    iteration = static_cast<int64_t>(NewestCommonCheckpoint(ckpt.dir(), servers, &passed_over));
    if (!passed_over.empty()) Say(process.out, index, "checkpoints " + passed_over);
    if (iteration == 0) {
      Say(process.out, index,
          absl::StrCat("no checkpoint that all ", servers, " servers have in ", ckpt.dir(),
                       "; starting fresh"));
      return std::nullopt;
    }
    Say(process.out, index,
        absl::StrCat("the newest checkpoint that all ", servers, " servers have is iteration ",
                     iteration));
  }
  absl::StatusOr<ShardCheckpoint> restored =
      ReadLatestCheckpoint(dir, static_cast<uint64_t>(iteration));
  if (restored.ok()) {
    Say(process.out, index, absl::StrCat("resuming from iteration ", restored->iteration));
    return std::optional<ShardCheckpoint>(*std::move(restored));
  }
  // Only "this server's newest" may find nothing: a fresh start.
  if (iteration > 0 || !absl::IsNotFound(restored.status())) return restored.status();
  Say(process.out, index,
      absl::StrCat("no checkpoint to resume from; starting fresh (", restored.status().message(),
                   ")"));
  return std::nullopt;
}

}  // namespace p3
