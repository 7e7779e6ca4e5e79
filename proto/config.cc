// Parsing, overrides and text output of experiment configs (proto/config.h).
#include "proto/config.h"

#include <arpa/inet.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "p3/base/file_util.h"
#include "p3/base/status_macros.h"

namespace p3::config {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using google::protobuf::TextFormat;

// Keeps the parser's errors; the text-format parser stops at its first error, but a
// tokenizer error may precede it.
class CollectingErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  struct Error {
    int line;    // 0-based.
    int column;  // 0-based.
    std::string message;
  };

  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    errors_.push_back({line, column, message});
  }

  const std::vector<Error>& errors() const { return errors_; }

 private:
  std::vector<Error> errors_;
};

class SilentErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
};

// Comma-separated names of the fields of `descriptor`, in declaration order.
std::string FieldNames(const Descriptor& descriptor) {
  std::vector<std::string> names;
  for (int i = 0; i < descriptor.field_count(); ++i) {
    names.push_back(descriptor.field(i)->name());
  }
  return absl::StrJoin(names, ", ");
}

// The message type reached by following `path` (field names) from `root`, or null when
// a component is unknown or not a message.
const Descriptor* DescriptorAt(const Descriptor* root, const std::vector<std::string>& path) {
  const Descriptor* descriptor = root;
  for (const std::string& name : path) {
    const FieldDescriptor* field = descriptor->FindFieldByName(name);
    if (field == nullptr || field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) {
      return nullptr;
    }
    descriptor = field->message_type();
  }
  return descriptor;
}

struct FieldAtPosition {
  std::vector<std::string> path;  // Field names from the root.
  int name_line = -1;             // Where the last name of `path` starts, 0-based.
  int name_column = -1;
};

// The dotted path of the field that the text-format parser was reading when it stopped
// at (line, column), 0-based: the enclosing message fields plus the name of the field
// whose name or value was being read. Best effort: it follows the token structure of
// text format, which is all that is needed to name the field in an error message.
FieldAtPosition FieldPathAt(const std::string& text, int line, int column) {
  google::protobuf::io::ArrayInputStream input(text.data(), static_cast<int>(text.size()));
  SilentErrorCollector silent;
  google::protobuf::io::Tokenizer tokenizer(&input, &silent);
  using Tokenizer = google::protobuf::io::Tokenizer;

  std::vector<std::string> stack;
  std::string name;
  int name_line = -1;
  int name_column = -1;
  bool expecting_name = true;
  int list_depth = 0;
  while (tokenizer.Next()) {
    const Tokenizer::Token& token = tokenizer.current();
    if (token.line > line || (token.line == line && token.column >= column)) break;
    switch (token.type) {
      case Tokenizer::TYPE_IDENTIFIER:
        if (expecting_name && list_depth == 0) {
          name = token.text;
          name_line = token.line;
          name_column = token.column;
          expecting_name = false;
        } else if (list_depth == 0) {
          expecting_name = true;  // An identifier value: true, an enum, inf.
        }
        break;
      case Tokenizer::TYPE_INTEGER:
      case Tokenizer::TYPE_FLOAT:
      case Tokenizer::TYPE_STRING:
        if (list_depth == 0) expecting_name = true;
        break;
      case Tokenizer::TYPE_SYMBOL:
        if (token.text == "{" || token.text == "<") {
          stack.push_back(name);
          name.clear();
          expecting_name = true;
        } else if (token.text == "}" || token.text == ">") {
          if (!stack.empty()) {
            name = stack.back();
            stack.pop_back();
          }
          expecting_name = true;
        } else if (token.text == "[") {
          ++list_depth;
        } else if (token.text == "]") {
          if (list_depth > 0) --list_depth;
          expecting_name = list_depth == 0;
        }
        break;
      default:
        break;
    }
  }
  FieldAtPosition result;
  result.path = std::move(stack);
  if (!name.empty() && !expecting_name) {
    result.path.push_back(name);
    result.name_line = name_line;
    result.name_column = name_column;
  }
  return result;
}

// Rewrites one parser error into "<line>:<column>: <field path>: <what is wrong>".
std::string DescribeParseError(const std::string& text,
                               const CollectingErrorCollector::Error& error) {
  const FieldAtPosition field = FieldPathAt(text, error.line, error.column);
  const std::vector<std::string>& path = field.path;
  const std::string dotted = absl::StrJoin(path, ".");

  // "Message type "p3.config.TrainingConfig" has no field named "batch_sizee"." The
  // parser reports it at the token after the name; point at the name instead.
  if (absl::StrContains(error.message, "has no field named")) {
    const bool at_name = field.name_line >= 0;
    const std::string location =
        absl::StrCat((at_name ? field.name_line : error.line) + 1, ":",
                     (at_name ? field.name_column : error.column) + 1, ": ");
    std::vector<std::string> parent(path.begin(), path.empty() ? path.end() : path.end() - 1);
    const Descriptor* descriptor = DescriptorAt(ExperimentConfig::descriptor(), parent);
    if (descriptor != nullptr) {
      return absl::StrCat(location, dotted.empty() ? "" : dotted + ": ", "unknown field; allowed",
                          parent.empty() ? "" : absl::StrCat(" in ", absl::StrJoin(parent, ".")),
                          ": ", FieldNames(*descriptor));
    }
  }
  const std::string location = absl::StrCat(error.line + 1, ":", error.column + 1, ": ");
  std::string message = error.message;
  if (absl::EndsWith(message, "got: ")) message += "end of input";
  return absl::StrCat(location, dotted.empty() ? "" : dotted + ": ", message);
}

