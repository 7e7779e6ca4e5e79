#!/usr/bin/env bash
# Workers rejoin (docs/reliability.md): real processes under launch_cluster --max_restarts=1.
# Three seeded kill trials of tools/experiments/kill_trials.py (a random worker SIGKILLed at
# a random iteration; seed 4 draws priority_only and slicing_only with shared memory and
# values_only without, killing rank 1 once and rank 0 twice): each run must complete with param_l2
# identical to the uninterrupted run's. The restarted process is held back 5 s (a slow
# start, through a wrapper), longer than the config's peer_timeout_s of 3 s: the other
# workers must wait on cluster.rejoin_timeout_s instead of timing out. Then a restart
# budget that runs out: the run fails, naming the worker and showing its last log lines.
# And a restart slower than cluster.rejoin_timeout_s (2 s here; the restart is held back
# 6 s): the servers stop the run with an error naming the missing rank.
set -uo pipefail

TMP="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
common=(--launcher=tools/launch_cluster --server_binary=server/p3_server
        --worker_binary=worker/p3_worker --iterations=30 --peer_timeout_s=3)

/usr/bin/python3 tools/experiments/kill_trials.py "${common[@]}" --trials=3 --seed=4 \
    --restart_delay_s=5 --out="$TMP/trials" --csv="$TMP/trials.csv" || failures=$((failures + 1))
/usr/bin/python3 tools/experiments/kill_trials.py "${common[@]}" --exhaust --out="$TMP/exhaust" \
    || failures=$((failures + 1))
/usr/bin/python3 tools/experiments/kill_trials.py "${common[@]}" --late --rejoin_timeout_s=2 \
    --restart_delay_s=6 --out="$TMP/late" || failures=$((failures + 1))

if ((failures > 0)); then
  echo "FAILED: $failures check(s)"
  exit 1
fi
echo "rejoin_test: all checks passed"
