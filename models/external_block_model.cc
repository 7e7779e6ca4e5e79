#include "models/external_block_model.h"

#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace p3::models {
namespace {

// Registers `t` under its dotted name ("conv1.0.weight"): libtorch refuses '.' in a
// name, so the path's modules are made (empty) as needed, and named_parameters() and
// named_buffers() give back the caller's names.
void Register(torch::nn::Module& root, const std::string& name, const torch::Tensor& t,
              bool parameter) {
  const std::vector<std::string> parts = absl::StrSplit(name, '.');
  torch::nn::Module* owner = &root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    std::shared_ptr<torch::nn::Module> child;
    for (const auto& c : owner->named_children()) {
      if (c.key() == parts[i]) child = c.value();
    }
    if (child == nullptr) {
      child = owner->register_module(parts[i], std::make_shared<torch::nn::Module>());
    }
    owner = child.get();
  }
  if (parameter) {
    owner->register_parameter(parts.back(), t, /*requires_grad=*/true);
  } else {
    owner->register_buffer(parts.back(), t);
  }
}

}  // namespace

absl::StatusOr<std::shared_ptr<ExternalBlockModel>> ExternalBlockModel::Create(
    std::vector<Block> blocks, std::vector<torch::Tensor> buffers,
    std::vector<std::string> buffer_names) {
  if (blocks.empty()) return absl::InvalidArgumentError("the model has no block with parameters");
  if (buffers.size() != buffer_names.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(buffers.size(), " buffers but ", buffer_names.size(), " buffer names"));
  }
  std::shared_ptr<ExternalBlockModel> model(new ExternalBlockModel());
  std::set<const void*> seen;
  std::set<std::string> names;
  auto add = [&](const std::string& what, const std::string& name,
                 const torch::Tensor& t) -> absl::Status {
    if (!t.defined())
      return absl::InvalidArgumentError(absl::StrCat(what, " ", name, " is undefined"));
    if (!seen.insert(t.unsafeGetTensorImpl()).second) {
      return absl::InvalidArgumentError(absl::StrCat(what, " ", name, " is given twice"));
    }
    if (name.empty() || absl::StrContains(name, "..") || name.front() == '.' ||
        name.back() == '.' || !names.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " name \"", name, "\" is empty, malformed or taken"));
    }
    return absl::OkStatus();
  };
  try {
    for (const Block& block : blocks) {
      if (block.params.empty() || block.params.size() != block.param_names.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("block ", block.name, ": ", block.params.size(), " parameters and ",
                         block.param_names.size(), " names (at least one parameter is needed)"));
      }
      for (size_t j = 0; j < block.params.size(); ++j) {
        if (absl::Status s = add("parameter", block.param_names[j], block.params[j]); !s.ok()) {
          return s;
        }
        Register(*model, block.param_names[j], block.params[j], /*parameter=*/true);
      }
    }
    for (size_t j = 0; j < buffers.size(); ++j) {
      if (absl::Status s = add("buffer", buffer_names[j], buffers[j]); !s.ok()) return s;
      Register(*model, buffer_names[j], buffers[j], /*parameter=*/false);
    }
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot describe the model: ", e.what_without_backtrace()));
  }
  model->blocks_ = std::move(blocks);
  return model;
}

torch::Tensor ExternalBlockModel::ForwardBlock(int64_t i, const torch::Tensor& x) {
  TORCH_CHECK(false, "block ", BlockName(i),
              " runs in the caller's own forward pass (ExternalBlockModel)");
  return x;
}

}  // namespace p3::models
