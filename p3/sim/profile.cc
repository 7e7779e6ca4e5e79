#include "p3/sim/profile.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "models/output_rows.h"
#include "nlohmann/json.hpp"
#include "p3/base/json_file.h"
#include "p3/base/status_macros.h"

namespace p3::sim {

absl::StatusOr<Profile> LoadProfile(const std::string& path) {
  P3_ASSIGN_OR_RETURN(nlohmann::json j, ReadJsonFile(path));
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  Profile p;
  p.model = j.value("model", "");
  p.batch = j.value("batch", int64_t{0});
  p.source = j.value("source", "");
  if (p.batch < 1) return absl::InvalidArgumentError(absl::StrCat(path, ": batch must be >= 1"));
  if (!j.contains("blocks") || !j["blocks"].is_array() || j["blocks"].empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": \"blocks\" must be a non-empty array"));
  }
  for (const nlohmann::json& b : j["blocks"]) {
    ProfileBlock block;
    if (!b.is_object() || !b.contains("forward_s") || !b.contains("backward_s") ||
        !b["forward_s"].is_number() || !b["backward_s"].is_number()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": block ", p.blocks.size(), " needs numbers forward_s, backward_s"));
    }
    block.name = b.value("name", absl::StrCat("block", p.blocks.size()));
    block.forward_s = b["forward_s"].get<double>();
    block.backward_s = b["backward_s"].get<double>();
    if (block.forward_s < 0 || block.backward_s < 0) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": block ", block.name,
                                                     " has a negative time"));
    }
    if (b.contains("params")) {
      if (!b["params"].is_array()) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": params of ", block.name,
                                                       " must be an array of sizes"));
      }
      for (const nlohmann::json& n : b["params"]) {
        if (!n.is_number_integer() || n.get<int64_t>() < 1) {
          return absl::InvalidArgumentError(
              absl::StrCat(path, ": params of ", block.name, " must be sizes >= 1"));
        }
        block.params.push_back(n.get<int64_t>());
      }
    }
    p.blocks.push_back(std::move(block));
  }
  return p;
}

absl::StatusOr<Profile> CutOutputBlock(Profile profile, int64_t pieces) {
  if (pieces <= 1) return profile;
  const ProfileBlock whole = profile.blocks.back();
  const int64_t rows = whole.params.size() == 2 ? whole.params[1] : 0;
  if (rows < 1 || whole.params[0] % rows != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the profile's last block \"", whole.name,
        "\" is not an output projection (a weight of rows x inputs and a bias of rows)"));
  }
  if (pieces > rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "output_pieces ", pieces, " exceeds the output projection's ", rows, " rows"));
  }
  const int64_t in = whole.params[0] / rows;
  profile.blocks.pop_back();
  for (int64_t i = 0; i < pieces; ++i) {
    const int64_t own = models::OutputPieceRows(rows, pieces, i);
    const double share = static_cast<double>(own) / static_cast<double>(rows);
    profile.blocks.push_back({absl::StrCat(whole.name, ".", i), whole.forward_s * share,
                              whole.backward_s * share, {own * in, own}});
  }
  return profile;
}

std::vector<TensorEntry> ProfileTensors(const Profile& profile) {
  std::vector<TensorEntry> out;
  for (const ProfileBlock& b : profile.blocks) {
    for (size_t i = 0; i < b.params.size(); ++i) {
      out.push_back({absl::StrCat(b.name, "/", i), b.params[i]});
    }
  }
  return out;
}

}  // namespace p3::sim
