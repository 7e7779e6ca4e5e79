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

}  // namespace p3::tools::launcher
