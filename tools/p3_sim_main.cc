// p3_sim: predicts the throughput of one experiment config with the discrete-event
// simulator (p3/sim/simulator.h, docs/simulator.md).
//
// Example (one command):
//   bazel run //tools:p3_sim -- --config=$PWD/configs/bench/resnet50.textproto
//       --calibration=$PWD/configs/sim/calibration_cpu.json
//       --cpu_cores_per_host=2 --machines_per_host=2 --set=network.bandwidth_gbps=2.5
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "p3/base/file_util.h"
#include "p3/core/mode.h"
#include "p3/core/wire_dtype.h"
#include "p3/sim/sim_config.h"
#include "p3/sim/simulator.h"
#include "p3/sim/tune.h"
#include "proto/config.h"
#include "proto/program.h"
#include "tools/launcher/command_line.h"
#include "tools/launcher/trace_merge.h"
#include "tools/launcher/tuning.h"
#include "tools/cpp/runfiles/runfiles.h"

ABSL_FLAG(std::string, config, "", "experiment config (text proto), as for launch_cluster");
ABSL_FLAG(std::string, profile, "",
          "per-block forward/backward seconds (JSON, docs/simulator.md); default: the "
          "model's committed profile in --profile_dir at the config's batch, else at the "
          "nearest batch (times scaled linearly)");
ABSL_FLAG(std::string, profile_dir, "configs/sim/profiles",
          "where the committed profiles are (relative: where bazel run was invoked, the "
          "current directory, then p3_sim's runfiles)");
ABSL_FLAG(std::string, calibration, "", "calibration JSON (Calibration fields); default: built-in");
ABSL_FLAG(bool, allreduce, false, "simulate ring all-reduce with DDP's buckets instead of mode");
ABSL_FLAG(double, cpu_cores_per_host, 0,
          "cores per host shared by its machines' computation and communication; 0: the CPU "
          "is never a limit and the computation runs on an accelerator");
ABSL_FLAG(int32_t, machines_per_host, 1, "emulated machines per host (sharing its cores)");
ABSL_FLAG(int32_t, iterations, 8, "iterations simulated");
ABSL_FLAG(int32_t, warmup, 3, "first iterations left out of the figures");
ABSL_FLAG(double, compute_scale, 0, "multiplies every profile time (0: the calibration's)");
ABSL_FLAG(double, worker_start_stagger_s, 0,
          "worker r starts its first iteration r x this later (seconds)");
ABSL_FLAG(double, compute_jitter, 0,
          "relative sd of each worker's computation per iteration (seeded; 0: none)");
ABSL_FLAG(double, block_jitter, 0,
          "sd of the log of each block's computation, per worker, iteration and block "
          "(a log-normal factor of mean 1, seeded; 0: none)");
ABSL_FLAG(uint64_t, jitter_seed, 1, "the seed of --compute_jitter's and --block_jitter's draws");
ABSL_FLAG(bool, equal_split, false,
          "share links and CPUs equally without handing on unused shares: much faster on "
          "large clusters (docs/simulator.md)");
ABSL_FLAG(std::string, out, "", "write the result as JSON here");
ABSL_FLAG(std::string, trace, "", "write a Chrome trace (the real trace's format) here");

namespace {

using bazel::tools::cpp::runfiles::Runfiles;

constexpr char kUsage[] =
    "Predicts samples/s, iteration time and its breakdown for an experiment config.\n"
    "\n"
    "  bazel run //tools:p3_sim -- --config=FILE [--set=field.path=value ...] "
    "[--profile=FILE]\n"
    "      [--calibration=FILE] [--cpu_cores_per_host=N --machines_per_host=M] [--allreduce]\n"
    "      [--out=result.json] [--trace=trace.json]\n"
    "\n"
    "See docs/simulator.md.";

// The smallest N of the files "<model>_b<batch>_i<N>_cpu.json" in `dir`; 0 when none.
int64_t SmallestProfiledImageSize(const std::string& dir, const std::string& model) {
  int64_t smallest = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string filename = entry.path().filename().string();
    absl::string_view name = filename;
    if (!absl::ConsumePrefix(&name, model + "_b") || !absl::ConsumeSuffix(&name, "_cpu.json")) {
      continue;
    }
    const size_t at = name.find("_i");
    int64_t size = 0;
    if (at == absl::string_view::npos || !absl::SimpleAtoi(name.substr(at + 2), &size) ||
        size <= 0) {
      continue;
    }
    if (smallest == 0 || size < smallest) smallest = size;
  }
  return smallest;
}

