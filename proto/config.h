// Loading, overriding, defaulting and validating experiment configs
// (proto/config.proto, Protocol Buffers text format).
//
// LoadConfig() is the one way a tool, the server or a worker should read a config: it
// parses the text, applies command-line overrides, fills the defaults stated in
// config.proto and validates every field. Every error is an absl::Status
// (InvalidArgument for bad input, NotFound / PermissionDenied for an unreadable file)
// whose message names the field by its dotted path and says what is allowed, e.g.
//   cluster.workers: 0 is out of range; allowed 1..64
//
// Defaults: a zero or empty field means "use the default" (proto3 cannot tell an unset
// scalar from a zero one); fields declared `optional` in config.proto (momentum,
// weight_decay, evaluate, threads, scheduling.slice_params) use presence instead, so an
// explicit 0 / false is kept (for slice_params an explicit 0 means automatic).
// The defaults are applied after the overrides, so `--set=optimizer.name=adam` also
// selects Adam's default learning rate. Filling defaults is idempotent: loading the
// resolved config that ConfigToText() writes gives back the same config.
//
// Overrides are "dotted.path=value" strings, e.g.
//   training.batch_size=64   optimizer.lr=0.01   mode=baseline   name="my run"
//   training.evaluate=false  model.name=mlp      cluster.host=::1
// String values may be quoted or not; other values use text-format syntax.
//
// Example:
//   absl::StatusOr<p3::config::ExperimentConfig> config =
//       p3::config::LoadConfig("configs/default.textproto", {"training.batch_size=64"});
//   if (!config.ok()) {
//     std::cerr << config.status().message() << "\n";
//     return 2;
//   }
//   int64_t batch = p3::config::GlobalBatchSize(*config);   // 64 * cluster.workers
//
// All functions are thread-compatible and hold no state.
#ifndef P3_PROTO_CONFIG_H_
#define P3_PROTO_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "p3/core/membership.h"
#include "proto/config.pb.h"

