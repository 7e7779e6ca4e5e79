// Each config default is stated three times: in the code that fills it
// (proto/config_defaults.cc), in its field's comment in proto/config.proto ("Default:
// ..."), and in the field's row of docs/config.md. This test reads all three and names
// every field where they disagree, or where a statement is missing.
//
// The code's default of a field is its value after FillDefaults() of a config that sets
// only what the default depends on: mode "pipeline" (the pipeline section), an emulated
// network, a schedule with a warm-up, a checkpoint folder (config_defaults.cc fills those
// sections only then). A stated default is compared where it starts with a value: a
// number (1e-8, 1/3), a quoted string ("out/<name>": <...> stands for anything), true or
// false, or empty / none / unset / absent (the zero value, or no value). "absent: 40000"
// is the value when the field is absent. Prose ("max(workers, servers) for ...") is not
// compared, only required.
//
// "local": it reads docs/config.md from the source tree, found by following the
// runfiles link of proto/config.proto.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/text_format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "p3/base/file_util.h"
#include "proto/config.h"

namespace p3::config {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// A default: a value, "no value" (kUnset), or prose that is not compared.
struct Value {
  enum class Kind { kUnset, kNumber, kString, kBool };
  Kind kind = Kind::kUnset;
  double number = 0;
  std::string text;
  bool flag = false;

  std::string Show() const {
    switch (kind) {
      case Kind::kUnset:
        return "unset";
      case Kind::kNumber:
        return absl::StrCat(number);
      case Kind::kString:
        return absl::StrCat("\"", text, "\"");
      case Kind::kBool:
        return flag ? "true" : "false";
    }
    return "?";
  }
};

bool StartsWithWord(absl::string_view text, absl::string_view word) {
  return absl::StartsWith(text, word) &&
         (text.size() == word.size() || !absl::ascii_isalnum(text[word.size()]));
}

// The value a stated default starts with; nullopt for prose.
std::optional<Value> Literal(absl::string_view text) {
  text = absl::StripLeadingAsciiWhitespace(text);
  const bool when_absent = absl::ConsumePrefix(&text, "absent:");
  text = absl::StripLeadingAsciiWhitespace(text);
  Value v;
  if (absl::ConsumePrefix(&text, "\"")) {
    const size_t end = text.find('"');
    if (end == absl::string_view::npos) return std::nullopt;
    v.kind = Value::Kind::kString;
    v.text = std::string(text.substr(0, end));
    return v;
  }
  if (!text.empty() && (absl::ascii_isdigit(text[0]) ||
                        (text.size() > 1 && text[0] == '-' && absl::ascii_isdigit(text[1])))) {
    const std::string s(text);
    char* end = nullptr;
    v.kind = Value::Kind::kNumber;
    v.number = std::strtod(s.c_str(), &end);
    if (*end == '/' && absl::ascii_isdigit(end[1])) v.number /= std::strtod(end + 1, &end);
    return v;
  }
  for (const char* word : {"true", "false"}) {
    if (StartsWithWord(text, word)) {
      v.kind = Value::Kind::kBool;
      v.flag = std::string(word) == "true";
      return v;
    }
  }
  for (const char* word : {"empty", "none", "unset", "absent"}) {
    if (StartsWithWord(text, word)) return v;
  }
  if (when_absent) return v;
  return std::nullopt;
}

// `value` matches `pattern`, in which each "<...>" stands for one or more characters.
bool MatchesPattern(absl::string_view value, absl::string_view pattern) {
  const size_t open = pattern.find('<');
  const size_t close = pattern.find('>', open);
  if (open == absl::string_view::npos || close == absl::string_view::npos) {
    return value == pattern;
  }
  if (!absl::StartsWith(value, pattern.substr(0, open))) return false;
  const absl::string_view rest_pattern = pattern.substr(close + 1);
  for (size_t at = open + 1; at <= value.size(); ++at) {
    if (MatchesPattern(value.substr(at), rest_pattern)) return true;
  }
  return false;
}

bool Agrees(const Value& stated, const Value& code) {
  using Kind = Value::Kind;
  if (stated.kind == Kind::kUnset) {
    return code.kind == Kind::kUnset || (code.kind == Kind::kNumber && code.number == 0) ||
           (code.kind == Kind::kString && code.text.empty()) ||
           (code.kind == Kind::kBool && !code.flag);
  }
  if (stated.kind != code.kind) return false;
  switch (stated.kind) {
    case Kind::kNumber:
      return std::abs(stated.number - code.number) <= 1e-9 * std::max(1.0, std::abs(code.number));
    case Kind::kString:
      return MatchesPattern(code.text, stated.text);
    case Kind::kBool:
      return stated.flag == code.flag;
    case Kind::kUnset:
      break;
  }
  return true;
}

// The value of the scalar or repeated field `path` (dotted) of `config`.
Value CodeValue(const Message& config, const std::string& path) {
  const Message* m = &config;
  const std::vector<std::string> parts = absl::StrSplit(path, '.');
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    const FieldDescriptor* f = m->GetDescriptor()->FindFieldByName(parts[i]);
    m = &m->GetReflection()->GetMessage(*m, f);
  }
  const FieldDescriptor* f = m->GetDescriptor()->FindFieldByName(parts.back());
  const Reflection* r = m->GetReflection();
  Value v;
  if (f->is_repeated()) {
    if (r->FieldSize(*m, f) > 0) {
      v.kind = Value::Kind::kString;
      v.text = "(a list)";
    }
    return v;
  }
  if (f->has_presence() && !r->HasField(*m, f)) return v;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING:
      v.kind = Value::Kind::kString;
      v.text = r->GetString(*m, f);
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      v.kind = Value::Kind::kBool;
      v.flag = r->GetBool(*m, f);
      break;
    case FieldDescriptor::CPPTYPE_INT32:
      v.kind = Value::Kind::kNumber;
      v.number = r->GetInt32(*m, f);
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      v.kind = Value::Kind::kNumber;
      v.number = static_cast<double>(r->GetInt64(*m, f));
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      v.kind = Value::Kind::kNumber;
      v.number = static_cast<double>(r->GetUInt64(*m, f));
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      v.kind = Value::Kind::kNumber;
      v.number = r->GetDouble(*m, f);
      break;
    default:
      v.kind = Value::Kind::kString;
      v.text = "(a type this test does not read)";
  }
  return v;
}

