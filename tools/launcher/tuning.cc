#include "tools/launcher/tuning.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "p3/core/mode.h"
#include "p3/sim/sim_config.h"
#include "p3/sim/simulator.h"
#include "p3/core/slice_search.h"
#include "proto/config.h"

namespace p3::tools::launcher {
namespace {

using Json = nlohmann::ordered_json;

// The committed CPU profiles without "_i<size>" were measured at 32 x 32 images
// (docs/simulator.md, "Profile files").
constexpr int kPlainProfileImageSize = 32;

Json PointJson(const sim::TuningCandidate& c) {
  Json j{{"slice_params", c.point.slice_params}, {"credit_bytes", c.point.credit_bytes}};
  if (c.ok) {
    j["samples_per_second"] = c.samples_per_second;
  } else {
    j["samples_per_second"] = nullptr;
    j["error"] = c.error;
  }
  return j;
}

}  // namespace

bool NeedsTuning(const config::ExperimentConfig& config) {
  return config::SliceParamsAuto(config) || config::CreditBytesAuto(config);
}

std::string FindProfile(const std::string& dir, const std::string& model, int64_t batch,
                        int64_t image_size) {
  const std::string suffix =
      image_size > kPlainProfileImageSize ? absl::StrCat("_i", image_size, "_cpu.json")
                                          : std::string("_cpu.json");
  const std::string prefix = model + "_b";
  std::string best;
  int64_t best_distance = -1;
  int64_t best_batch = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string filename = entry.path().filename().string();
    absl::string_view name = filename;
    if (!absl::ConsumePrefix(&name, prefix) || !absl::ConsumeSuffix(&name, suffix)) continue;
    int64_t profile_batch = 0;
    // Digits only: "resnet50_b2_i224_cpu.json" is not a plain profile of batch "2_i224".
    if (!absl::SimpleAtoi(name, &profile_batch) || profile_batch <= 0 ||
        name.find_first_not_of("0123456789") != absl::string_view::npos) {
      continue;
    }
    const int64_t distance = std::llabs(profile_batch - batch);
    // Equally near: the smaller batch (the directory's order is no order).
    if (best_distance < 0 || distance < best_distance ||
        (distance == best_distance && profile_batch < best_batch)) {
      best = entry.path().string();
      best_distance = distance;
      best_batch = profile_batch;
    }
  }
  return best;
}

