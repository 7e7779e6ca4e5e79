// Models in and out of PyTorch: a module's state dict (its parameters and buffers by
// dotted name, as Python's `module.state_dict()` names them) written to, and read from,
// the file format of Python's `torch.save` / `torch.load` (the zip archive of PyTorch
// 1.6 and later, through libtorch's torch::pickle_save / torch::pickle_load).
//
// For the zoo's torchvision models (models/zoo.h, docs/models.md) the names, shapes and
// dtypes are torchvision's, BatchNorm's running_mean, running_var and num_batches_tracked
// (int64) included, so in Python
//   torchvision.models.resnet50(num_classes=10).load_state_dict(torch.load(path))
// takes a file written by SaveStateDict, and LoadStateDict takes a file written by
//   torch.save(torchvision.models.resnet50(num_classes=10).state_dict(), path).
//
// Example:
//   P3_RETURN_IF_ERROR(p3::models::SaveStateDict(*model, "out/run/model.pt"));
//   P3_RETURN_IF_ERROR(p3::models::LoadStateDict("pretrained.pt", *model));
//
// Thread-compatible: the module must not be trained or read by another thread meanwhile.
#ifndef P3_MODELS_STATE_DICT_H_
#define P3_MODELS_STATE_DICT_H_

#include <torch/types.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace p3::models {

// Names and tensors, in order.
using StateDict = std::vector<std::pair<std::string, torch::Tensor>>;

// The module's parameters and buffers, module by module in registration order (each
// module's own parameters, then its own buffers: Python's state_dict() order), named by
// their dotted path ("layer1.0.bn1.running_mean"). The tensors are the module's own
// (not copies).
StateDict ModuleState(torch::nn::Module& module);

// Writes `state` as a dict {name: tensor} in torch.save's format: each tensor a compact
// CPU copy (a parameter that is a view into a larger buffer is written alone). The file
// is written atomically (p3/base/file_util.h). Errors name the file.
absl::Status WriteStateDict(const StateDict& state, const std::string& path);

// ModuleState(module) written by WriteStateDict.
absl::Status SaveStateDict(torch::nn::Module& module, const std::string& path);

// A file written by torch.save (a dict or OrderedDict of name -> tensor, e.g. Python's
// `model.state_dict()`) or by WriteStateDict, as CPU tensors in the file's order.
// InvalidArgument, naming the file, when it is not such a file.
absl::StatusOr<StateDict> ReadStateDict(const std::string& path);

// Copies `state` into the module's parameters and buffers (in place, without autograd:
// views stay views). Every name must match in both directions and every shape must be
// the same; otherwise InvalidArgument naming the first mismatch in the module's order
// (a name the file lacks, with its shape), then in the file's order (a name the module
// lacks): "missing \"fc.bias\" [10]", "unexpected \"fc.extra\"",
// "\"fc.weight\": shape [10, 512] in the file, [10, 2048] in the model". Floating-point
// values are converted to the module's dtype; an integer buffer (num_batches_tracked)
// takes integer values only. On error nothing is copied.
absl::Status CopyStateDict(const StateDict& state, torch::nn::Module& module);

// ReadStateDict(path) copied into `module` by CopyStateDict; errors are prefixed with
// the path.
absl::Status LoadStateDict(const std::string& path, torch::nn::Module& module);

}  // namespace p3::models

#endif  // P3_MODELS_STATE_DICT_H_
