// Measures forward + backward time per batch of each zoo model on this machine and prints
// a Markdown table (docs/models.md). --dump=<model> instead prints every parameter's name,
// shape and sum (to compare with a reference implementation). --profile=FILE instead
// measures each block's forward and backward time of one model (--models) and writes
// them, with the block's parameter tensors, as the simulator's profile JSON
// (docs/simulator.md, "Profile files").
//
//   bazel run -c opt //models:model_bench -- --batch=16 --runs=5
//   (one command, wrapped here)
//   bazel-bin/models/model_bench --models=resnet50 --batch=8 --image_size=32 --threads=1
//       --runs=7 --profile=configs/sim/profiles/resnet50_b8_cpu.json
//
// On a GPU (the GPU check, tools/gpu/check.py): --device=cuda:0 --precision=bf16 runs the
// model there under autocast; --step adds an SGD step with momentum to each timed
// iteration (as a training step); --compare_cpu first compares the device's eval-mode
// output on one batch of 2 with the CPU's, same weights (--tf32=false for float32
// matrix products and convolutions); --csv=FILE appends one row per model:
//   model,device,precision,batch,image_size,ms,samples_per_second,max_relative_difference
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "models/compute_device.h"
#include "models/zoo.h"
#include "p3/base/file_util.h"

ABSL_FLAG(std::string, models, "", "comma-separated model names; empty: all");
ABSL_FLAG(int64_t, batch, 16, "batch size");
ABSL_FLAG(int64_t, runs, 5, "timed runs per model (after one untimed warm-up run)");
ABSL_FLAG(int64_t, num_classes, 1000, "classes of the image models");
ABSL_FLAG(int64_t, vocab_size, 0, "vocabulary of the sequence models; 0: model default");
ABSL_FLAG(int64_t, seq_len, 16, "source and target length of the sequence models");
ABSL_FLAG(int64_t, output_pieces, 0,
          "the sequence models' output projection in this many blocks (model.output_pieces)");
ABSL_FLAG(int64_t, threads, 0, "libtorch intra-op threads; 0: libtorch's default");
ABSL_FLAG(std::string, dump, "", "print the parameters of this model and exit");
ABSL_FLAG(std::string, device, "cpu", "cpu, cuda or cuda:<i>: where the table's models run");
ABSL_FLAG(std::string, precision, "fp32", "fp32 or bf16 (autocast) for the table's models");
ABSL_FLAG(bool, step, false, "time an SGD step (momentum 0.9) with each forward+backward");
ABSL_FLAG(bool, compare_cpu, false,
          "compare the device's eval-mode output with the CPU's (same weights, batch 2)");
ABSL_FLAG(bool, tf32, true,
          "false: no TF32 for float32 matrix products and convolutions on a GPU (true: "
          "libtorch's defaults, convolutions only)");
ABSL_FLAG(std::string, csv, "", "append one row per model to this CSV file");
ABSL_FLAG(std::string, profile, "",
          "write the per-block forward/backward times of --models (one model) to this JSON file");
ABSL_FLAG(int64_t, image_size, 0, "image size of the image models; 0: the benchmark's own");

