#include "tools/trace_merge.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace p3::tools {
namespace {

// A validating JSON scanner that skips over values and reports their extent; only as
// much JSON as a trace file needs (no decoding of strings beyond keys).
class Scanner {
 public:
  explicit Scanner(absl::string_view text) : text_(text) {}

  size_t pos() const { return pos_; }
  bool AtEnd() {
    SkipSpace();
    return pos_ >= text_.size();
  }

  void SkipSpace() {
    while (pos_ < text_.size() && absl::ascii_isspace(static_cast<unsigned char>(text_[pos_]))) {
      ++pos_;
    }
  }

  // The next non-space character, or '\0' at the end.
  char Peek() {
    SkipSpace();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }

  absl::Status Expect(char c) {
    if (Peek() != c) return Error(absl::StrCat("expected '", std::string(1, c), "'"));
    ++pos_;
    return absl::OkStatus();
  }

  // A string; its content (escapes kept as written) goes to `out` if not null.
  absl::Status String(std::string* out) {
    if (Peek() != '"') return Error("expected a string");
    ++pos_;
    const size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      if (static_cast<unsigned char>(text_[pos_]) < 0x20) {
        return Error("control character in a string");
      }
      if (text_[pos_] == '\\') ++pos_;
      ++pos_;
    }
    if (pos_ >= text_.size()) return Error("unterminated string");
    if (out != nullptr) *out = std::string(text_.substr(start, pos_ - start));
    ++pos_;
    return absl::OkStatus();
  }

  // Any value; its text (without surrounding space) goes to `out` if not null.
  absl::Status Value(absl::string_view* out, int depth = 0) {
    if (depth > 64) return Error("nesting deeper than 64");
    const char c = Peek();
    const size_t start = pos_;
    absl::Status status;
    if (c == '{') {
      ++pos_;
      if (Peek() == '}') {
        ++pos_;
      } else {
        while (status.ok()) {
          status = String(nullptr);
          if (status.ok()) status = Expect(':');
          if (status.ok()) status = Value(nullptr, depth + 1);
          if (!status.ok()) break;
          if (Peek() == ',') {
            ++pos_;
            continue;
          }
          status = Expect('}');
          break;
        }
      }
    } else if (c == '[') {
      ++pos_;
      if (Peek() == ']') {
        ++pos_;
      } else {
        while (status.ok()) {
          status = Value(nullptr, depth + 1);
          if (!status.ok()) break;
          if (Peek() == ',') {
            ++pos_;
            continue;
          }
          status = Expect(']');
          break;
        }
      }
    } else if (c == '"') {
      status = String(nullptr);
    } else if (c == '-' || absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      while (pos_ < text_.size() && (absl::ascii_isdigit(static_cast<unsigned char>(text_[pos_])) ||
                                     std::strchr("+-.eE", text_[pos_]) != nullptr)) {
        ++pos_;
      }
      double unused;
      if (!absl::SimpleAtod(text_.substr(start, pos_ - start), &unused)) {
        pos_ = start;
        status = Error("malformed number");
      }
    } else {
      bool matched = false;
      for (absl::string_view word : {"true", "false", "null"}) {
        if (text_.substr(pos_, word.size()) == word) {
          pos_ += word.size();
          matched = true;
          break;
        }
      }
      if (!matched) status = Error("expected a JSON value");
    }
    if (status.ok() && out != nullptr) *out = text_.substr(start, pos_ - start);
    return status;
  }

  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("at byte ", pos_, ": ", what));
  }

 private:
  absl::string_view text_;
  size_t pos_ = 0;
};

// The events of a traceEvents array, each checked to be an object.
absl::Status ParseEventArray(Scanner& scanner, std::vector<std::string>* events) {
  absl::Status status = scanner.Expect('[');
  if (!status.ok()) return status;
  if (scanner.Peek() == ']') return scanner.Expect(']');
  while (true) {
    if (scanner.Peek() != '{') return scanner.Error("expected an event object");
    absl::string_view event;
    status = scanner.Value(&event);
    if (!status.ok()) return status;
    events->emplace_back(event);
    if (scanner.Peek() == ',') {
      status = scanner.Expect(',');
      if (!status.ok()) return status;
      continue;
    }
    return scanner.Expect(']');
  }
}

