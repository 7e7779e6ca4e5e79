// Inception-v3 with its auxiliary classifier (torchvision.models.inception_v3 with
// aux_logits=True, transform_input=False, init_weights=True) with torchvision's module
// names, parameter order and initialisation.
//
// Blocks, in forward order (18): "Conv2d_1a_3x3", "Conv2d_2a_3x3", "Conv2d_2b_3x3" (+ max
// pool), "Conv2d_3b_1x1", "Conv2d_4a_3x3" (+ max pool), "Mixed_5b" .. "Mixed_5d",
// "Mixed_6a" .. "Mixed_6e", "AuxLogits", "Mixed_7a" .. "Mixed_7c", "fc" (average pool +
// dropout + flatten + Linear). 27,161,264 parameters with 1000 classes. Input
// [B, 3, H, W] float with H, W >= 75 (torchvision's minimum); 299 is the native size.
//
// The auxiliary head: block "AuxLogits" sits where torchvision's parameter order puts it
// (after Mixed_6e). It passes its input through unchanged; in training mode it also
// computes the auxiliary logits from it and keeps them, and Loss() then returns
// cross_entropy(logits) + aux_loss_weight * cross_entropy(aux_logits), as torchvision's
// reference training does. In eval mode it does nothing. So the auxiliary loss needs
// "AuxLogits" and the last block to run in the same model object (pipeline stages that
// split them lose the auxiliary loss; its parameters then get no gradient). At inputs
// below 299 (Mixed_6e smaller than 17x17) torchvision's fixed 5x5/stride-3 average pool of
// the auxiliary head does not fit; there it is replaced by an adaptive average pool to 5x5,
// the one deviation from torchvision, and the parameters are unchanged.
//
// Example:
//   torch::manual_seed(1);
//   auto model = std::make_shared<p3::models::InceptionV3>(p3::models::InceptionV3Options{});
//   torch::Tensor x = torch::randn({2, 3, 75, 75});
//   torch::Tensor loss = model->Loss(model->forward(x), torch::tensor({3, 5}));
#ifndef P3_MODELS_INCEPTION_H_
#define P3_MODELS_INCEPTION_H_

#include <cstdint>

#include "models/block_list_model.h"

namespace p3::models {

struct InceptionV3Options {
  int64_t num_classes = 1000;    // Default: 1000.
  int64_t in_channels = 3;       // Default: 3.
  double dropout = 0.5;          // Before fc. Default: 0.5, torchvision's.
  double aux_loss_weight = 0.4;  // Default: 0.4, torchvision's reference recipe.
};

class InceptionV3 : public BlockListModel {
 public:
  explicit InceptionV3(const InceptionV3Options& options);

  // Cross-entropy of `output`, plus aux_loss_weight times that of the auxiliary logits when
  // the last forward pass ran "AuxLogits" in training mode (see above).
  torch::Tensor Loss(const torch::Tensor& output, const torch::Tensor& target) override;

 private:
  double aux_loss_weight_;
  torch::Tensor aux_logits_;  // from the current forward pass; undefined if none
};

}  // namespace p3::models

#endif  // P3_MODELS_INCEPTION_H_
