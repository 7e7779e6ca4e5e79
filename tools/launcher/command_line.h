// The launcher's command-line helper: resolving the relative paths a user gives (or the defaults name) to absolute ones.
//
// A relative path is looked up, in order, in the directory `bazel run` was invoked from
// ($BUILD_WORKING_DIRECTORY), in the current directory, and in the launcher's runfiles
// (its data: configs/, the server and worker binaries, the Slurm task script). So
// `bazel run //tools:launch_cluster`, `bazel-bin/tools/launch_cluster` from the workspace
// and the same binary run from any other folder all find "server/p3_server".
//
// Example:
//   PathSearch search;
//   search.invocation_dir = "/home/me/p3";            // $BUILD_WORKING_DIRECTORY
//   search.current_dir = "/tmp";
//   search.runfile = [&](const std::string& p) { return runfiles->Rlocation("p3/" + p); };
//   std::string server = ResolveInputPath("server/p3_server", search);
//   // "/home/me/p3/server/p3_server" if that file exists, else "/tmp/server/p3_server" if
//   // it exists, else the runfiles' copy if it exists, else "/tmp/server/p3_server".
//
// Stateless; thread-compatible (ResolveInputPath reads the file system).
#ifndef P3_TOOLS_LAUNCHER_COMMAND_LINE_H_
#define P3_TOOLS_LAUNCHER_COMMAND_LINE_H_

#include <functional>
#include <string>
#include <vector>

namespace p3::tools::launcher {

// Where ResolveInputPath() looks for a relative path.
struct PathSearch {
  // Where `bazel run` was invoked; empty when not under `bazel run`. Default: empty.
  std::string invocation_dir;
  // The process's current directory (absolute). Default: empty (skipped).
  std::string current_dir;
  // Maps a workspace-relative path ("server/p3_server") to its absolute path in the
  // runfiles, or "" when it has none. Default: none (skipped).
  std::function<std::string(const std::string&)> runfile;
};

// `path` made absolute and normalised: as given when absolute; else the first of
// invocation_dir/path, current_dir/path and runfile(path) that exists and is not a
// directory; else current_dir/path (so that an error names where it was expected).
std::string ResolveInputPath(const std::string& path, const PathSearch& search);


}  // namespace p3::tools::launcher

#endif  // P3_TOOLS_LAUNCHER_COMMAND_LINE_H_
