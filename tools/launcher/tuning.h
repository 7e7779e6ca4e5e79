// Automatic slice size and credit: what launch_cluster does, before any process starts,
// for a config with scheduling.slice_params absent (the default) or 0, or
// scheduling.credit_bytes = -1 (proto/config.h; docs/simulator.md, "Automatic slice size
// and credit"). It runs the
// simulator (p3/sim) on this config for every point of a grid (p3/sim/tune.h: slice
// sizes 10 k .. 1 M, credits 0 .. 16 MiB), with the committed profile of the model and
// the calibration of this machine's data path, and picks the best predicted throughput.
// The launcher then gives the choice to every process as a --set override (in the
// resolved config), prints the table and writes it into summary.json ("tuning").
//
// No search, and the defaults (slice_params 40000, credit_bytes 0), with the reason in
// the report, when: the model has no profile (or, for an absent slice_params, the workers
// run the user's own program, worker.command), the mode has nothing to tune (local; a mode
// that sends whole tensors for the slice size), the processes run on other hosts (the
// config does not give their link rate), or no point could be simulated. An absent
// slice_params in a mode where the slice size means nothing (local, whole tensors) is
// not reported at all: nothing was asked for.
//
// Example:
//   if (NeedsTuning(config)) {
//     TuningOptions options;
//     options.profile_dir = "/home/me/p3/configs/sim/profiles";
//     options.calibration_path = "/home/me/p3/configs/sim/calibration_cpu.json";
//     options.cpu_cores_per_host = std::thread::hardware_concurrency();
//     TuningReport report = TuneConfig(config, options);
//     for (const std::string& line : TuningLogLines(report)) std::cout << "[p3] " << line << "\n";
//     overrides = TuningOverrides(report);   // {"scheduling.slice_params=80000"}
//   }
//
// Stateless; thread-compatible (TuneConfig reads files and runs the simulator).
#ifndef P3_TOOLS_LAUNCHER_TUNING_H_
#define P3_TOOLS_LAUNCHER_TUNING_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "p3/sim/tune.h"
#include "proto/config.pb.h"

namespace p3::tools::launcher {

struct TuningOptions {
  // Folder of the simulator's profiles, "<model>_b<batch>_cpu.json" (configs/sim/profiles).
  // Required.
  std::string profile_dir;
  // Calibration JSON (Calibration fields, p3/sim/sim_config.h); empty: the simulator's
  // built-in values. Default: empty.
  std::string calibration_path;
  // Cores of the host that runs every emulated machine (they share them for computing
  // and communicating); 0: the CPU is never a limit. Default: 0.
  double cpu_cores_per_host = 0;
  // The processes run on other hosts (--hosts, --slurm, --kubernetes). Default: false.
  bool other_hosts = false;
  // Iterations simulated per point, and the first ones left out. Default: 6, 2.
  int iterations = 6;
  int warmup_iterations = 2;
};

struct TuningReport {
  // What the config asked for; slice_absent: slice_auto because the field is absent
  // (automatic as the default: no online search unless the config turns it on).
  bool slice_auto = false;
  bool slice_absent = false;
  bool credit_auto = false;
  // The values every process gets (the config's when not automatic).
  int64_t slice_params = 0;
  int64_t credit_bytes = 0;
  // A grid was simulated; false: the defaults, for `reason`.
  bool searched = false;
  // Why nothing (or only one of the two) was searched; "" when everything asked for was.
  std::string reason;
  // The profile and calibration used; "" when none.
  std::string profile;
  std::string profile_source;
  std::string calibration;
  double cpu_cores_per_host = 0;
  int machines_per_host = 1;
  int iterations = 0;
  int warmup_iterations = 0;
  // The grid with the predictions, when searched.
  std::optional<sim::TuningChoice> choice;
  // Wall-clock seconds the search took.
  double seconds = 0;
  // The online search (scheduling.online_search) after the prediction: on when the config
  // says so, or leaves it absent with slice_params 0 (explicitly) and nothing rules it out.
  bool online_search = false;
  bool online_search_in_config = false;  // explicit in the config: no override
  // Why it is off ("" when on, or when the slice size was not automatic).
  std::string online_reason;
  // When on: the ownership stripes and the slice sizes worker 0 times, and the iterations
  // the search takes at most.
  int64_t owner_params = 0;
  std::vector<int64_t> online_candidates;
  int64_t online_iterations = 0;
};

// The config asks for an automatic slice size or credit.
bool NeedsTuning(const config::ExperimentConfig& config);

// The profile for `model` at `batch` in `dir`: "<model>_b<batch>_cpu.json", else the
// model's profile at the nearest other batch, the smaller of two equally near (the
// simulator scales the times linearly);
// "" when the model has none. Those profiles are of 32 x 32 images (or none); for an
// image_size above 32, "<model>_b<batch>_i<image_size>_cpu.json" the same way.
std::string FindProfile(const std::string& dir, const std::string& model, int64_t batch,
                        int64_t image_size);

// Searches what the config leaves automatic (see above), then decides the online search:
// on with slice_params 0 (not absent) unless the config sets it, the mode does not re-plan
// (no slices, or values pulled), the wire is float16, checkpoints are on, or the run is
// shorter than ten times the search (training.iterations). Never fails: without a
// prediction it keeps the defaults and says why in `reason`.
TuningReport TuneConfig(const config::ExperimentConfig& config, const TuningOptions& options);

// What the launcher prints (without "[p3] "): the grid with the predictions, the choice,
// or the fallback and its reason.
std::vector<std::string> TuningLogLines(const TuningReport& report);

// The overrides that give every process the values: "scheduling.slice_params=80000",
// "scheduling.credit_bytes=0" (only for what was automatic), and
// "scheduling.online_search=true" when the launcher turned the online search on.
std::vector<std::string> TuningOverrides(const TuningReport& report);

// summary.json's "tuning" member (docs/launcher.md).
nlohmann::ordered_json TuningJson(const TuningReport& report);

}  // namespace p3::tools::launcher

#endif  // P3_TOOLS_LAUNCHER_TUNING_H_
