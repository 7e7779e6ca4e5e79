// Fashion-MNIST loading from Debian's files, and the errors for missing or corrupt ones.
#include <torch/torch.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "models/data.h"
#include "models/fashion_mnist.h"

namespace p3::models {
namespace {

namespace fs = std::filesystem;

// A fresh empty folder under the test's temporary directory.
fs::path TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  fs::path dir = fs::path(base != nullptr ? base : fs::temp_directory_path().string()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void WriteGzip(const fs::path& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  CATCH_REQUIRE(f != nullptr);
  CATCH_REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) ==
                static_cast<int>(bytes.size()));
  CATCH_REQUIRE(gzclose(f) == Z_OK);
}

void Put32(std::vector<uint8_t>& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
}

std::vector<uint8_t> Images(uint32_t magic, uint32_t n, uint32_t rows, uint32_t cols,
                            size_t pixels) {
  std::vector<uint8_t> out;
  Put32(out, magic);
  Put32(out, n);
  Put32(out, rows);
  Put32(out, cols);
  for (size_t i = 0; i < pixels; ++i) out.push_back(static_cast<uint8_t>(i));
  return out;
}

std::vector<uint8_t> Labels(uint32_t magic, const std::vector<uint8_t>& labels) {
  std::vector<uint8_t> out;
  Put32(out, magic);
  Put32(out, static_cast<uint32_t>(labels.size()));
  out.insert(out.end(), labels.begin(), labels.end());
  return out;
}

// Writes a valid 3-sample, 2x2 test set to `dir` (t10k files).
void WriteValidTestSet(const fs::path& dir) {
  WriteGzip(dir / "t10k-images-idx3-ubyte.gz", Images(2051, 3, 2, 2, 12));
  WriteGzip(dir / "t10k-labels-idx1-ubyte.gz", Labels(2049, {0, 9, 4}));
}

absl::StatusCode LoadCode(const fs::path& dir, std::string* message) {
  absl::StatusOr<std::shared_ptr<Dataset>> data = LoadFashionMnist(dir.string(), false);
  *message = std::string(data.status().message());
  return data.status().code();
}

CATCH_TEST_CASE("loads the real training and test sets, normalised, labels 0..9") {
  for (bool train : {true, false}) {
    absl::StatusOr<std::shared_ptr<Dataset>> data = LoadFashionMnist(kFashionMnistDir, train);
    CATCH_REQUIRE(data.ok());
    CATCH_CHECK((*data)->size() == (train ? 60000 : 10000));
    std::vector<int64_t> all((*data)->size());
    for (int64_t i = 0; i < (*data)->size(); ++i) all[i] = i;
    Batch b = (*data)->Get(all);
    CATCH_CHECK(b.input.sizes() == torch::IntArrayRef({(*data)->size(), 1, 28, 28}));
    CATCH_CHECK(b.input.dtype() == torch::kFloat32);
    CATCH_CHECK(b.target.dtype() == torch::kInt64);
    CATCH_CHECK(b.target.min().item<int64_t>() == 0);
    CATCH_CHECK(b.target.max().item<int64_t>() == 9);
    // Every class is present equally often in Fashion-MNIST.
    CATCH_CHECK(torch::equal(torch::bincount(b.target),
                             torch::full({10}, (*data)->size() / 10, torch::kInt64)));
    // Normalised: pixel 0 maps to -mean/std, and the data set's mean is about 0.
    CATCH_CHECK(b.input.min().item<float>() ==
                Approx(-kFashionMnistMean / kFashionMnistStd).epsilon(1e-5));
    CATCH_CHECK(std::abs(b.input.mean().item<float>()) < 0.02);
    CATCH_CHECK(std::abs(b.input.std().item<float>() - 1.0) < 0.02);
  }
}

CATCH_TEST_CASE("Get returns the requested samples in order") {
  absl::StatusOr<std::shared_ptr<Dataset>> data = LoadFashionMnist(kFashionMnistDir, false);
  CATCH_REQUIRE(data.ok());
  Batch one = (*data)->Get({5});
  Batch three = (*data)->Get({7, 5, 7});
  CATCH_CHECK(torch::equal(three.input[1], one.input[0]));
  CATCH_CHECK(torch::equal(three.input[0], three.input[2]));
  CATCH_CHECK(three.target[1].item<int64_t>() == one.target[0].item<int64_t>());
}

CATCH_TEST_CASE("a small valid set in a temp folder loads with the right values") {
  fs::path dir = TempDir("valid");
  WriteValidTestSet(dir);
  absl::StatusOr<std::shared_ptr<Dataset>> data = LoadFashionMnist(dir.string(), false);
  CATCH_REQUIRE(data.ok());
  Batch b = (*data)->Get({0, 1, 2});
  CATCH_CHECK(b.input.sizes() == torch::IntArrayRef({3, 1, 2, 2}));
  CATCH_CHECK(torch::equal(b.target, torch::tensor({0, 9, 4}, torch::kInt64)));
  CATCH_CHECK(b.input[2][0][1][1].item<float>() ==
              Approx((11 / 255.0 - kFashionMnistMean) / kFashionMnistStd));
}

CATCH_TEST_CASE("a missing file is NotFound naming the file") {
  fs::path dir = TempDir("missing");
  std::string message;
  CATCH_CHECK(LoadCode(dir, &message) == absl::StatusCode::kNotFound);
  CATCH_CHECK(message.find("t10k-images-idx3-ubyte.gz") != std::string::npos);
  WriteGzip(dir / "t10k-images-idx3-ubyte.gz", Images(2051, 3, 2, 2, 12));
  CATCH_CHECK(LoadCode(dir, &message) == absl::StatusCode::kNotFound);
  CATCH_CHECK(message.find("t10k-labels-idx1-ubyte.gz") != std::string::npos);
}

CATCH_TEST_CASE("a wrong magic number is DataLoss naming the file") {
  fs::path dir = TempDir("magic");
  WriteValidTestSet(dir);
  WriteGzip(dir / "t10k-labels-idx1-ubyte.gz", Labels(2051, {0, 9, 4}));  // images' magic
  std::string message;
  CATCH_CHECK(LoadCode(dir, &message) == absl::StatusCode::kDataLoss);
  CATCH_CHECK(message.find("t10k-labels-idx1-ubyte.gz") != std::string::npos);
  CATCH_CHECK(message.find("magic") != std::string::npos);
}

CATCH_TEST_CASE("fewer bytes than the header announces is DataLoss") {
  fs::path dir = TempDir("short");
  WriteValidTestSet(dir);
  WriteGzip(dir / "t10k-images-idx3-ubyte.gz", Images(2051, 3, 2, 2, 11));
  std::string message;
  CATCH_CHECK(LoadCode(dir, &message) == absl::StatusCode::kDataLoss);
  CATCH_CHECK(message.find("t10k-images-idx3-ubyte.gz") != std::string::npos);
  WriteGzip(dir / "t10k-images-idx3-ubyte.gz", {0x00, 0x00, 0x08});  // not even a header
  CATCH_CHECK(LoadCode(dir, &message) == absl::StatusCode::kDataLoss);
}

CATCH_TEST_CASE("a truncated gzip stream is DataLoss") {
  fs::path dir = TempDir("truncated");
  WriteValidTestSet(dir);
  // Cut the real training images to their first 100 kB of compressed data.
  std::ifstream in(std::string(kFashionMnistDir) + "/t10k-images-idx3-ubyte.gz", std::ios::binary);
  std::vector<char> head(100000);
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  std::ofstream out(dir / "t10k-images-idx3-ubyte.gz", std::ios::binary | std::ios::trunc);
  out.write(head.data(), in.gcount());
  out.close();
  std::string message;
  CATCH_CHECK(LoadCode(dir, &message) == absl::StatusCode::kDataLoss);
  CATCH_CHECK(message.find("t10k-images-idx3-ubyte.gz") != std::string::npos);
}

CATCH_TEST_CASE("image and label counts that differ are DataLoss") {
  fs::path dir = TempDir("count");
  WriteValidTestSet(dir);
  WriteGzip(dir / "t10k-labels-idx1-ubyte.gz", Labels(2049, {0, 9}));
  std::string message;
  CATCH_CHECK(LoadCode(dir, &message) == absl::StatusCode::kDataLoss);
  CATCH_CHECK(message.find("3 images") != std::string::npos);
}

CATCH_TEST_CASE("a label outside 0..9 is DataLoss") {
  fs::path dir = TempDir("label");
  WriteValidTestSet(dir);
  WriteGzip(dir / "t10k-labels-idx1-ubyte.gz", Labels(2049, {0, 10, 4}));
  std::string message;
  CATCH_CHECK(LoadCode(dir, &message) == absl::StatusCode::kDataLoss);
  CATCH_CHECK(message.find("label 10") != std::string::npos);
}

CATCH_TEST_CASE("CreateDataset picks loaders by name and rejects unknown names") {
  DatasetOptions options;
  options.train = false;
  absl::StatusOr<std::shared_ptr<Dataset>> fashion = CreateDataset(options);
  CATCH_REQUIRE(fashion.ok());
  CATCH_CHECK((*fashion)->size() == 10000);
  options.name = "synthetic";
  options.size = 64;
  absl::StatusOr<std::shared_ptr<Dataset>> synthetic = CreateDataset(options);
  CATCH_REQUIRE(synthetic.ok());
  CATCH_CHECK((*synthetic)->Get({0}).input.sizes() == torch::IntArrayRef({1, 1, 28, 28}));
  options.name = "synthetic_tokens";
  absl::StatusOr<std::shared_ptr<Dataset>> tokens = CreateDataset(options);
  CATCH_REQUIRE(tokens.ok());
  CATCH_CHECK((*tokens)->Get({0}).input.sizes() == torch::IntArrayRef({1, 2, 16}));
  options.name = "imagenet";
  absl::StatusOr<std::shared_ptr<Dataset>> unknown = CreateDataset(options);
  CATCH_CHECK(unknown.status().code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(std::string(unknown.status().message()).find("fashion_mnist") != std::string::npos);
}

}  // namespace
}  // namespace p3::models
