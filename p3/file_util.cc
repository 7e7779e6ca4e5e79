#include "p3/file_util.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace p3 {

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
  if (path.empty()) return absl::InvalidArgumentError("cannot write a file with an empty path");
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      return absl::InternalError(absl::StrCat("cannot write ", tmp, ": ", std::strerror(errno)));
    }
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    out.flush();
    if (!out.good()) {
      const int err = errno;
      std::remove(tmp.c_str());
      return absl::InternalError(absl::StrCat("cannot write ", tmp, ": ", std::strerror(err)));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return absl::InternalError(
        absl::StrCat("cannot rename ", tmp, " to ", path, ": ", std::strerror(err)));
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
  if (in.bad()) return absl::InternalError(absl::StrCat("cannot read ", path));
  return contents.str();
}

}  // namespace p3
