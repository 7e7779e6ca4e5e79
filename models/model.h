// A model as an ordered list of blocks in forward order.
//
// The parameter-server worker gates the forward pass per block (block i runs as soon as
// the parameters of block i have arrived), and the pipeline mode cuts the list into
// stages. The model's parameter order is the concatenation of the blocks' parameters,
// which is the forward order that P3's priorities are computed from.
//
// Example:
//   P3_ASSIGN_OR_RETURN(auto model, p3::models::CreateModel(options));  // models/zoo.h
//   torch::Tensor x = batch.input;
//   for (int64_t i = 0; i < model->num_blocks(); ++i) x = model->ForwardBlock(i, x);
//   torch::Tensor loss = model->Loss(x, batch.target);
//
// A BlockModel is not thread-safe; one thread runs it at a time.
#ifndef P3_MODELS_MODEL_H_
#define P3_MODELS_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "absl/status/status.h"

namespace p3::models {

class BlockModel : public torch::nn::Module {
 public:
  // Number of blocks, >= 1.
  virtual int64_t num_blocks() const = 0;

  // Runs block `i` on `x`: the model's input for block 0, else block i-1's output.
  virtual torch::Tensor ForwardBlock(int64_t i, const torch::Tensor& x) = 0;

  // The parameters of block `i`, in the block's registration order. Every parameter of
  // the model belongs to exactly one block.
  virtual std::vector<torch::Tensor> BlockParameters(int64_t i) = 0;

  // Human-readable block name, e.g. "conv1" or "layer3.2".
  virtual std::string BlockName(int64_t i) const = 0;

  // Training loss of the final block's `output` against `target`.
  // Default: mean cross-entropy over the batch (logits [B, C], target [B] int64).
  virtual torch::Tensor Loss(const torch::Tensor& output, const torch::Tensor& target);

  // Runs all blocks in order.
  torch::Tensor forward(torch::Tensor x);

  // All parameters in forward (block) order, with names "block_name/param_index".
  std::vector<std::pair<std::string, torch::Tensor>> OrderedParameters();
};

// OK when every parameter of `model` (parameters(), recursively) is in exactly one block's
// BlockParameters() and every block parameter is the model's; else InvalidArgument
// naming the first one that is not, in the model's order, then the blocks':
// "parameter \"fc.bias\" is in no block", "parameter \"fc.bias\" is in blocks \"a\" and
// \"b\"", "block \"a\" has a parameter that is not the model's". The Worker synchronises
// only the blocks' parameters, so a model that fails this would train partly
// unsynchronised. Not thread-safe with training.
absl::Status CheckBlocksCoverParameters(BlockModel& model);

}  // namespace p3::models

#endif  // P3_MODELS_MODEL_H_
