// What p3_worker's training loop needs for an elastic run (docs/reliability.md, "Elastic
// membership"), kept out of the trainer and free of libtorch:
//
// - MembershipRequests: the requests file (`p3_worker --membership_requests=FILE`). A
//   joining process appends `join R` once it has said Hello to every server; the launcher
//   appends `leave R`. Rank 0 reads the lines added since its last look, between
//   iterations, and turns them into the next present set.
// - SampleStream: the data set read as one stream, epoch e's permutation
//   (models::ShardedSampler::EpochPermutation, seeded by (seed, e)) then epoch e+1's, ...;
//   an iteration's batches are cut from it at MembershipSchedule::SamplesBefore.
//
// Example (rank 0, between iterations):
//   MembershipRequests requests("out/x/membership_requests");
//   absl::StatusOr<std::optional<std::vector<int>>> next = requests.Poll({0, 1}, &log);
//   // the file said "join 2": *next == {0, 1, 2}
//
// Neither is thread-safe (the training thread owns them).
#ifndef P3_WORKER_ELASTIC_REQUESTS_H_
#define P3_WORKER_ELASTIC_REQUESTS_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace p3 {

// Appends `line` and a newline to `path` in one write (O_APPEND, so concurrent writers'
// lines do not interleave). Errors name the file.
absl::Status AppendRequestLine(const std::string& path, const std::string& line);

class MembershipRequests {
 public:
  explicit MembershipRequests(std::string path) : path_(std::move(path)) {}

  // Reads the complete lines added since the last call (a missing file has none) and
  // applies them to `current`: `join R` adds R, `leave R` removes R. Returns the new set
  // (increasing ranks) when it differs from `current`, nullopt otherwise. A line that
  // cannot apply (a malformed one, `leave 0`, a rank already left or not present) is
  // reported on `log` (may be null) and skipped: the run goes on. A `leave R` read in
  // the same call as R's `join R` is left for the next call, so that R is present for
  // at least one change before it leaves.
  absl::StatusOr<std::optional<std::vector<int>>> Poll(const std::vector<int>& current,
                                                       std::ostream* log);

 private:
  const std::string path_;
  int64_t offset_ = 0;   // bytes of the file already read (complete lines only)
  std::set<int> left_;   // ranks that have left: they do not come back
};

class SampleStream {
 public:
  SampleStream(int64_t dataset_size, uint64_t seed) : size_(dataset_size), seed_(seed) {}
  // The data set indices at stream positions [start, start + count).
  std::vector<int64_t> Indices(int64_t start, int64_t count);

 private:
  const int64_t size_;
  const uint64_t seed_;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> permutation_;
};

}  // namespace p3

#endif  // P3_WORKER_ELASTIC_REQUESTS_H_
