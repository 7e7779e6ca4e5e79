#include "p3/base/log_line.h"

#include <unistd.h>

#include <cerrno>
#include <string>

#include "absl/synchronization/mutex.h"

namespace p3 {

void LogLine(absl::string_view line) {
  std::string text(line);
  text.push_back('\n');
  // Lines longer than a pipe takes whole are kept apart by the lock.
  static absl::Mutex mu(absl::kConstInit);
  absl::MutexLock lock(&mu);
  const char* at = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, at, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // stderr closed: nothing to do
    at += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace p3
