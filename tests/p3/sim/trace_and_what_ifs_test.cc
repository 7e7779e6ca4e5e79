// p3_sim's trace as the launcher's (the names and arguments tools/experiments read in
// both), and the what-ifs that draw simulated workers apart: a start stagger, and
// computation that varies from iteration to iteration or from block to block.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstdlib>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "p3/base/json_file.h"
#include "p3/core/mode.h"
#include "p3/sim/simulator.h"
#include "tests/p3/sim/ideal_calibration.h"

namespace p3::sim {
namespace {

CATCH_TEST_CASE("the trace names what the launcher's trace names: a wait's slices, a value's "
                "version, the slice an update summed") {
  // Two blocks of one slice each; what tools/experiments/value_waits.py reads in both.
  SimOptions o = Separate(Blocks({1000, 1000}), 1, 1, 1e-4);
  o.mode = Mode::kP3;
  o.trace = true;
  absl::StatusOr<SimResult> r = Simulate(o);
  CATCH_REQUIRE(r.ok());
  CATCH_REQUIRE(r->traces.size() == 2);  // the worker, the server
  bool wait_of_block0 = false, value_version = false, update_named = false;
  for (int i = 0; i < 2; ++i) {
    const std::string path =
        absl::StrCat(std::getenv("TEST_TMPDIR"), "/names", i, ".json");
    CATCH_REQUIRE(r->traces[i]->WriteJson(path).ok());
    absl::StatusOr<nlohmann::json> j = ReadJsonFile(path);
    CATCH_REQUIRE(j.ok());
    for (const nlohmann::json& e : (*j)["traceEvents"]) {
      const std::string name = e.value("name", "");
      const nlohmann::json args = e.value("args", nlohmann::json::object());
      // Block 0's gradient goes last, so the next forward waits for its values.
      if (name == "wait v2" && args.value("first_slice", -1) == 0 &&
          args.value("last_slice", -1) == 1) {
        wait_of_block0 = true;
      }
      if (name == "params 0" && args.value("version", -1) >= 1 && !args.contains("iteration")) {
        value_version = true;
      }
      if (name == "aggregate+update 1" && args.value("slice", -1) == 1) update_named = true;
    }
  }
  CATCH_CHECK(wait_of_block0);
  CATCH_CHECK(value_version);
  CATCH_CHECK(update_named);
}

CATCH_TEST_CASE("a start stagger starts worker r's first forward r x the stagger later") {
  Profile profile = Blocks({1000});
  profile.blocks[0].forward_s = 1e-3;
  SimOptions o = Separate(profile, 3, 1, 0);
  o.mode = Mode::kP3;
  o.trace = true;
  o.worker_start_stagger_s = 0.25;
  absl::StatusOr<SimResult> r = Simulate(o);
  CATCH_REQUIRE(r.ok());
  for (int w = 0; w < 3; ++w) {
    const std::string path = absl::StrCat(std::getenv("TEST_TMPDIR"), "/stagger", w, ".json");
    CATCH_REQUIRE(r->traces[w]->WriteJson(path).ok());
    absl::StatusOr<nlohmann::json> j = ReadJsonFile(path);
    CATCH_REQUIRE(j.ok());
    double first = 1e9;
    for (const nlohmann::json& e : (*j)["traceEvents"]) {
      if (e.value("name", "") == "forward b0") first = std::min(first, e["ts"].get<double>());
    }
    // Its initial values need no wait (they are there before any iteration), so the
    // first forward starts when the worker does.
    CATCH_CHECK(first * 1e-6 == Approx(0.25 * w).margin(1e-6));
  }
}

// A jitter what-if in `o`: the same for the same seed and another for another, the two
// workers computing unlike, and worker 0's mean computation within `margin` of `still_s`.
void CheckDrawnApart(SimOptions o, double still_s, double margin) {
  absl::StatusOr<SimResult> a = Simulate(o);
  absl::StatusOr<SimResult> b = Simulate(o);
  CATCH_REQUIRE(a.ok());
  CATCH_REQUIRE(b.ok());
  CATCH_CHECK(a->iteration_seconds == b->iteration_seconds);  // seeded: reproducible
  CATCH_CHECK(a->workers[0].compute_s != a->workers[1].compute_s);
  CATCH_CHECK(a->workers[0].compute_s == Approx(still_s).margin(margin));
  o.jitter_seed = 2;
  absl::StatusOr<SimResult> c = Simulate(o);
  CATCH_REQUIRE(c.ok());
  CATCH_CHECK(c->workers[0].compute_s != a->workers[0].compute_s);
}

CATCH_TEST_CASE("compute jitter draws each worker's iterations apart, the same for the same seed") {
  Profile profile = Blocks({1000});
  profile.blocks[0].forward_s = 0.01;
  profile.blocks[0].backward_s = 0.02;
  SimOptions o = Separate(profile, 2, 1, 0);
  o.mode = Mode::kP3;
  o.iterations = 20;
  absl::StatusOr<SimResult> still = Simulate(o);
  CATCH_REQUIRE(still.ok());
  CATCH_CHECK(still->workers[0].compute_s == Approx(0.03).epsilon(1e-9));
  o.compute_jitter = 0.2;
  // 17 measured iterations of 1 + 0.2 z: the mean factor within 0.2 (4 standard errors).
  CheckDrawnApart(o, 0.03, 0.2 * 0.03);
}

CATCH_TEST_CASE("block jitter varies each block apart, keeps the mean, and leaves local alone") {
  Profile profile = Blocks({1000, 1000, 1000, 1000});
  for (auto& b : profile.blocks) {
    b.forward_s = 0.01;
    b.backward_s = 0.02;
  }
  SimOptions o = Separate(profile, 2, 1, 0);
  o.mode = Mode::kP3;
  o.iterations = 40;
  o.block_jitter = 0.3;
  // 37 measured iterations of 8 blocks, each x a log-normal factor of mean 1 and sd 0.31:
  // an iteration's sd 0.014 s, the mean's 0.0023; within 0.0072 (3 of them) of the 0.12 s
  // a worker computes still.
  CheckDrawnApart(o, 0.12, 0.06 * 0.12);
  // One process alone has no other to share the cores with: `local` computes as without.
  o.mode = Mode::kLocal;
  absl::StatusOr<SimResult> jittered = Simulate(o);
  o.block_jitter = 0;
  absl::StatusOr<SimResult> still = Simulate(o);
  CATCH_REQUIRE(jittered.ok());
  CATCH_REQUIRE(still.ok());
  CATCH_CHECK(jittered->iteration_seconds == still->iteration_seconds);
}

}  // namespace
}  // namespace p3::sim
