// p3_worker: one worker of a P3 cluster (or the whole `local` run), driven by a config.
//
//   p3_worker --config=out/x/config.textproto --rank=0 --servers=127.0.0.1:4001,127.0.0.1:4002
//             --result_file=out/x/worker_0.json --records_file=out/x/worker_0.csv
//
// Prints PROGRESS lines on stdout; exits non-zero with the reason on stderr.
#include <torch/utils.h>

#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "p3/base/allocator.h"
#include "p3/base/file_util.h"
#include "proto/config.h"
#include "proto/config_options.h"
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

namespace {

// Writes `text` to `path` unless no path was given.
absl::Status MaybeWriteFile(const std::string& path, const std::string& text) {
  if (path.empty()) return absl::OkStatus();
  return p3::WriteFileAtomically(path, text);
}

}  // namespace

int main(int argc, char** argv) {
  // Before any thread: large messages without page faults (p3/base/allocator.h).
  if (absl::Status tuned = p3::TuneAllocatorForLargeMessages(); !tuned.ok()) {
    std::cerr << "p3_worker: " << tuned.message() << " (continuing)\n";
  }
  // Abseil's lock-order graph is on in builds without NDEBUG (these binaries); on the data
  // path it took about 1 % of all cycles (perf, ResNet-50 at 2.5 Gbit/s;
  // docs/results/throughput.md). The tests, which link the libraries, keep it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  const std::vector<std::string> overrides = p3::config::TakeOverrideFlags(&argc, argv);
  absl::ParseCommandLine(argc, argv);
  absl::StatusOr<p3::config::ExperimentConfig> config =
      p3::config::LoadConfig(absl::GetFlag(FLAGS_config), overrides);
  if (!config.ok()) {
    std::cerr << "p3_worker: " << config.status().message() << "\n";
    return 2;
  }
  p3::TrainerOptions options;
  options.rank = absl::GetFlag(FLAGS_rank);
  const std::string servers = absl::GetFlag(FLAGS_servers);
  if (!servers.empty()) options.servers = absl::StrSplit(servers, ',');
  options.progress = &std::cout;
  options.rejoin = absl::GetFlag(FLAGS_rejoin);
  // Rank 0's parameters are the cluster's; it alone writes the model.
  if (options.rank == 0) options.model_file = p3::ModelFileFromConfig(*config);
  const std::string trace_file = absl::GetFlag(FLAGS_trace_file);
  p3::TraceRecorder trace({.enabled = !trace_file.empty(),
                           .process_name = "worker " + std::to_string(options.rank),
                           .pid = 100 + options.rank});
  options.trace = &trace;
  if (config->mode() != "local" &&
      static_cast<int>(options.servers.size()) != config->cluster().servers()) {
    std::cerr << "p3_worker: --servers lists " << options.servers.size()
              << " servers; cluster.servers is " << config->cluster().servers() << "\n";
    return 2;
  }
  // libtorch's thread count is process state: set here, not in the library.
  if (config->training().threads() > 0) torch::set_num_threads(config->training().threads());
  absl::StatusOr<p3::TrainResult> result = p3::RunTraining(*config, options);
  if (trace.enabled()) {
    // Written on failure too: the timeline up to the failure is what one wants to see.
    absl::Status written = trace.WriteJson(trace_file);
    if (!written.ok()) std::cerr << "p3_worker " << options.rank << ": " << written << "\n";
  }
  if (!result.ok()) {
    std::cerr << "p3_worker " << options.rank << ": " << result.status() << "\n";
    return 1;
  }
  for (absl::Status written :
       {MaybeWriteFile(absl::GetFlag(FLAGS_result_file), result->ToJson() + "\n"),
        MaybeWriteFile(absl::GetFlag(FLAGS_records_file), result->RecordsCsv())}) {
    if (!written.ok()) {
      std::cerr << "p3_worker " << options.rank << ": " << written << "\n";
      return 1;
    }
  }
  std::cout << "RESULT " << result->ToJson() << std::endl;
  return 0;
}
