// Reading a JSON file: the one loader for every JSON input of the C++ code (the
// simulator's profiles and calibrations, among others). Errors name the file, and for
// text that is not JSON the line and column where the parser stopped.
//
// Example:
//   P3_ASSIGN_OR_RETURN(const nlohmann::json profile, ReadJsonFile(path));
//   if (!profile.is_object()) return absl::InvalidArgumentError(path + ": not a JSON object");
//
// Stateless; thread-safe.
#ifndef P3_P3_BASE_JSON_FILE_H_
#define P3_P3_BASE_JSON_FILE_H_

#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/statusor.h"

namespace p3 {

// The parsed contents of the file at `path`, any JSON value. A file that cannot be read
// gives ReadFile's status (NotFound, PermissionDenied, Internal: "cannot read <path>:
// <reason>"); text that is not JSON gives InvalidArgument "<path>: not valid JSON: parse
// error at line L, column C: <the parser's reason>".
absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path);

}  // namespace p3

#endif  // P3_P3_BASE_JSON_FILE_H_
