// What an experiment config (proto/config.proto) asks of one parameter server: the one
// translation of a config into ServerOptions (server/parameter_server.h), beside its
// siblings WorkerOptionsFromConfig (worker/trainer.h), PipelineOptionsFromConfig
// (p3/pipeline/run_config.h) and ModelOptionsFromConfig (models/config/from_config.h).
//
// Example (what p3_server does):
//   const ServerProcess process{.index = 1, .out = &std::cout, .err = &std::cerr};
//   P3_ASSIGN_OR_RETURN(ServerOptions options, ServerOptionsFromConfig(config, process));
//   P3_ASSIGN_OR_RETURN(options.shard.restore, CheckpointToResume(config, process));
//   options.trace = &trace;
//   P3_ASSIGN_OR_RETURN(std::unique_ptr<ParameterServer> server,
//                       ParameterServer::Start(options));
//
// Stateless; thread-compatible (both functions read files). `config` must have its
// defaults filled and be validated (proto/config.h).
#ifndef P3_SERVER_SERVER_CONFIG_H_
#define P3_SERVER_SERVER_CONFIG_H_

#include <optional>
#include <ostream>

#include "absl/status/statusor.h"
#include "p3/core/checkpoint.h"
#include "proto/config.pb.h"
#include "server/parameter_server.h"

namespace p3 {

// Which server of the cluster this process is, and where it reports its checkpoints.
struct ServerProcess {
  // This server's index, 0 .. cluster.servers - 1 (p3_server --server_index). Default: 0.
  int index = 0;
  // The port to bind on cluster.host; 0 picks a free one. Default: 0.
  int port = 0;
  // Where the checkpoints' lines go, each starting "p3_server <index>: ": what was saved,
  // which checkpoint a resume chose, on `out`; a save that failed on `err` (the run goes
  // on). Not owned; null: not printed. `out` and `err` are written from the server's
  // checkpoint thread too. Default: null.
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
};

// ServerOptions for server `process.index` of the cluster `config` describes: the
// address (cluster.host, an IPv6 address in brackets, and `process.port`), the shard
// (index, cluster.workers, the optimizer, scheduling.wire_dtype), cluster.peer_timeout_s,
// stall_report_s and rejoin_timeout_s, scheduling.max_message_params, credit_bytes (an
// automatic -1 nobody resolved: 0), stalled_write_s and shared_memory, the security settings (whose files
// it reads; errors name the field), and with checkpoint.every and checkpoint.dir the
// checkpoint writer (<dir>/server_<index>, keeping checkpoint.keep). Leaves `trace` and
// `shard.restore` (CheckpointToResume) to the caller. InvalidArgument for an index out
// of range.
absl::StatusOr<ServerOptions> ServerOptionsFromConfig(const config::ExperimentConfig& config,
                                                      const ServerProcess& process);

// The checkpoint server `process.index` resumes from (docs/checkpoints.md): none without
// checkpoint.resume and checkpoint.dir, or when there is nothing to resume from (a fresh
// start, said on `out`); with checkpoint.resume_iteration -1 the newest iteration that
// every server has (p3::NewestCommonCheckpoint). An error (NotFound, DataLoss, ...) for
// a checkpoint that was asked for by its iteration, or is there but cannot be read.
absl::StatusOr<std::optional<ShardCheckpoint>> CheckpointToResume(
    const config::ExperimentConfig& config, const ServerProcess& process);

}  // namespace p3

#endif  // P3_SERVER_SERVER_CONFIG_H_
