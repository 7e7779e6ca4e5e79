#!/bin/sh
# A worker program for launch_cluster's worker.command in the launcher's tests:
#   worker { command: "tests/tools/fake_worker_program.sh <fake_p3_worker>" }
# Records its P3_* environment in $P3_RUN_DIR/env_<rank>_<P3_REJOIN>.txt and its
# GLIBC_TUNABLES (or "unset") in $P3_RUN_DIR/tunables_<rank>_<P3_REJOIN>.txt, then runs the
# fake worker with the flags the environment stands for. Test knobs, in the environment
# (or in front of the command: it runs through /bin/sh -c):
#   RESULT_ELSEWHERE=DIR  the result goes to DIR/worker_<rank>.json, P3_RESULT_FILE stays
#                         unwritten;
#   FAIL_FIRST_RANK=r     rank r's first start (P3_REJOIN=0) exits 5 before connecting.
set -eu
fake_worker="$1"
env | grep '^P3_' | sort >"$P3_RUN_DIR/env_${P3_RANK}_${P3_REJOIN}.txt"
printf '%s\n' "${GLIBC_TUNABLES-unset}" >"$P3_RUN_DIR/tunables_${P3_RANK}_${P3_REJOIN}.txt"
if [ "${FAIL_FIRST_RANK:-}" = "$P3_RANK" ] && [ "$P3_REJOIN" = 0 ]; then
  echo "program: rank $P3_RANK fails on purpose" >&2
  exit 5
fi
result="$P3_RESULT_FILE"
[ -n "${RESULT_ELSEWHERE:-}" ] && result="$RESULT_ELSEWHERE/worker_$P3_RANK.json"
set -- --config="$P3_CONFIG" --rank="$P3_RANK" --servers="$P3_SERVERS" \
  --result_file="$result" --records_file="$P3_RECORDS_FILE"
[ -n "$P3_TRACE_FILE" ] && set -- "$@" --trace_file="$P3_TRACE_FILE"
exec "$fake_worker" "$@"
