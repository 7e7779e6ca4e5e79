#!/usr/bin/env bash
# Trains train.py on a local P3 cluster without the launcher: starts the config's servers
# on loopback (free ports), then train.py once per worker with the environment
# launch_cluster's worker.command gives (P3_RANK, P3_WORLD_SIZE, P3_SERVERS, P3_CONFIG, ...;
# docs/python.md). Rank 0's output (the accuracy) is printed; every log is kept in RUN_DIR.
#
#   bazel run //worker/examples/python_fashion_mnist:run -- [train.py arguments, e.g. --limit=6400]
#
# Environment: P3_EXAMPLE_CONFIG (default: the config.textproto beside this script),
# P3_EXAMPLE_RUN_DIR (default: a new temporary folder).
set -euo pipefail

HERE=worker/examples/python_fashion_mnist
CONFIG=$(realpath "${P3_EXAMPLE_CONFIG:-$HERE/config.textproto}")
RUN_DIR=${P3_EXAMPLE_RUN_DIR:-$(mktemp -d -t p3_python_example.XXXXXX)}
mkdir -p "$RUN_DIR"
field() { sed -n "s/^ *$1: *\([0-9]*\).*/\1/p" "$CONFIG" | head -1; }
WORKERS=$(field workers)
SERVERS=$(field servers)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT

addresses=""
for ((s = 0; s < SERVERS; s++)); do
  server/p3_server --config="$CONFIG" --server_index=$s --port_file="$RUN_DIR/server_$s.port" \
    > "$RUN_DIR/server_$s.log" 2>&1 &
  pids+=($!)
done
for ((s = 0; s < SERVERS; s++)); do
  for _ in $(seq 300); do [ -s "$RUN_DIR/server_$s.port" ] && break; sleep 0.1; done
  addresses+="${addresses:+,}127.0.0.1:$(cat "$RUN_DIR/server_$s.port")"
done

workers=()
for ((r = 0; r < WORKERS; r++)); do
  P3_RANK=$r P3_WORLD_SIZE=$WORKERS P3_SERVERS=$addresses P3_CONFIG=$CONFIG P3_REJOIN=0 \
    P3_RESULT_FILE="$RUN_DIR/worker_$r.json" P3_RECORDS_FILE="" P3_TRACE_FILE="" \
    P3_RUN_DIR="$RUN_DIR" PYTHONPATH="$PWD/worker/python${PYTHONPATH:+:$PYTHONPATH}" \
    /usr/bin/python3 "$HERE/train.py" "$@" > "$RUN_DIR/worker_$r.log" 2>&1 &
  workers+=($!)
  pids+=($!)
done
status=0
for p in "${workers[@]}"; do wait "$p" || status=1; done
cat "$RUN_DIR/worker_0.log"
if ((status != 0)); then
  for ((r = 1; r < WORKERS; r++)); do echo "--- worker $r:"; tail -5 "$RUN_DIR/worker_$r.log"; done
  echo "a worker failed; logs in $RUN_DIR" >&2
fi
exit $status
