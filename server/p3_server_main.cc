// p3_server: one parameter server of a P3 cluster, driven by a config.
//
//   p3_server --config=out/x/config.textproto --server_index=0 --port_file=out/x/server_0.port
//
// Binds cluster.host on a free port (or --port), writes the port to --port_file, serves
// until every worker is done, and exits 0; non-zero with the reason on stderr.
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "p3/base/allocator.h"
#include "p3/core/checkpoint.h"
#include "p3/base/file_util.h"
#include "p3/core/wire_dtype.h"
#include "proto/config.h"
#include "proto/config_options.h"
#include "server/parameter_server.h"

ABSL_FLAG(std::string, config, "", "experiment config (text format)");
ABSL_FLAG(int, server_index, 0, "this server's index");
ABSL_FLAG(int, port, 0, "port to bind; 0 picks a free one");
ABSL_FLAG(std::string, port_file, "", "where to write the bound port");
ABSL_FLAG(std::string, trace_file, "", "where to write this server's timeline (Chrome trace JSON)");

int main(int argc, char** argv) {
  // Before any thread: large messages without page faults (p3/base/allocator.h).
  if (absl::Status tuned = p3::TuneAllocatorForLargeMessages({.one_arena = true}); !tuned.ok()) {
    std::cerr << "p3_server: " << tuned.message() << " (continuing)\n";
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
    std::cerr << "p3_server: " << config.status().message() << "\n";
    return 2;
  }
  const int index = absl::GetFlag(FLAGS_server_index);
  if (index < 0 || index >= config->cluster().servers()) {
    std::cerr << "p3_server: --server_index " << index << " is out of range for "
              << config->cluster().servers() << " servers\n";
    return 2;
  }
  p3::ServerOptions options;
  const std::string& host = config->cluster().host();
  const bool ipv6 = host.find(':') != std::string::npos;
  options.address =
      absl::StrCat(ipv6 ? "[" : "", host, ipv6 ? "]" : "", ":", absl::GetFlag(FLAGS_port));
  options.shard.server_index = index;
  options.shard.num_workers = config->cluster().workers();
  options.shard.optimizer = p3::OptimizerFromConfig(*config);
  options.peer_timeout = absl::Seconds(config->cluster().peer_timeout_s());
  options.stall_report = absl::Seconds(config->cluster().stall_report_s());
  options.rejoin_timeout = absl::Seconds(config->cluster().rejoin_timeout_s());
  options.max_message_params = config->scheduling().max_message_params();
  // -1 (automatic) is resolved by launch_cluster; started without it: 0.
  options.credit_bytes = p3::config::EffectiveCreditBytes(*config);
  options.shared_memory = config->scheduling().shared_memory();
  // Validated with the config: one of the three names.
  options.shard.wire_dtype = p3::ParseWireDType(config->scheduling().wire_dtype()).value();
  absl::StatusOr<p3::SecuritySettings> security = p3::SecurityFromConfig(*config);
  if (!security.ok()) {
    std::cerr << "p3_server " << index << ": " << security.status().message() << "\n";
    return 2;
  }
  const p3::config::CheckpointConfig& ckpt = config->checkpoint();
  const std::string ckpt_dir =
      ckpt.dir().empty() ? "" : absl::StrCat(ckpt.dir(), "/server_", index);
  if (ckpt.every() > 0 && !ckpt_dir.empty()) {
    options.shard.checkpoint_every = static_cast<uint64_t>(ckpt.every());
    const int keep = ckpt.keep() > 0 ? ckpt.keep() : 2;
    options.shard.on_checkpoint = [ckpt_dir, keep, index](p3::ShardCheckpoint c) {
      const uint64_t iteration = c.iteration;
      absl::Status s = p3::WriteCheckpoint(c, ckpt_dir, keep);
      if (s.ok()) {
        std::cout << "p3_server " << index << ": checkpoint of iteration " << iteration << " saved"
                  << std::endl;
      } else {
        std::cerr << "p3_server " << index << ": checkpoint of iteration " << iteration
                  << " failed: " << s << std::endl;
      }
    };
  }
  if (ckpt.resume() && !ckpt_dir.empty()) {
    int64_t iteration = std::max<int64_t>(0, ckpt.resume_iteration());
    if (ckpt.resume_iteration() == p3::config::kResumeNewestCommon) {
      // Every server of a restarted cluster runs this with the same folder and finds the
      // same iteration (docs/checkpoints.md): no coordinator needed.
      std::string passed_over;
      iteration = static_cast<int64_t>(
          p3::NewestCommonCheckpoint(ckpt.dir(), config->cluster().servers(), &passed_over));
      if (!passed_over.empty()) {
        std::cout << "p3_server " << index << ": checkpoints " << passed_over << std::endl;
      }
      if (iteration == 0) {
        std::cout << "p3_server " << index << ": no checkpoint that all "
                  << config->cluster().servers() << " servers have in " << ckpt.dir()
                  << "; starting fresh" << std::endl;
      } else {
        std::cout << "p3_server " << index << ": the newest checkpoint that all "
                  << config->cluster().servers() << " servers have is iteration " << iteration
                  << std::endl;
      }
    }
    absl::StatusOr<p3::ShardCheckpoint> restored =
        ckpt.resume_iteration() == p3::config::kResumeNewestCommon && iteration == 0
            ? absl::NotFoundError("none common")
            : p3::ReadLatestCheckpoint(ckpt_dir, static_cast<uint64_t>(iteration));
    if (restored.ok()) {
      std::cout << "p3_server " << index << ": resuming from iteration " << restored->iteration
                << std::endl;
      options.shard.restore = *std::move(restored);
    } else if (iteration > 0 || !absl::IsNotFound(restored.status())) {
      std::cerr << "p3_server " << index << ": " << restored.status() << "\n";
      return 1;
    } else if (ckpt.resume_iteration() != p3::config::kResumeNewestCommon) {
      std::cout << "p3_server " << index << ": no checkpoint to resume from; starting fresh ("
                << restored.status().message() << ")" << std::endl;
    }
  }
  options.tls_cert_pem = security->cert_pem;
  options.tls_key_pem = security->key_pem;
  options.token = security->token;
  const std::string trace_file = absl::GetFlag(FLAGS_trace_file);
  p3::TraceRecorder trace({.enabled = !trace_file.empty(),
                           .process_name = absl::StrCat("server ", index),
                           .pid = 200 + index});
  options.trace = &trace;
  absl::StatusOr<std::unique_ptr<p3::ParameterServer>> server = p3::ParameterServer::Start(options);
  if (!server.ok()) {
    std::cerr << "p3_server " << index << ": " << server.status() << "\n";
    return 1;
  }
  const std::string port_file = absl::GetFlag(FLAGS_port_file);
  if (!port_file.empty()) {
    // The launcher polls for this file: it must never see it half written.
    const absl::Status written =
        p3::WriteFileAtomically(port_file, absl::StrCat((*server)->port(), "\n"));
    if (!written.ok()) {
      std::cerr << "p3_server " << index << ": " << written << "\n";
      return 1;
    }
  }
  std::cout << "p3_server " << index << " listening on port " << (*server)->port() << std::endl;
  absl::Status status = (*server)->Wait();
  (*server)->Shutdown();
  if (trace.enabled()) {
    absl::Status written = trace.WriteJson(trace_file);
    if (!written.ok()) std::cerr << "p3_server " << index << ": " << written << "\n";
  }
  if (!status.ok()) {
    std::cerr << "p3_server " << index << ": " << status << "\n";
    return 1;
  }
  std::cout << "p3_server " << index << ": all workers done" << std::endl;
  return 0;
}
