// The one place where the pipeline turns libtorch's exceptions into absl::Status.
//
// libtorch reports failures by throwing c10::Error (a std::exception); the pipeline's
// API reports them as Status. Every call into libtorch that can fail on input (a model's
// forward or backward, an update, a move to a device, a batch loaded from a data set)
// runs inside CatchTorchErrors() at the boundary where the Status is returned.
//
// Example:
//   absl::Status status = CatchTorchErrors(
//       absl::StrCat("stage ", k, ": forward of mini-batch ", i), [&]() -> absl::Status {
//         y = model.ForwardBlock(b, x);
//         return absl::OkStatus();
//       });
//   // On a throw: InternalError("stage 1: forward of mini-batch 4: <libtorch's message>").
//
// Stateless and thread-safe.
#ifndef P3_PIPELINE_TORCH_ERRORS_H_
#define P3_PIPELINE_TORCH_ERRORS_H_

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace p3::pipeline {

// Runs `body` and returns its status. A c10::Error it throws becomes an InternalError
// "<context>: <message without libtorch's backtrace>", any other std::exception an
// InternalError "<context>: <what()>". Other exceptions propagate.
absl::Status CatchTorchErrors(absl::string_view context, absl::FunctionRef<absl::Status()> body);

}  // namespace p3::pipeline

#endif  // P3_PIPELINE_TORCH_ERRORS_H_
