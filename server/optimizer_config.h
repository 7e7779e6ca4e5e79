// The optimizer an experiment config asks for. Servers apply it; the `local` mode builds
// libtorch's optimizer from the same options, so a config means one optimizer everywhere.
#ifndef P3_SERVER_OPTIMIZER_CONFIG_H_
#define P3_SERVER_OPTIMIZER_CONFIG_H_

#include "p3/optimizer.h"
#include "proto/config.pb.h"

namespace p3 {

// `config` must have its defaults filled (tools/config.h).
OptimizerOptions OptimizerFromConfig(const config::ExperimentConfig& config);

}  // namespace p3

#endif  // P3_SERVER_OPTIMIZER_CONFIG_H_