// Dotted paths of the scalar and repeated fields below `d`, in declaration order.
void LeafPaths(const Descriptor* d, const std::string& prefix, std::vector<std::string>* out) {
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    const std::string path = prefix + f->name();
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && !f->is_repeated()) {
      LeafPaths(f->message_type(), path + ".", out);
    } else {
      out->push_back(path);
    }
  }
}

// Dotted paths of the leaf fields `m` sets.
void SetPaths(const Message& m, const std::string& prefix, std::vector<std::string>* out) {
  std::vector<const FieldDescriptor*> fields;
  m.GetReflection()->ListFields(m, &fields);
  for (const FieldDescriptor* f : fields) {
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && !f->is_repeated()) {
      SetPaths(m.GetReflection()->GetMessage(m, f), prefix + f->name() + ".", out);
    } else {
      out->push_back(prefix + f->name());
    }
  }
}

// The configs whose filled defaults are the code's: the first that does not set the field.
constexpr const char* kContexts[] = {
    "mode: \"pipeline\" network { bandwidth_gbps: 1 } checkpoint { dir: \"/c\" } "
    "optimizer { schedule { name: \"step\" step_size: 9 warmup_iterations: 5 } }",
    "optimizer { schedule { } }",
};

// Field path -> the code's default.
std::map<std::string, Value> CodeDefaults(const std::vector<std::string>& paths) {
  std::map<std::string, Value> defaults;
  for (const char* text : kContexts) {
    ExperimentConfig context;
    CATCH_REQUIRE(google::protobuf::TextFormat::ParseFromString(text, &context));
    std::vector<std::string> set;
    SetPaths(context, "", &set);
    FillDefaults(&context);
    for (const std::string& path : paths) {
      if (defaults.count(path) == 0 && std::find(set.begin(), set.end(), path) == set.end()) {
        defaults[path] = CodeValue(context, path);
      }
    }
  }
  return defaults;
}

// The text after "Default:" (or "Default (...):"), to the end of the comment; nullopt
// when there is no such statement.
std::optional<std::string> DefaultStatement(const std::string& comment) {
  for (size_t at = comment.find("Default"); at != std::string::npos;
       at = comment.find("Default", at + 1)) {
    absl::string_view rest = absl::string_view(comment).substr(at + 7);
    if (absl::StartsWith(rest, " (")) rest.remove_prefix(rest.find(')') + 1);
    if (absl::ConsumePrefix(&rest, ":")) return std::string(rest);
  }
  return std::nullopt;
}

