#include "p3/pipeline/mode_engine.h"

#include "absl/strings/str_cat.h"

namespace p3::pipeline {

absl::StatusOr<models::Batch> LoadBatch(const BatchSource& source, int64_t i) {
  absl::StatusOr<models::Batch> batch = source(i);
  if (!batch.ok()) {
    return absl::Status(batch.status().code(),
                        absl::StrCat("loading mini-batch ", i, ": ", batch.status().message()));
  }
  return batch;
}

}  // namespace p3::pipeline
