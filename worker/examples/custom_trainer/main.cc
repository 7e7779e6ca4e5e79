// custom_trainer: a program of its own that trains its own model on a P3 cluster through
// p3's worker library (docs/worker_api.md walks through it).
//
//   custom_trainer --rank=0 --num_workers=2 --servers=127.0.0.1:7070 --model_file=model.pt
//
// Start the servers first (p3_server, or the launcher); every worker runs this program
// with its own --rank. Rank 0 evaluates on the test set and writes the trained model.
// Under launch_cluster's worker.command the launcher starts the servers and this program
// once per rank, and the P3_* environment stands in for --rank, --num_workers, --servers
// and --model_file (<P3_RUN_DIR>/model.pt); flags given on the command line still win.
#include <torch/torch.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "models/data.h"
#include "models/sampler.h"
#include "models/state_dict.h"
#include "models/wrap.h"
#include "p3/base/allocator.h"
#include "p3/base/grpc_experiments.h"
#include "p3/base/status_macros.h"
#include "worker/worker.h"

ABSL_FLAG(int, rank, 0, "this worker's rank");
ABSL_FLAG(int, num_workers, 1, "number of workers");
ABSL_FLAG(std::string, servers, "", "comma-separated host:port of the servers, in order");
ABSL_FLAG(int64_t, iterations, 200, "training iterations");
ABSL_FLAG(int64_t, batch_size, 32, "samples per worker per iteration");
ABSL_FLAG(std::string, data_dir, "/usr/share/datasets/fashion-mnist", "Fashion-MNIST folder");
ABSL_FLAG(std::string, model_file, "model.pt", "where rank 0 writes the trained model");

namespace {

// The model: an ordinary libtorch module, written without knowing about P3.
struct NetImpl : torch::nn::Module {
  NetImpl() {
    conv1 =
        register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 3).padding(1)));
    bn1 = register_module("bn1", torch::nn::BatchNorm2d(16));
    conv2 =
        register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 3).padding(1)));
    fc = register_module("fc", torch::nn::Linear(32 * 7 * 7, 10));
  }
  torch::Tensor features(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(bn1(conv1(x))), 2);  // [B, 16, 14, 14]
    return torch::max_pool2d(torch::relu(conv2(x)), 2);    // [B, 32, 7, 7]
  }
  torch::Tensor classifier(const torch::Tensor& x) { return fc(x.flatten(1)); }
  torch::Tensor forward(const torch::Tensor& x) { return classifier(features(x)); }

  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr};
  torch::nn::Linear fc{nullptr};
};

