#include "p3/core/slice_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace p3 {

absl::StatusOr<SlicePlan> SlicePlan::Create(const std::vector<TensorEntry>& tensors,
                                            const SlicePlanOptions& options) {
  absl::StatusOr<SlicePlan> plan = Build(tensors, options, /*packs=*/true);
  if (!plan.ok() || options.pack_params < 1) return plan;
  // Packs that would leave a server without a slice (a model of a few packs): the plan
  // without them, when it has a slice for every server.
  auto every_server = [](const SlicePlan& p) {
    return std::none_of(p.server_slices_.begin(), p.server_slices_.end(),
                        [](const std::vector<int>& s) { return s.empty(); });
  };
  if (every_server(*plan)) return plan;
  absl::StatusOr<SlicePlan> unpacked = Build(tensors, options, /*packs=*/false);
  if (unpacked.ok() && every_server(*unpacked)) return unpacked;
  return plan;
}

absl::StatusOr<SlicePlan> SlicePlan::Build(const std::vector<TensorEntry>& tensors,
                                           const SlicePlanOptions& options, bool packs) {
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
  if (options.pack_params < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("pack_params: ", options.pack_params, " is out of range; allowed >= 0"));
  }
  if (tensors.empty()) return absl::InvalidArgumentError("a model needs at least one tensor");

  SlicePlan plan;
  plan.options_ = options;
  plan.tensors_ = tensors;
  plan.server_slices_.resize(options.num_servers);
  const int num_tensors = static_cast<int>(tensors.size());
  int64_t offset = 0;
  for (const TensorEntry& tensor : tensors) {
    if (tensor.numel < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor \"", tensor.name, "\" has ", tensor.numel, " parameters"));
    }
    if (tensor.numel > kMaxPlanParams - offset) {
      return absl::InvalidArgumentError(
          absl::StrCat("the model has more than ", kMaxPlanParams, " parameters"));
    }
    plan.tensor_offsets_.push_back(offset);
    offset += tensor.numel;
  }
  plan.total_params_ = offset;
  const bool sliced = options.granularity == Granularity::kSliced;
  const bool striped = sliced && options.owner_params > 0;
  const bool packing = packs && sliced && options.pack_params > 0;
  int next_server = 0;
  int server = 0;
  // Gives the next server in the round robin (by slice, or by stripe or pack).
  auto take_server = [&] {
    server = next_server;
    next_server = (next_server + 1) % options.num_servers;
    return server;
  };
  auto add_slice = [&](int first_tensor, int last_tensor, int64_t at, int64_t length) {
    Slice s;
    s.id = static_cast<int>(plan.slices_.size());
    s.tensor = first_tensor;
    s.last_tensor = last_tensor;
    s.offset = at;
    s.length = length;
    s.server = server;
    s.priority = first_tensor;
    plan.server_slices_[s.server].push_back(s.id);
    plan.slices_.push_back(s);
  };
  auto too_many = [&](int64_t pieces) -> absl::Status {
    if (static_cast<int64_t>(plan.slices_.size()) + pieces > kMaxPlanSlices) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the plan would have more than ", kMaxPlanSlices, " slices; raise slice_params"));
    }
    return absl::OkStatus();
  };
  plan.first_slice_.resize(num_tensors);
  plan.end_slice_.resize(num_tensors);
  for (int t = 0; t < num_tensors;) {
    const int64_t n = tensors[t].numel;
    if (packing && n < options.pack_params) {
      // A pack: this small tensor and the small ones after it, as many as fit.
      int end = t;
      int64_t length = 0;
      while (end < num_tensors && tensors[end].numel < options.pack_params &&
             length + tensors[end].numel <= options.pack_params) {
        length += tensors[end].numel;
        ++end;
      }
      if (absl::Status s = too_many(1); !s.ok()) return s;
      take_server();
      for (int u = t; u < end; ++u) {
        plan.first_slice_[u] = static_cast<int>(plan.slices_.size());
        plan.end_slice_[u] = plan.first_slice_[u] + 1;
      }
      add_slice(t, end - 1, plan.tensor_offsets_[t], length);
      t = end;
      continue;
    }
    int64_t pieces = options.num_servers;
    if (sliced) {
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
    if (absl::Status s = too_many(pieces); !s.ok()) return s;
    plan.first_slice_[t] = static_cast<int>(plan.slices_.size());

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
    } else if (sliced) {
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
      if (!striped || new_stripe[p]) take_server();
      add_slice(t, t, plan.tensor_offsets_[t] + cuts[p], end - cuts[p]);
    }
    plan.end_slice_[t] = static_cast<int>(plan.slices_.size());
    ++t;
  }
  return plan;
}

std::pair<int, int> SlicePlan::tensors_slices(int t_begin, int t_end) const {
  if (t_begin >= t_end) {
    const int at = t_begin < static_cast<int>(tensors_.size()) ? first_slice_[t_begin]
                                                                : static_cast<int>(slices_.size());
    return {at, at};
  }
  return {first_slice_[t_begin], end_slice_[t_end - 1]};
}

absl::StatusOr<SlicePlan> SlicePlan::WithSliceParams(int64_t slice_params) const {
  SlicePlanOptions options = options_;
  options.slice_params = slice_params;
  return Create(tensors_, options);
}

}  // namespace p3
