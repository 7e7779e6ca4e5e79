#include "p3/core/slice_plan.h"

#include <algorithm>

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
  if (options.owner_params < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("owner_params: ", options.owner_params, " is out of range; allowed >= 0"));
  }
  if (tensors.empty()) return absl::InvalidArgumentError("a model needs at least one tensor");

  SlicePlan plan;
  plan.options_ = options;
  plan.tensors_ = tensors;
  plan.server_slices_.resize(options.num_servers);
  int next_server = 0;
  int server = 0;
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
    const bool striped = options.granularity == Granularity::kSliced && options.owner_params > 0;
    int64_t pieces = options.num_servers;
    if (options.granularity == Granularity::kSliced) {
      if (striped) {
        // Whole stripes, and the slices of the last, shorter one.
        const int64_t per_stripe =
            (options.owner_params + options.slice_params - 1) / options.slice_params;
        const int64_t stripes = n / options.owner_params;
        const int64_t rest = n % options.owner_params;
        pieces = stripes > 0 && per_stripe > kMaxPlanSlices / stripes
                     ? kMaxPlanSlices + 1  // (no overflow: refused below)
                     : stripes * per_stripe + (rest + options.slice_params - 1) / options.slice_params;
      } else {
        pieces = (n + options.slice_params - 1) / options.slice_params;
      }
    }
    if (static_cast<int64_t>(plan.slices_.size()) + pieces > kMaxPlanSlices) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the plan would have more than ", kMaxPlanSlices, " slices; raise slice_params"));
    }
    plan.tensor_offsets_.push_back(offset);
    plan.first_slice_.push_back(static_cast<int>(plan.slices_.size()));

    // Boundaries of the pieces of this tensor.
    std::vector<int64_t> cuts;  // piece starts, relative to the tensor
    std::vector<bool> new_stripe;  // striped: the piece starts a stripe
    if (striped) {
      for (int64_t stripe = 0; stripe < n; stripe += options.owner_params) {
        const int64_t stripe_end = std::min(n, stripe + options.owner_params);
        for (int64_t start = stripe; start < stripe_end; start += options.slice_params) {
          cuts.push_back(start);
          new_stripe.push_back(start == stripe);
        }
      }
    } else if (options.granularity == Granularity::kSliced) {
      for (int64_t start = 0; start < n; start += options.slice_params) cuts.push_back(start);
    } else if (n > options.split_threshold && options.num_servers > 1) {
      const int64_t parts = options.num_servers;
      for (int64_t p = 0; p < parts; ++p) cuts.push_back(n * p / parts);
    } else {
      cuts.push_back(0);
    }
    for (size_t p = 0; p < cuts.size(); ++p) {
      const int64_t end = p + 1 < cuts.size() ? cuts[p + 1] : n;
      // Round-robin by slice, or striped by stripe: a stripe's slices share its server.
      if (!striped || new_stripe[p]) {
        server = next_server;
        next_server = (next_server + 1) % options.num_servers;
      }
      Slice s;
      s.id = static_cast<int>(plan.slices_.size());
      s.tensor = t;
      s.offset = offset + cuts[p];
      s.length = end - cuts[p];
      s.server = server;
      s.priority = t;
      plan.server_slices_[s.server].push_back(s.id);
      plan.slices_.push_back(s);
    }
    offset += n;
  }
  plan.first_slice_.push_back(static_cast<int>(plan.slices_.size()));
  plan.total_params_ = offset;
  return plan;
}

absl::StatusOr<SlicePlan> SlicePlan::WithSliceParams(int64_t slice_params) const {
  SlicePlanOptions options = options_;
  options.slice_params = slice_params;
  return Create(tensors_, options);
}

}  // namespace p3