// message name -> field name -> the Default statement of its comment. Fields declared
// one after another under one comment share it; "Default: a, b, c" gives one value each
// when there are as many.
std::map<std::string, std::map<std::string, std::optional<std::string>>> ProtoStatements(
    const std::string& proto) {
  std::map<std::string, std::map<std::string, std::optional<std::string>>> statements;
  std::string message, comment;
  std::vector<std::string> group;  // the fields under the current comment
  std::optional<std::string> statement;
  auto close_group = [&] {
    if (group.size() > 1 && statement.has_value()) {
      const std::string first_sentence = statement->substr(0, statement->find(". "));
      const std::vector<std::string> values = absl::StrSplit(first_sentence, ", ");
      if (values.size() == group.size()) {
        for (size_t i = 0; i < group.size(); ++i) statements[message][group[i]] = values[i];
      }
    }
    group.clear();
  };
  for (absl::string_view raw : absl::StrSplit(proto, '\n')) {
    const absl::string_view line = absl::StripAsciiWhitespace(raw);
    absl::string_view text = line;
    if (absl::ConsumePrefix(&text, "message ")) {
      close_group();
      message = std::string(text.substr(0, text.find(' ')));
      comment.clear();
    } else if (absl::ConsumePrefix(&text, "//")) {
      close_group();
      absl::StrAppend(&comment, comment.empty() ? "" : " ", absl::StripAsciiWhitespace(text));
    } else if (line.empty() || line == "}") {
      close_group();
      comment.clear();
    } else if (!message.empty() && absl::StrContains(line, " = ") && absl::EndsWith(line, ";")) {
      std::vector<absl::string_view> words =
          absl::StrSplit(line.substr(0, line.find(" = ")), ' ', absl::SkipEmpty());
      const std::string field(words.back());
      if (!comment.empty()) {
        statement = DefaultStatement(comment);
        comment.clear();
      } else if (group.empty()) {
        statement.reset();
      }
      group.push_back(field);
      statements[message][field] = statement;
    }
  }
  return statements;
}

// Field path -> the default column of its row in docs/config.md, backticks removed.
std::map<std::string, std::string> DocStatements(const std::string& docs) {
  std::map<std::string, std::string> rows;
  for (absl::string_view line : absl::StrSplit(docs, '\n')) {
    if (!absl::StartsWith(line, "| `")) continue;
    const std::vector<std::string> cells = absl::StrSplit(line, '|');
    if (cells.size() < 5) continue;  // "", field, type, default, ...
    const std::string field(absl::StripAsciiWhitespace(absl::StrReplaceAll(cells[1], {{"`", ""}})));
    rows[field] = std::string(absl::StripAsciiWhitespace(absl::StrReplaceAll(cells[3], {{"`", ""}})));
  }
  return rows;
}

// One line per field whose stated defaults disagree with the code's, or are missing.
std::vector<std::string> Disagreements(const std::string& proto, const std::string& docs) {
  std::vector<std::string> paths;
  LeafPaths(ExperimentConfig::descriptor(), "", &paths);
  const std::map<std::string, Value> code = CodeDefaults(paths);
  const auto in_proto = ProtoStatements(proto);
  const std::map<std::string, std::string> in_docs = DocStatements(docs);
  std::vector<std::string> problems;
  for (const std::string& path : paths) {
    const Descriptor* d = ExperimentConfig::descriptor();
    const std::vector<std::string> parts = absl::StrSplit(path, '.');
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      d = d->FindFieldByName(parts[i])->message_type();
    }
    const Value& value = code.at(path);
    std::optional<std::string> proto_statement;
    if (auto m = in_proto.find(d->name()); m != in_proto.end()) {
      if (auto f = m->second.find(parts.back()); f != m->second.end()) proto_statement = f->second;
    }
    const std::string code_says = absl::StrCat("the code fills ", value.Show());
    if (!proto_statement.has_value()) {
      problems.push_back(absl::StrCat(path, ": config.proto states no default (", code_says, ")"));
    } else if (std::optional<Value> stated = Literal(*proto_statement);
               stated.has_value() && !Agrees(*stated, value)) {
      problems.push_back(absl::StrCat(path, ": config.proto says ", stated->Show(), ", ",
                                      code_says));
    }
    if (auto row = in_docs.find(path); row == in_docs.end()) {
      problems.push_back(absl::StrCat(path, ": no row in docs/config.md (", code_says, ")"));
    } else if (std::optional<Value> stated = Literal(row->second);
               stated.has_value() && !Agrees(*stated, value)) {
      problems.push_back(absl::StrCat(path, ": docs/config.md says ", stated->Show(), ", ",
                                      code_says));
    }
  }
  return problems;
}