namespace {

// The grid search (everything but the online search).
TuningReport TuneGrid(const config::ExperimentConfig& config, const TuningOptions& options) {
  TuningReport r;
  r.slice_auto = config::SliceParamsAuto(config);
  r.slice_absent = config::SliceParamsAbsent(config);
  r.credit_auto = config::CreditBytesAuto(config);
  r.slice_params = config::EffectiveSliceParams(config);
  r.credit_bytes = config::EffectiveCreditBytes(config);
  r.cpu_cores_per_host = options.cpu_cores_per_host;
  r.machines_per_host = config::MachineCount(config);
  r.iterations = options.iterations;
  r.warmup_iterations = options.warmup_iterations;
  if (!r.slice_auto && !r.credit_auto) return r;

  absl::StatusOr<Mode> mode = ParseMode(config.mode());
  const bool sliced = mode.ok() && *mode != Mode::kLocal &&
                      sim::KnobsToSearch(true, false, *mode).slice;
  if (r.slice_absent && !sliced) {
    // The default in a mode whose slice size means nothing: nothing was asked for.
    r.slice_auto = false;
    r.slice_absent = false;
    if (!r.credit_auto) return r;
  }
  if (!mode.ok() || *mode == Mode::kLocal) {
    r.reason = absl::StrCat("mode \"", config.mode(), "\" has no communication to tune");
    return r;
  }
  // The default with the user's own worker program: model.name need not be the model it
  // trains, so its profile predicts nothing (an explicit 0 still predicts with it).
  const bool own_program = r.slice_absent && config.worker().has_command();
  const sim::SearchedKnobs knobs =
      sim::KnobsToSearch(r.slice_auto && !own_program, r.credit_auto, *mode);
  const bool search_slice = knobs.slice;
  const bool search_credit = knobs.credit;
  std::vector<std::string> notes;
  if (own_program) {
    notes.push_back(
        "worker.command runs your own program, whose model need not be model.name's: no "
        "profile to predict its slice size from (slice_params: 0 predicts with model.name's)");
  } else if (r.slice_auto && !search_slice) {
    notes.push_back(absl::StrCat("mode \"", config.mode(),
                                 "\" sends whole tensors (split at split_threshold): "
                                 "slice_params has no effect"));
  }
  if (!search_slice && !search_credit) {
    r.reason = absl::StrJoin(notes, "; ");
    return r;
  }
  if (options.other_hosts) {
    r.reason =
        "the processes run on other hosts, whose link rate the config does not give "
        "(network.bandwidth_gbps is 0 there): no prediction";
    return r;
  }
  const int64_t batch = config.training().batch_size();
  r.profile = FindProfile(options.profile_dir, config.model().name(), batch,
                          config.model().image_size());
  if (r.profile.empty()) {
    r.reason = absl::StrCat(
        "no simulator profile for model \"", config.model().name(), "\" in ", options.profile_dir,
        " (", config.model().name(), "_b<batch>",
        config.model().image_size() > kPlainProfileImageSize
            ? absl::StrCat("_i", config.model().image_size())
            : "",
        "_cpu.json; docs/simulator.md, \"Profile files\")");
    return r;
  }
  sim::SimOptions base;
  absl::StatusOr<sim::Profile> profile = sim::LoadProfile(r.profile);
  if (!profile.ok()) {
    r.reason = std::string(profile.status().message());
    return r;
  }
  base.profile = *std::move(profile);
  if (absl::Status s = sim::ApplyConfig(config, &base); !s.ok()) {
    r.reason = std::string(s.message());
    return r;
  }
  r.profile_source = base.profile.source;
  r.calibration = options.calibration_path.empty() ? "built-in" : options.calibration_path;
  if (!options.calibration_path.empty()) {
    if (absl::Status s = sim::LoadCalibration(options.calibration_path, &base.calibration);
        !s.ok()) {
      r.reason = std::string(s.message());
      return r;
    }
  }
  base.cpu_cores_per_host = options.cpu_cores_per_host;
  base.machines_per_host = r.machines_per_host;
  base.iterations = options.iterations;
  base.warmup_iterations = options.warmup_iterations;

  const absl::Time start = absl::Now();
  absl::StatusOr<sim::TuningChoice> choice = sim::ChooseTuningPoint(
      sim::TuningGrid(search_slice, search_credit, r.slice_params, r.credit_bytes),
      [&base](const sim::TuningPoint& point) { return sim::PredictSamplesPerSecond(base, point); });
  r.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (!choice.ok()) {
    notes.push_back(std::string(choice.status().message()));
    r.reason = absl::StrJoin(notes, "; ");
    return r;
  }
  r.searched = true;
  r.reason = absl::StrJoin(notes, "; ");
  const sim::TuningPoint& chosen = choice->candidates[choice->chosen].point;
  r.slice_params = chosen.slice_params;
  r.credit_bytes = chosen.credit_bytes;
  r.choice = *std::move(choice);
  return r;
}

// Fills the online-search fields of `r`, whose slice_params is the start.
void DecideOnlineSearch(const config::ExperimentConfig& config, TuningReport* r) {
  const config::SchedulingConfig& scheduling = config.scheduling();
  r->online_search_in_config = scheduling.has_online_search();
  // Not asked for: an absent slice_params is automatic as the default, and the default
  // does not re-plan during the run (docs/config.md, scheduling.online_search).
  if (!r->online_search_in_config && (!r->slice_auto || r->slice_absent)) return;
  // What the workers will search (p3/core/slice_search.h), from the size every process gets.
  const int64_t owner = scheduling.owner_params() > 0 ? scheduling.owner_params()
                                                      : SliceSearchOwnerParams(r->slice_params);
  const std::vector<int64_t> candidates = SliceSearchCandidates(r->slice_params, owner);
  const int64_t needed = SliceSearch::IterationsNeeded({.candidates = candidates});
  const int64_t iterations = config.training().iterations();
  if (r->online_search_in_config) {
    r->online_search = scheduling.online_search();
    if (!r->online_search) r->online_reason = "scheduling.online_search is false in the config";
  } else if (std::string why = config::OnlineSearchRuledOutBy(config); !why.empty()) {
    r->online_reason = std::move(why);
  } else if (iterations > 0 && iterations < 10 * needed) {
    r->online_reason = absl::StrCat("the run has ", iterations, " iterations; the search takes ",
                                    needed, ", more than 10 % of them");
  } else {
    r->online_search = true;
  }
  if (!r->online_search) return;
  r->owner_params = owner;
  r->online_candidates = candidates;
  r->online_iterations = needed;
}

}  // namespace

TuningReport TuneConfig(const config::ExperimentConfig& config, const TuningOptions& options) {
  TuningReport r = TuneGrid(config, options);
  DecideOnlineSearch(config, &r);
  return r;
}

namespace {
std::string OnlineSearchLine(const TuningReport& r);
Json OnlineSearchJson(const TuningReport& r);
std::vector<std::string> GridLogLines(const TuningReport& r);
}  // namespace

std::vector<std::string> TuningLogLines(const TuningReport& r) {
  std::vector<std::string> lines = GridLogLines(r);
  if (std::string online = OnlineSearchLine(r); !online.empty()) lines.push_back(online);
  return lines;
}

