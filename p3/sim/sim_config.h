// What an experiment config (proto/config.proto) means for the simulator, the
// simulator's calibration files, and its results as JSON. The layer between the
// library (p3/sim/simulator.h) and //tools:p3_sim.
//
// Example:
//   absl::StatusOr<config::ExperimentConfig> config = config::LoadConfig(path, overrides);
//   SimOptions options;
//   options.profile = *LoadProfile(profile_path);
//   absl::Status s = ApplyConfig(*config, &options);   // mode, cluster, network, scheduling
//   s = LoadCalibration("configs/sim/calibration_cpu.json", &options.calibration);
//   absl::StatusOr<SimResult> result = Simulate(options);
//   std::string json = ResultJson(options, *result);
#ifndef P3_P3_SIM_SIM_CONFIG_H_
#define P3_P3_SIM_SIM_CONFIG_H_

#include <string>

#include "absl/status/status.h"
#include "p3/sim/simulator.h"
#include "proto/config.pb.h"

namespace p3::sim {

// OK when the config is one the simulator can run: a cluster of workers and parameter
// servers (every mode of p3/core/mode.h, local included). InvalidArgument otherwise, saying
// why: mode "pipeline" (a pipeline of stages, tools/pipeline_train) or an unknown mode.
absl::Status CheckSimulatable(const config::ExperimentConfig& config);

// Sets mode, workers, servers, placement, shared memory, bandwidth, slicing, parts and
// credit from a loaded (defaulted, validated) config. The profile's times are for
// profile.batch samples; a different training.batch_size scales them linearly (stated
// in ResultJson's "notes"); model.output_pieces > 1 cuts its last block
// (CutOutputBlock). Fails as CheckSimulatable does, or naming model.output_pieces.
absl::Status ApplyConfig(const config::ExperimentConfig& config, SimOptions* options);

// Overrides the fields of `calibration` named in the JSON object in `path` (the field
// names of Calibration); an unknown name is an error. Errors name the file (a file that
// cannot be read or is not JSON: ReadJsonFile's, p3/base/json_file.h).
absl::Status LoadCalibration(const std::string& path, Calibration* calibration);

// {"samples_per_second", "iteration_seconds", "workers": [{"iteration_s", "compute_s",
//  "exposed_comm_s", "idle_s"}], "cpu_s_per_iteration": {"compute", "send", "receive",
//  "update", "ring", "preempt", "total"}, "mode", "model", "bandwidth_gbps", ... , "calibration"}.
std::string ResultJson(const SimOptions& options, const SimResult& result);

}  // namespace p3::sim

#endif  // P3_P3_SIM_SIM_CONFIG_H_