namespace p3::models {
namespace {

// Reduced input sizes that keep every parameter in use (see docs/models.md).
int64_t BenchImageSize(const std::string& name) {
  if (absl::GetFlag(FLAGS_image_size) > 0) return absl::GetFlag(FLAGS_image_size);
  if (name == "small_cnn" || name == "row_lstm") return 28;
  if (name == "inception_v3") return 75;
  if (name == "resnet50") return 64;
  return 32;
}

// The Fashion-MNIST-sized models, benchmarked with 10 classes whatever --classes says.
bool IsTenClassModel(const std::string& name) {
  return name == "small_cnn" || name == "mlp" || name == "row_lstm";
}

bool IsSequenceModel(const std::string& name) {
  return name == "seq2seq_lstm" || name == "transformer";
}

struct Input {
  torch::Tensor x;
  torch::Tensor target;
};

Input MakeInput(const std::string& name, int64_t batch, int64_t classes, int64_t vocab,
                int64_t seq_len) {
  if (IsSequenceModel(name)) {
    return {torch::randint(2, vocab, {batch, 2, seq_len}, torch::kInt64),
            torch::randint(2, vocab, {batch, seq_len}, torch::kInt64)};
  }
  const int64_t classes_used = IsTenClassModel(name) ? 10 : classes;
  torch::Tensor target = torch::randint(classes_used, {batch}, torch::kInt64);
  if (name == "mlp") return {torch::randn({batch, 12}), target};
  const int64_t channels = name == "small_cnn" || name == "row_lstm" ? 1 : 3;
  const int64_t s = BenchImageSize(name);
  return {torch::randn({batch, channels, s, s}), target};
}

int Dump(const std::string& name, int64_t classes, int64_t vocab) {
  ModelOptions options;
  options.name = name;
  options.num_classes = classes;
  options.vocab_size = vocab;
  absl::StatusOr<std::shared_ptr<BlockModel>> model = CreateModel(options);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  for (const auto& item : (*model)->named_parameters()) {
    const torch::Tensor& p = item.value();
    std::printf("%s %s %.6f\n", item.key().c_str(), absl::StrJoin(p.sizes(), "x").c_str(),
                p.sum().item<double>());
  }
  if (!IsSequenceModel(name)) {
    // An eval-mode output on a seeded input, to compare the forward pass too.
    (*model)->eval();
    torch::manual_seed(2);
    Input input = MakeInput(name, 2, classes, 0, 0);
    torch::NoGradGuard no_grad;
    torch::Tensor y = (*model)->forward(input.x);
    std::printf("output %s %.6f %.6f\n", absl::StrJoin(y.sizes(), "x").c_str(),
                y.sum().item<double>(), y.abs().sum().item<double>());
  }
  return 0;
}

// Each block's forward and backward time: the blocks run one by one on detached inputs
// (so that backward can be timed block by block), `runs` times after one warm-up; the
// medians go to `path` as JSON.
int Profile(const std::string& path, const std::string& name, int64_t batch, int64_t runs,
            int64_t classes, int64_t vocab_flag, int64_t seq_len) {
  ModelOptions options;
  options.name = name;
  options.num_classes = IsTenClassModel(name) ? 10 : classes;
  options.vocab_size = vocab_flag;
  if (IsSequenceModel(name)) options.output_pieces = absl::GetFlag(FLAGS_output_pieces);
  if (!IsSequenceModel(name) && name != "mlp") options.image_size = BenchImageSize(name);
  absl::StatusOr<std::shared_ptr<BlockModel>> created = CreateModel(options);
  if (!created.ok()) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), std::string(created.status().message()).c_str());
    return 1;
  }
  BlockModel& m = **created;
  m.train();
  int64_t vocab = 0;
  if (IsSequenceModel(name)) vocab = m.BlockParameters(m.num_blocks() - 1).back().size(0);
  Input input = MakeInput(name, batch, options.num_classes, vocab, seq_len);
  const int64_t blocks = m.num_blocks();
  std::vector<std::vector<double>> fwd(blocks), bwd(blocks), total;
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  std::vector<double> totals;
  for (int64_t r = 0; r <= runs; ++r) {
    m.zero_grad();
    std::vector<torch::Tensor> ins(blocks), outs(blocks);
    torch::Tensor x = input.x;
    const auto run_start = Clock::now();
    for (int64_t b = 0; b < blocks; ++b) {
      ins[b] = x.is_floating_point() ? x.detach().requires_grad_(b > 0) : x;
      const auto start = Clock::now();
      outs[b] = m.ForwardBlock(b, ins[b]);
      if (r > 0) fwd[b].push_back(seconds(start, Clock::now()));
      x = outs[b];
    }
    torch::Tensor grad;
    for (int64_t b = blocks - 1; b >= 0; --b) {
      const auto start = Clock::now();
      if (b == blocks - 1) {
        const torch::Tensor loss = m.Loss(outs[b], input.target);
        loss.backward();
      } else {
        outs[b].backward(grad);
      }
      if (r > 0) bwd[b].push_back(seconds(start, Clock::now()));
      if (b > 0) grad = ins[b].grad();
    }
    if (r > 0) totals.push_back(seconds(run_start, Clock::now()));
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::string json = "{\n";
  json += "  \"model\": \"" + name + "\",\n";
  json += "  \"batch\": " + std::to_string(batch) + ",\n";
  json += "  \"input\": \"" + absl::StrJoin(input.x.sizes(), "x") + "\",\n";
  json += "  \"source\": \"models/model_bench --profile, libtorch threads " +
          std::to_string(torch::get_num_threads()) + ", median of " + std::to_string(runs) +
          " runs after 1 warm-up\",\n";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6f", median(totals));
  json += std::string("  \"total_s\": ") + buf + ",\n";
  json += "  \"blocks\": [\n";
  for (int64_t b = 0; b < blocks; ++b) {
    json += "    {\"name\": \"" + m.BlockName(b) + "\", ";
    std::snprintf(buf, sizeof(buf), "%.6f", median(fwd[b]));
    json += std::string("\"forward_s\": ") + buf + ", ";
    std::snprintf(buf, sizeof(buf), "%.6f", median(bwd[b]));
    json += std::string("\"backward_s\": ") + buf + ", \"params\": [";
    const std::vector<torch::Tensor> params = m.BlockParameters(b);
    for (size_t i = 0; i < params.size(); ++i) {
      json += (i > 0 ? ", " : "") + std::to_string(params[i].numel());
    }
    json += "]}";
    json += b + 1 < blocks ? ",\n" : "\n";
  }
  json += "  ]\n}\n";
  if (const absl::Status written = p3::WriteFileAtomically(path, json); !written.ok()) {
    std::fprintf(stderr, "%s\n", std::string(written.message()).c_str());
    return 1;
  }
  std::printf("%s: %ld blocks, forward+backward %.4f s (median of %ld); wrote %s\n", name.c_str(),
              blocks, median(totals), runs, path.c_str());
  return 0;
}

}  // namespace
}  // namespace p3::models

