// Writing files so that a reader never sees half of one: every result, port, trace,
// summary and checkpoint file of the project is written this way.
//
// Example:
//   P3_RETURN_IF_ERROR(WriteFileAtomically(out_dir + "/summary.json", json));
//
// Thread-safe for different paths; two writers of one path race (the last rename wins).
#ifndef P3_P3_FILE_UTIL_H_
#define P3_P3_FILE_UTIL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace p3 {

// Writes `contents` to "<path>.tmp" and renames it to `path`: a reader sees either the
// old file or the whole new one. Errors (InvalidArgument for an empty path, Internal for
// an I/O failure) name the file and the system's reason; the temporary is removed.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

// The whole file. NotFound / PermissionDenied / Internal naming the file.
absl::StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace p3

#endif  // P3_P3_FILE_UTIL_H_
