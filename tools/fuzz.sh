#!/usr/bin/env bash
# Coverage-guided fuzzing with libFuzzer (Debian's clang + libclang-rt-14-dev):
#   tools/fuzz.sh shard|config|wire_codec [SECONDS]     (default 60 s)
#   tools/fuzz.sh check     every target's sources exist (no build; //tests/tools:fuzz_test)
# Builds the target with -fsanitize=fuzzer,address,undefined, runs it on its corpus
# folder tests/fuzz/corpus/<target> (new interesting inputs are added there: commit
# them), and stops at the first crash, leaving the input in out/fuzz/<target>/.
set -euo pipefail
usage="usage: tools/fuzz.sh shard|config|wire_codec [SECONDS] | check"
target=${1:?$usage}
seconds=${2:-60}
cd "$(dirname "$0")/.."
gen=bazel-bin

# sources TARGET: sets srcs and libs (the files clang compiles: this fuzzer outside Bazel
# names them itself, so a moved file must be renamed here too).
sources() {
  case "$1" in
    shard)
      srcs=(tests/fuzz/shard_fuzz.cc server/message_handler.cc proto/wire.cc proto/wire_codec.cc
            p3/core/parameter_shard.cc p3/core/shard_aggregation.cc p3/core/shard_checkpoint.cc
            p3/core/shard_rejoin.cc p3/core/shard_replan.cc p3/core/snapshot.cc p3/core/downstream.cc
            p3/core/buffer_average.cc p3/core/stall_report.cc p3/core/wire_dtype.cc
            p3/core/slice_plan.cc p3/core/optimizer.cc p3/core/lr_schedule.cc
            p3/core/checkpoint.cc p3/core/cluster_signature.cc p3/base/file_util.cc "$gen/proto/p3.pb.cc")
      libs=(-lgrpc++ -lgrpc -lgpr) ;;
    wire_codec)
      srcs=(tests/fuzz/wire_codec_fuzz.cc proto/wire_codec.cc "$gen/proto/p3.pb.cc")
      libs=(-lgrpc++ -lgrpc -lgpr) ;;
    config)
      srcs=(tests/fuzz/config_fuzz.cc proto/config.cc proto/config_defaults.cc
            proto/config_validate.cc proto/config_layout.cc proto/config_options.cc p3/core/optimizer.cc
            p3/core/lr_schedule.cc p3/base/file_util.cc p3/core/mode.cc "$gen/proto/config.pb.cc")
      libs=() ;;
    *) echo "unknown target $1; allowed: shard, config, wire_codec" >&2; exit 2 ;;
  esac
}

if [ "$target" = check ]; then
  missing=0
  for t in shard config wire_codec; do
    sources "$t"
    for f in "${srcs[@]}"; do
      # Generated sources come from the build.
      if [[ $f != "$gen"/* && ! -f $f ]]; then
        echo "fuzz.sh: $t: $f does not exist" >&2
        missing=$((missing + 1))
      fi
    done
  done
  [ "$missing" -eq 0 ] && echo "fuzz.sh: every target's sources exist"
  exit $((missing > 0))
fi
sources "$target"

bazel build --jobs=2 //proto:p3_proto //proto:config_proto "//tests/fuzz:${target}_fuzz_replay_test" \
  >/dev/null

out=out/fuzz/$target
mkdir -p "$out" "tests/fuzz/corpus/$target"
if [ -z "$(ls -A "tests/fuzz/corpus/$target")" ]; then
  "$gen/tests/fuzz/${target}_fuzz_replay_test" --write_seeds="tests/fuzz/corpus/$target"
fi
bin=$out/${target}_fuzzer
echo "fuzz: building $bin"
clang++ -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I. -I"$gen" "${srcs[@]}" -o "$bin" "${libs[@]}" -lprotobuf \
  -labsl_statusor -labsl_status -labsl_cord -labsl_cord_internal -labsl_cordz_info \
  -labsl_cordz_handle -labsl_cordz_functions -labsl_exponential_biased -labsl_str_format_internal \
  -labsl_synchronization -labsl_graphcycles_internal -labsl_symbolize -labsl_demangle_internal \
  -labsl_stacktrace -labsl_debugging_internal -labsl_malloc_internal -labsl_time -labsl_time_zone \
  -labsl_strings -labsl_strings_internal -labsl_int128 -labsl_throw_delegate -labsl_base \
  -labsl_spinlock_wait -labsl_raw_logging_internal -labsl_log_severity -labsl_hash -labsl_city \
  -labsl_low_level_hash -labsl_raw_hash_set -labsl_bad_optional_access -labsl_bad_variant_access
echo "fuzz: running $target for ${seconds}s on tests/fuzz/corpus/$target"
cd "$out"
# Leaks of the protobuf/gRPC runtimes' globals are not ours.
ASAN_OPTIONS=detect_leaks=0 "./${target}_fuzzer" -max_total_time="$seconds" -max_len=4096 \
  -print_final_stats=1 "../../../tests/fuzz/corpus/$target"
