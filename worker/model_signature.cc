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
  sig.plan.pack_params = traits.sliced ? options.pack_params : 0;
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

std::vector<int> BlockTensors(models::BlockModel& model) {
  std::vector<int> first = {0};
  for (int64_t b = 0; b < model.num_blocks(); ++b) {
    first.push_back(first.back() + static_cast<int>(model.BlockParameters(b).size()));
  }
  return first;
}

std::vector<int> TensorBlocks(models::BlockModel& model) {
  const std::vector<int> first = BlockTensors(model);
  std::vector<int> block;
  for (size_t b = 0; b + 1 < first.size(); ++b) {
    for (int t = first[b]; t < first[b + 1]; ++t) block.push_back(static_cast<int>(b));
  }
  return block;
}

std::vector<std::string> BlockNames(const models::BlockModel& model) {
  std::vector<std::string> names;
  for (int64_t b = 0; b < model.num_blocks(); ++b) names.push_back(model.BlockName(b));
  return names;
}

std::vector<std::pair<int64_t, int64_t>> BlockSpans(const std::vector<int>& block_tensors,
                                                    const SlicePlan& plan) {
  const int num_tensors = block_tensors.back();
  auto offset = [&](int t) {
    return t < num_tensors ? plan.tensor_offset(t) : plan.total_params();
  };
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (size_t b = 0; b + 1 < block_tensors.size(); ++b) {
    spans.emplace_back(offset(block_tensors[b]),
                       offset(block_tensors[b + 1]) - offset(block_tensors[b]));
  }
  return spans;
}

}  // namespace p3
