#include "server/optimizer_config.h"

namespace p3 {

OptimizerOptions OptimizerFromConfig(const config::ExperimentConfig& config) {
  const config::OptimizerConfig& c = config.optimizer();
  OptimizerOptions o;
  o.kind = c.name() == "adam" ? OptimizerKind::kAdam : OptimizerKind::kSgd;
  o.lr = c.lr();
  o.momentum = c.momentum();
  o.weight_decay = c.weight_decay();
  o.nesterov = c.nesterov();
  o.beta1 = c.beta1();
  o.beta2 = c.beta2();
  o.eps = c.eps();
  return o;
}

}  // namespace p3
