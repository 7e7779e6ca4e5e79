// Writing files so that a reader never sees half of one: every result, port, trace,
// summary and checkpoint file of the project is written this way.
//
// Example:
//   P3_RETURN_IF_ERROR(WriteFileAtomically(out_dir + "/summary.json", json));
//   P3_RETURN_IF_ERROR(WriteFileAtomically(checkpoint_path, bytes, {.sync = true}));
//
// Thread-safe for different paths; two writers of one path race (the last rename wins).
#ifndef P3_P3_BASE_FILE_UTIL_H_
#define P3_P3_BASE_FILE_UTIL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace p3 {

struct WriteFileOptions {
  // Also durable across a crash of the machine: the file is flushed to the disk (fsync)
  // before the rename, and its folder after it, so that after the call returns the new
  // file survives a power loss whole. Costs a disk flush; checkpoints need it, result
  // and trace files do not. Default: false.
  bool sync = false;
};

// Writes `contents` to "<path>.tmp" and renames it to `path`: a reader sees either the
// old file or the whole new one. Errors (InvalidArgument for an empty path, Internal for
// an I/O failure) name the file and the system's reason; the temporary is removed.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents,
                                 const WriteFileOptions& options = {});

// The whole file: the one way the project reads a file whole. NotFound /
// PermissionDenied / Internal, whose message is "cannot read <path>: <the system's
// reason>".
absl::StatusOr<std::string> ReadFile(const std::string& path);

// A folder for a program's output: `dir`, created with its parents, or where `dir` is
// empty a new one, /tmp/<prefix>.XXXXXX. Returns its path; Internal names the folder and
// the system's reason.
absl::StatusOr<std::string> OutputFolder(const std::string& dir, const std::string& prefix);

}  // namespace p3

#endif  // P3_P3_BASE_FILE_UTIL_H_
