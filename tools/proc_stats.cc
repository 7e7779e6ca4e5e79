#include "tools/proc_stats.h"

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "p3/base/file_util.h"
#include "p3/base/status_macros.h"

namespace p3::tools {

absl::StatusOr<int64_t> ParseStatCpuTicks(const std::string& stat_text) {
  // Fields after the command name follow its last ')'.
  const size_t close = stat_text.rfind(')');
  if (close == std::string::npos || close + 2 > stat_text.size()) {
    return absl::InvalidArgumentError("malformed /proc/<pid>/stat: no ')' after the command");
  }
  std::vector<std::string> fields =
      absl::StrSplit(absl::StripAsciiWhitespace(stat_text.substr(close + 2)), ' ');
  // fields[0] is field 3 (state); utime is field 14, stime 15.
  int64_t utime = 0, stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtoi(fields[11], &utime) ||
      !absl::SimpleAtoi(fields[12], &stime)) {
    return absl::InvalidArgumentError("malformed /proc/<pid>/stat: no utime and stime");
  }
  return utime + stime;
}

absl::StatusOr<double> ProcessCpuSeconds(pid_t pid) {
  P3_ASSIGN_OR_RETURN(const std::string text, ReadFile(absl::StrCat("/proc/", pid, "/stat")));
  P3_ASSIGN_OR_RETURN(const int64_t ticks, ParseStatCpuTicks(text));
  return static_cast<double>(ticks) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double SelfCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

double Load1() {
  std::ifstream in("/proc/loadavg");
  double load = -1;
  if (!(in >> load)) return -1;
  return load;
}

absl::StatusOr<ContextSwitches> ParseStatusSwitches(const std::string& status_text) {
  ContextSwitches out;
  bool voluntary = false, involuntary = false;
  for (absl::string_view line : absl::StrSplit(status_text, '\n')) {
    int64_t* into = nullptr;
    if (absl::ConsumePrefix(&line, "voluntary_ctxt_switches:")) {
      into = &out.voluntary;
      voluntary = true;
    } else if (absl::ConsumePrefix(&line, "nonvoluntary_ctxt_switches:")) {
      into = &out.involuntary;
      involuntary = true;
    } else {
      continue;
    }
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line), into)) {
      return absl::InvalidArgumentError(absl::StrCat("malformed context-switch line: ", line));
    }
  }
  if (!voluntary || !involuntary) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no ", voluntary ? "nonvoluntary_ctxt_switches" : "voluntary_ctxt_switches", " line"));
  }
  out.threads = 1;
  return out;
}

absl::StatusOr<ContextSwitches> ThreadContextSwitches(pid_t pid) {
  const std::string dir = absl::StrCat("/proc/", pid, "/task");
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) return absl::NotFoundError(absl::StrCat("cannot list ", dir, ": ", ec.message()));
  ContextSwitches sum;
  for (const auto& entry : it) {
    absl::StatusOr<std::string> text = ReadFile(entry.path().string() + "/status");
    if (!text.ok()) continue;  // The thread ended after the listing.
    P3_ASSIGN_OR_RETURN(const ContextSwitches one, ParseStatusSwitches(*text));
    sum = sum + one;
  }
  if (sum.threads == 0) return absl::NotFoundError(absl::StrCat("no thread readable in ", dir));
  return sum;
}

}  // namespace p3::tools