std::string SourceFile(const std::string& path) {
  const std::filesystem::path root =
      std::filesystem::canonical("proto/config.proto").parent_path().parent_path();
  absl::StatusOr<std::string> text = ReadFile((root / path).string());
  CATCH_REQUIRE(text.ok());
  return *text;
}

CATCH_TEST_CASE("config.proto, docs/config.md and the code state the same defaults") {
  const std::vector<std::string> problems =
      Disagreements(SourceFile("proto/config.proto"), SourceFile("docs/config.md"));
  for (const std::string& problem : problems) CATCH_FAIL_CHECK(problem);
  CATCH_CHECK(problems.empty());
}

CATCH_TEST_CASE("a default stated differently, or not at all, is named by its field") {
  std::string proto = SourceFile("proto/config.proto");
  std::string docs = SourceFile("docs/config.md");
  CATCH_REQUIRE(absl::StrReplaceAll(
                    {{"// Number of worker processes. Default: 2.", "// Workers. Default: 3."},
                     {"// Adam's beta1, beta2, epsilon. Default: 0.9, 0.999, 1e-8.",
                      "// Adam's beta1, beta2, epsilon. Default: 0.9, 0.99, 1e-8."},
                     {"// Folder of the Fashion-MNIST .gz files. Default:", "// The folder:"}},
                    &proto) == 3);
  CATCH_REQUIRE(absl::StrReplaceAll({{"| `optimizer.eps` | double | 1e-8 |",
                                      "| `optimizer.eps` | double | 1e-6 |"},
                                     {"| `cluster.host` |", "| `cluster.hosts` |"},
                                     {"| `output_dir` | string | `\"out/<name>\"` |",
                                      "| `output_dir` | string | `\"output/<name>\"` |"}},
                                    &docs) == 3);
  CATCH_CHECK(Disagreements(proto, docs) ==
              std::vector<std::string>{
                  "cluster.workers: config.proto says 3, the code fills 2",
                  "cluster.host: no row in docs/config.md (the code fills \"127.0.0.1\")",
                  "data.path: config.proto states no default (the code fills "
                  "\"/usr/share/datasets/fashion-mnist\")",
                  "optimizer.beta2: config.proto says 0.99, the code fills 0.999",
                  "optimizer.eps: docs/config.md says 1e-06, the code fills 1e-08",
                  "output_dir: docs/config.md says \"output/<name>\", the code fills "
                  "\"out/experiment\"",
              });
}

CATCH_TEST_CASE("stated defaults are read as values, prose is left alone") {
  CATCH_CHECK(Literal(" 0.05 (sgd), 0.001 (adam).")->number == 0.05);
  CATCH_CHECK(std::abs(Literal("1/3 (PyTorch's LinearLR)")->number - 1.0 / 3.0) < 1e-12);
  CATCH_CHECK(Literal("\"out/<name>\"")->text == "out/<name>");
  CATCH_CHECK(Literal("absent: 40000 (the P3 paper's)")->number == 40000);
  CATCH_CHECK(Literal("absent: on when slice_params is 0")->kind == Value::Kind::kUnset);
  CATCH_CHECK(Literal("none: \"cpu\" for every stage")->kind == Value::Kind::kUnset);
  CATCH_CHECK(!Literal("nonesuch").has_value());
  CATCH_CHECK(!Literal("max(workers, servers) for colocated").has_value());
  CATCH_CHECK(MatchesPattern("out/experiment", "out/<name>"));
  CATCH_CHECK(!MatchesPattern("out/", "out/<name>"));
  CATCH_CHECK(!MatchesPattern("output/x", "out/<name>"));
}

}  // namespace
}  // namespace p3::config
