#!/bin/sh
# A worker program for launch_cluster's worker.command that runs p3_worker itself: the
# worker-program environment (docs/worker_api.md, "Run your own program with
# launch_cluster") translated back into p3_worker's flags, one for one.
#   worker { command: "tests/cluster/p3_worker_from_env.sh bazel-bin/worker/p3_worker" }
set -eu
worker="$1"
shift
set -- --config="$P3_CONFIG" --rank="$P3_RANK" --servers="$P3_SERVERS" \
  --result_file="$P3_RESULT_FILE" --records_file="$P3_RECORDS_FILE" "$@"
[ -n "$P3_TRACE_FILE" ] && set -- "$@" --trace_file="$P3_TRACE_FILE"
[ "$P3_REJOIN" = 1 ] && set -- "$@" --rejoin
exec "$worker" "$@"
