// Turning an ordinary libtorch model into a BlockModel (models/model.h) without rewriting
// it: the Worker (worker/worker.h) and the pipeline need the model as blocks in forward
// order, each owning its parameters.
//
//   WrapSequential  an nn::Sequential: each child is a block, named by its name in the
//                   Sequential ("0", "1", ... or the names it was built with).
//   WrapChildren    any nn::Module whose forward() is its children applied one after
//                   another: give the children in forward order.
//   WrapFunctions   any nn::Module: blocks given as functions, each with the children
//                   (or parameters) of the module whose parameters it owns.
//
// Every parameter of the module must belong to exactly one block: a parameter no block
// owns, one owned twice, a name that is not the module's, or a frozen parameter
// (requires_grad false) is refused with InvalidArgument naming the parameter (a
// parameter outside the blocks would otherwise never be synchronised over the cluster;
// CheckBlocksCoverParameters() in models/model.h checks any BlockModel the same way).
// Buffers (BatchNorm's running statistics) need no owner.
//
// The wrapper registers the module's own parameters, buffers and children under their
// own names, so its state dict (models/state_dict.h) is the module's: a model exported to
// or loaded from Python keeps the names of the Python model it mirrors. The module is
// shared, not copied: training the wrapper trains it.
//
// Example:
//   torch::nn::Sequential net(torch::nn::Flatten(), torch::nn::Linear(784, 128),
//                             torch::nn::Functional(torch::relu), torch::nn::Linear(128, 10));
//   P3_ASSIGN_OR_RETURN(std::shared_ptr<p3::models::BlockModel> model,
//                       p3::models::WrapSequential(net));
//   P3_ASSIGN_OR_RETURN(auto worker, p3::Worker::Create(options, model));
//
//   // A module with a forward() of its own (std::shared_ptr<NetImpl> net):
//   P3_ASSIGN_OR_RETURN(model, p3::models::WrapFunctions(net, {
//       {"features", {"conv1", "bn1"}, [net](const torch::Tensor& x) {
//          return torch::relu(net->bn1(net->conv1(x))); }},
//       {"head", {"fc"}, [net](const torch::Tensor& x) { return net->fc(x.mean({2, 3})); }},
//   }));
//
// Not thread-safe, like every BlockModel.
#ifndef P3_MODELS_WRAP_H_
#define P3_MODELS_WRAP_H_

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "models/model.h"

namespace p3::models {

struct WrapOptions {
  // The training loss of the last block's output against the target.
  // Default: mean cross-entropy (BlockModel::Loss).
  std::function<torch::Tensor(const torch::Tensor& output, const torch::Tensor& target)> loss;
};

// One block of WrapFunctions.
struct FunctionBlock {
  // The block's name, e.g. "features". Must not be empty; unique.
  std::string name;
  // What the block owns: names of the module's submodules ("conv1", "layer1.0", ...: all
  // their parameters) or of single parameters ("scale", "head.bias"), as the module's
  // named_modules() / named_parameters() spell them.
  std::vector<std::string> owns;
  // Runs the block on the previous block's output (the model's input for the first).
  std::function<torch::Tensor(const torch::Tensor&)> fn;
};

// Blocks are `sequential`'s children, in order.
absl::StatusOr<std::shared_ptr<BlockModel>> WrapSequential(torch::nn::Sequential sequential,
                                                           WrapOptions options = {});

// Blocks are `children`, in forward order: each a direct child of `module` (by name), run
// by its forward(Tensor) -> Tensor. The model's forward is their composition; a module
// whose forward() does more between its children needs WrapFunctions.
absl::StatusOr<std::shared_ptr<BlockModel>> WrapChildren(
    std::shared_ptr<torch::nn::Module> module,
    std::vector<std::pair<std::string, torch::nn::AnyModule>> children, WrapOptions options = {});

// Blocks are `blocks`, in forward order.
absl::StatusOr<std::shared_ptr<BlockModel>> WrapFunctions(std::shared_ptr<torch::nn::Module> module,
                                                          std::vector<FunctionBlock> blocks,
                                                          WrapOptions options = {});

}  // namespace p3::models

#endif  // P3_MODELS_WRAP_H_
