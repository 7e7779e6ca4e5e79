// A BlockModel assembled from registered submodules: the building block of every model in
// the zoo (models/zoo.h).
//
// A subclass registers its submodules with register_module() as usual (so that names and
// parameter order follow the reference implementation, e.g. torchvision's), then describes
// each block once with AddBlock(): its name, the submodules whose parameters it owns, and
// the function that runs it.
//
// Example:
//   class Tiny : public BlockListModel {
//    public:
//     Tiny() {
//       fc_ = register_module("fc", torch::nn::Linear(4, 2));
//       AddBlock("fc", {fc_.ptr()}, [this](const torch::Tensor& x) { return fc_(x); });
//     }
//    private:
//     torch::nn::Linear fc_{nullptr};
//   };
//
// Not thread-safe, like every BlockModel.
#ifndef P3_MODELS_BLOCK_LIST_MODEL_H_
#define P3_MODELS_BLOCK_LIST_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/model.h"

namespace p3::models {

class BlockListModel : public BlockModel {
 public:
  using BlockFn = std::function<torch::Tensor(const torch::Tensor&)>;

  int64_t num_blocks() const override { return static_cast<int64_t>(blocks_.size()); }

  torch::Tensor ForwardBlock(int64_t i, const torch::Tensor& x) override {
    return blocks_.at(i).fn(x);
  }

  // The parameters of the block's modules, each module's in registration order.
  std::vector<torch::Tensor> BlockParameters(int64_t i) override {
    std::vector<torch::Tensor> out;
    for (const auto& m : blocks_.at(i).modules) {
      std::vector<torch::Tensor> p = m->parameters(/*recurse=*/true);
      out.insert(out.end(), p.begin(), p.end());
    }
    return out;
  }

  std::string BlockName(int64_t i) const override { return blocks_.at(i).name; }

 protected:
  // Appends a block. `modules` must already be registered with this model (directly or
  // nested) and must not belong to another block; `fn` runs the block. Blocks are added in
  // forward order, and their parameters in that order must be the model's parameters() order.
  void AddBlock(std::string name, std::vector<std::shared_ptr<torch::nn::Module>> modules,
                BlockFn fn) {
    blocks_.push_back({std::move(name), std::move(modules), std::move(fn)});
  }

  // A block running children [begin, end) of a registered Sequential in order; it owns
  // their parameters. Names such as "features.0" keep the reference's parameter names.
  void AddSequentialRange(std::string name, std::shared_ptr<torch::nn::SequentialImpl> seq,
                          size_t begin, size_t end) {
    std::vector<std::shared_ptr<torch::nn::Module>> modules;
    for (size_t i = begin; i < end; ++i) modules.push_back(seq->ptr(i));
    AddBlock(std::move(name), std::move(modules), [seq, begin, end](const torch::Tensor& x) {
      torch::Tensor y = x;
      for (auto it = seq->begin() + begin; it != seq->begin() + end; ++it) y = it->forward(y);
      return y;
    });
  }

  // Shorthand for a block that is one registered module with forward(Tensor) -> Tensor,
  // as register_module() returns it.
  template <typename Impl>
  void AddModuleBlock(std::string name, std::shared_ptr<Impl> module) {
    AddBlock(std::move(name), {module},
             [module](const torch::Tensor& x) { return module->forward(x); });
  }

 private:
  struct Block {
    std::string name;
    std::vector<std::shared_ptr<torch::nn::Module>> modules;
    BlockFn fn;
  };
  std::vector<Block> blocks_;
};

}  // namespace p3::models

#endif  // P3_MODELS_BLOCK_LIST_MODEL_H_
