#include "p3/base/file_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace p3 {

namespace {

absl::Status ErrnoError(const std::string& what, int err) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(err)));
}

// All of `contents` to `fd`, retrying short writes and interruptions.
bool WriteAll(int fd, absl::string_view contents) {
  size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n = write(fd, contents.data() + written, contents.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    written += static_cast<size_t>(n);
  }
  return true;
}

// The folder holding `path` ("." for a bare file name).
std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents,
                                 const WriteFileOptions& options) {
  if (path.empty()) return absl::InvalidArgumentError("cannot write a file with an empty path");
  const std::string tmp = path + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(absl::StrCat("cannot write ", tmp), errno);
  if (!WriteAll(fd, contents) || (options.sync && fsync(fd) != 0)) {
    const int err = errno;
    close(fd);
    unlink(tmp.c_str());
    return ErrnoError(absl::StrCat("cannot write ", tmp), err);
  }
  if (close(fd) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return ErrnoError(absl::StrCat("cannot write ", tmp), err);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return ErrnoError(absl::StrCat("cannot rename ", tmp, " to ", path), err);
  }
  if (options.sync) {
    // The rename itself is durable only once the folder's entry is on the disk.
    const std::string dir = DirName(path);
    const int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0) return ErrnoError(absl::StrCat("cannot sync folder ", dir), errno);
    const bool synced = fsync(dir_fd) == 0;
    const int err = errno;
    close(dir_fd);
    if (!synced) return ErrnoError(absl::StrCat("cannot sync folder ", dir), err);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const std::string message = absl::StrCat("cannot read ", path, ": ", std::strerror(errno));
    if (errno == ENOENT) return absl::NotFoundError(message);
    if (errno == EACCES) return absl::PermissionDeniedError(message);
    return absl::InternalError(message);
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) return absl::InternalError(absl::StrCat("cannot read ", path, ": read error"));
  return contents.str();
}

absl::StatusOr<std::string> OutputFolder(const std::string& dir, const std::string& prefix) {
  if (dir.empty()) {
    std::string pattern = absl::StrCat("/tmp/", prefix, ".XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr) {
      return absl::InternalError(
          absl::StrCat("cannot make a folder like ", pattern, ": ", std::strerror(errno)));
    }
    return pattern;
  }
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return absl::InternalError(absl::StrCat("cannot make ", dir, ": ", error.message()));
  return dir;
}

}  // namespace p3
