// Fuzz target: the config parser (proto/config.h). Bytes before the first 0 byte are the
// config text; each 0-separated piece after it is a --set override. Any input must give
// a config or an error, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_seeds.h"
#include "proto/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string all(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t i = 0; i <= all.size(); ++i) {
    if (i == all.size() || all[i] == '\0') {
      parts.push_back(all.substr(start, i - start));
      start = i + 1;
    }
  }
  std::vector<std::string> overrides(parts.begin() + 1, parts.end());
  absl::StatusOr<p3::config::ExperimentConfig> config = p3::config::ParseConfig(parts[0], overrides);
  if (config.ok()) {
    // A valid config survives its own text form.
    absl::StatusOr<p3::config::ExperimentConfig> again =
        p3::config::ParseConfig(p3::config::ConfigToText(*config), {});
    if (!again.ok()) __builtin_trap();
  }
  return 0;
}

std::vector<std::string> FuzzSeeds() {
  return {
      "mode: \"p3\"\ncluster { workers: 2 servers: 2 }\nmodel { name: \"small_cnn\" }\n",
      std::string("training { batch_size: 8 iterations: 3 }") + '\0' + "mode=baseline" + '\0' +
          "optimizer.lr=0.1",
      "optimizer { name: \"adam\" }\nscheduling { slice_params: 1000 }\n",
      "cluster { workers: 0 }\n",
      "training { batch_sizee: 1 }\n",
  };
}