namespace p3::config {

// The values `mode` may take: the cluster modes of p3/core/mode.h (p3::kModeNames) and
// kPipelineMode.
// "local" trains in one process without servers: it ignores the cluster but uses
// training.batch_size * cluster.workers as its batch, so that a local run sees the same
// total batch per iteration as the distributed run it is compared with.
// "pipeline" trains in one process cut into pipeline stages (//tools:pipeline_train,
// not the launcher); it ignores the cluster and uses training.batch_size as its batch.
inline constexpr char kPipelineMode[] = "pipeline";
// The values pipeline.weights may take (mode "pipeline", docs/pipeline.md).
inline constexpr const char* kPipelineWeights[] = {"spectrain", "pipedream", "stale", "vanilla",
                                                   "data_parallel"};
// The values pipeline.schedule may take ("interleaved_1f1b" is refused as not implemented).
inline constexpr const char* kPipelineSchedules[] = {"1f1b", "gpipe", "interleaved_1f1b"};
inline constexpr const char* kPlacements[] = {"colocated", "separate"};
// scheduling.wire_dtype (p3/core/wire_dtype.h's names).
inline constexpr const char* kWireDTypes[] = {"float32", "bfloat16", "float16"};
inline constexpr const char* kPrecisions[] = {"fp32", "bf16", "fp16"};
inline constexpr const char* kDatasets[] = {"fashion_mnist", "synthetic", "synthetic_tokens"};
inline constexpr const char* kOptimizers[] = {"sgd", "adam"};
inline constexpr int kMaxProcesses = 64;
// checkpoint.resume_iteration: resume from the newest iteration that every server has a
// valid checkpoint of (p3::NewestCommonCheckpoint), which lets restarted servers agree
// with no coordinator (docs/checkpoints.md).
inline constexpr int64_t kResumeNewestCommon = -1;

// scheduling.slice_params absent (the default) or 0, and scheduling.credit_bytes = -1:
// automatic. launch_cluster resolves them before any process starts
// (tools/launcher/tuning.h) and passes the values chosen to every process. An explicit
// 0 also turns the online search on for long runs; an absent field does not.
inline constexpr int64_t kAutoSliceParams = 0;
inline constexpr int64_t kAutoCreditBytes = -1;
// slice_params absent or 0.
bool SliceParamsAuto(const ExperimentConfig& config);
// slice_params absent (FillDefaults leaves it absent): automatic as the default.
bool SliceParamsAbsent(const ExperimentConfig& config);
bool CreditBytesAuto(const ExperimentConfig& config);
// The slice size and credit a process uses: the config's values, and for an automatic
// one that nobody resolved (absent or 0 in a process started without the launcher) the
// defaults, 40000 and 0 -- the same on every process, so that they still agree on the plan.
int64_t EffectiveSliceParams(const ExperimentConfig& config);
// scheduling.pack_params, or kDefaultPackParams (65536) when absent; 0: no packs.
int64_t EffectivePackParams(const ExperimentConfig& config);
// scheduling.owner_params, or with online_search and no stripes given the ones its search
// needs (p3/core/slice_search.h: 4 x the slice size, at most 1000000); 0: none.
int64_t EffectiveOwnerParams(const ExperimentConfig& config);
// Why this config cannot re-plan its slices (scheduling.online_search): its mode has no
// slices returned with their values on the push, or its wire is float16 (checkpoints and
// rejoins compose with it); "" when nothing rules it out. The one rule for config validation and launch_cluster.
std::string OnlineSearchRuledOutBy(const ExperimentConfig& config);
int64_t EffectiveCreditBytes(const ExperimentConfig& config);
// scheduling.stalled_write_s as SendQueueOptions::stalled_after: 0 is
// absl::InfiniteDuration() (a message holds the link until written).
absl::Duration StalledWriteAfter(const ExperimentConfig& config);

// Reads `path` and returns ParseConfig(contents, overrides); error messages start with
// `path`.
absl::StatusOr<ExperimentConfig> LoadConfig(const std::string& path,
                                            const std::vector<std::string>& overrides);

// Parses text-format `text`, applies `overrides` in order, fills defaults and validates.
// Errors name the line and column (1-based) and the field, e.g.
//   3:3: training.batch_sizee: unknown field; allowed: batch_size, epochs, ...
//   5:15: cluster.workers: Expected integer, got: "two"
absl::StatusOr<ExperimentConfig> ParseConfig(const std::string& text,
                                             const std::vector<std::string>& overrides);

// Applies one "dotted.path=value" override to `config`. An unknown path names the
// field and lists the allowed names at that level.
absl::Status ApplyOverride(const std::string& override_text, ExperimentConfig* config);

// Replaces zero / empty / absent fields by the defaults documented in config.proto.
void FillDefaults(ExperimentConfig* config);

// Checks every field of a config whose defaults are filled.
absl::Status ValidateConfig(const ExperimentConfig& config);

// Text format of `config`, parseable by ParseConfig().
std::string ConfigToText(const ExperimentConfig& config);

// Takes every config override out of argv and returns them in order: "--set=v",
// "--set v", "-set=v" and "-set v" (a value may contain commas and spaces). argc and argv
// keep the other arguments, argv[0] included, for absl::ParseCommandLine (whose list
// flags would keep only the last --set). Everything from a "--" on is left as it is.
// The one parser of --set for every binary (launcher, server, worker, pipeline).
std::vector<std::string> TakeOverrideFlags(int* argc, char** argv);

// Samples per iteration over the whole cluster: training.batch_size * cluster.workers.
// In mode "local" this is also the batch of the single process.
int64_t GlobalBatchSize(const ExperimentConfig& config);

// The ranks a run may have: cluster.elastic.max_workers (cluster.workers when 0) in an
// elastic run, else cluster.workers. Workers and servers size the cluster by it; ranks
// 0..cluster.workers-1 are present at the start (docs/reliability.md).
int MaxWorkers(const ExperimentConfig& config);

// The membership a config describes: ranks 0..cluster.workers-1 from iteration 0, then
// every cluster.elastic.change in order (mode "local" replays it; docs/reliability.md,
// "Elastic membership"). InvalidArgument naming `cluster.elastic.change[i]` when a change
// cannot follow the ones before it (MembershipSchedule::Check).
absl::StatusOr<MembershipSchedule> ElasticSchedule(const ExperimentConfig& config);

// Number of server and worker processes the launcher starts: none and one in mode
// "local", else cluster.servers and cluster.workers.
int ServerProcessCount(const ExperimentConfig& config);

// Placement of processes on machines: the emulated machines of the `network` section
// (docs/network.md), or the hosts of a host file (docs/multihost.md).
// Machines by default: max(workers, servers) for network.placement "colocated" (or
// unset), workers + servers for "separate".
int DefaultMachineCount(const ExperimentConfig& config);
// network.machines, or DefaultMachineCount() when it is 0.
int MachineCount(const ExperimentConfig& config);
// The machine (0..machines-1) of worker `rank` / server `index` among `machines`:
// "colocated" puts worker r on r mod machines and server i on i mod machines (machine i
// hosts worker i and server i); "separate" puts workers on 0..W-1 and servers on W..W+S-1.
int WorkerMachine(const ExperimentConfig& config, int rank, int machines);
int ServerMachine(const ExperimentConfig& config, int index, int machines);
// Whether the launcher emulates the network: network.bandwidth_gbps > 0 and the mode
// starts servers (not "local").
bool NetworkEmulated(const ExperimentConfig& config);
// The servers on worker `rank`'s machine, with which it exchanges values through shared
// memory (scheduling.shared_memory); empty when that is off, or in mode local.
std::vector<int> SharedMemoryServers(const ExperimentConfig& config, int rank);
int WorkerProcessCount(const ExperimentConfig& config);

}  // namespace p3::config

#endif  // P3_PROTO_CONFIG_H_
