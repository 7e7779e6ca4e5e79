#include "worker/buffer_exchange.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace p3 {

void BufferExchange::Expect(uint64_t round) {
  absl::MutexLock lock(&mu_);
  round_ = round;
  mean_.reset();
}

absl::Status BufferExchange::Arrived(int server, uint64_t round, absl::string_view values) {
  absl::MutexLock lock(&mu_);
  if (server != 0 || round != round_ || mean_.has_value() || values.size() % sizeof(float) != 0) {
    return absl::InternalError(
        absl::StrCat("server ", server, " sent buffers of round ", round, " (", values.size(),
                     " bytes); this worker awaits round ", round_, " from server 0"));
  }
  std::vector<float> mean(values.size() / sizeof(float));
  std::memcpy(mean.data(), values.data(), values.size());
  mean_ = std::move(mean);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> BufferExchange::Await(absl::Duration bound) {
  absl::MutexLock lock(&mu_);
  auto arrived = [this] {
    mu_.AssertHeld();
    return mean_.has_value() || !abort_.ok();
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&arrived), bound)) {
    return absl::DeadlineExceededError(
        absl::StrCat("worker ", rank_, ": waited ", absl::FormatDuration(bound),
                     " for the mean of the workers' buffers (round ", round_, ") from server 0"));
  }
  if (!abort_.ok()) return abort_;
  std::vector<float> mean = *std::move(mean_);
  mean_.reset();
  return mean;
}

void BufferExchange::Abort(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (abort_.ok()) abort_ = status;
}

}  // namespace p3
