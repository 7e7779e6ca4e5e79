#!/bin/bash
# bazel run //tools:bench_throughput -- {sweep|run|report|trace} [flags]
#
# Runs tools/bench_throughput.py with Debian's Python (it and the DDP peer need
# python3-torch, the report python3-matplotlib) against the launcher, server and worker
# that Bazel built with this target. Results go to out/bench/ in the workspace, tables and
# plots to docs/results/. See docs/results/throughput/throughput.md.
set -euo pipefail
runfiles="${RUNFILES_DIR:-$0.runfiles}"
here="$runfiles/p3/tools"
export P3_LAUNCHER="$here/launch_cluster"
export P3_SERVER="$runfiles/p3/server/p3_server"
export P3_WORKER="$runfiles/p3/worker/p3_worker"
# bazel run sets BUILD_WORKSPACE_DIRECTORY; elsewhere, the current directory.
export BUILD_WORKSPACE_DIRECTORY="${BUILD_WORKSPACE_DIRECTORY:-$PWD}"
cd "$BUILD_WORKSPACE_DIRECTORY"
exec /usr/bin/python3 "$here/bench_throughput.py" "$@"
