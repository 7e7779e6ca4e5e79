#include "worker/elastic_requests.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace p3 {
namespace {

std::string RequestsFile(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path =
      (std::filesystem::path(tmp != nullptr ? tmp : "/tmp") / name).string();
  std::filesystem::remove(path);
  return path;
}

using Present = std::optional<std::vector<int>>;

CATCH_TEST_CASE("joins and leaves change the present set; nothing new gives nullopt") {
  const std::string path = RequestsFile("basic");
  MembershipRequests requests(path);
  std::ostringstream log;
  CATCH_CHECK(*requests.Poll({0, 1}, &log) == Present());  // no file yet
  CATCH_REQUIRE(AppendRequestLine(path, "join 2").ok());
  CATCH_CHECK(*requests.Poll({0, 1}, &log) == Present(std::vector<int>{0, 1, 2}));
  CATCH_CHECK(*requests.Poll({0, 1, 2}, &log) == Present());  // read once only
  CATCH_REQUIRE(AppendRequestLine(path, "leave 1").ok());
  CATCH_CHECK(*requests.Poll({0, 1, 2}, &log) == Present(std::vector<int>{0, 2}));
  CATCH_CHECK(log.str().empty());
}

CATCH_TEST_CASE("bad lines are reported and skipped, and a rank that left cannot come back") {
  const std::string path = RequestsFile("bad");
  MembershipRequests requests(path);
  std::ostringstream log;
  for (const char* line : {"leave 0", "join", "jump 3", "leave 5", "leave 1", "join 1"}) {
    CATCH_REQUIRE(AppendRequestLine(path, line).ok());
  }
  CATCH_CHECK(*requests.Poll({0, 1}, &log) == Present(std::vector<int>{0}));
  const std::string said = log.str();
  CATCH_CHECK(said.find("\"leave 0\": rank 0 cannot leave") != std::string::npos);
  CATCH_CHECK(said.find("\"join\": not") != std::string::npos);
  CATCH_CHECK(said.find("\"jump 3\": not") != std::string::npos);
  CATCH_CHECK(said.find("\"leave 5\": rank is not present") != std::string::npos);
  CATCH_CHECK(said.find("\"join 1\": rank has left already") != std::string::npos);
}

CATCH_TEST_CASE("a line without its newline yet waits for the next look") {
  const std::string path = RequestsFile("partial");
  MembershipRequests requests(path);
  {
    std::ofstream out(path);
    out << "join 2";  // the writer has not finished the line
  }
  CATCH_CHECK(*requests.Poll({0, 1}, nullptr) == Present());
  {
    std::ofstream out(path, std::ios::app);
    out << "\n";
  }
  CATCH_CHECK(*requests.Poll({0, 1}, nullptr) == Present(std::vector<int>{0, 1, 2}));
}

CATCH_TEST_CASE("a leave read together with its rank's join waits: the join takes effect first") {
  const std::string path = RequestsFile("join_then_leave");
  MembershipRequests requests(path);
  std::ostringstream log;
  CATCH_REQUIRE(AppendRequestLine(path, "join 2").ok());
  CATCH_REQUIRE(AppendRequestLine(path, "leave 2").ok());
  CATCH_REQUIRE(AppendRequestLine(path, "join 3").ok());
  // Were both read at once, rank 2 (already waiting to be present) would never join.
  CATCH_CHECK(*requests.Poll({0, 1}, &log) == Present(std::vector<int>{0, 1, 2}));
  CATCH_CHECK(*requests.Poll({0, 1, 2}, &log) == Present(std::vector<int>{0, 1, 3}));
  CATCH_CHECK(*requests.Poll({0, 1, 3}, &log) == Present());
  CATCH_CHECK(log.str().empty());
}

}  // namespace
}  // namespace p3
