// What every worker and server of a run must agree on: the cluster's size, the model's
// tensors and the slicing. Workers send it in the handshake; a server refuses a worker
// whose signature differs from the first one's.
#ifndef P3_P3_CORE_CLUSTER_SIGNATURE_H_
#define P3_P3_CORE_CLUSTER_SIGNATURE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "p3/core/slice_plan.h"
#include "p3/core/wire_dtype.h"

namespace p3 {

struct TensorSignature {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype = "float32";
  bool operator==(const TensorSignature& o) const {
    return name == o.name && shape == o.shape && dtype == o.dtype;
  }
};

// What every worker of a run must agree on; sent in the handshake.
struct ClusterSignature {
  int num_workers = 1;
  int num_servers = 1;
  std::vector<TensorSignature> tensors;  // forward order
  SlicePlanOptions plan;                 // num_servers is taken from the field above
  bool values_on_push = true;
  bool priority = true;
  // How gradients and values down are encoded (scheduling.wire_dtype).
  WireDType wire_dtype = WireDType::kFloat32;
};

// Empty when equal, else a sentence saying the first difference ("tensor 3 \"fc2/0\": shape
// [30, 40], expected [40, 30]").
std::string DescribeDifference(const ClusterSignature& got, const ClusterSignature& want);

}  // namespace p3

#endif  // P3_P3_CORE_CLUSTER_SIGNATURE_H_
