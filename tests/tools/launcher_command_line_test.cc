#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/testing/temp_dir.h"
#include "tools/launcher/command_line.h"

namespace p3::tools::launcher {
namespace {

namespace fs = std::filesystem;

// A fresh folder under TEST_TMPDIR.
using p3::testing::FreshDir;

void Touch(const std::string& path) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << "x";
}

CATCH_TEST_CASE(
    "a relative path is found where bazel run was invoked, then here, then in runfiles") {
  const std::string invoked = FreshDir("invoked");
  const std::string current = FreshDir("current");
  const std::string runfiles = FreshDir("runfiles");
  PathSearch search;
  search.invocation_dir = invoked;
  search.current_dir = current;
  search.runfile = [&](const std::string& path) { return runfiles + "/p3/" + path; };

  Touch(runfiles + "/p3/server/p3_server");
  CATCH_CHECK(ResolveInputPath("server/p3_server", search) == runfiles + "/p3/server/p3_server");
  Touch(current + "/server/p3_server");
  CATCH_CHECK(ResolveInputPath("server/p3_server", search) == current + "/server/p3_server");
  Touch(invoked + "/server/p3_server");
  CATCH_CHECK(ResolveInputPath("./server//p3_server", search) == invoked + "/server/p3_server");
}

CATCH_TEST_CASE("a folder of the same name is skipped, and a missing file resolves to here") {
  const std::string current = FreshDir("current_dir_case");
  const std::string runfiles = FreshDir("runfiles_dir_case");
  PathSearch search;
  search.current_dir = current;
  search.runfile = [&](const std::string& path) { return runfiles + "/p3/" + path; };
  // A source folder named like the binary (the workspace has server/, not the binary).
  fs::create_directories(current + "/server/p3_server");
  Touch(runfiles + "/p3/server/p3_server");
  CATCH_CHECK(ResolveInputPath("server/p3_server", search) == runfiles + "/p3/server/p3_server");

  CATCH_CHECK(ResolveInputPath("no/such_file", search) == current + "/no/such_file");
  search.runfile = nullptr;  // No runfiles (a copied binary): still the current folder.
  CATCH_CHECK(ResolveInputPath("no/such_file", search) == current + "/no/such_file");
}

CATCH_TEST_CASE("an absolute path is only normalised") {
  PathSearch search;
  search.current_dir = "/somewhere";
  CATCH_CHECK(ResolveInputPath("/a/./b/../c", search) == "/a/c");
}

}  // namespace
}  // namespace p3::tools::launcher
