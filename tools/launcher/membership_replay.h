// launch_cluster --membership_from=FILE: mode "local" replays the membership of a finished
// elastic run (docs/reliability.md, "Elastic membership").
//
// FILE is that run's summary.json (its "elastic": {"max_workers", "membership"}) or one
// worker's result (results/worker_R.json: "membership"). The membership list becomes
// cluster.workers (the size of the first present set), cluster.elastic.max_workers and
// one cluster.elastic.change per later set; the config is then validated again.
//
// Example:
//   absl::StatusOr<std::vector<std::string>> notes =
//       ApplyMembershipFrom(*ReadFile("out/elastic/summary.json"), &config);
//   // config now holds change { from_iteration: 100 present: [0, 1, 2] } ...
//
// Thread-compatible (a function of its arguments).
#ifndef P3_TOOLS_LAUNCHER_MEMBERSHIP_REPLAY_H_
#define P3_TOOLS_LAUNCHER_MEMBERSHIP_REPLAY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/config.pb.h"

namespace p3::tools::launcher {

// Sets `config`'s membership (above) from the JSON `text`; `config` must be in mode
// "local". Returns what it set, as override-like lines for the resolved config's header.
// InvalidArgument, naming what is wrong, for text that is not such a record, a first set
// that is not ranks 0..n-1 from iteration 0, or a membership the config refuses; `config`
// is then unchanged.
absl::StatusOr<std::vector<std::string>> ApplyMembershipFrom(absl::string_view text,
                                                             config::ExperimentConfig* config);

}  // namespace p3::tools::launcher

#endif  // P3_TOOLS_LAUNCHER_MEMBERSHIP_REPLAY_H_
