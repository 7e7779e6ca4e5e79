// The commit a binary was built from, for a benchmark's record of what it measured.
//
// Built with `--config=stamp` (.bazelrc: tools/workspace_status.sh as Bazel's
// --workspace_status_command), BuildCommit() is the workspace's HEAD at build time (short
// hash), with "+dirty" appended when tracked files had changes; otherwise "unstamped".
// Only the binaries that link //p3/base:build_commit (p3_server, bench_streaming) are
// relinked when the commit changes, and only in a stamped build: an ordinary build runs
// no git and relinks nothing when HEAD moves.
//
// The same text is in the binary's bytes as "P3_BUILD_COMMIT=<commit>" followed by a NUL,
// so that a driver can read it from the file without running the program
// (tools/bench_streaming.py).
//
// Example:
//   std::cout << "{\"build_commit\": \"" << p3::BuildCommit() << "\"}";
#ifndef P3_P3_BASE_BUILD_COMMIT_H_
#define P3_P3_BASE_BUILD_COMMIT_H_

namespace p3 {

// e.g. "f567446", "f567446+dirty" or "unstamped". Thread-safe.
const char* BuildCommit();

}  // namespace p3

#endif  // P3_P3_BASE_BUILD_COMMIT_H_