// Parses `text` into `config` (merging), turning parser errors into a Status.
absl::Status ParseText(const std::string& text, ExperimentConfig* config) {
  CollectingErrorCollector errors;
  TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (parser.ParseFromString(text, config)) return absl::OkStatus();
  if (errors.errors().empty()) {
    return absl::InvalidArgumentError("the config is not valid text format");
  }
  std::vector<std::string> messages;
  for (const CollectingErrorCollector::Error& error : errors.errors()) {
    messages.push_back(DescribeParseError(text, error));
  }
  return absl::InvalidArgumentError(absl::StrJoin(messages, "\n"));
}

}  // namespace

absl::StatusOr<ExperimentConfig> LoadConfig(const std::string& path,
                                            const std::vector<std::string>& overrides) {
  absl::StatusOr<std::string> contents = ReadFile(path);
  if (!contents.ok()) {
    // Every error of a config starts with its path: "x.textproto: cannot open the config
    // file: No such file or directory".
    absl::string_view reason = contents.status().message();
    absl::ConsumePrefix(&reason, absl::StrCat("cannot read ", path, ": "));
    return absl::Status(contents.status().code(),
                        absl::StrCat(path, ": cannot open the config file: ", reason));
  }
  absl::StatusOr<ExperimentConfig> config = ParseConfig(*contents, overrides);
  if (!config.ok()) {
    // "path:3:5: ..." for syntax errors (as compilers print them), "path: field: ..." else.
    std::vector<std::string> lines;
    for (absl::string_view line : absl::StrSplit(config.status().message(), '\n')) {
      const bool located =
          !line.empty() && absl::ascii_isdigit(static_cast<unsigned char>(line[0]));
      lines.push_back(absl::StrCat(path, located ? ":" : ": ", line));
    }
    return absl::Status(config.status().code(), absl::StrJoin(lines, "\n"));
  }
  return config;
}

absl::StatusOr<ExperimentConfig> ParseConfig(const std::string& text,
                                             const std::vector<std::string>& overrides) {
  ExperimentConfig config;
  P3_RETURN_IF_ERROR(ParseText(text, &config));
  for (const std::string& override_text : overrides) {
    P3_RETURN_IF_ERROR(ApplyOverride(override_text, &config));
  }
  FillDefaults(&config);
  P3_RETURN_IF_ERROR(ValidateConfig(config));
  return config;
}

absl::Status ApplyOverride(const std::string& override_text, ExperimentConfig* config) {
  const std::string context = absl::StrCat("override '", override_text, "'");
  const size_t equals = override_text.find('=');
  if (equals == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(context, ": expected field.path=value, e.g. training.batch_size=64"));
  }
  const std::string path(absl::StripAsciiWhitespace(override_text.substr(0, equals)));
  std::string value(absl::StripAsciiWhitespace(override_text.substr(equals + 1)));

  std::vector<std::string> names;
  for (absl::string_view part : absl::StrSplit(path, '.')) names.emplace_back(part);

  Message* message = config;
  std::string walked;  // Dotted path of `message` from the root.
  for (size_t i = 0; i < names.size(); ++i) {
    const Descriptor* descriptor = message->GetDescriptor();
    const std::string field_path = walked.empty() ? names[i] : walked + "." + names[i];
    const FieldDescriptor* field = descriptor->FindFieldByName(names[i]);
    if (field == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(context, ": ", field_path, ": unknown field; allowed",
                       walked.empty() ? "" : " in " + walked, ": ", FieldNames(*descriptor)));
    }
    if (field->is_repeated()) {
      return absl::InvalidArgumentError(absl::StrCat(
          context, ": ", field_path, " is a repeated field; overrides set single fields"));
    }
    const bool last = i + 1 == names.size();
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (last) {
        return absl::InvalidArgumentError(absl::StrCat(
            context, ": ", field_path, " is a message; set one of its fields (", field_path,
            ".<field>=value); allowed: ", FieldNames(*field->message_type())));
      }
      message = message->GetReflection()->MutableMessage(message, field);
      walked = field_path;
      continue;
    }
    if (!last) {
      return absl::InvalidArgumentError(
          absl::StrCat(context, ": ", field_path, " is a ", field->type_name(),
                       ", not a message; it has no field \"", names[i + 1], "\""));
    }
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_STRING &&
        !(value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
          value.back() == value.front())) {
      value = absl::StrCat("\"", absl::CEscape(value), "\"");
    }
    CollectingErrorCollector errors;
    TextFormat::Parser parser;
    parser.RecordErrorsTo(&errors);
    if (!parser.ParseFieldValueFromString(value, field, message)) {
      const std::string reason =
          errors.errors().empty() ? "cannot parse the value" : errors.errors().front().message;
      return absl::InvalidArgumentError(
          absl::StrCat(context, ": ", field_path, " (", field->type_name(), "): ", reason));
    }
  }
  return absl::OkStatus();
}

std::string ConfigToText(const ExperimentConfig& config) {
  std::string text;
  TextFormat::Printer printer;
  printer.PrintToString(config, &text);
  return text;
}

std::vector<std::string> TakeOverrideFlags(int* argc, char** argv) {
  std::vector<std::string> overrides;
  int kept = 1;
  int i = 1;
  for (; i < *argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") break;  // The rest is positional: left as it is.
    if (absl::ConsumePrefix(&arg, "--set=") || absl::ConsumePrefix(&arg, "-set=")) {
      overrides.emplace_back(arg);
    } else if ((arg == "--set" || arg == "-set") && i + 1 < *argc) {
      overrides.emplace_back(argv[++i]);
    } else {
      argv[kept++] = argv[i];
    }
  }
  for (; i < *argc; ++i) argv[kept++] = argv[i];
  *argc = kept;
  return overrides;
}

}  // namespace p3::config
