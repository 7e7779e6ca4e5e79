// A BlockModel over tensors that live elsewhere: the parameters and buffers of a PyTorch
// module in Python (worker/python/, docs/python.md), grouped into blocks by the caller.
// It does not run the blocks — the caller runs its own forward pass and gates each block
// with Worker::WaitForBlock — so ForwardBlock fails (a c10::Error). The tensors are
// shared, not copied: what the Worker writes into them (parameter values, the buffers'
// mean) is what the caller's module computes with.
//
// Example:
//   P3_ASSIGN_OR_RETURN(auto model, ExternalBlockModel::Create(
//       {{.name = "conv1", .param_names = {"conv1.weight"}, .params = {w}}}, {}, {}));
//   P3_ASSIGN_OR_RETURN(auto worker, p3::Worker::Create(options, model));
//   P3_RETURN_IF_ERROR(worker->WaitForBlock(0));
//
// Not thread-safe, like every BlockModel.
#ifndef P3_MODELS_EXTERNAL_BLOCK_MODEL_H_
#define P3_MODELS_EXTERNAL_BLOCK_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/model.h"

namespace p3::models {

class ExternalBlockModel : public BlockModel {
 public:
  struct Block {
    std::string name;                      // e.g. "layer1"
    std::vector<std::string> param_names;  // the module's own names, for messages
    std::vector<torch::Tensor> params;     // forward order within the block
  };

  // Blocks in forward order, and the module's buffers (named by buffer_names, same
  // length). InvalidArgument when there is no block, a block has no parameter, names and
  // tensors differ in number, a tensor is undefined or appears twice.
  static absl::StatusOr<std::shared_ptr<ExternalBlockModel>> Create(
      std::vector<Block> blocks, std::vector<torch::Tensor> buffers,
      std::vector<std::string> buffer_names);

  int64_t num_blocks() const override { return static_cast<int64_t>(blocks_.size()); }
  // Fails: the caller runs the blocks (see the class comment).
  torch::Tensor ForwardBlock(int64_t i, const torch::Tensor& x) override;
  std::vector<torch::Tensor> BlockParameters(int64_t i) override { return blocks_.at(i).params; }
  std::string BlockName(int64_t i) const override { return blocks_.at(i).name; }

 private:
  ExternalBlockModel() = default;
  std::vector<Block> blocks_;
};

}  // namespace p3::models

#endif  // P3_MODELS_EXTERNAL_BLOCK_MODEL_H_
