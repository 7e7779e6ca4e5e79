#include "models/wrap.h"

#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"

namespace p3::models {
namespace {

// The BlockModel the helpers build: `module`'s own parameters, buffers and children
// registered under their names, and the blocks as functions over them.
class WrappedModel : public BlockModel {
 public:
  struct Block {
    std::string name;
    std::vector<torch::Tensor> params;
    std::function<torch::Tensor(const torch::Tensor&)> fn;
  };

  WrappedModel(torch::nn::Module& module, std::vector<Block> blocks, WrapOptions options)
      : blocks_(std::move(blocks)), options_(std::move(options)) {
    for (const auto& p : module.named_parameters(/*recurse=*/false)) {
      register_parameter(p.key(), p.value(), p.value().requires_grad());
    }
    for (const auto& b : module.named_buffers(/*recurse=*/false))
      register_buffer(b.key(), b.value());
    for (const auto& c : module.named_children()) register_module(c.key(), c.value());
  }

  int64_t num_blocks() const override { return static_cast<int64_t>(blocks_.size()); }
  torch::Tensor ForwardBlock(int64_t i, const torch::Tensor& x) override {
    return blocks_.at(i).fn(x);
  }
  std::vector<torch::Tensor> BlockParameters(int64_t i) override { return blocks_.at(i).params; }
  std::string BlockName(int64_t i) const override { return blocks_.at(i).name; }
  torch::Tensor Loss(const torch::Tensor& output, const torch::Tensor& target) override {
    return options_.loss ? options_.loss(output, target) : BlockModel::Loss(output, target);
  }

 private:
  std::vector<Block> blocks_;
  WrapOptions options_;
};

absl::Status Refuse(const std::string& message) { return absl::InvalidArgumentError(message); }

}  // namespace

absl::StatusOr<std::shared_ptr<BlockModel>> WrapFunctions(std::shared_ptr<torch::nn::Module> module,
                                                          std::vector<FunctionBlock> blocks,
                                                          WrapOptions options) {
  if (module == nullptr) return Refuse("no module given");
  if (blocks.empty()) return Refuse("at least one block is needed");
  std::unordered_map<std::string, std::shared_ptr<torch::nn::Module>> submodules;
  for (const auto& m : module->named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
    submodules.emplace(m.key(), m.value());
  }
  std::unordered_map<std::string, torch::Tensor> params_by_name;
  std::unordered_map<const void*, std::string> names;  // TensorImpl -> parameter name
  std::vector<std::string> order;
  for (const auto& p : module->named_parameters(/*recurse=*/true)) {
    params_by_name.emplace(p.key(), p.value());
    names.emplace(p.value().unsafeGetTensorImpl(), p.key());
    order.push_back(p.key());
  }
  std::unordered_map<std::string, std::string> owner;  // parameter name -> block name
  std::unordered_set<std::string> block_names;
  std::vector<WrappedModel::Block> built;
  for (FunctionBlock& block : blocks) {
    if (block.name.empty()) return Refuse("a block has no name");
    if (!block_names.insert(block.name).second) {
      return Refuse(absl::StrCat("two blocks are named \"", block.name, "\""));
    }
    if (!block.fn) return Refuse(absl::StrCat("block \"", block.name, "\" has no function"));
    WrappedModel::Block b{block.name, {}, std::move(block.fn)};
    for (const std::string& owned : block.owns) {
      std::vector<torch::Tensor> params;
      if (auto m = submodules.find(owned); m != submodules.end()) {
        params = m->second->parameters(/*recurse=*/true);
      } else if (auto p = params_by_name.find(owned); p != params_by_name.end()) {
        params = {p->second};
      } else {
        return Refuse(absl::StrCat("block \"", block.name, "\": \"", owned,
                                   "\" is neither a submodule nor a parameter of the module"));
      }
      for (const torch::Tensor& p : params) {
        const std::string& name = names.at(p.unsafeGetTensorImpl());
        if (auto it = owner.find(name); it != owner.end()) {
          return Refuse(absl::StrCat("parameter \"", name, "\" is in blocks \"", it->second,
                                     "\" and \"", block.name, "\""));
        }
        if (!p.requires_grad()) {
          return Refuse(absl::StrCat("parameter \"", name,
                                     "\" does not require grad (frozen parameters are not "
                                     "supported: every parameter is trained)"));
        }
        owner.emplace(name, block.name);
        b.params.push_back(p);
      }
    }
    built.push_back(std::move(b));
  }
  for (const std::string& name : order) {
    if (owner.count(name) == 0) {
      return Refuse(absl::StrCat("parameter \"", name, "\" is in no block"));
    }
  }
  auto model = std::make_shared<WrappedModel>(*module, std::move(built), std::move(options));
  if (absl::Status covered = CheckBlocksCoverParameters(*model); !covered.ok()) return covered;
  return std::shared_ptr<BlockModel>(std::move(model));
}

absl::StatusOr<std::shared_ptr<BlockModel>> WrapChildren(
    std::shared_ptr<torch::nn::Module> module,
    std::vector<std::pair<std::string, torch::nn::AnyModule>> children, WrapOptions options) {
  if (module == nullptr) return Refuse("no module given");
  std::unordered_map<std::string, std::shared_ptr<torch::nn::Module>> own;
  for (const auto& c : module->named_children()) own.emplace(c.key(), c.value());
  std::vector<FunctionBlock> blocks;
  for (auto& [name, child] : children) {
    auto it = own.find(name);
    if (it == own.end()) {
      return Refuse(absl::StrCat("\"", name, "\" is not a child of the module"));
    }
    if (child.is_empty() || child.ptr() != it->second) {
      return Refuse(absl::StrCat("the module given for \"", name,
                                 "\" is not the module's child of that name"));
    }
    blocks.push_back({name, {name}, [child = std::move(child)](const torch::Tensor& x) mutable {
                        return child.forward(x);
                      }});
  }
  return WrapFunctions(std::move(module), std::move(blocks), std::move(options));
}

absl::StatusOr<std::shared_ptr<BlockModel>> WrapSequential(torch::nn::Sequential sequential,
                                                           WrapOptions options) {
  if (sequential.is_empty()) return Refuse("no module given");
  std::shared_ptr<torch::nn::SequentialImpl> seq = sequential.ptr();
  std::vector<FunctionBlock> blocks;
  const auto children = seq->named_children();
  for (size_t i = 0; i < seq->size(); ++i) {
    const std::string name = children[i].key();
    blocks.push_back({name, {name}, [seq, i](const torch::Tensor& x) {
                        return (seq->begin() + i)->forward(x);
                      }});
  }
  return WrapFunctions(seq, std::move(blocks), std::move(options));
}

}  // namespace p3::models
