// A small BlockModel for end-to-end tests: its weights are larger than the tests'
// 50-parameter slices and its biases smaller.
#ifndef P3_TESTS_TEST_MLP_H_
#define P3_TESTS_TEST_MLP_H_

#include <torch/torch.h>

#include <string>
#include <vector>

#include "models/model.h"

namespace p3 {

class TestMlp : public models::BlockModel {
 public:
  // 12 inputs, hidden layers of `hidden1` and `hidden2`, 5 classes.
  explicit TestMlp(int64_t hidden1 = 40, int64_t hidden2 = 30) {
    fc1_ = register_module("fc1", torch::nn::Linear(12, hidden1));
    fc2_ = register_module("fc2", torch::nn::Linear(hidden1, hidden2));
    fc3_ = register_module("fc3", torch::nn::Linear(hidden2, 5));
  }
  int64_t num_blocks() const override { return 3; }
  torch::Tensor ForwardBlock(int64_t i, const torch::Tensor& x) override {
    if (i == 0) return torch::tanh(fc1_->forward(x));
    if (i == 1) return torch::tanh(fc2_->forward(x));
    return fc3_->forward(x);
  }
  std::vector<torch::Tensor> BlockParameters(int64_t i) override {
    torch::nn::Linear l = i == 0 ? fc1_ : i == 1 ? fc2_ : fc3_;
    return {l->weight, l->bias};
  }
  std::string BlockName(int64_t i) const override { return "fc" + std::to_string(i + 1); }

 private:
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr}, fc3_{nullptr};
};

// The same with batch normalisation after the first layer: its weight and bias are
// parameters of block 0; its running statistics are buffers, which stay per worker.
// Data-parallel training normalises each worker's batch on its own (as PyTorch's DDP
// without SyncBatchNorm), so a cluster of W workers equals local training that averages
// the losses of the W per-worker batches, not one forward over their union.
class TestBnMlp : public models::BlockModel {
 public:
  TestBnMlp() {
    fc1_ = register_module("fc1", torch::nn::Linear(12, 40));
    bn1_ = register_module("bn1", torch::nn::BatchNorm1d(40));
    fc2_ = register_module("fc2", torch::nn::Linear(40, 30));
    fc3_ = register_module("fc3", torch::nn::Linear(30, 5));
  }
  int64_t num_blocks() const override { return 3; }
  torch::Tensor ForwardBlock(int64_t i, const torch::Tensor& x) override {
    if (i == 0) return torch::tanh(bn1_->forward(fc1_->forward(x)));
    if (i == 1) return torch::tanh(fc2_->forward(x));
    return fc3_->forward(x);
  }
  std::vector<torch::Tensor> BlockParameters(int64_t i) override {
    if (i == 0) return {fc1_->weight, fc1_->bias, bn1_->weight, bn1_->bias};
    torch::nn::Linear l = i == 1 ? fc2_ : fc3_;
    return {l->weight, l->bias};
  }
  std::string BlockName(int64_t i) const override { return "fc" + std::to_string(i + 1); }

 private:
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr}, fc3_{nullptr};
  torch::nn::BatchNorm1d bn1_{nullptr};
};

// The plain MLP with a wide middle layer (1024 x 1024 = 1,048,576 weights, 4 MB): messages
// as large as a real model's largest slices. For what acts only on large messages (gRPC's
// reads sized to the message: tests/cluster/sized_reads_equivalence_test.cc).
inline std::shared_ptr<TestMlp> MakeTestWideMlp(uint64_t seed) {
  torch::manual_seed(seed);
  return std::make_shared<TestMlp>(1024, 1024);
}

inline std::shared_ptr<TestBnMlp> MakeTestBnMlp(uint64_t seed) {
  torch::manual_seed(seed);
  return std::make_shared<TestBnMlp>();
}

inline std::shared_ptr<TestMlp> MakeTestMlp(uint64_t seed) {
  torch::manual_seed(seed);
  return std::make_shared<TestMlp>();
}

}  // namespace p3

#endif  // P3_TESTS_TEST_MLP_H_