absl::Status Train() {
  const int rank = absl::GetFlag(FLAGS_rank);
  const int num_workers = absl::GetFlag(FLAGS_num_workers);

  // 1. The model, as blocks in forward order: each block names what it owns.
  torch::manual_seed(1);  // every worker builds the same model; rank 0's values are used
  auto net = std::make_shared<NetImpl>();
  P3_ASSIGN_OR_RETURN(
      std::shared_ptr<p3::models::BlockModel> model,
      p3::models::WrapFunctions(net, {{"features",
                                       {"conv1", "bn1", "conv2"},
                                       [net](const torch::Tensor& x) { return net->features(x); }},
                                      {"classifier", {"fc"}, [net](const torch::Tensor& x) {
                                         return net->classifier(x);
                                       }}}));

  // 2. The data: this worker's shard of Fashion-MNIST.
  p3::models::DatasetOptions data;
  data.dir = absl::GetFlag(FLAGS_data_dir);
  P3_ASSIGN_OR_RETURN(std::shared_ptr<p3::models::Dataset> train, p3::models::CreateDataset(data));
  P3_ASSIGN_OR_RETURN(
      p3::models::ShardedSampler sampler,
      p3::models::ShardedSampler::Create({.dataset_size = train->size(),
                                          .batch_size = absl::GetFlag(FLAGS_batch_size),
                                          .num_workers = num_workers,
                                          .rank = rank}));

  // 3. The cluster: the servers hold the parameters and run the optimizer.
  p3::WorkerOptions options;
  options.servers = absl::StrSplit(absl::GetFlag(FLAGS_servers), ',');
  options.rank = rank;
  options.num_workers = num_workers;
  P3_ASSIGN_OR_RETURN(std::unique_ptr<p3::Worker> worker, p3::Worker::Create(options, model));

  // 4. The loop.
  const int64_t iterations = absl::GetFlag(FLAGS_iterations);
  for (int64_t it = worker->iteration(); it < iterations; ++it) {
    const p3::models::Batch batch = train->Get(sampler.Indices(it));
    P3_ASSIGN_OR_RETURN(torch::Tensor out, worker->Forward(batch.input));
    torch::Tensor loss = model->Loss(out, batch.target);
    P3_RETURN_IF_ERROR(worker->Backward(loss));
    if ((it + 1) % 50 == 0)
      std::cout << "iteration " << it + 1 << " loss " << loss.item<double>() << std::endl;
  }
  // Every rank: bn1's running statistics become the mean over the workers.
  P3_RETURN_IF_ERROR(worker->AverageBuffers());
  P3_RETURN_IF_ERROR(worker->Finish());  // the model now holds the final parameters
  if (rank != 0) return absl::OkStatus();

  // 5. Rank 0: accuracy on the test set, and the model for PyTorch.
  data.train = false;
  P3_ASSIGN_OR_RETURN(std::shared_ptr<p3::models::Dataset> test, p3::models::CreateDataset(data));
  std::vector<int64_t> all(test->size());
  for (int64_t i = 0; i < test->size(); ++i) all[i] = i;
  const p3::models::Batch batch = test->Get(all);
  torch::NoGradGuard no_grad;
  model->eval();
  const double accuracy = model->forward(batch.input)
                              .argmax(1)
                              .eq(batch.target)
                              .to(torch::kFloat64)
                              .mean()
                              .item<double>();
  std::cout << "test_accuracy " << accuracy << std::endl;
  return p3::models::SaveStateDict(*model, absl::GetFlag(FLAGS_model_file));
}

// The worker-program environment (docs/worker_api.md, "Run your own program with
// launch_cluster") as the flags' defaults, before the command line is parsed. Read here
// in main(): p3's libraries never read the environment.
absl::Status FlagsFromEnvironment() {
  auto set_int = [](const char* name, absl::Flag<int>& flag) -> absl::Status {
    const char* value = std::getenv(name);
    if (value == nullptr) return absl::OkStatus();
    int number = 0;
    if (!absl::SimpleAtoi(value, &number)) {
      return absl::InvalidArgumentError(absl::StrCat(name, "=\"", value, "\" is not an integer"));
    }
    absl::SetFlag(&flag, number);
    return absl::OkStatus();
  };
  P3_RETURN_IF_ERROR(set_int("P3_RANK", FLAGS_rank));
  P3_RETURN_IF_ERROR(set_int("P3_WORLD_SIZE", FLAGS_num_workers));
  if (const char* servers = std::getenv("P3_SERVERS")) absl::SetFlag(&FLAGS_servers, servers);
  if (const char* run_dir = std::getenv("P3_RUN_DIR")) {
    absl::SetFlag(&FLAGS_model_file, absl::StrCat(run_dir, "/model.pt"));
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  if (absl::Status from_env = FlagsFromEnvironment(); !from_env.ok()) {
    std::cerr << "custom_trainer: " << from_env << std::endl;
    return 2;
  }
  absl::ParseCommandLine(argc, argv);
  // Before any thread: large messages without page faults (p3/base/allocator.h).
  if (absl::Status tuned = p3::TuneAllocatorForLargeMessages(); !tuned.ok()) {
    std::cerr << "custom_trainer: " << tuned << " (continuing)" << std::endl;
  }
  // Before gRPC's first use: reads sized to the message, as p3_worker's
  // (p3/base/grpc_experiments.h; a GRPC_EXPERIMENTS of the environment wins).
  if (absl::StatusOr<bool> set = p3::RequestGrpcExperiments(p3::kSizedReadExperiments);
      !set.ok()) {
    std::cerr << "custom_trainer: " << set.status() << " (continuing)" << std::endl;
  }
  torch::set_num_threads(1);
  const absl::Status status = Train();
  if (!status.ok()) {
    std::cerr << "custom_trainer: " << status << std::endl;
    return 1;
  }
  return 0;
}
