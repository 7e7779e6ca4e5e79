#include "tools/launcher/worker_program.h"

#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace p3::tools {

std::vector<std::string> WorkerProgramEnvironment(const WorkerProgramEnv& env) {
  const std::string values[] = {absl::StrCat(env.rank),
                                absl::StrCat(env.world_size),
                                env.servers,
                                env.config_path,
                                env.result_file,
                                env.records_file,
                                env.trace_file,
                                env.rejoin ? "1" : "0",
                                env.run_dir};
  static_assert(std::size(kWorkerProgramVariables) == std::size(values));
  std::vector<std::string> assignments;
  for (size_t i = 0; i < std::size(values); ++i) {
    assignments.push_back(absl::StrCat(kWorkerProgramVariables[i], "=", values[i]));
  }
  return assignments;
}

std::vector<std::string> WorkerProgramArgv(const std::string& command,
                                           const WorkerProgramEnv& env,
                                           const std::string& working_dir) {
  std::vector<std::string> argv = {"/usr/bin/env"};
  for (std::string& assignment : WorkerProgramEnvironment(env)) {
    argv.push_back(std::move(assignment));
  }
  const std::string script =
      working_dir.empty()
          ? command
          : absl::StrCat("cd -- '", absl::StrReplaceAll(working_dir, {{"'", "'\\''"}}),
                         "' || exit 1\n", command);
  argv.insert(argv.end(), {"/bin/sh", "-c", script});
  return argv;
}

}  // namespace p3::tools
