#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "p3/base/file_util.h"
#include "proto/config.h"
#include "tests/testing/temp_dir.h"
#include "tools/launcher/backends.h"

namespace p3::tools::launcher {
namespace {

namespace fs = std::filesystem;

using p3::testing::FreshDir;

config::ExperimentConfig Config(const std::vector<std::string>& overrides) {
  absl::StatusOr<config::ExperimentConfig> config = config::ParseConfig("", overrides);
  CATCH_REQUIRE(config.ok());
  return *config;
}

std::string Contents(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  CATCH_REQUIRE(text.ok());
  return *text;
}

bool Executable(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && (info.st_mode & S_IXUSR) != 0;
}

CATCH_TEST_CASE("fetching a host's files is one ssh running tar over the relative paths") {
  Host host;
  host.destination = "alice@node1";
  host.address = "node1";
  const std::vector<std::string> argv = FetchArchiveArgv(
      {"ssh", "-F", "cfg"}, host, "/remote/out", {"results/worker_1.json", "traces/a b.json"});
  CATCH_CHECK(argv == std::vector<std::string>{"ssh", "-F", "cfg", "-o", "BatchMode=yes",
                                               "alice@node1",
                                               "tar -C /remote/out --ignore-failed-read -cf - "
                                               "results/worker_1.json 'traces/a b.json'"});
}

CATCH_TEST_CASE("the resolved config names its source, purpose and overrides") {
  const config::ExperimentConfig config = Config({"training.iterations=5"});
  const std::string text =
      ResolvedConfigText(config, "/p3/configs/x.textproto", {"training.iterations=5"}, "for Slurm");
  CATCH_CHECK(absl::StartsWith(
      text,
      "# Resolved experiment config written by launch_cluster for Slurm: defaults filled, "
      "overrides applied.\n# Source: /p3/configs/x.textproto\n# --set=training.iterations=5\n"));
  absl::StatusOr<config::ExperimentConfig> back = config::ParseConfig(text, {});
  CATCH_REQUIRE(back.ok());
  CATCH_CHECK(back->training().iterations() == 5);
}

CATCH_TEST_CASE("--slurm writes the batch script, the task script and the config") {
  const std::string work = FreshDir("slurm_work");
  const std::string task = work + "/task.sh";
  std::ofstream(task) << "#!/bin/sh\necho task\n";
  std::ostringstream said;
  SlurmJobOptions options;
  options.working_dir = work;
  options.config_source = "/p3/configs/local.textproto";
  options.server_binary = "/opt/p3/p3_server";
  options.worker_binary = "/opt/p3/p3_worker";
  options.launcher = "/opt/p3/launch_cluster";
  options.task_script = task;
  options.partition = "cpu";
  options.time_limit = "01:00:00";
  options.out = &said;
  const absl::Status status = GenerateSlurm(Config({"output_dir=out/s"}), options);
  CATCH_REQUIRE(status.ok());

  const std::string out = work + "/out/s";
  const std::string batch = Contents(out + "/slurm/p3.sbatch");
  CATCH_CHECK(absl::StrContains(batch, "#SBATCH --partition=cpu\n"));
  CATCH_CHECK(absl::StrContains(batch, "#SBATCH --time=01:00:00\n"));
  CATCH_CHECK(absl::StrContains(batch, "/opt/p3/launch_cluster"));
  CATCH_CHECK(Executable(out + "/slurm/p3.sbatch"));
  CATCH_CHECK(Contents(out + "/slurm/p3_slurm_task.sh") == "#!/bin/sh\necho task\n");
  CATCH_CHECK(Executable(out + "/slurm/p3_slurm_task.sh"));
  // The config the tasks read names the absolute output folder.
  absl::StatusOr<config::ExperimentConfig> written =
      config::LoadConfig(out + "/config.textproto", {});
  CATCH_REQUIRE(written.ok());
  CATCH_CHECK(written->output_dir() == out);
  CATCH_CHECK(
      absl::StrContains(said.str(), "[p3] submit with: sbatch " + out + "/slurm/p3.sbatch\n"));
  // slurmd opens the job's --output file before the script runs: its folder must exist.
  CATCH_CHECK(absl::StrContains(batch, "#SBATCH --output=" + out + "/logs/slurm-%j.out\n"));
  CATCH_CHECK(fs::is_directory(out + "/logs"));
}

CATCH_TEST_CASE("--slurm without a readable task script writes nothing") {
  const std::string work = FreshDir("slurm_missing");
  SlurmJobOptions options;
  options.working_dir = work;
  options.task_script = work + "/missing.sh";
  std::ostringstream said;
  options.out = &said;
  const absl::Status status = GenerateSlurm(Config({"output_dir=out"}), options);
  CATCH_CHECK(absl::IsInvalidArgument(status));
  CATCH_CHECK(absl::StartsWith(status.message(), "--slurm_task_script: "));
  CATCH_CHECK(!fs::exists(work + "/out/slurm/p3.sbatch"));
  CATCH_CHECK(!fs::exists(work + "/out/config.textproto"));
  CATCH_CHECK(!fs::exists(work + "/out"));
  CATCH_CHECK(said.str().empty());
}

CATCH_TEST_CASE("--kubernetes writes one manifest file and says how to run it") {
  const std::string work = FreshDir("kube_work");
  KubernetesJobOptions options;
  options.working_dir = work;
  options.config_source = "/p3/configs/default.textproto";
  options.image = "registry/p3:v2";
  options.kube_namespace = "ml";
  options.binary_dir = "/app";
  options.server_port = 6000;
  std::ostringstream said;
  options.out = &said;
  const absl::Status status = GenerateKubernetes(Config({"output_dir=k", "name=My_Run"}), options);
  CATCH_REQUIRE(status.ok());
  const std::string path = work + "/k/kubernetes/p3.yaml";
  const std::string yaml = Contents(path);
  CATCH_CHECK(absl::StrContains(yaml, "image: \"registry/p3:v2\""));
  CATCH_CHECK(absl::StrContains(yaml, "namespace: ml"));
  CATCH_CHECK(absl::StrContains(yaml, "/app/p3_server"));
  CATCH_CHECK(absl::StrContains(yaml, "6000"));
  CATCH_CHECK(absl::StrContains(yaml, "output_dir: \"/var/p3/out\""));
  CATCH_CHECK(absl::StrContains(yaml, "for Kubernetes: defaults filled"));
  CATCH_CHECK(absl::StrContains(said.str(), "[p3] run:     kubectl apply -f " + path + "\n"));
  CATCH_CHECK(absl::StrContains(said.str(), "job/p3-my-run-worker"));
}

CATCH_TEST_CASE(
    "--kubernetes with restarts and checkpoints: servers resume from the newest common one") {
  const std::string work = FreshDir("kube_ckpt_work");
  KubernetesJobOptions options;
  options.working_dir = work;
  options.max_restarts = 2;
  std::ostringstream said;
  options.out = &said;
  const config::ExperimentConfig config =
      Config({"output_dir=k", "name=r", "checkpoint.dir=ckpt", "checkpoint.every=5",
              "cluster.rejoin_timeout_s=30"});
  // Without a shared volume the servers could not see each other's checkpoints.
  const absl::Status refused = GenerateKubernetes(config, options);
  CATCH_CHECK(absl::IsInvalidArgument(refused));
  CATCH_CHECK(absl::StrContains(refused.message(), "--kube_checkpoint_claim"));
  CATCH_CHECK_FALSE(fs::exists(work + "/k/kubernetes/p3.yaml"));

  options.checkpoint_claim = "p3-ckpt";
  CATCH_REQUIRE(GenerateKubernetes(config, options).ok());
  const std::string yaml = Contents(work + "/k/kubernetes/p3.yaml");
  // The ConfigMap's config: the volume's folder, resume from the newest common checkpoint.
  for (const char* line : {"    checkpoint {\n      dir: \"/var/p3/checkpoints\"\n",
                           "\n      resume: true\n", "\n      resume_iteration: -1\n",
                           "\n          mountPath: /var/p3/checkpoints\n",
                           "\n          claimName: p3-ckpt\n"}) {
    CATCH_CAPTURE(line);
    CATCH_CHECK(absl::StrContains(yaml, line));
  }
  // The resolved config is valid as written (resume_iteration -1 needs resume and dir).
  const size_t begin = yaml.find("  config.textproto: |\n");
  CATCH_REQUIRE(begin != std::string::npos);
  std::string text;
  std::istringstream lines(yaml.substr(begin));
  std::string line;
  std::getline(lines, line);
  while (std::getline(lines, line) && (line.empty() || line.rfind("    ", 0) == 0)) {
    text += (line.empty() ? line : line.substr(4)) + "\n";
  }
  absl::StatusOr<config::ExperimentConfig> parsed = config::ParseConfig(text, {});
  CATCH_REQUIRE(parsed.ok());
  CATCH_CHECK(parsed->checkpoint().resume_iteration() == -1);

  // The output claim serves when no checkpoint claim is given.
  options.checkpoint_claim.clear();
  options.output_claim = "p3-shared";
  CATCH_REQUIRE(GenerateKubernetes(config, options).ok());
  CATCH_CHECK(absl::StrContains(Contents(work + "/k/kubernetes/p3.yaml"),
                                "      - name: checkpoints\n        persistentVolumeClaim:\n"
                                "          claimName: p3-shared\n"));
}

}  // namespace
}  // namespace p3::tools::launcher
