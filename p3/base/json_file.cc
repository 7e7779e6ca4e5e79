#include "p3/base/json_file.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "p3/base/file_util.h"
#include "p3/base/status_macros.h"

namespace p3 {

absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path) {
  P3_ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& error) {
    // what() is "[json.exception.parse_error.101] parse error at line 2, column 8: ...":
    // the bracketed id means nothing to a reader of the message.
    absl::string_view what = error.what();
    if (const size_t id_end = what.find("] "); !what.empty() && what.front() == '[' &&
                                               id_end != absl::string_view::npos) {
      what.remove_prefix(id_end + 2);
    }
    return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON: ", what));
  }
}

}  // namespace p3