// otherData: adds a numeric "dropped_events" member, skips the rest.
absl::Status ParseOtherData(Scanner& scanner, int64_t* dropped) {
  if (scanner.Peek() != '{') return scanner.Value(nullptr);
  absl::Status status = scanner.Expect('{');
  if (scanner.Peek() == '}') return scanner.Expect('}');
  while (status.ok()) {
    std::string key;
    status = scanner.String(&key);
    if (status.ok()) status = scanner.Expect(':');
    absl::string_view value;
    if (status.ok()) status = scanner.Value(&value);
    if (!status.ok()) break;
    int64_t number = 0;
    if (key == "dropped_events" && absl::SimpleAtoi(value, &number)) *dropped += number;
    if (scanner.Peek() == ',') {
      status = scanner.Expect(',');
      continue;
    }
    return scanner.Expect('}');
  }
  return status;
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  std::stringstream contents;
  contents << file.rdbuf();
  if (file.bad()) return absl::DataLossError(absl::StrCat(path, ": read error"));
  return contents.str();
}

}  // namespace

absl::StatusOr<TraceEvents> ParseTraceEvents(absl::string_view json) {
  Scanner scanner(json);
  TraceEvents result;
  absl::Status status;
  if (scanner.Peek() == '[') {
    status = ParseEventArray(scanner, &result.events);
  } else if (scanner.Peek() == '{') {
    status = scanner.Expect('{');
    bool found = false;
    if (scanner.Peek() == '}') {
      status = scanner.Expect('}');
    } else {
      while (status.ok()) {
        std::string key;
        status = scanner.String(&key);
        if (status.ok()) status = scanner.Expect(':');
        if (!status.ok()) break;
        if (key == "traceEvents") {
          found = true;
          status = ParseEventArray(scanner, &result.events);
        } else if (key == "otherData") {
          status = ParseOtherData(scanner, &result.dropped_events);
        } else {
          status = scanner.Value(nullptr);
        }
        if (!status.ok()) break;
        if (scanner.Peek() == ',') {
          status = scanner.Expect(',');
          continue;
        }
        status = scanner.Expect('}');
        break;
      }
    }
    if (status.ok() && !found) return absl::InvalidArgumentError("no \"traceEvents\" array");
  } else {
    status = scanner.Error("expected a trace: {\"traceEvents\": [...]} or [...]");
  }
  if (status.ok() && !scanner.AtEnd()) status = scanner.Error("text after the trace");
  if (!status.ok()) return status;
  return result;
}

absl::StatusOr<TraceMergeStats> MergeTraceFiles(const std::vector<std::string>& inputs,
                                                const std::string& output) {
  TraceMergeStats stats;
  const std::string tmp = output + ".tmp";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) {
    return absl::PermissionDeniedError(
        absl::StrCat(tmp, ": cannot create: ", std::strerror(errno)));
  }
  // The events are written as each file is read, so a large run needs one file's worth
  // of memory; otherData (known only at the end) therefore comes after traceEvents.
  out << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [";
  for (const std::string& input : inputs) {
    absl::StatusOr<std::string> text = ReadWholeFile(input);
    absl::StatusOr<TraceEvents> parsed =
        text.ok() ? ParseTraceEvents(*text) : absl::StatusOr<TraceEvents>(text.status());
    if (!parsed.ok()) {
      out.close();
      std::remove(tmp.c_str());
      if (!text.ok()) return text.status();
      return absl::InvalidArgumentError(
          absl::StrCat(input, ": not a Chrome trace: ", parsed.status().message()));
    }
    for (const std::string& event : parsed->events) {
      out << (stats.events == 0 ? "\n" : ",\n") << event;
      ++stats.events;
    }
    stats.dropped_events += parsed->dropped_events;
    ++stats.files;
  }
  out << "\n],\n\"otherData\": {\"merged_files\": " << stats.files
      << ", \"dropped_events\": " << stats.dropped_events << "}}\n";
  out.close();
  if (!out) {
    std::remove(tmp.c_str());
    return absl::DataLossError(absl::StrCat(tmp, ": short write"));
  }
  if (std::rename(tmp.c_str(), output.c_str()) != 0) {
    const int error = errno;
    std::remove(tmp.c_str());
    return absl::PermissionDeniedError(
        absl::StrCat("cannot rename ", tmp, " to ", output, ": ", std::strerror(error)));
  }
  return stats;
}

}  // namespace p3::tools
