// p3_server: one parameter server of a P3 cluster, driven by a config.
//
//   p3_server --config=out/x/config.textproto --server_index=0 --port_file=out/x/server_0.port
//
// Binds cluster.host on a free port (or --port), writes the port to --port_file, serves
// until every worker is done, and exits 0; non-zero with the reason on stderr.
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "p3/base/build_commit.h"
#include "p3/base/thread_policy.h"
#include "p3/base/trace.h"
#include "proto/program.h"
#include "server/parameter_server.h"
#include "server/server_config.h"

ABSL_FLAG(std::string, config, "", "experiment config (text format)");
ABSL_FLAG(int, server_index, 0, "this server's index");
ABSL_FLAG(int, port, 0, "port to bind; 0 picks a free one");
ABSL_FLAG(std::string, port_file, "", "where to write the bound port");
ABSL_FLAG(std::string, trace_file, "", "where to write this server's timeline (Chrome trace JSON)");

int main(int argc, char** argv) {
  p3::Program program("p3_server", argc, argv,
                      {.allocator = p3::AllocatorOptions{.one_arena = true},
                       .skip_lock_order_checks = true,
                       .config_overrides = true});
  absl::StatusOr<p3::config::ExperimentConfig> config =
      program.LoadConfig(absl::GetFlag(FLAGS_config));
  if (!config.ok()) return program.Fail(2, config.status().message());
  const p3::ServerProcess process{.index = absl::GetFlag(FLAGS_server_index),
                                  .port = absl::GetFlag(FLAGS_port),
                                  .out = &std::cout,
                                  .err = &std::cerr};
  program.set_name(absl::StrCat("p3_server ", process.index));
  // Before gRPC's first use (scheduling.sized_reads; p3/base/grpc_experiments.h).
  program.RequestSizedReads(config->scheduling().sized_reads());
  // Every thread of the server is a communication thread: before any starts, so that all
  // inherit it (scheduling.batch_io_threads; p3/base/thread_policy.h).
  if (config->scheduling().batch_io_threads()) {
    if (absl::Status batch = p3::ScheduleThisThreadAsBatch(); !batch.ok()) {
      program.Warn(absl::StrCat("the threads keep their CPU policy: ", batch.message()));
    }
  }
  absl::StatusOr<p3::ServerOptions> options = p3::ServerOptionsFromConfig(*config, process);
  if (!options.ok()) return program.Fail(2, options.status().message());
  absl::StatusOr<std::optional<p3::ShardCheckpoint>> restore =
      p3::CheckpointToResume(*config, process);
  if (!restore.ok()) return program.Fail(1, restore.status().ToString());
  options->shard.restore = *std::move(restore);
  const std::string trace_file = absl::GetFlag(FLAGS_trace_file);
  p3::TraceRecorder trace({.enabled = !trace_file.empty(),
                           .process_name = absl::StrCat("server ", process.index),
                           .pid = 200 + process.index});
  options->trace = &trace;
  absl::StatusOr<std::unique_ptr<p3::ParameterServer>> server = p3::ParameterServer::Start(*options);
  if (!server.ok()) return program.Fail(1, server.status().ToString());
  // The launcher polls for this file: it must never see it half written.
  const absl::Status port_written =
      p3::WriteRequestedFile(absl::GetFlag(FLAGS_port_file), absl::StrCat((*server)->port(), "\n"));
  if (!port_written.ok()) return program.Fail(1, port_written.ToString());
  std::cout << program.name() << " built from " << p3::BuildCommit() << std::endl;
  std::cout << program.name() << " listening on port " << (*server)->port() << std::endl;
  absl::Status status = (*server)->Wait();
  (*server)->Shutdown();
  if (trace.enabled()) {
    const absl::Status written = trace.WriteJson(trace_file);
    if (!written.ok()) program.Warn(written.ToString());
  }
  if (!status.ok()) return program.Fail(1, status.ToString());
  std::cout << program.name() << ": all workers done" << std::endl;
  return 0;
}
