#include "worker/replans.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace p3 {

Replans::Replans(const ReplansOptions& options, WorkerCore* core)
    : options_(options), core_(core) {}

absl::StatusOr<std::vector<ToServer>> Replans::Request(int64_t slice_params, uint64_t iteration) {
  if (options_.rank != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", options_.rank, ": only worker 0 re-plans"));
  }
  const SlicePlan& plan = core_->plan();
  if (plan.options().granularity != Granularity::kSliced || plan.options().owner_params < 1) {
    return absl::FailedPreconditionError(
        "a re-plan needs a sliced plan with ownership stripes (WorkerOptions::owner_params)");
  }
  if (!options_.values_on_push || options_.wire_dtype == WireDType::kFloat16 || options_.rejoin) {
    return absl::FailedPreconditionError(
        "a re-plan needs values on the push, a wire other than float16, and a worker that "
        "has not rejoined");
  }
  if (absl::Status s = plan.WithSliceParams(slice_params).status(); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (requested_from_ > iteration) {
    return absl::FailedPreconditionError(absl::StrCat("a re-plan from iteration ", requested_from_,
                                                      " is pending; this is iteration ",
                                                      iteration));
  }
  // The next iteration: the servers' slices are below it (its versions need this
  // worker's gradients of the current one, which follow the Replan on every stream).
  const uint64_t from = iteration + 1;
  std::vector<ToServer> out;
  for (int s = 0; s < options_.num_servers; ++s) {
    out.push_back(ToServer{.server = s,
                           .message = Upstream{.kind = Upstream::Kind::kReplan,
                                               .from_iteration = from,
                                               .slice_params = slice_params},
                           .priority = std::numeric_limits<int64_t>::min(),
                           .tiebreak = 0,
                           .bytes = 0});
  }
  requested_from_ = from;
  return out;
}

absl::Status Replans::Forwarded(int server, uint64_t from_iteration, int64_t slice_params) {
  absl::MutexLock lock(&mu_);
  auto same = std::find_if(pending_.begin(), pending_.end(),
                           [&](const Pending& p) { return p.from_iteration == from_iteration; });
  if (same == pending_.end()) {
    if (!pending_.empty() && pending_.back().from_iteration > from_iteration) {
      return absl::InternalError(
          absl::StrCat("server ", server, " forwarded a re-plan from iteration ", from_iteration,
                       " after one from iteration ", pending_.back().from_iteration));
    }
    pending_.push_back(Pending{from_iteration, slice_params, {server}});
  } else if (same->slice_params != slice_params) {
    return absl::InternalError(absl::StrCat(
        "server ", server, " forwarded a re-plan to slices of ", slice_params, " from iteration ",
        from_iteration, "; another server forwarded one to ", same->slice_params));
  } else if (std::find(same->servers.begin(), same->servers.end(), server) == same->servers.end()) {
    same->servers.push_back(server);  // (a server may tell a joining worker twice)
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> Replans::SwitchIfDue(uint64_t iteration) {
  Pending replan;
  {
    absl::MutexLock lock(&mu_);
    if (pending_.empty() || pending_.front().from_iteration > iteration) return false;
    replan = pending_.front();
    pending_.pop_front();
  }
  absl::Status wrong;
  if (replan.from_iteration < iteration) {
    wrong = absl::InternalError(absl::StrCat("a re-plan from iteration ", replan.from_iteration,
                                             " arrived after that iteration's values"));
  } else if (static_cast<int>(replan.servers.size()) != options_.num_servers) {
    wrong = absl::InternalError(absl::StrCat("a re-plan from iteration ", replan.from_iteration,
                                             " came from ", replan.servers.size(), " of ",
                                             options_.num_servers, " servers before their values"));
  } else {
    absl::StatusOr<SlicePlan> next = core_->plan().WithSliceParams(replan.slice_params);
    wrong = next.ok() ? core_->Replan(*std::move(next), replan.from_iteration) : next.status();
  }
  if (!wrong.ok()) {
    return absl::Status(wrong.code(),
                        absl::StrCat("worker ", options_.rank, ": ", wrong.message()));
  }
  absl::MutexLock lock(&mu_);
  ++count_;
  return true;
}

int Replans::count() const {
  absl::MutexLock lock(&mu_);
  return count_;
}

}  // namespace p3
