#include "worker/elastic_requests.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"
#include "models/sampler.h"

namespace p3 {

absl::Status AppendRequestLine(const std::string& path, const std::string& line) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  const std::string text = line + "\n";
  const ssize_t written = ::write(fd, text.data(), text.size());
  ::close(fd);
  if (written != static_cast<ssize_t>(text.size())) {
    return absl::UnavailableError(absl::StrCat("cannot append to ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::vector<int>>> MembershipRequests::Poll(
    const std::vector<int>& current, std::ostream* log) {
  std::ifstream in(path_, std::ios::binary);
  if (!in) return std::optional<std::vector<int>>();
  in.seekg(offset_);
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  // A line still being written (no newline yet) waits for the next look.
  const size_t end = text.rfind('\n');
  if (end == std::string::npos) return std::optional<std::vector<int>>();
  text.resize(end + 1);
  std::set<int> next(current.begin(), current.end());
  std::set<int> joined_here;  // ranks added by this call's lines
  size_t start = 0;
  while (start < text.size()) {
    const size_t stop = text.find('\n', start);
    const absl::string_view line = absl::StripAsciiWhitespace(
        absl::string_view(text).substr(start, stop - start));
    const std::vector<absl::string_view> words =
        absl::StrSplit(line, ' ', absl::SkipWhitespace());
    int rank = -1;
    const bool parsed = words.size() == 2 && absl::SimpleAtoi(words[1], &rank) && rank >= 0;
    if (parsed && words[0] == "leave" && joined_here.count(rank) > 0) {
      // R joins and leaves in one read: the join takes effect first, and the leave is
      // read again at the next look (otherwise R, already waiting, would never be present).
      break;
    }
    start = stop + 1;
    if (line.empty()) continue;
    std::string problem;
    if (!parsed || (words[0] != "join" && words[0] != "leave")) {
      problem = "not \"join R\" or \"leave R\"";
    } else if (left_.count(rank) > 0) {
      problem = "rank has left already";
    } else if (words[0] == "join") {
      if (next.insert(rank).second) joined_here.insert(rank);
    } else if (rank == 0) {
      problem = "rank 0 cannot leave";
    } else if (next.erase(rank) == 0) {
      problem = "rank is not present";
    } else {
      left_.insert(rank);
    }
    if (!problem.empty() && log != nullptr) {
      *log << "MEMBERSHIP ignored \"" << line << "\": " << problem << std::endl;
    }
  }
  offset_ += static_cast<int64_t>(start);
  std::vector<int> result(next.begin(), next.end());
  if (result == current) return std::optional<std::vector<int>>();
  return std::optional<std::vector<int>>(std::move(result));
}

std::vector<int64_t> SampleStream::Indices(int64_t start, int64_t count) {
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(std::max<int64_t>(0, count)));
  for (int64_t pos = start; pos < start + count && size_ > 0; ++pos) {
    const int64_t epoch = pos / size_;
    if (epoch != cached_epoch_) {
      permutation_ = models::ShardedSampler::EpochPermutation(size_, seed_, epoch);
      cached_epoch_ = epoch;
    }
    out.push_back(permutation_[static_cast<size_t>(pos % size_)]);
  }
  return out;
}

}  // namespace p3
