// Tests of tools/launcher/worker_program.h: the P3_* environment a worker program gets
// (worker.command) and the argv that sets it, run for real with /usr/bin/env and /bin/sh.
#include "tools/launcher/worker_program.h"

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace p3::tools {
namespace {

namespace fs = std::filesystem;

WorkerProgramEnv Env() {
  WorkerProgramEnv env;
  env.rank = 1;
  env.world_size = 3;
  env.servers = "10.0.0.1:7070,10.0.0.2:7071";
  env.config_path = "/runs/x/config.textproto";
  env.result_file = "/runs/x/results/worker_1.json";
  env.records_file = "/runs/x/records/worker_1.csv";
  env.run_dir = "/runs/x";
  return env;
}

// Runs `argv` (fork/exec), waits; its exit status, or -1.
int Run(const std::vector<std::string>& argv) {
  std::vector<char*> ptrs;
  for (const std::string& arg : argv) ptrs.push_back(const_cast<char*>(arg.c_str()));
  ptrs.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    execv(ptrs[0], ptrs.data());
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// NAME=value lines of `path` (the P3_ ones).
std::map<std::string, std::string> ReadEnv(const std::string& path) {
  std::map<std::string, std::string> vars;
  std::ifstream file(path);
  for (std::string line; std::getline(file, line);) {
    const size_t equals = line.find('=');
    if (line.rfind("P3_", 0) == 0 && equals != std::string::npos) {
      vars[line.substr(0, equals)] = line.substr(equals + 1);
    }
  }
  return vars;
}

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  const fs::path dir = fs::path(base != nullptr ? base : "/tmp") / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

CATCH_TEST_CASE("the environment names every variable of the contract, in order, with its value") {
  WorkerProgramEnv env = Env();
  CATCH_CHECK(WorkerProgramEnvironment(env) ==
              std::vector<std::string>{"P3_RANK=1", "P3_WORLD_SIZE=3",
                                       "P3_SERVERS=10.0.0.1:7070,10.0.0.2:7071",
                                       "P3_CONFIG=/runs/x/config.textproto",
                                       "P3_RESULT_FILE=/runs/x/results/worker_1.json",
                                       "P3_RECORDS_FILE=/runs/x/records/worker_1.csv",
                                       "P3_TRACE_FILE=", "P3_REJOIN=0", "P3_RUN_DIR=/runs/x"});
  env.rejoin = true;
  env.trace_file = "/runs/x/traces/worker_1.json";
  const std::vector<std::string> again = WorkerProgramEnvironment(env);
  CATCH_CHECK(again[6] == "P3_TRACE_FILE=/runs/x/traces/worker_1.json");
  CATCH_CHECK(again[7] == "P3_REJOIN=1");
  CATCH_CHECK(std::size(kWorkerProgramVariables) == again.size());
}

CATCH_TEST_CASE("the argv is env with the variables, then /bin/sh -c and the command") {
  const std::vector<std::string> argv = WorkerProgramArgv("python3 train.py --epochs 3", Env());
  CATCH_REQUIRE(argv.size() == 1 + 9 + 3);
  CATCH_CHECK(argv.front() == "/usr/bin/env");
  CATCH_CHECK(argv[1] == "P3_RANK=1");
  CATCH_CHECK(std::vector<std::string>(argv.end() - 3, argv.end()) ==
              std::vector<std::string>{"/bin/sh", "-c", "python3 train.py --epochs 3"});
}

CATCH_TEST_CASE("run for real: the program sees the variables, in the working folder given") {
  // A folder name a shell would split or unquote: the cd must survive it.
  const std::string dir = TempDir("it's a dir");
  const std::string out = dir + "/env.txt";
  WorkerProgramEnv env = Env();
  env.rejoin = true;
  const int status = Run(WorkerProgramArgv("env > env.txt && pwd > pwd.txt; exit 3", env, dir));
  CATCH_CHECK(status == 3);
  const std::map<std::string, std::string> vars = ReadEnv(out);
  CATCH_CHECK(vars.size() == std::size(kWorkerProgramVariables));
  CATCH_CHECK(vars.at("P3_RANK") == "1");
  CATCH_CHECK(vars.at("P3_WORLD_SIZE") == "3");
  CATCH_CHECK(vars.at("P3_SERVERS") == "10.0.0.1:7070,10.0.0.2:7071");
  CATCH_CHECK(vars.at("P3_TRACE_FILE").empty());
  CATCH_CHECK(vars.at("P3_REJOIN") == "1");
  std::ifstream pwd(dir + "/pwd.txt");
  std::stringstream where;
  where << pwd.rdbuf();
  CATCH_CHECK(where.str() == dir + "\n");
}

CATCH_TEST_CASE("a working folder that is missing: the program does not run, exit 1") {
  const std::string dir = TempDir("missing_parent") + "/not_there";
  const std::string marker = TempDir("marker") + "/ran";
  CATCH_CHECK(Run(WorkerProgramArgv("touch '" + marker + "'", Env(), dir)) == 1);
  CATCH_CHECK(!fs::exists(marker));
}

}  // namespace
}  // namespace p3::tools
