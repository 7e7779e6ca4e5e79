#include "p3/slice_plan.h"

#include "absl/strings/str_cat.h"

namespace p3 {

absl::StatusOr<SlicePlan> SlicePlan::Create(const std::vector<TensorEntry>& tensors,
                                            const SlicePlanOptions& options) {
  if (options.num_servers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_servers: ", options.num_servers, " is out of range; allowed >= 1"));
  }
  if (options.slice_params < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("slice_params: ", options.slice_params, " is out of range; allowed >= 1"));
  }
  if (options.split_threshold < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "split_threshold: ", options.split_threshold, " is out of range; allowed >= 1"));
  }
  if (tensors.empty()) return absl::InvalidArgumentError("a model needs at least one tensor");

  SlicePlan plan;
  plan.options_ = options;
  plan.tensors_ = tensors;
  plan.server_slices_.resize(options.num_servers);
  int next_server = 0;
  int64_t offset = 0;
  for (int t = 0; t < static_cast<int>(tensors.size()); ++t) {
    const int64_t n = tensors[t].numel;
    if (n < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor \"", tensors[t].name, "\" has ", n, " parameters"));
    }
    if (n > kMaxPlanParams - offset) {
      return absl::InvalidArgumentError(
          absl::StrCat("the model has more than ", kMaxPlanParams, " parameters"));
    }
    const int64_t pieces = options.granularity == Granularity::kSliced
                               ? (n + options.slice_params - 1) / options.slice_params
                               : options.num_servers;
    if (static_cast<int64_t>(plan.slices_.size()) + pieces > kMaxPlanSlices) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the plan would have more than ", kMaxPlanSlices, " slices; raise slice_params"));
    }
    plan.tensor_offsets_.push_back(offset);
    plan.first_slice_.push_back(static_cast<int>(plan.slices_.size()));

    // Boundaries of the pieces of this tensor.
    std::vector<int64_t> cuts;  // piece starts, relative to the tensor
    if (options.granularity == Granularity::kSliced) {
      for (int64_t start = 0; start < n; start += options.slice_params) cuts.push_back(start);
    } else if (n > options.split_threshold && options.num_servers > 1) {
      const int64_t parts = options.num_servers;
      for (int64_t p = 0; p < parts; ++p) cuts.push_back(n * p / parts);
    } else {
      cuts.push_back(0);
    }
    for (size_t p = 0; p < cuts.size(); ++p) {
      const int64_t end = p + 1 < cuts.size() ? cuts[p + 1] : n;
      Slice s;
      s.id = static_cast<int>(plan.slices_.size());
      s.tensor = t;
      s.offset = offset + cuts[p];
      s.length = end - cuts[p];
      s.server = next_server;
      s.priority = t;
      next_server = (next_server + 1) % options.num_servers;
      plan.server_slices_[s.server].push_back(s.id);
      plan.slices_.push_back(s);
    }
    offset += n;
  }
  plan.first_slice_.push_back(static_cast<int>(plan.slices_.size()));
  plan.total_params_ = offset;
  return plan;
}

}  // namespace p3
