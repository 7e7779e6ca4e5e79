// What an experiment config means for the servers and workers: the optimizer and the
// security settings, read the same way on both sides. `config` must have its defaults
// filled (proto/config.h).
#ifndef P3_PROTO_CONFIG_OPTIONS_H_
#define P3_PROTO_CONFIG_OPTIONS_H_

#include <string>

#include "absl/status/statusor.h"
#include "p3/core/optimizer.h"
#include "proto/config.pb.h"

namespace p3 {

// The optimizer the servers apply; `local` builds libtorch's own from the same options.
OptimizerOptions OptimizerFromConfig(const config::ExperimentConfig& config);

// Where rank 0 writes the trained model: output.model_file, by default
// "<output_dir>/model.pt"; "" when output.save_model is false.
std::string ModelFileFromConfig(const config::ExperimentConfig& config);

// The contents of the files named in config.security.
struct SecuritySettings {
  bool tls = false;
  std::string cert_pem;     // the servers'
  std::string key_pem;      // the servers'
  std::string ca_pem;       // what the workers verify against
  std::string server_name;  // the name in the servers' certificate, if not the host
  std::string token;        // shared cluster token (trailing newline removed)
};

// Reads the files; NotFound/PermissionDenied naming the field and the file.
absl::StatusOr<SecuritySettings> SecurityFromConfig(const config::ExperimentConfig& config);

}  // namespace p3

#endif  // P3_PROTO_CONFIG_OPTIONS_H_
