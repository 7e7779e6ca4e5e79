// p3_worker: one worker of a P3 cluster (or the whole `local` run), driven by a config.
//
//   p3_worker --config=out/x/config.textproto --rank=0 --servers=127.0.0.1:4001,127.0.0.1:4002
//             --result_file=out/x/worker_0.json --records_file=out/x/worker_0.csv
//
// Prints PROGRESS lines on stdout; exits non-zero with the reason on stderr.
#include <torch/utils.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "models/compute_device.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "p3/base/trace.h"
#include "proto/config_options.h"
#include "proto/program.h"
#include "worker/trainer.h"

ABSL_FLAG(std::string, config, "", "experiment config (text format)");
ABSL_FLAG(int, rank, 0, "this worker's rank");
ABSL_FLAG(std::string, servers, "", "comma-separated host:port of the servers, in order");
ABSL_FLAG(std::string, result_file, "", "where to write the result JSON");
ABSL_FLAG(std::string, records_file, "", "where to write per-iteration records (CSV)");
ABSL_FLAG(std::string, trace_file, "", "where to write this worker's timeline (Chrome trace JSON)");
ABSL_FLAG(bool, rejoin, false,
          "this process replaces a dead worker of the same rank: rejoin the servers and "
          "resume at the cluster's iteration (needs cluster.rejoin_timeout_s > 0)");

ABSL_FLAG(bool, elastic_join, false,
          "elastic runs (cluster.elastic): this process joins the running cluster; once "
          "connected it appends `join RANK` to --membership_requests and starts when rank 0 "
          "adds it");
ABSL_FLAG(std::string, membership_requests, "",
          "elastic runs: the requests file; rank 0 reads its new lines (`join R`, `leave R`) "
          "between iterations and changes the membership (docs/reliability.md)");

int main(int argc, char** argv) {
  // One malloc arena, as in p3_server: with glibc's per-thread arenas a long-lived
  // worker's RSS crept by 1.2-1.9 MB while its peers rejoined 90 times, by 0.1-0.2 MB
  // with one (docs/results/reliability/soak.md, "Memory across 100 rejoins").
  // Throughput was the same within noise (docs/simulator.md, "The cost of a switch").
  p3::Program program("p3_worker", argc, argv,
                      {.allocator = p3::AllocatorOptions{.one_arena = true},
                       .skip_lock_order_checks = true,
                       .config_overrides = true});
  absl::StatusOr<p3::config::ExperimentConfig> config =
      program.LoadConfig(absl::GetFlag(FLAGS_config));
  if (!config.ok()) return program.Fail(2, config.status().message());
  // Before any thread and gRPC's first use (scheduling.sized_reads;
  // p3/base/grpc_experiments.h).
  program.RequestSizedReads(config->scheduling().sized_reads());
  p3::TrainerOptions options;
  options.rank = absl::GetFlag(FLAGS_rank);
  const std::string servers = absl::GetFlag(FLAGS_servers);
  if (!servers.empty()) options.servers = absl::StrSplit(servers, ',');
  options.progress = &std::cout;
  options.rejoin = absl::GetFlag(FLAGS_rejoin);
  options.elastic_join = absl::GetFlag(FLAGS_elastic_join);
  options.membership_requests = absl::GetFlag(FLAGS_membership_requests);
  // Rank 0's parameters are the cluster's; it alone writes the model.
  if (options.rank == 0) options.model_file = p3::ModelFileFromConfig(*config);
  const std::string trace_file = absl::GetFlag(FLAGS_trace_file);
  p3::TraceRecorder trace({.enabled = !trace_file.empty(),
                           .process_name = "worker " + std::to_string(options.rank),
                           .pid = 100 + options.rank});
  options.trace = &trace;
  // The records are written as the run goes, not kept in memory to the end: 32 bytes an
  // iteration made a long job's RSS creep (docs/results/reliability/soak.md, "Creep
  // without faults"). Into "<file>.partial", renamed once the run has ended well; without
  // --records_file into a stream that drops them.
  const std::string records_file = absl::GetFlag(FLAGS_records_file);
  const std::string records_partial = records_file + ".partial";
  std::ofstream records_out;
  std::ostream records_dropped(nullptr);
  if (!records_file.empty()) {
    records_out.open(records_partial, std::ios::out | std::ios::trunc);
    if (!records_out) return program.Fail(1, absl::StrCat("cannot write ", records_partial));
    options.records = &records_out;
  } else {
    options.records = &records_dropped;
  }
  if (config->mode() != "local" &&
      static_cast<int>(options.servers.size()) != config->cluster().servers()) {
    return program.Fail(2, absl::StrCat("--servers lists ", options.servers.size(),
                                        " servers; cluster.servers is ",
                                        config->cluster().servers()));
  }
  program.set_name(absl::StrCat("p3_worker ", options.rank));
  // libtorch's thread count is process state: set here, not in the library.
  if (config->training().threads() > 0) torch::set_num_threads(config->training().threads());
  if (config->training().has_tf32()) p3::SetTf32(config->training().tf32());
  absl::StatusOr<p3::TrainResult> result = p3::RunTraining(*config, options);
  if (trace.enabled()) {
    // Written on failure too: the timeline up to the failure is what one wants to see.
    const absl::Status written = trace.WriteJson(trace_file);
    if (!written.ok()) program.Warn(written.ToString());
  }
  if (!result.ok()) {
    if (!records_file.empty()) std::remove(records_partial.c_str());
    return program.Fail(1, result.status().ToString());
  }
  if (!records_file.empty()) {
    records_out.close();
    if (!records_out || std::rename(records_partial.c_str(), records_file.c_str()) != 0) {
      std::remove(records_partial.c_str());
      return program.Fail(1, absl::StrCat("cannot write ", records_file));
    }
  }
  const absl::Status written =
      p3::WriteRequestedFile(absl::GetFlag(FLAGS_result_file), result->ToJson() + "\n");
  if (!written.ok()) return program.Fail(1, written.ToString());
  std::cout << "RESULT " << result->ToJson() << std::endl;
  return 0;
}
