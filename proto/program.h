// The first and the last lines of every p3 binary's main(): the process-wide settings
// that only a main() may make (glibc's allocator, Abseil's lock-order checks), the
// command line (the flags, the config's --set overrides, the arguments), the experiment
// config, and the "<program>: <reason>" line on stderr with which a program gives up.
//
// House style: flags are parsed only in main()s. A main defines its own flags
// (ABSL_FLAG) and hands argc/argv to a Program, which parses them.
//
// Example:
//   ABSL_FLAG(std::string, config, "", "experiment config (text format)");
//
//   int main(int argc, char** argv) {
//     p3::Program program("p3_server", argc, argv,
//                         {.allocator = p3::AllocatorOptions{.one_arena = true},
//                          .skip_lock_order_checks = true,
//                          .config_overrides = true});
//     absl::StatusOr<p3::config::ExperimentConfig> config =
//         program.LoadConfig(absl::GetFlag(FLAGS_config));
//     if (!config.ok()) return program.Fail(2, config.status().message());
//     ...
//     if (!status.ok()) return program.Fail(1, status.ToString());
//     return 0;
//   }
//
// Construct one Program per process, first thing in main(), before any thread starts.
// Its methods are thread-compatible.
#ifndef P3_PROTO_PROGRAM_H_
#define P3_PROTO_PROGRAM_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "p3/base/allocator.h"
#include "proto/config.pb.h"

namespace p3 {

struct ProgramOptions {
  // What --help prints above the flags (absl::SetProgramUsageMessage, which may be set
  // once per process). Default: "" (Abseil's).
  std::string usage;
  // glibc's allocator tuned for large messages (p3/base/allocator.h), before anything
  // else: for the binaries that move slices. Where it is refused, "<program>: <reason>
  // (continuing)" is printed and the program goes on. Default: unset (left as it is).
  std::optional<AllocatorOptions> allocator;
  // Turns off Abseil's lock-order graph, which is on in builds without NDEBUG (these
  // binaries): on the data path it took about 1 % of all cycles (perf, ResNet-50 at
  // 2.5 Gbit/s; docs/results/throughput/throughput.md), and a fifth of the simulator's run time,
  // whose one thread takes the core's locks millions of times. The tests, which link the
  // libraries, keep it. Default: false.
  bool skip_lock_order_checks = false;
  // Takes the config's --set overrides out of the command line
  // (config::TakeOverrideFlags) for LoadConfig(). Default: false (--set is then an
  // unknown flag).
  bool config_overrides = false;
};

class Program {
 public:
  // Applies `options` in order (allocator, lock-order checks, usage, --set), then parses
  // the flags; absl::ParseCommandLine prints an unknown or malformed flag and exits 1.
  // `name` starts every line the program prints on stderr.
  Program(std::string name, int argc, char** argv, const ProgramOptions& options = {});

  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  // The program's name as its messages start, e.g. "p3_server".
  const std::string& name() const { return name_; }
  // Once a process knows its place in the cluster, e.g. "p3_server 1".
  void set_name(std::string name) { name_ = std::move(name); }

  // The --set overrides, in order (empty without ProgramOptions::config_overrides).
  const std::vector<std::string>& overrides() const { return overrides_; }
  // The arguments that are not flags, in order (argv[0] excluded).
  const std::vector<std::string>& arguments() const { return arguments_; }

  // OK when there are no arguments(); else InvalidArgument naming the first
  // ("unexpected argument "x"", pointing at --set where the overrides are taken).
  absl::Status NoArguments() const;

  // The experiment config at `path` with the --set overrides (config::LoadConfig):
  // defaults filled and validated; errors start with the path. InvalidArgument
  // "--config=PATH is required" for an empty path.
  absl::StatusOr<config::ExperimentConfig> LoadConfig(const std::string& path) const;

  // Prints "<name>: <message>" on stderr and returns `exit_code`, for
  //   return program.Fail(2, config.status().message());
  int Fail(int exit_code, absl::string_view message) const;
  // Prints "<name>: <message>" on stderr and goes on.
  void Warn(absl::string_view message) const;

  // With `on` (scheduling.sized_reads), reads sized to the message for this process and
  // those it starts (p3/base/grpc_experiments.h); a GRPC_EXPERIMENTS already in the
  // environment wins. Call before gRPC's first use and before any thread starts. Where it
  // cannot be set, warns and goes on.
  void RequestSizedReads(bool on) const;

 private:
  std::string name_;
  std::vector<std::string> overrides_;
  std::vector<std::string> arguments_;
  bool config_overrides_ = false;
};

// Writes `contents` to `path` atomically (p3/base/file_util.h) unless `path` is empty:
// the flag that names an optional output file was not given.
absl::Status WriteRequestedFile(const std::string& path, absl::string_view contents);

}  // namespace p3

#endif  // P3_PROTO_PROGRAM_H_
