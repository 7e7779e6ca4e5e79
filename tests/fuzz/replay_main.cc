// A short, deterministic fuzz run without libFuzzer, for the test suite: runs the target
// on its built-in seeds and every file of its corpus folder, then on `--mutations`
// inputs mutated from those (bit flips, byte changes, insertions, deletions, splices)
// with a fixed random seed. Long coverage-guided runs: tools/fuzz.sh (clang, libFuzzer).
//
//   shard_fuzz_replay --corpus=tests/fuzz/corpus/shard --mutations=20000
#include <dirent.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_seeds.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void Run(const std::string& input) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

std::string Mutate(std::string s, const std::vector<std::string>& pool, std::mt19937_64& rng) {
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    const size_t n = s.size();
    switch (rng() % 5) {
      case 0:
        if (n > 0) s[rng() % n] ^= static_cast<char>(1 << (rng() % 8));
        break;
      case 1:
        if (n > 0) s[rng() % n] = static_cast<char>(rng());
        break;
      case 2:
        s.insert(s.begin() + (n ? rng() % (n + 1) : 0), static_cast<char>(rng()));
        break;
      case 3:
        if (n > 0) s.erase(rng() % n, 1 + rng() % std::min<size_t>(n, 16));
        break;
      case 4: {
        const std::string& other = pool[rng() % pool.size()];
        if (!other.empty()) {
          const size_t from = rng() % other.size();
          s.insert(n ? rng() % (n + 1) : 0, other.substr(from, 1 + rng() % 64));
        }
        break;
      }
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::string corpus;
  std::string write_seeds;
  long mutations = 10000;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--corpus=", 9) == 0) corpus = argv[i] + 9;
    if (std::strncmp(argv[i], "--mutations=", 12) == 0) mutations = std::atol(argv[i] + 12);
    if (std::strncmp(argv[i], "--write_seeds=", 14) == 0) write_seeds = argv[i] + 14;
  }
  std::vector<std::string> pool = FuzzSeeds();
  if (!write_seeds.empty()) {  // for tools/fuzz.sh: start libFuzzer from the seeds
    for (size_t i = 0; i < pool.size(); ++i) {
      std::ofstream(write_seeds + "/seed_" + std::to_string(i), std::ios::binary) << pool[i];
    }
    return 0;
  }
  if (DIR* d = opendir(corpus.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream in(corpus + "/" + e->d_name, std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      pool.push_back(ss.str());
    }
    closedir(d);
  }
  for (const std::string& input : pool) Run(input);
  std::mt19937_64 rng(20261130);
  for (long i = 0; i < mutations; ++i) Run(Mutate(pool[rng() % pool.size()], pool, rng));
  // A line the test log keeps, and a check that something was run at all.
  std::printf("fuzz replay: %zu corpus inputs, %ld mutated inputs, no crash\n", pool.size(),
              mutations);
  return pool.empty() ? 1 : 0;
}
