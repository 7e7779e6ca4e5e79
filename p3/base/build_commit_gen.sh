#!/bin/sh
# Writes build_commit.cc (p3/base/build_commit.h) from Bazel's stable-status.txt, given
# as $1: the value of STABLE_P3_COMMIT that tools/workspace_status.sh puts there in a
# build with --config=stamp, else "unstamped".
commit=$(sed -n 's/^STABLE_P3_COMMIT \([0-9a-f]*\(+dirty\)\{0,1\}\)$/\1/p' "$1")
[ -n "$commit" ] || commit=unstamped
cat <<CC
#include "p3/base/build_commit.h"

namespace p3 {
namespace {
// Kept whole in the binary: tools/bench_streaming.py reads it from the file.
__attribute__((used)) const char kStamp[] = "P3_BUILD_COMMIT=$commit";
}  // namespace

const char* BuildCommit() { return kStamp + sizeof("P3_BUILD_COMMIT=") - 1; }

}  // namespace p3
CC
