// A timeline recorder that writes Chrome trace-event JSON (opens in Perfetto or
// chrome://tracing): complete events ("ph":"X") on named tracks of one process.
//
// Each process (worker, server) records into its own TraceRecorder and writes one file;
// the launcher merges the files (timestamps are microseconds of the shared wall clock).
// A disabled recorder costs one branch per event.
//
// Example:
//   TraceRecorder trace({.enabled = true, .process_name = "worker 0", .pid = 100});
//   const int compute = trace.Track("compute");
//   absl::Time start = absl::Now();
//   ... forward of block 2 ...
//   trace.Complete(compute, "forward conv2", "compute", start, absl::Now());
//   absl::Status s = trace.WriteJson("out/x/traces/worker_0.json");
//
// Thread-safe.
#ifndef P3_P3_BASE_TRACE_H_
#define P3_P3_BASE_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace p3 {

struct TraceOptions {
  // Record anything at all. Default: false.
  bool enabled = false;
  // Shown as the process's name in the viewer. Default: "p3".
  std::string process_name = "p3";
  // Process id in the merged trace; distinct per process. Default: 0.
  int pid = 0;
  // Events kept at most; later ones are counted and dropped. Default: 2,000,000.
  int64_t max_events = 2000000;
};

class TraceRecorder {
 public:
  explicit TraceRecorder(const TraceOptions& options);

  bool enabled() const { return options_.enabled; }

  // The id of the track called `name`, created on first use (a "thread" in the viewer).
  int Track(absl::string_view name);

  // An event `name` on `track` from `start` to `end`. `args` is empty or a JSON object's
  // members, e.g. "\"slice\": 3, \"bytes\": 160000".
  void Complete(int track, absl::string_view name, absl::string_view category, absl::Time start,
                absl::Time end, absl::string_view args = "");

  // Number of events recorded (not counting dropped ones).
  int64_t size() const;

  // Writes {"traceEvents": [...], "displayTimeUnit": "ms"} atomically (p3/base/file_util.h).
  absl::Status WriteJson(const std::string& path) const;

 private:
  struct Event {
    int track;
    std::string name;
    std::string category;
    int64_t start_us;
    int64_t duration_us;
    std::string args;
  };

  const TraceOptions options_;
  mutable absl::Mutex mu_;
  std::vector<std::string> tracks_ ABSL_GUARDED_BY(mu_);
  std::vector<Event> events_ ABSL_GUARDED_BY(mu_);
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace p3

#endif  // P3_P3_BASE_TRACE_H_
