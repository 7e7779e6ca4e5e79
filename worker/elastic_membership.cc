#include "worker/elastic_membership.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace p3 {
namespace {

bool Has(const std::vector<int>& ranks, int rank) {
  return std::binary_search(ranks.begin(), ranks.end(), rank);
}

}  // namespace

ElasticMembership::ElasticMembership(const ElasticMembershipOptions& options,
                                     std::function<void(uint64_t)> release)
    : options_(options), release_(std::move(release)), schedule_(options.max_ranks, options.initial) {}

absl::StatusOr<std::vector<ToServer>> ElasticMembership::Request(uint64_t iteration,
                                                                 const std::vector<int>& present) {
  if (options_.rank != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", options_.rank, ": only worker 0 changes the membership"));
  }
  // The next iteration: the servers' slices are below it (its versions need this
  // worker's gradients of the current one, which follow the change on every stream).
  const uint64_t from = iteration + 1;
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status fits = schedule_.Check(from, present); !fits.ok()) return fits;
  }
  auto shared = std::make_shared<const std::vector<int>>(present);
  std::vector<ToServer> out;
  for (int s = 0; s < options_.num_servers; ++s) {
    out.push_back(ToServer{.server = s,
                           .message = Upstream{.kind = Upstream::Kind::kMembership,
                                               .from_iteration = from,
                                               .present = shared},
                           .priority = std::numeric_limits<int64_t>::min()});
  }
  return out;
}

absl::Status ElasticMembership::Forwarded(int server, uint64_t from_iteration,
                                          std::vector<int> present) {
  absl::MutexLock lock(&mu_);
  for (const MembershipChange& c : schedule_.changes()) {
    if (c.from_iteration != from_iteration) continue;
    if (c.present == present) return absl::OkStatus();  // another server's, or again
    return absl::InternalError(absl::StrCat(
        "server ", server, " forwarded workers {", DescribeRanks(present), "} from iteration ",
        from_iteration, ", another server {", DescribeRanks(c.present), "}"));
  }
  if (absl::Status s = schedule_.Add(from_iteration, std::move(present)); !s.ok()) {
    return absl::InternalError(absl::StrCat("server ", server, " forwarded ", s.message()));
  }
  MaybeReleaseLocked();
  return absl::OkStatus();
}

void ElasticMembership::Reached(uint64_t iteration) {
  absl::MutexLock lock(&mu_);
  reached_ = std::max(reached_, iteration);
  MaybeReleaseLocked();
}

void ElasticMembership::MaybeReleaseLocked() {
  if (released_ || options_.rank == 0) return;
  // The first iteration, after one this worker took part in, that it does not: it leaves
  // there. Due once every iteration before it is done.
  bool was_present = false;
  for (const MembershipChange& c : schedule_.changes()) {
    const bool present = Has(c.present, options_.rank);
    if (was_present && !present) {
      if (reached_ >= c.from_iteration) {
        released_ = true;
        release_(c.from_iteration);
      }
      return;
    }
    was_present = was_present || present;
  }
}

absl::StatusOr<uint64_t> ElasticMembership::AwaitJoin(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto joined = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!abort_.ok()) return true;
    for (const MembershipChange& c : schedule_.changes()) {
      if (Has(c.present, options_.rank)) return true;
    }
    return false;
  };
  mu_.AwaitWithDeadline(absl::Condition(&joined), deadline);
  if (!abort_.ok()) return abort_;
  for (const MembershipChange& c : schedule_.changes()) {
    if (Has(c.present, options_.rank)) return c.from_iteration;
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "worker ", options_.rank, " joined the servers but no membership change made it present ",
      "in time (worker 0 adds it with RequestMembership)"));
}

std::vector<int> ElasticMembership::PresentAt(uint64_t iteration) const {
  absl::MutexLock lock(&mu_);
  return schedule_.PresentAt(iteration);
}

std::vector<MembershipChange> ElasticMembership::changes() const {
  absl::MutexLock lock(&mu_);
  return schedule_.changes();
}

void ElasticMembership::Abort(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (abort_.ok()) abort_ = status;
}

}  // namespace p3
