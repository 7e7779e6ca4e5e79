#include "tools/launcher/command_line.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace p3::tools::launcher {
namespace {

namespace fs = std::filesystem;

bool IsFile(const fs::path& path) {
  std::error_code error;
  return fs::exists(path, error) && !fs::is_directory(path, error);
}

}  // namespace

std::string ResolveInputPath(const std::string& path, const PathSearch& search) {
  const fs::path p(path);
  if (p.is_absolute()) return p.lexically_normal().string();
  if (!search.invocation_dir.empty()) {
    const fs::path candidate = fs::path(search.invocation_dir) / p;
    if (IsFile(candidate)) return candidate.lexically_normal().string();
  }
  const fs::path in_current = fs::path(search.current_dir) / p;
  if (!search.current_dir.empty() && IsFile(in_current)) {
    return in_current.lexically_normal().string();
  }
  if (search.runfile) {
    const std::string runfile = search.runfile(p.lexically_normal().string());
    if (!runfile.empty() && IsFile(runfile)) return fs::path(runfile).lexically_normal().string();
  }
  return in_current.lexically_normal().string();
}

std::vector<std::string> ExtractSetFlags(std::vector<char*>& argv) {
  std::vector<std::string> values;
  if (argv.empty()) return values;
  std::vector<char*> rest(argv.begin(), argv.begin() + 1);
  for (size_t i = 1; i < argv.size(); ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") {  // Everything after "--" is left to absl (as positional).
      rest.insert(rest.end(), argv.begin() + i, argv.end());
      break;
    }
    if (absl::ConsumePrefix(&arg, "--set=") || absl::ConsumePrefix(&arg, "-set=")) {
      values.emplace_back(arg);
    } else if ((arg == "--set" || arg == "-set") && i + 1 < argv.size()) {
      values.emplace_back(argv[++i]);
    } else {
      rest.push_back(argv[i]);
    }
  }
  argv = rest;
  return values;
}

}  // namespace p3::tools::launcher
