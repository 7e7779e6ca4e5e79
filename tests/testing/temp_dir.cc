#include "tests/testing/temp_dir.h"

#include <cstdlib>
#include <filesystem>

namespace p3::testing {

std::string FreshDir(const std::string& name) {
  namespace fs = std::filesystem;
  const char* tmp = std::getenv("TEST_TMPDIR");
  const fs::path dir = fs::path(tmp != nullptr ? tmp : "/tmp") / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

}  // namespace p3::testing