namespace {

std::vector<std::string> GridLogLines(const TuningReport& r) {
  std::vector<std::string> lines;
  std::vector<std::string> what;
  if (r.slice_auto) {
    what.push_back(r.slice_absent ? "scheduling.slice_params (absent: the default)"
                                  : "scheduling.slice_params");
  }
  if (r.credit_auto) what.push_back("scheduling.credit_bytes");
  if (what.empty()) return lines;
  const std::string subject = absl::StrCat("automatic ", absl::StrJoin(what, " and "));
  const std::string values = absl::StrCat("slice_params ", r.slice_params, ", credit_bytes ",
                                          r.credit_bytes);
  if (!r.searched) {
    lines.push_back(absl::StrCat(subject, ": not searched (", r.reason, "); the defaults: ",
                                 values));
    return lines;
  }
  const sim::TuningChoice& choice = *r.choice;
  lines.push_back(absl::StrFormat(
      "%s: %d points simulated in %.1f s (profile %s; calibration %s; %g cores shared by %d "
      "machines; %d iterations, %d left out)",
      subject, choice.candidates.size(), r.seconds, r.profile, r.calibration,
      r.cpu_cores_per_host, r.machines_per_host, r.iterations, r.warmup_iterations));
  if (!r.reason.empty()) lines.push_back(absl::StrCat("  note: ", r.reason));
  lines.push_back("  slice_params  credit_bytes  predicted samples/s");
  for (size_t i = 0; i < choice.candidates.size(); ++i) {
    const sim::TuningCandidate& c = choice.candidates[i];
    std::string predicted =
        c.ok ? absl::StrFormat("%19.3f", c.samples_per_second) : "  failed: " + c.error;
    if (static_cast<int>(i) == choice.chosen) absl::StrAppend(&predicted, "  <- chosen");
    if (static_cast<int>(i) == choice.best && choice.best != choice.chosen) {
      absl::StrAppend(&predicted, "  (best, within the tie tolerance of the chosen)");
    }
    lines.push_back(absl::StrFormat("  %12d  %12d  %s", c.point.slice_params,
                                    c.point.credit_bytes, predicted));
  }
  lines.push_back(absl::StrCat("chosen: ", values, " (given to every process)"));
  return lines;
}

}  // namespace

std::vector<std::string> TuningOverrides(const TuningReport& r) {
  std::vector<std::string> overrides;
  if (r.slice_auto) overrides.push_back(absl::StrCat("scheduling.slice_params=", r.slice_params));
  if (r.credit_auto) overrides.push_back(absl::StrCat("scheduling.credit_bytes=", r.credit_bytes));
  if (r.online_search && !r.online_search_in_config) {
    overrides.push_back("scheduling.online_search=true");
  }
  return overrides;
}

namespace {

// The online search's lines and JSON, appended to the grid's.
std::string OnlineSearchLine(const TuningReport& r) {
  if (r.online_search) {
    return absl::StrCat("online search: on; worker 0 times slice sizes ",
                        absl::StrJoin(r.online_candidates, ", "),
                        " (3 iterations each) within ownership stripes of ", r.owner_params,
                        " and every process switches to the fastest by iteration ",
                        r.online_iterations);
  }
  return r.online_reason.empty() ? "" : absl::StrCat("online search: off (", r.online_reason, ")");
}

Json OnlineSearchJson(const TuningReport& r) {
  Json j;
  j["enabled"] = r.online_search;
  j["set_in_config"] = r.online_search_in_config;
  if (!r.online_reason.empty()) j["reason"] = r.online_reason;
  if (r.online_search) {
    j["owner_params"] = r.owner_params;
    j["candidates"] = r.online_candidates;
    j["iterations_needed"] = r.online_iterations;
  }
  return j;
}

}  // namespace

Json TuningJson(const TuningReport& r) {
  Json j;
  j["slice_params_auto"] = r.slice_auto;
  j["slice_params_absent"] = r.slice_absent;
  j["credit_bytes_auto"] = r.credit_auto;
  j["slice_params"] = r.slice_params;
  j["credit_bytes"] = r.credit_bytes;
  j["searched"] = r.searched;
  if (!r.reason.empty()) j["reason"] = r.reason;
  if (r.online_search || !r.online_reason.empty()) j["online_search"] = OnlineSearchJson(r);
  if (!r.searched) return j;
  const sim::TuningChoice& choice = *r.choice;
  j["predicted_samples_per_second"] = choice.candidates[choice.chosen].samples_per_second;
  j["best"] = PointJson(choice.candidates[choice.best]);
  j["tie_tolerance"] = sim::kTuningTieTolerance;
  Json grid = Json::array();
  for (const sim::TuningCandidate& c : choice.candidates) grid.push_back(PointJson(c));
  j["grid"] = grid;
  j["profile"] = r.profile;
  j["profile_source"] = r.profile_source;
  j["calibration"] = r.calibration;
  j["cpu_cores_per_host"] = r.cpu_cores_per_host;
  j["machines_per_host"] = r.machines_per_host;
  j["iterations"] = r.iterations;
  j["warmup_iterations"] = r.warmup_iterations;
  j["seconds"] = r.seconds;
  return j;
}

}  // namespace p3::tools::launcher
