#include "models/fashion_mnist.h"

#include <torch/types.h>
#include <zlib.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "models/tensor_dataset.h"
#include "p3/base/status_macros.h"

namespace p3::models {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // unsigned byte, 3 dimensions
constexpr uint32_t kLabelsMagic = 0x00000801;  // unsigned byte, 1 dimension
constexpr int64_t kNumClasses = 10;

// The whole decompressed content of `path` (zlib reads uncompressed files as they are).
absl::StatusOr<std::vector<uint8_t>> ReadGzipFile(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("no such file: ", path));
    return absl::UnavailableError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  std::vector<uint8_t> data;
  std::vector<uint8_t> chunk(1 << 20);
  while (true) {
    int n = gzread(file, chunk.data(), static_cast<unsigned>(chunk.size()));
    if (n < 0) {
      int code = 0;
      std::string message = gzerror(file, &code);
      gzclose(file);
      return absl::DataLossError(absl::StrCat("corrupt gzip file ", path, ": ", message));
    }
    if (n == 0) break;
    data.insert(data.end(), chunk.begin(), chunk.begin() + n);
  }
  // A gzip stream cut short reads as a clean end of file; gzclose then reports Z_BUF_ERROR.
  int close_code = gzclose(file);
  if (close_code != Z_OK) {
    return absl::DataLossError(
        absl::StrCat("corrupt or truncated gzip file ", path, " (zlib error ", close_code, ")"));
  }
  return data;
}

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

struct Idx {
  std::vector<int64_t> dims;
  const uint8_t* values = nullptr;
  int64_t num_values = 0;
};

// Parses an IDX header with `num_dims` dimensions and checks the sizes against the data.
absl::StatusOr<Idx> ParseIdx(const std::vector<uint8_t>& data, const std::string& path,
                             uint32_t magic, int num_dims) {
  const size_t header_size = sizeof(uint32_t) * (1 + static_cast<size_t>(num_dims));
  if (data.size() < header_size) {
    return absl::DataLossError(absl::StrCat(
        path, ": ", data.size(), " bytes, shorter than an IDX header of ", header_size, " bytes"));
  }
  const uint32_t found = BigEndian32(data.data());
  if (found != magic) {
    return absl::DataLossError(
        absl::StrCat(path, ": wrong magic number ", found, ", expected ", magic));
  }
  Idx idx;
  idx.num_values = 1;
  for (int d = 0; d < num_dims; ++d) {
    idx.dims.push_back(BigEndian32(data.data() + sizeof(uint32_t) * (1 + d)));
    idx.num_values *= idx.dims.back();
  }
  const int64_t available = static_cast<int64_t>(data.size() - header_size);
  if (available != idx.num_values) {
    return absl::DataLossError(absl::StrCat(path, ": header announces ", idx.num_values,
                                            " values, file holds ", available));
  }
  idx.values = data.data() + header_size;
  return idx;
}

}  // namespace

absl::StatusOr<std::shared_ptr<Dataset>> LoadFashionMnist(const std::string& dir, bool train) {
  const std::string prefix = absl::StrCat(dir, "/", train ? "train" : "t10k");
  const std::string images_path = prefix + "-images-idx3-ubyte.gz";
  const std::string labels_path = prefix + "-labels-idx1-ubyte.gz";

  P3_ASSIGN_OR_RETURN(const std::vector<uint8_t> image_bytes, ReadGzipFile(images_path));
  P3_ASSIGN_OR_RETURN(const std::vector<uint8_t> label_bytes, ReadGzipFile(labels_path));
  P3_ASSIGN_OR_RETURN(Idx images, ParseIdx(image_bytes, images_path, kImagesMagic, 3));
  P3_ASSIGN_OR_RETURN(Idx labels, ParseIdx(label_bytes, labels_path, kLabelsMagic, 1));

  const int64_t n = images.dims[0];
  if (labels.dims[0] != n) {
    return absl::DataLossError(absl::StrCat(images_path, " holds ", n, " images but ", labels_path,
                                            " holds ", labels.dims[0], " labels"));
  }
  for (int64_t i = 0; i < n; ++i) {
    if (labels.values[i] >= kNumClasses) {
      return absl::DataLossError(absl::StrCat(labels_path, ": label ", int{labels.values[i]},
                                              " at index ", i, " is outside 0..", kNumClasses - 1));
    }
  }

  torch::Tensor input = torch::from_blob(const_cast<uint8_t*>(images.values),
                                         {n, 1, images.dims[1], images.dims[2]}, torch::kUInt8)
                            .to(torch::kFloat32)
                            .div_(255.0)
                            .sub_(kFashionMnistMean)
                            .div_(kFashionMnistStd);
  torch::Tensor target =
      torch::from_blob(const_cast<uint8_t*>(labels.values), {n}, torch::kUInt8).to(torch::kInt64);
  return std::make_shared<TensorDataset>(std::move(input), std::move(target));
}

}  // namespace p3::models
