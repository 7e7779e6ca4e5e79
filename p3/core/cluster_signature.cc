#include "p3/core/cluster_signature.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace p3 {
namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

const char* GranularityName(Granularity g) {
  return g == Granularity::kSliced ? "sliced" : "tensor";
}

}  // namespace

std::string DescribeDifference(const ClusterSignature& got, const ClusterSignature& want) {
  if (got.num_workers != want.num_workers) {
    return absl::StrCat("cluster has ", got.num_workers, " workers, expected ", want.num_workers);
  }
  if (got.num_servers != want.num_servers) {
    return absl::StrCat("cluster has ", got.num_servers, " servers, expected ", want.num_servers);
  }
  if (got.tensors.size() != want.tensors.size()) {
    return absl::StrCat("model has ", got.tensors.size(), " tensors, expected ",
                        want.tensors.size());
  }
  for (size_t i = 0; i < got.tensors.size(); ++i) {
    const TensorSignature& a = got.tensors[i];
    const TensorSignature& b = want.tensors[i];
    if (a.name != b.name) {
      return absl::StrCat("tensor ", i, " is named \"", a.name, "\", expected \"", b.name, "\"");
    }
    if (a.shape != b.shape) {
      return absl::StrCat("tensor ", i, " \"", a.name, "\" has shape ", ShapeString(a.shape),
                          ", expected ", ShapeString(b.shape));
    }
    if (a.dtype != b.dtype) {
      return absl::StrCat("tensor ", i, " \"", a.name, "\" has dtype ", a.dtype, ", expected ",
                          b.dtype);
    }
  }
  if (got.plan.granularity != want.plan.granularity ||
      got.plan.slice_params != want.plan.slice_params ||
      got.plan.split_threshold != want.plan.split_threshold ||
      got.plan.owner_params != want.plan.owner_params ||
      got.plan.pack_params != want.plan.pack_params) {
    return absl::StrCat("slice plan (", GranularityName(got.plan.granularity), ", ",
                        got.plan.slice_params, ", ", got.plan.split_threshold, ", owner ",
                        got.plan.owner_params, ", pack ", got.plan.pack_params, ") differs from (",
                        GranularityName(want.plan.granularity), ", ", want.plan.slice_params, ", ",
                        want.plan.split_threshold, ", owner ", want.plan.owner_params, ", pack ",
                        want.plan.pack_params, ")");
  }
  if (got.values_on_push != want.values_on_push || got.priority != want.priority) {
    return "scheduling mode differs from the other workers'";
  }
  if (got.wire_dtype != want.wire_dtype) {
    return absl::StrCat("scheduling.wire_dtype is ", WireDTypeName(got.wire_dtype), ", expected ",
                        WireDTypeName(want.wire_dtype));
  }
  return "";
}

}  // namespace p3
