#include "proto/program.h"

#include <iostream>
#include <utility>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "p3/base/file_util.h"
#include "p3/base/grpc_experiments.h"
#include "proto/config.h"

namespace p3 {

Program::Program(std::string name, int argc, char** argv, const ProgramOptions& options)
    : name_(std::move(name)), config_overrides_(options.config_overrides) {
  if (options.allocator.has_value()) {
    if (absl::Status tuned = TuneAllocatorForLargeMessages(*options.allocator); !tuned.ok()) {
      Warn(absl::StrCat(tuned.message(), " (continuing)"));
    }
  }
  if (options.skip_lock_order_checks) {
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  }
  if (!options.usage.empty()) absl::SetProgramUsageMessage(options.usage);
  // Before Abseil's parser, whose list flags would keep only the last --set.
  if (config_overrides_) overrides_ = config::TakeOverrideFlags(&argc, argv);
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  arguments_.assign(positional.begin() + (positional.empty() ? 0 : 1), positional.end());
}

absl::Status Program::NoArguments() const {
  if (arguments_.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("unexpected argument \"", arguments_.front(), "\"",
                   config_overrides_ ? "; config fields are set with --set=field.path=value" : ""));
}

absl::StatusOr<config::ExperimentConfig> Program::LoadConfig(const std::string& path) const {
  if (path.empty()) return absl::InvalidArgumentError("--config=PATH is required");
  return config::LoadConfig(path, overrides_);
}

int Program::Fail(int exit_code, absl::string_view message) const {
  Warn(message);
  return exit_code;
}

void Program::RequestSizedReads(bool on) const {
  if (!on) return;
  if (absl::StatusOr<bool> set = RequestGrpcExperiments(kSizedReadExperiments); !set.ok()) {
    Warn(absl::StrCat("reads are not sized to the message: ", set.status().message()));
  }
}

void Program::Warn(absl::string_view message) const {
  std::cerr << name_ << ": " << message << "\n";
}

absl::Status WriteRequestedFile(const std::string& path, absl::string_view contents) {
  if (path.empty()) return absl::OkStatus();
  return WriteFileAtomically(path, contents);
}

}  // namespace p3
