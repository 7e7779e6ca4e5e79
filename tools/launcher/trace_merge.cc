#include "tools/launcher/trace_merge.h"

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "p3/base/file_util.h"
#include "p3/base/status_macros.h"

namespace p3::tools {
namespace {

using Json = nlohmann::ordered_json;

// Compact text of `value`; invalid UTF-8 cannot occur (the parser rejects it), but is
// replaced rather than thrown on.
std::string Dump(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// The events of a traceEvents array, each checked to be an object.
absl::Status AppendEvents(const Json& array, std::vector<std::string>* events) {
  if (!array.is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"traceEvents\" is not an array but a ", array.type_name()));
  }
  for (size_t i = 0; i < array.size(); ++i) {
    if (!array[i].is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat("event ", i, ": expected an event object, not a ", array[i].type_name()));
    }
    events->push_back(Dump(array[i]));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TraceEvents> ParseTraceEvents(absl::string_view json) {
  Json trace;
  try {
    trace = Json::parse(json.begin(), json.end());
  } catch (const Json::parse_error& error) {
    // what() is "[json.exception.parse_error.101] parse error at line 1, column 9: ...".
    absl::string_view what = error.what();
    const size_t colon = what.find(": ");
    if (colon != absl::string_view::npos) what.remove_prefix(colon + 2);
    return absl::InvalidArgumentError(absl::StrCat("at byte ", error.byte, ": ", what));
  }
  TraceEvents result;
  if (trace.is_array()) {
    P3_RETURN_IF_ERROR(AppendEvents(trace, &result.events));
    return result;
  }
  if (!trace.is_object()) {
    return absl::InvalidArgumentError("expected a trace: {\"traceEvents\": [...]} or [...]");
  }
  auto events = trace.find("traceEvents");
  if (events == trace.end()) return absl::InvalidArgumentError("no \"traceEvents\" array");
  P3_RETURN_IF_ERROR(AppendEvents(*events, &result.events));
  auto other = trace.find("otherData");
  if (other != trace.end() && other->is_object()) {
    auto dropped = other->find("dropped_events");
    if (dropped != other->end() && dropped->is_number_integer()) {
      result.dropped_events += dropped->get<int64_t>();
    }
  }
  return result;
}

absl::StatusOr<TraceMergeStats> MergeTraceFiles(const std::vector<std::string>& inputs,
                                                const std::string& output) {
  TraceMergeStats stats;
  // One event per line; otherData (known only at the end) comes after traceEvents.
  std::string merged = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [";
  for (const std::string& input : inputs) {
    absl::StatusOr<std::string> text = ReadFile(input);
    if (!text.ok()) {
      // ReadFile's message is "cannot read <path>: <reason>".
      absl::string_view reason = text.status().message();
      absl::ConsumePrefix(&reason, absl::StrCat("cannot read ", input, ": "));
      return absl::Status(text.status().code(), absl::StrCat(input, ": cannot open: ", reason));
    }
    absl::StatusOr<TraceEvents> parsed = ParseTraceEvents(*text);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(input, ": not a Chrome trace: ", parsed.status().message()));
    }
    for (const std::string& event : parsed->events) {
      absl::StrAppend(&merged, stats.events == 0 ? "\n" : ",\n", event);
      ++stats.events;
    }
    stats.dropped_events += parsed->dropped_events;
    ++stats.files;
  }
  const Json other_data = {{"merged_files", stats.files}, {"dropped_events", stats.dropped_events}};
  absl::StrAppend(&merged, "\n],\n\"otherData\": ", Dump(other_data), "}\n");
  P3_RETURN_IF_ERROR(WriteFileAtomically(output, merged));
  return stats;
}

}  // namespace p3::tools
