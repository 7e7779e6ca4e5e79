#include "p3/base/trace.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "p3/base/file_util.h"

namespace p3 {
namespace {

// A JSON string literal, quoted and escaped.
std::string Quoted(absl::string_view s) { return nlohmann::json(std::string(s)).dump(); }

}  // namespace

TraceRecorder::TraceRecorder(const TraceOptions& options) : options_(options) {}

int TraceRecorder::Track(absl::string_view name) {
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < tracks_.size(); ++i) {
    if (tracks_[i] == name) return static_cast<int>(i);
  }
  tracks_.emplace_back(name);
  return static_cast<int>(tracks_.size() - 1);
}

void TraceRecorder::Complete(int track, absl::string_view name, absl::string_view category,
                             absl::Time start, absl::Time end, absl::string_view args) {
  if (!options_.enabled) return;
  Event e{track,
          std::string(name),
          std::string(category),
          absl::ToUnixMicros(start),
          std::max<int64_t>(0, absl::ToInt64Microseconds(end - start)),
          std::string(args)};
  absl::MutexLock lock(&mu_);
  if (static_cast<int64_t>(events_.size()) >= options_.max_events) {
    ++dropped_;
    return;
  }
  events_.push_back(std::move(e));
}

int64_t TraceRecorder::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(events_.size());
}

absl::Status TraceRecorder::WriteJson(const std::string& path) const {
  std::ostringstream out;
  {
    absl::MutexLock lock(&mu_);
    out << "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"dropped_events\": " << dropped_
        << "}, \"traceEvents\": [\n";
    out << "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": " << options_.pid
        << ", \"tid\": 0, \"args\": {\"name\": " << Quoted(options_.process_name) << "}}";
    for (size_t t = 0; t < tracks_.size(); ++t) {
      out << ",\n{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " << options_.pid
          << ", \"tid\": " << t << ", \"args\": {\"name\": " << Quoted(tracks_[t]) << "}}";
      out << ",\n{\"ph\": \"M\", \"name\": \"thread_sort_index\", \"pid\": " << options_.pid
          << ", \"tid\": " << t << ", \"args\": {\"sort_index\": " << t << "}}";
    }
    for (const Event& e : events_) {
      out << ",\n{\"ph\": \"X\", \"pid\": " << options_.pid << ", \"tid\": " << e.track
          << ", \"ts\": " << e.start_us << ", \"dur\": " << e.duration_us
          << ", \"name\": " << Quoted(e.name) << ", \"cat\": " << Quoted(e.category);
      if (!e.args.empty()) out << ", \"args\": {" << e.args << "}";
      out << "}";
    }
    out << "\n]}\n";
  }
  // The file is written without the lock: recording goes on meanwhile.
  return WriteFileAtomically(path, out.str());
}

}  // namespace p3
