#include "p3/pipeline/profile.h"

#include <memory>

#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "p3/pipeline/torch_errors.h"
#include "p3/base/stats.h"
#include "p3/base/status_macros.h"

namespace p3::pipeline {

absl::StatusOr<std::vector<BlockProfile>> ProfileBlocks(models::BlockModel& model,
                                                        const std::vector<models::Batch>& batches,
                                                        const SgdOptions* sgd) {
  if (batches.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("profiling needs at least 2 batches (one warm-up); got ", batches.size()));
  }
  const int64_t num_blocks = model.num_blocks();
  std::vector<std::vector<double>> forward(num_blocks);
  std::vector<std::vector<double>> backward(num_blocks);
  std::vector<std::vector<double>> update(num_blocks);
  std::vector<int64_t> output_bytes(num_blocks, 0);
  // One optimizer per block over its parameters, keeping the real weights apart: Step()
  // then updates copies, and the model stays as it is.
  std::vector<std::unique_ptr<StageSgd>> optimizers;
  if (sgd != nullptr) {
    for (int64_t i = 0; i < num_blocks; ++i) {
      optimizers.push_back(
          std::make_unique<StageSgd>(model.BlockParameters(i), *sgd, /*separate_real=*/true));
    }
  }
  P3_RETURN_IF_ERROR(CatchTorchErrors("profiling the model's blocks", [&]() -> absl::Status {
    for (size_t b = 0; b < batches.size(); ++b) {
      const bool timed = b > 0;
      std::vector<torch::Tensor> inputs(num_blocks);
      std::vector<torch::Tensor> outputs(num_blocks);
      torch::Tensor x = batches[b].input;
      for (int64_t i = 0; i < num_blocks; ++i) {
        inputs[i] = i == 0 ? x : x.detach().requires_grad_(true);
        const absl::Time t0 = absl::Now();
        torch::Tensor y = model.ForwardBlock(i, inputs[i]);
        if (i + 1 == num_blocks) y = model.Loss(y, batches[b].target);
        const absl::Time t1 = absl::Now();
        if (timed) forward[i].push_back(absl::ToDoubleSeconds(t1 - t0));
        output_bytes[i] = static_cast<int64_t>(y.numel() * y.element_size());
        outputs[i] = y;
        x = y;
      }
      torch::Tensor grad;
      for (int64_t i = num_blocks - 1; i >= 0; --i) {
        const absl::Time t0 = absl::Now();
        if (i + 1 == num_blocks) {
          outputs[i].backward();
        } else {
          torch::autograd::backward({outputs[i]}, {grad});
        }
        const absl::Time t1 = absl::Now();
        if (timed) backward[i].push_back(absl::ToDoubleSeconds(t1 - t0));
        if (i > 0) grad = inputs[i].grad();
      }
      for (size_t i = 0; i < optimizers.size(); ++i) {
        const absl::Time t0 = absl::Now();
        optimizers[i]->Step();
        if (timed) update[i].push_back(absl::ToDoubleSeconds(absl::Now() - t0));
      }
      model.zero_grad();
    }
    return absl::OkStatus();
  }));
  std::vector<BlockProfile> profile(num_blocks);
  for (int64_t i = 0; i < num_blocks; ++i) {
    profile[i].name = model.BlockName(i);
    profile[i].forward_seconds = Median(forward[i]);
    profile[i].backward_seconds = Median(backward[i]);
    if (!update[i].empty()) profile[i].update_seconds = Median(update[i]);
    for (const torch::Tensor& p : model.BlockParameters(i)) profile[i].parameters += p.numel();
    profile[i].output_bytes = output_bytes[i];
  }
  return profile;
}

}  // namespace p3::pipeline