int main(int argc, char** argv) {
  using namespace p3::models;  // NOLINT: a main()
  using p3::Autocast;
  using p3::CudaDeviceCount;
  using p3::ParsePrecision;
  using p3::Precision;
  using p3::PrecisionName;
  using p3::ResolveDevice;
  using p3::SetTf32;
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_threads) > 0) torch::set_num_threads(absl::GetFlag(FLAGS_threads));
  const int64_t classes = absl::GetFlag(FLAGS_num_classes);
  const int64_t vocab_flag = absl::GetFlag(FLAGS_vocab_size);
  if (!absl::GetFlag(FLAGS_dump).empty()) {
    return Dump(absl::GetFlag(FLAGS_dump), classes, vocab_flag);
  }
  if (!absl::GetFlag(FLAGS_profile).empty()) {
    if (absl::GetFlag(FLAGS_models).empty() ||
        absl::GetFlag(FLAGS_models).find(',') != std::string::npos) {
      std::fprintf(stderr, "--profile needs exactly one model in --models\n");
      return 2;
    }
    return Profile(absl::GetFlag(FLAGS_profile), absl::GetFlag(FLAGS_models),
                   absl::GetFlag(FLAGS_batch), absl::GetFlag(FLAGS_runs), classes, vocab_flag,
                   absl::GetFlag(FLAGS_seq_len));
  }
  std::vector<std::string> names = ModelNames();
  if (!absl::GetFlag(FLAGS_models).empty()) {
    names = absl::StrSplit(absl::GetFlag(FLAGS_models), ',');
  }
  const int64_t batch = absl::GetFlag(FLAGS_batch);
  const int64_t runs = absl::GetFlag(FLAGS_runs);
  const int64_t seq_len = absl::GetFlag(FLAGS_seq_len);
  absl::StatusOr<torch::Device> device =
      ResolveDevice(absl::GetFlag(FLAGS_device), 0, CudaDeviceCount());
  absl::StatusOr<Precision> precision = ParsePrecision(absl::GetFlag(FLAGS_precision));
  if (!device.ok() || !precision.ok()) {
    std::fprintf(stderr, "model_bench: %s\n",
                 std::string((device.ok() ? precision.status() : device.status()).message()).c_str());
    return 2;
  }
  if (!absl::GetFlag(FLAGS_tf32)) SetTf32(false);
  std::printf("libtorch threads: %d; batch %ld; %s, %s%s; median of %ld runs after 1 warm-up\n\n",
              torch::get_num_threads(), batch, device->str().c_str(), PrecisionName(*precision),
              absl::GetFlag(FLAGS_step) ? ", with an SGD step" : "", runs);
  std::printf(
      "| model | parameters | blocks | input | forward+backward ms (median) | min | max |"
      " samples/s | device vs CPU |\n");
  std::printf("|---|---:|---:|---|---:|---:|---:|---:|---:|\n");
  for (const std::string& name : names) {
    ModelOptions options;
    options.name = name;
    options.num_classes = IsTenClassModel(name) ? 10 : classes;
    options.vocab_size = vocab_flag;
    if (IsSequenceModel(name)) options.output_pieces = absl::GetFlag(FLAGS_output_pieces);
    absl::StatusOr<std::shared_ptr<BlockModel>> model = CreateModel(options);
    if (!model.ok()) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), std::string(model.status().message()).c_str());
      return 1;
    }
    BlockModel& m = **model;
    int64_t num_params = 0;
    int64_t vocab = 0;
    for (const torch::Tensor& p : m.parameters()) num_params += p.numel();
    if (IsSequenceModel(name)) {
      // The first block's embedding has one row per token (the output layer may be in
      // pieces: model.output_pieces).
      vocab = m.BlockParameters(0).front().size(0);
    }
    double difference = -1;
    if (absl::GetFlag(FLAGS_compare_cpu)) {
      // The same weights on both sides, eval mode (no dropout, BatchNorm's statistics).
      torch::NoGradGuard no_grad;
      m.eval();
      torch::manual_seed(2);
      const Input small = MakeInput(name, 2, options.num_classes, vocab, seq_len);
      const torch::Tensor on_cpu = m.forward(small.x);
      m.to(*device);
      const torch::Tensor there = m.forward(small.x.to(*device)).to(torch::kCPU);
      difference = ((there - on_cpu).abs().max() / on_cpu.abs().max()).item<double>();
    }
    m.to(*device);
    m.train();
    torch::optim::SGD sgd(m.parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
    Input input = MakeInput(name, batch, options.num_classes, vocab, seq_len);
    input.x = input.x.to(*device);
    input.target = input.target.to(*device);
    std::vector<double> ms;
    for (int64_t r = 0; r <= runs; ++r) {
      auto start = std::chrono::steady_clock::now();
      m.zero_grad();
      torch::Tensor loss;
      {
        Autocast autocast(*device, *precision);
        loss = m.Loss(m.forward(input.x), input.target);
      }
      loss.backward();
      if (absl::GetFlag(FLAGS_step)) sgd.step();
      // Waits for the device's queue (a scalar read after every kernel of the iteration).
      m.parameters().back().sum().item<float>();
      auto end = std::chrono::steady_clock::now();
      if (r > 0) ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
    }
    std::sort(ms.begin(), ms.end());
    const double median = ms[ms.size() / 2];
    const double rate = static_cast<double>(batch) * 1000.0 / median;
    const std::string shape = absl::StrJoin(input.x.sizes(), "x") +
                              (vocab > 0 ? " (vocab " + std::to_string(vocab) + ")" : "");
    const std::string diff = difference >= 0 ? absl::StrFormat("%.2e", difference) : "-";
    std::printf("| %s | %ld | %ld | %s | %.1f | %.1f | %.1f | %.1f | %s |\n", name.c_str(),
                num_params, m.num_blocks(), shape.c_str(), median, ms.front(), ms.back(), rate,
                diff.c_str());
    std::fflush(stdout);
    if (!absl::GetFlag(FLAGS_csv).empty()) {
      const int64_t image = IsSequenceModel(name) || name == "mlp" ? 0 : input.x.size(-1);
      const std::string row = absl::StrFormat(
          "%s,%s,%s,%d,%d,%.3f,%.1f,%s\n", name, device->str(), PrecisionName(*precision), batch,
          image, median, rate, difference >= 0 ? absl::StrFormat("%.3g", difference) : "");
      if (std::FILE* f = std::fopen(absl::GetFlag(FLAGS_csv).c_str(), "a")) {
        std::fputs(row.c_str(), f);
        std::fclose(f);
      } else {
        std::fprintf(stderr, "model_bench: cannot append to %s\n", absl::GetFlag(FLAGS_csv).c_str());
        return 1;
      }
    }
  }
  return 0;
}
