// The C++ side of tests/models/pytorch_interop_test.py: p3's own view of a zoo model.
//
//   state_dict_tool --model=resnet50 --num_classes=10 --image_size=32
//                   [--init_from=FILE] [--save=FILE] [--input=FILE --output=FILE] [--list]
//
// Creates the zoo model, loads --init_from (models/state_dict.h), writes its state dict to
// --save, runs the eval-mode forward pass on the tensor "input" of --input (a dict saved by
// torch.save) and writes {"output": logits} to --output; --list prints one line per state
// entry: "name<TAB>d0,d1,...<TAB>dtype".
#include <torch/torch.h>

#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_join.h"
#include "models/state_dict.h"
#include "models/zoo.h"

ABSL_FLAG(std::string, model, "resnet50", "zoo model name");
ABSL_FLAG(int64_t, num_classes, 10, "classes");
ABSL_FLAG(int64_t, image_size, 0, "input side (0: the model's own)");
ABSL_FLAG(std::string, init_from, "", "state dict to start from");
ABSL_FLAG(std::string, save, "", "where to write the model's state dict");
ABSL_FLAG(std::string, input, "", "a torch.save'd dict {\"input\": tensor}");
ABSL_FLAG(std::string, output, "", "where to write {\"output\": eval-mode forward(input)}");
ABSL_FLAG(bool, list, false, "print name, shape and dtype of every state entry");

namespace {

absl::Status Run() {
  p3::models::ModelOptions options;
  options.name = absl::GetFlag(FLAGS_model);
  options.num_classes = absl::GetFlag(FLAGS_num_classes);
  options.image_size = absl::GetFlag(FLAGS_image_size);
  absl::StatusOr<std::shared_ptr<p3::models::BlockModel>> model = p3::models::CreateModel(options);
  if (!model.ok()) return model.status();
  if (!absl::GetFlag(FLAGS_init_from).empty()) {
    absl::Status loaded = p3::models::LoadStateDict(absl::GetFlag(FLAGS_init_from), **model);
    if (!loaded.ok()) return loaded;
  }
  if (absl::GetFlag(FLAGS_list)) {
    for (const auto& [name, tensor] : p3::models::ModuleState(**model)) {
      std::cout << name << "\t" << absl::StrJoin(tensor.sizes(), ",") << "\t"
                << tensor.scalar_type() << "\n";
    }
  }
  if (!absl::GetFlag(FLAGS_save).empty()) {
    absl::Status saved = p3::models::SaveStateDict(**model, absl::GetFlag(FLAGS_save));
    if (!saved.ok()) return saved;
  }
  if (!absl::GetFlag(FLAGS_input).empty()) {
    absl::StatusOr<p3::models::StateDict> input =
        p3::models::ReadStateDict(absl::GetFlag(FLAGS_input));
    if (!input.ok()) return input.status();
    if (input->size() != 1 || input->front().first != "input") {
      return absl::InvalidArgumentError("--input: expected a dict {\"input\": tensor}");
    }
    torch::NoGradGuard no_grad;
    (*model)->eval();
    torch::Tensor out = (*model)->forward(input->front().second);
    return p3::models::WriteStateDict({{"output", out}}, absl::GetFlag(FLAGS_output));
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  torch::set_num_threads(1);
  absl::Status status = Run();
  if (!status.ok()) {
    std::cerr << "state_dict_tool: " << status << "\n";
    return 1;
  }
  return 0;
}
