#include "p3/pipeline/run_config.h"

#include "p3/pipeline/schedule.h"
#include "p3/base/status_macros.h"
#include "proto/config_options.h"

namespace p3::pipeline {

absl::StatusOr<PipelineOptions> PipelineOptionsFromConfig(const config::ExperimentConfig& config) {
  const config::PipelineConfig& pc = config.pipeline();
  PipelineOptions po;
  P3_ASSIGN_OR_RETURN(po.mode, ParseWeightMode(pc.weights()));
  po.spectrain_version = pc.spectrain_version();
  po.num_stages = pc.stages();
  P3_ASSIGN_OR_RETURN(po.schedule, ParsePipelineSchedule(pc.schedule().empty() ? "1f1b"
                                                                                : pc.schedule()));
  po.microbatches = pc.microbatches() > 0 ? pc.microbatches() : 1;
  po.recompute = pc.recompute();
  po.chunks = pc.chunks() > 0 ? pc.chunks() : 1;
  for (int k = 0; k < pc.stages(); ++k) {
    po.devices.push_back(pc.devices_size() > 0 ? pc.devices(k) : "cpu");
  }
  po.boundaries.assign(pc.boundaries().begin(), pc.boundaries().end());
  po.sgd.lr = config.optimizer().lr();
  po.sgd.momentum = config.optimizer().momentum();
  po.sgd.weight_decay = config.optimizer().weight_decay();
  po.sgd.nesterov = config.optimizer().nesterov();
  po.sgd.schedule = OptimizerFromConfig(config).schedule;
  po.threads_per_stage = config.training().threads();
  return po;
}

int64_t RunIterations(const config::ExperimentConfig& config, int64_t per_epoch) {
  return config.training().iterations() > 0 ? config.training().iterations()
                                            : config.training().epochs() * per_epoch;
}

}  // namespace p3::pipeline
