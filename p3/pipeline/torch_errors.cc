#include "p3/pipeline/torch_errors.h"

#include <c10/util/Exception.h>

#include <exception>

#include "absl/strings/str_cat.h"

namespace p3::pipeline {

absl::Status CatchTorchErrors(absl::string_view context, absl::FunctionRef<absl::Status()> body) {
  try {
    return body();
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat(context, ": ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(context, ": ", e.what()));
  }
}

}  // namespace p3::pipeline