int Main(int argc, char** argv) {
  p3::Program program("p3_sim", argc, argv,
                      {.usage = kUsage, .skip_lock_order_checks = true, .config_overrides = true});
  if (absl::Status none = program.NoArguments(); !none.ok()) return program.Fail(2, none.message());
  // A relative path is where `bazel run` was invoked, if it is there; else as given.
  p3::tools::launcher::PathSearch search;
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY"); dir != nullptr) {
    search.invocation_dir = dir;
  }
  auto resolve = [&search](const std::string& path) {
    return p3::tools::launcher::ResolveInputPath(path, search);
  };
  absl::StatusOr<p3::config::ExperimentConfig> config =
      program.LoadConfig(resolve(absl::GetFlag(FLAGS_config)));
  if (!config.ok()) return program.Fail(2, config.status().message());
  // A pipeline config is not a cluster of workers and servers: say so before looking
  // for a profile (pipeline_lstm's row_lstm has one; the message would be another).
  if (absl::Status s = p3::sim::CheckSimulatable(*config); !s.ok()) {
    return program.Fail(2, s.message());
  }
  std::string profile_path = absl::GetFlag(FLAGS_profile);
  std::string other_image_size;
  if (profile_path.empty()) {
    const std::string dir = absl::GetFlag(FLAGS_profile_dir);
    std::vector<std::string> dirs;
    if (std::filesystem::path(dir).is_absolute()) {
      dirs.push_back(dir);
    } else {
      if (!search.invocation_dir.empty()) dirs.push_back(search.invocation_dir + "/" + dir);
      std::error_code error;
      dirs.push_back((std::filesystem::current_path(error) / dir).string());
      std::string runfiles_error;
      std::unique_ptr<Runfiles> runfiles(Runfiles::Create(argv[0], &runfiles_error));
      if (runfiles != nullptr) dirs.push_back(runfiles->Rlocation("p3/" + dir));
    }
    for (const std::string& d : dirs) {
      profile_path = p3::tools::launcher::FindProfile(d, config->model().name(),
                                                      config->training().batch_size(),
                                                      config->model().image_size());
      if (!profile_path.empty()) break;
    }
    // None at the config's image size: the model's profile at its smallest measured size
    // (inception_v3 has none at 32 x 32), said beside the result.
    for (size_t i = 0; profile_path.empty() && i < dirs.size(); ++i) {
      const int64_t size = SmallestProfiledImageSize(dirs[i], config->model().name());
      if (size == 0) continue;
      profile_path = p3::tools::launcher::FindProfile(dirs[i], config->model().name(),
                                                      config->training().batch_size(), size);
      other_image_size = absl::StrCat("; measured at image size ", size, ", the config's is ",
                                      config->model().image_size(),
                                      " (0: the input's): the times are of that size");
    }
    if (profile_path.empty()) {
      return program.Fail(
          2, absl::StrCat("no profile of model \"", config->model().name(), "\" in ",
                          absl::StrJoin(dirs, ", "), " (", config->model().name(),
                          "_b<batch>_cpu.json, or _i<image_size>_cpu.json above 32 x 32; "
                          "make one with models/model_bench --profile, docs/simulator.md, "
                          "\"Profile files\"; or give one with --profile)"));
    }
  } else {
    profile_path = resolve(profile_path);
  }
  p3::sim::SimOptions options;
  absl::StatusOr<p3::sim::Profile> profile = p3::sim::LoadProfile(profile_path);
  if (!profile.ok()) {
    return program.Fail(2, absl::StrCat(profile.status().message(), " (give one with --profile)"));
  }
  const int64_t profile_batch = profile->batch;
  options.profile = *std::move(profile);
  if (absl::Status s = p3::sim::ApplyConfig(*config, &options); !s.ok()) {
    return program.Fail(2, s.message());
  }
  if (!absl::GetFlag(FLAGS_calibration).empty()) {
    if (absl::Status s = p3::sim::LoadCalibration(resolve(absl::GetFlag(FLAGS_calibration)),
                                                  &options.calibration);
        !s.ok()) {
      return program.Fail(2, s.message());
    }
  }
  if (absl::GetFlag(FLAGS_compute_scale) > 0) {
    options.calibration.compute_scale = absl::GetFlag(FLAGS_compute_scale);
  }
  options.allreduce = absl::GetFlag(FLAGS_allreduce);
  options.cpu_cores_per_host = absl::GetFlag(FLAGS_cpu_cores_per_host);
  options.machines_per_host = absl::GetFlag(FLAGS_machines_per_host);
  options.iterations = absl::GetFlag(FLAGS_iterations);
  options.warmup_iterations = absl::GetFlag(FLAGS_warmup);
  options.trace = !absl::GetFlag(FLAGS_trace).empty();
  options.equal_split = absl::GetFlag(FLAGS_equal_split);
  options.worker_start_stagger_s = absl::GetFlag(FLAGS_worker_start_stagger_s);
  options.compute_jitter = absl::GetFlag(FLAGS_compute_jitter);
  options.block_jitter = absl::GetFlag(FLAGS_block_jitter);
  options.jitter_seed = absl::GetFlag(FLAGS_jitter_seed);
  // scheduling.slice_params absent or 0 / credit_bytes -1 (automatic): the search
  // launch_cluster runs (p3/sim/tune.h), with this command's options, then the chosen point.
  const p3::sim::SearchedKnobs knobs =
      p3::sim::KnobsToSearch(p3::config::SliceParamsAuto(*config),
                             p3::config::CreditBytesAuto(*config), options.mode, options.allreduce);
  const bool search_slice = knobs.slice;
  const bool search_credit = knobs.credit;
  if (search_slice || search_credit) {
    absl::StatusOr<p3::sim::TuningChoice> choice = p3::sim::ChooseTuningPoint(
        p3::sim::TuningGrid(search_slice, search_credit, options.slice_params,
                            options.credit_bytes),
        [&options](const p3::sim::TuningPoint& point) {
          return p3::sim::PredictSamplesPerSecond(options, point);
        });
    if (!choice.ok()) {
      return program.Fail(1, absl::StrCat("the automatic search failed: ",
                                          choice.status().message()));
    }
    std::printf("automatic search (p3/sim/tune.h): %zu points\n", choice->candidates.size());
    std::printf("| slice_params | credit_bytes | samples/s |\n|---:|---:|---:|\n");
    for (size_t i = 0; i < choice->candidates.size(); ++i) {
      const p3::sim::TuningCandidate& c = choice->candidates[i];
      std::printf("| %ld | %ld | %s%s |\n", static_cast<long>(c.point.slice_params),
                  static_cast<long>(c.point.credit_bytes),
                  c.ok ? absl::StrFormat("%.3f", c.samples_per_second).c_str()
                       : ("failed: " + c.error).c_str(),
                  static_cast<int>(i) == choice->chosen ? " (chosen)" : "");
    }
    options.slice_params = choice->candidates[choice->chosen].point.slice_params;
    options.credit_bytes = choice->candidates[choice->chosen].point.credit_bytes;
  } else if ((p3::config::SliceParamsAuto(*config) && !p3::config::SliceParamsAbsent(*config)) ||
             p3::config::CreditBytesAuto(*config)) {
    std::printf("automatic slice_params / credit_bytes: nothing to search in this mode; the "
                "defaults\n");
  }
  absl::StatusOr<p3::sim::SimResult> result = p3::sim::Simulate(options);
  if (!result.ok()) return program.Fail(1, result.status().message());
  const std::string mode =
      options.allreduce ? std::string("allreduce") : p3::ModeName(options.mode);
  if (options.mode == p3::Mode::kLocal && !options.allreduce) options.workers = 1;
  const std::string wire =
      options.wire_dtype == p3::WireDType::kFloat32 || options.allreduce
          ? std::string()
          : absl::StrCat(", ", p3::WireDTypeName(options.wire_dtype), " wire");
  std::printf("%s, %s, %d workers + %d servers (%s), %.3g Gbit/s%s: %.3f samples/s, "
              "iteration %.4f s\n",
              options.profile.model.c_str(), mode.c_str(), options.workers,
              options.allreduce ? 0 : options.servers,
              options.colocated ? "colocated" : "separate", options.bandwidth_gbps, wire.c_str(),
              result->samples_per_second, result->iteration_seconds);
  std::printf("profile: %s (batch %ld%s%s)\n", profile_path.c_str(),
              static_cast<long>(profile_batch),
              profile_batch == options.profile.batch
                  ? ""
                  : absl::StrCat(", times scaled linearly to batch ", options.profile.batch)
                        .c_str(),
              other_image_size.c_str());
  std::printf("| worker | iteration s | compute s | exposed communication s | idle s |\n");
  std::printf("|---:|---:|---:|---:|---:|\n");
  for (size_t w = 0; w < result->workers.size(); ++w) {
    const p3::sim::WorkerBreakdown& b = result->workers[w];
    std::printf("| %zu | %.4f | %.4f | %.4f | %.4f |\n", w, b.iteration_s, b.compute_s,
                b.exposed_comm_s, b.idle_s);
  }
  const p3::sim::CpuBreakdown& cpu = result->cpu;
  std::printf("CPU per iteration, core-seconds: compute %.4f, send %.4f, receive %.4f, "
              "update %.4f, ring %.4f, preemptions %.4f, interference %.4f (total %.4f)\n",
              cpu.compute_s, cpu.send_s, cpu.recv_s, cpu.update_s, cpu.ring_s, cpu.preempt_s,
              cpu.interference_s, cpu.total_s());
  std::printf("%d slices, %ld messages, %ld events, %.2f simulated s\n", result->num_slices,
              static_cast<long>(result->num_messages), static_cast<long>(result->events),
              result->simulated_seconds);
  if (!absl::GetFlag(FLAGS_out).empty()) {
    const std::string out = resolve(absl::GetFlag(FLAGS_out));
    if (absl::Status s = p3::WriteFileAtomically(out, p3::sim::ResultJson(options, *result));
        !s.ok()) {
      return program.Fail(1, s.message());
    }
  }
  if (options.trace) {
    // One file per process, merged as the launcher merges the real ones.
    const std::string trace = resolve(absl::GetFlag(FLAGS_trace));
    const std::string dir = trace + ".parts";
    std::filesystem::create_directories(dir);
    std::vector<std::string> parts;
    for (size_t p = 0; p < result->traces.size(); ++p) {
      parts.push_back(absl::StrCat(dir, "/process_", p, ".json"));
      if (absl::Status s = result->traces[p]->WriteJson(parts.back()); !s.ok()) {
        return program.Fail(1, s.message());
      }
    }
    absl::StatusOr<p3::tools::TraceMergeStats> merged = p3::tools::MergeTraceFiles(parts, trace);
    std::filesystem::remove_all(dir);
    if (!merged.ok()) return program.Fail(1, merged.status().message());
    std::printf("trace: %s (%ld events)\n", trace.c_str(), static_cast<long>(merged->events));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
