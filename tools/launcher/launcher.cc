#include "tools/launcher/launcher.h"

#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "p3/base/file_util.h"
#include "p3/base/status_macros.h"
#include "proto/config.h"
#include "tools/launcher/network_setup.h"
#include "tools/launcher/run_layout.h"
#include "tools/launcher/summary.h"

namespace p3::tools::launcher {
namespace {

namespace fs = std::filesystem;

ProgressDisplay::Options DisplayOptions(const LauncherOptions& options) {
  ProgressDisplay::Options display;
  display.live = options.live_progress;
  return display;
}

}  // namespace

std::string Launcher::Child::label() const {
  return host != nullptr ? absl::StrCat(role, " ", index, " on ", host->destination)
                         : absl::StrCat(role, " ", index);
}

Launcher::Launcher(LauncherOptions options, config::ExperimentConfig config)
    : options_(std::move(options)),
      config_(std::move(config)),
      display_(DisplayOptions(options_)) {}

Launcher::~Launcher() {
  // Every process first (they may run in the network), then the network.
  supervisor_.reset();
  network_.reset();
}

absl::Status Launcher::PrepareOutputDir(bool clear_stale, bool write_config) {
  const bool emulated = config::NetworkEmulated(config_) && options_.hosts.empty();
  RunLayoutOptions layout_options;
  layout_options.working_dir = options_.working_dir;
  layout_options.machines = !options_.hosts.empty() ? static_cast<int>(options_.hosts.size())
                                                    : (emulated ? config_.network().machines() : 1);
  layout_options.clear_stale = clear_stale;
  P3_ASSIGN_OR_RETURN(const RunLayout layout, MakeRunLayout(config_, layout_options));
  output_dir_ = layout.output_dir;
  config_out_ = layout.config_path;
  summary_path_ = layout.summary_path;
  for (const ProcessFiles& files : layout.processes) {
    Child child;
    static_cast<ProcessFiles&>(child) = files;
    if (!options_.hosts.empty()) child.host = &options_.hosts[child.machine];
    children_.push_back(child);
  }
  if (!write_config) return absl::OkStatus();

  std::string text = absl::StrCat(
      "# Resolved experiment config written by launch_cluster: defaults filled, overrides\n"
      "# applied. Source: ",
      options_.config_path, "\n");
  for (const std::string& override_text : options_.overrides) {
    absl::StrAppend(&text, "# --set=", override_text, "\n");
  }
  config::ExperimentConfig written = config_;
  if (!options_.hosts.empty() && !options_.remote_output_dir.empty() &&
      config_.output().save_model() && config_.output().model_file().empty()) {
    // No shared folder: rank 0 writes the model into the remote output folder, from
    // where FetchRemoteModel copies it here.
    written.mutable_output()->set_model_file(
        RemotePath((fs::path(output_dir_) / "model.pt").string()));
  }
  absl::StrAppend(&text, config::ConfigToText(written));
  config_text_ = text;
  return WriteFileAtomically(config_out_, text);
}

absl::Status Launcher::SetUpNetwork() {
  NetworkSetupOptions setup;
  setup.network = config_.network();
  setup.run_id = RunIdForPid(getpid());
  if (!children_.empty()) {
    setup.processes_by_machine.resize(config_.network().machines());
    for (const Child& child : children_) {
      setup.processes_by_machine[child.machine].push_back(child.name());
    }
  }
  setup.say = [this](const std::string& line) { Say(line); };
  P3_ASSIGN_OR_RETURN(network_, launcher::SetUpNetwork(setup));
  for (Child& child : children_) child.ns_path = network_->namespace_path(child.machine);
  // For summary.json; SetUpNetwork has checked it already.
  absl::StatusOr<std::string> congestion_control =
      ResolveCongestionControl(config_.network(), ProcSysctlReader());
  if (congestion_control.ok()) congestion_control_ = *congestion_control;
  return absl::OkStatus();
}

absl::Status Launcher::CheckLinks(bool strict) {
  LinkCheckOptions check;
  check.configured_gbps = config_.network().bandwidth_gbps();
  check.machines = network_->machines();
  check.each = absl::Seconds(config_.network().check_seconds());
  check.strict = strict;
  check.measure = [this](int from, int to, absl::Duration each) {
    return MeasureLink(*network_, from, to, each);
  };
  check.before_each = [this] {
    supervisor_->WaitForEvent(absl::ZeroDuration());
    return Interrupted();
  };
  check.say = [this](const std::string& line) { Say(line); };
  P3_ASSIGN_OR_RETURN(link_checks_, launcher::CheckLinks(check));
  return absl::OkStatus();
}

int Launcher::Run() {
  start_time_ = absl::Now();
  ProcessSupervisor::Options supervision;
  supervision.kill_grace = options_.kill_grace;
  absl::StatusOr<std::unique_ptr<ProcessSupervisor>> supervisor =
      ProcessSupervisor::Create(supervision);
  if (!supervisor.ok()) {
    std::cerr << "launch_cluster: " << supervisor.status().message() << "\n";
    return 1;
  }
  supervisor_ = *std::move(supervisor);

  absl::Status status = PrepareOutputDir(/*clear_stale=*/true, /*write_config=*/true);
  if (!status.ok()) {
    std::cerr << "launch_cluster: " << status.message() << "\n";
    return 2;
  }
  supervisor_->WatchFolder((fs::path(output_dir_) / "ports").string());
  status = PrepareElasticResume();
  if (!status.ok()) {
    std::cerr << "launch_cluster: " << status.message() << "\n";
    return 2;
  }
  const int servers = config::ServerProcessCount(config_);
  const int workers = config::WorkerProcessCount(config_);
  Say(absl::StrCat("experiment \"", config_.name(), "\": mode ", config_.mode(), ", model ",
                   config_.model().name(), ", ", servers, " server(s), ", workers,
                   " worker(s), batch ", config_.training().batch_size(), " per worker (",
                   config::GlobalBatchSize(config_), " in all)"));
  Say(absl::StrCat("output: ", output_dir_));
  for (size_t h = 0; h < options_.hosts.size(); ++h) {
    std::vector<std::string> names;
    for (const Child& child : children_) {
      if (child.machine == static_cast<int>(h)) names.push_back(child.name());
    }
    Say(absl::StrCat("  host ", h, " ", options_.hosts[h].destination, " (",
                     options_.hosts[h].address,
                     "): ", names.empty() ? "(idle)" : absl::StrJoin(names, ", ")));
  }
  if (config::NetworkEmulated(config_) && options_.hosts.empty()) {
    status = SetUpNetwork();
    if (status.ok() && config_.network().check_links()) status = CheckLinks(/*strict=*/false);
  } else if (config_.network().bandwidth_gbps() > 0 && servers == 0) {
    Say("mode local runs one process: no network to emulate");
  }

  // Servers first: the workers need their ports.
  if (status.ok()) status = StartServers();
  if (status.ok()) status = StartWorkers();
  if (status.ok()) status = WaitForWorkers();
  if (status.ok() && servers > 0) status = WaitForServers();
  if (status.ok()) status = FetchRemoteFiles();
  if (status.ok()) status = ReadResults();
  if (status.ok()) FetchRemoteModel();
  if (status.ok()) MergeTraces();
  if (status.ok()) status = WriteSummary();

  const launcher::Say say = [this](const std::string& line) { Say(line); };
  if (!status.ok()) {
    display_.Clear();
    std::cout << std::flush;
    if (absl::IsCancelled(status)) {
      std::cerr << "[p3] " << status.message() << "\n";
    } else {
      std::cerr << "[p3] FAILED: " << status.message() << "\n";
    }
    StopAll();
    if (!absl::IsCancelled(status)) ReportFailure(status);
    PrintTable();
    TearDownNetwork(network_, say);
    std::cerr << "[p3] run failed; logs are in " << output_dir_ << "/logs" << std::endl;
    return absl::IsCancelled(status) ? 128 + supervisor_->interrupt_signal() : 1;
  }

  std::cout << "\n";
  PrintTable();
  if (const std::string straggler = StragglerLine(Timings()); !straggler.empty()) Say(straggler);
  TearDownNetwork(network_, say);
  const std::string took =
      absl::StrFormat("%.1f s", absl::ToDoubleSeconds(absl::Now() - start_time_));
  if (!children_[servers].result.has_value()) {
    // Only a worker program (worker.command) may leave its result file unwritten.
    Say(absl::StrCat("done in ", took, ": rank 0's program wrote no result file (",
                     children_[servers].result_file,
                     "), so the run has no figures; summary.json lists the missing results"));
  }
  const nlohmann::ordered_json rank0 =
      children_[servers].result.value_or(nlohmann::ordered_json::object());
  if (children_[servers].result.has_value()) {
    Say(absl::StrCat("done in ", took, ": ", NumberText(rank0.at("iterations")), " iterations, ",
                     NumberText(rank0.at("samples_per_second")), " samples/s, final loss ",
                     NumberText(rank0.at("final_loss")), ", test accuracy ",
                     NumberText(rank0.at("test_accuracy"))));
  }
  if (rank0.contains("online_search")) {
    const nlohmann::ordered_json& search = rank0["online_search"];
    std::vector<std::string> timed;
    for (const nlohmann::ordered_json& c : search["timed"]) {
      timed.push_back(absl::StrFormat("%d: %.3f s", c["slice_params"].get<int64_t>(),
                                      c["mean_seconds"].get<double>()));
    }
    Say(absl::StrCat("online search: slice_params ", NumberText(search["chosen_slice_params"]),
                     " from iteration ", NumberText(search["done_iteration"]), " (mean ",
                     "iteration time ", absl::StrJoin(timed, ", "), "; ",
                     search["reason"].get<std::string>(), ")"));
  }
  if (restarts_used_ > 0) {
    std::vector<std::string> restarted;
    for (const Child& child : children_) {
      if (child.restarts > 0)
        restarted.push_back(absl::StrCat(child.label(), " ×", child.restarts));
    }
    Say(absl::StrCat("restarted ", absl::StrJoin(restarted, ", "),
                     " (--max_restarts=", options_.max_restarts, ")"));
  }
  if (!trace_path_.empty()) Say(absl::StrCat("trace: ", trace_path_));
  Say(absl::StrCat("summary: ", summary_path_));
  DrawCurves();
  return 0;
}

int Launcher::CheckNetworkOnly() {
  start_time_ = absl::Now();
  absl::StatusOr<std::unique_ptr<ProcessSupervisor>> supervisor =
      ProcessSupervisor::Create(ProcessSupervisor::Options{});
  if (!supervisor.ok()) {
    std::cerr << "launch_cluster: " << supervisor.status().message() << "\n";
    return 1;
  }
  supervisor_ = *std::move(supervisor);
  absl::Status status = SetUpNetwork();
  if (status.ok()) status = CheckLinks(/*strict=*/true);
  TearDownNetwork(network_, [this](const std::string& line) { Say(line); });
  if (!status.ok()) {
    std::cerr << "[p3] " << (absl::IsCancelled(status) ? "" : "FAILED: ") << status.message()
              << std::endl;
    return absl::IsCancelled(status) ? 128 + supervisor_->interrupt_signal() : 1;
  }
  Say("no link exceeds its configured rate");
  return 0;
}

int Launcher::Collect() {
  start_time_ = absl::Now();
  absl::Status status = PrepareOutputDir(/*clear_stale=*/false, /*write_config=*/false);
  if (!status.ok()) {
    std::cerr << "[p3] FAILED: " << status.message() << std::endl;
    return 1;
  }
  ReadExitRecords();
  // The run's start: the earliest recorded one (the failures' times are relative to it).
  for (const Child& child : children_) {
    if (!child.recorded.has_value()) continue;
    const absl::Time started = absl::UnixEpoch() + absl::Seconds(child.recorded->start_unix);
    if (started < start_time_) start_time_ = started;
  }
  status = ReadResults();
  const std::vector<ProcessOutcome> outcomes = Outcomes();
  if (const int first = RankFailures(outcomes).first; first >= 0) {
    const ProcessOutcome& failed = outcomes[first];
    status = absl::AbortedError(
        absl::StrCat(failed.name, failed.node.empty() ? "" : " on " + failed.node, " ended with ",
                     failed.status(), " (its exit record results/", failed.name, ".exit.json)"));
  }
  if (!status.ok()) {
    std::cerr << "[p3] FAILED: " << status.message() << std::endl;
    ReportFailure(status);
    PrintTable();
    return 1;
  }
  MergeTraces();
  status = WriteSummary();
  if (!status.ok()) {
    std::cerr << "[p3] FAILED: " << status.message() << std::endl;
    return 1;
  }
  PrintTable();
  if (const std::string straggler = StragglerLine(Timings()); !straggler.empty()) Say(straggler);
  Say(absl::StrCat("summary: ", summary_path_));
  DrawCurves();
  return 0;
}

}  // namespace p3::tools::launcher
