#!/usr/bin/env bash
# tools/experiments/link_faults.py for real, one trial per fault on tiny settings: the real
# binaries on an emulated 1 Gbit/s network (2 workers, 2 servers, one per machine), faults
# of a second or two. Each short fault (loss 1 %, loss 5 %, outage, brownout) must be
# survived with param_l2 identical to the undisturbed run; a partition longer than the
# peer timeout must end the run within the bound (never a hang), and the restart from the
# checkpoint must end identical. Then SIGTERM to the tool in the middle of a fault: it must
# undo the fault, stop its run, and leave no namespace and no nft table behind.
# Needs root (namespaces) and nft (Debian's nftables): without them the cases are reported
# as skipped (tests/testing/skip.sh), never as passed.
set -uo pipefail

source tests/testing/cases.sh
source tests/testing/skip.sh

TMP="${TEST_TMPDIR:-$(mktemp -d)}"
TOOL=(/usr/bin/python3 tools/experiments/link_faults.py --launcher=tools/launch_cluster
      --server_binary=server/p3_server --worker_binary=worker/p3_worker --iterations=30
      --seed=3 --loss_s=1.5 --outage_s=1.5 --brownout_s=2 --partition_s=5
      --partition_peer_timeout_s=2 --peer_timeout_s=10 --run_timeout_s=120)

if ! p3_is_root; then
  p3_skip "link fault cases" "need root for network namespaces (running as $(id -un))"
  finish_cases
fi
if ! command -v nft >/dev/null; then
  p3_skip "link fault cases" "nft is not installed (Debian's nftables; tools/install_deps.sh)"
  finish_cases
fi
if ! ip netns add "p3-$$-probe" 2>"$TMP/probe.err"; then
  p3_skip "link fault cases" "cannot create a network namespace: $(head -c 300 "$TMP/probe.err")"
  finish_cases
fi
ip netns delete "p3-$$-probe"

# Namespaces of launchers started under $1 (their run folders' launcher logs name them).
leftover_namespaces() {
  local ids
  ids=$(grep -ho 'namespaces p3-[0-9]*-' "$1"/*.launcher.log 2>/dev/null | sed 's/namespaces //' | sort -u)
  for id in $ids; do ip netns list | grep "^$id" ; done
}

# --- one trial per fault --------------------------------------------------------------
case_name=trials
output="$TMP/trials.out"
"${TOOL[@]}" --trials=1 --faults=loss_1,loss_5,outage,brownout --partition_trials=1 \
  --out="$TMP/trials" --csv="$TMP/trials.csv" >"$output" 2>&1
echo "tool exit status $?" >>"$output"
cat "$output"
for fault in loss_1 loss_5 outage brownout; do
  case_name=$fault
  if /usr/bin/python3 - "$TMP/trials.csv" "$fault" <<'EOF'
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["fault"] == sys.argv[2]]
assert len(rows) == 1, f"{len(rows)} rows"
r = rows[0]
assert r["fault_s"] != "", f"no fault injected: {r['error']}"
assert r["survived"] == "1" and r["identical"] == "1", r
assert r["param_l2"] == r["reference"], r
if sys.argv[2].startswith("loss"):
    assert int(r["seen"]) > 0, r  # the rules were in place and saw the traffic
EOF
  then ok; else fail "see the trial above"; fi
done
# A partition is bounded: the run fails within the peer timeout (2 s) plus the launcher's
# grace (2 s) and a second, and the restart from the checkpoint ends identical. Whether the
# first failure names the cut link is in the CSV (names_target), not asserted here:
# docs/results/reliability/link_faults.md says what the report names today.
case_name=partition
if /usr/bin/python3 - "$TMP/trials.csv" <<'EOF'
import csv, sys
r = [r for r in csv.DictReader(open(sys.argv[1])) if r["fault"] == "partition"][0]
assert r["error_after_s"] != "" and float(r["error_after_s"]) <= 5.0, r
assert "hang" not in r["error"], r
assert r["survived"] == "1" and r["identical"] == "1", r
EOF
then ok; else fail "see the trial above"; fi
case_name=cleaned_up
if [[ -n "$(leftover_namespaces "$TMP/trials")" ]]; then
  fail "namespaces left: $(leftover_namespaces "$TMP/trials")"
else
  ok
fi

# --- SIGTERM in the middle of a fault ---------------------------------------------------
case_name=sigterm
output="$TMP/sigterm.out"
"${TOOL[@]}" --trials=1 --faults=loss_5 --loss_s=60 --out="$TMP/sigterm" >"$output" 2>&1 &
tool_pid=$!
for _ in $(seq 600); do
  grep -q "loss_5_00: loss_5 on" "$output" && break
  sleep 0.1
done
ns=$(grep -o '(p3-[0-9]*-m[0-9]*' "$output" | head -1 | tr -d '(')
if [[ -z "$ns" ]]; then
  kill "$tool_pid" 2>/dev/null
  wait "$tool_pid"
  fail "no fault was injected"
elif ! ip netns exec "$ns" nft list table inet p3_link_fault >/dev/null 2>&1; then
  kill "$tool_pid"
  wait "$tool_pid"
  fail "the nft table is not in $ns"
else
  kill -TERM "$tool_pid"
  wait "$tool_pid"
  rc=$?
  if [[ $rc -ne 143 ]]; then
    fail "the tool exited $rc, not 143 (SIGTERM)"
  elif ! grep -q "every fault undone, every run stopped" "$output"; then
    fail "no word of the undo"
  elif [[ -n "$(leftover_namespaces "$TMP/sigterm")" ]]; then
    fail "namespaces left: $(leftover_namespaces "$TMP/sigterm")"
  elif pgrep -f "output_dir=$TMP/sigterm/" >/dev/null; then
    fail "processes of the run left: $(pgrep -af "output_dir=$TMP/sigterm/")"
  else
    ok
  fi
fi

finish_cases
