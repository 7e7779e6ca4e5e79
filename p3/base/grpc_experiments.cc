#include "p3/base/grpc_experiments.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace p3 {

absl::StatusOr<bool> RequestGrpcExperiments(const char* experiments) {
  if (std::getenv("GRPC_EXPERIMENTS") != nullptr) return false;
  if (setenv("GRPC_EXPERIMENTS", experiments, /*overwrite=*/0) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot set GRPC_EXPERIMENTS: ", std::strerror(errno)));
  }
  return true;
}

}  // namespace p3
