// The fuzz targets' built-in seed inputs (each target defines it; the corpus folders
// under tests/fuzz/corpus/ hold the inputs found by fuzzing).
#ifndef P3_TESTS_FUZZ_FUZZ_SEEDS_H_
#define P3_TESTS_FUZZ_FUZZ_SEEDS_H_

#include <string>
#include <vector>

std::vector<std::string> FuzzSeeds();

#endif  // P3_TESTS_FUZZ_FUZZ_SEEDS_H_
