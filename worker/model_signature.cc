#include "worker/model_signature.h"

#include <torch/torch.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "p3/core/mode.h"

namespace p3 {

absl::StatusOr<ModelSignature> DescribeModel(const WorkerOptions& options,
                                             models::BlockModel& model) {
  const ModeTraits traits = TraitsOf(options.mode);
  ModelSignature m;
  ClusterSignature& sig = m.signature;
  sig.num_workers = options.num_workers;
  sig.num_servers = static_cast<int>(options.servers.size());
  sig.plan.granularity = traits.sliced ? Granularity::kSliced : Granularity::kTensor;
  sig.plan.slice_params = options.slice_params;
  sig.plan.owner_params = traits.sliced ? options.owner_params : 0;
  sig.plan.split_threshold = options.split_threshold;
  sig.plan.num_servers = sig.num_servers;
  sig.values_on_push = traits.values_on_push;
  sig.priority = traits.priority;
  sig.wire_dtype = options.wire_dtype;
  std::map<const void*, std::string> module_names;
  for (const auto& named : model.named_parameters()) {
    module_names[named.value().unsafeGetTensorImpl()] = named.key();
  }
  for (auto& [name, p] : model.OrderedParameters()) {
    if (p.scalar_type() != torch::kFloat32) {
      return absl::InvalidArgumentError(absl::StrCat("parameter ", name, " is not float32"));
    }
    sig.tensors.push_back({name, p.sizes().vec(), "float32"});
    m.entries.push_back({name, p.numel()});
    m.params.push_back(p);
    auto named = module_names.find(p.unsafeGetTensorImpl());
    m.names.push_back(named == module_names.end() ? name
                                                  : absl::StrCat(named->second, " (", name, ")"));
  }
  return m;
}

}  // namespace p3
