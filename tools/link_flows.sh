#!/bin/bash
# Goodput of one emulated link with the cluster's traffic pattern, against one flow.
# Builds 2 machines as tools/launcher/netem.cc does (a namespace each, veth to a bridge,
# tbf at the rate on both ends, 128 KiB bucket, 20 ms queue bound), then runs iperf3
# (receiver's Gbit/s) for: one flow one way; one flow each way at once; two flows each
# way at once (a colocated worker + server pair sends two, as in the benchmark).
#
#   sudo bash tools/link_flows.sh [RATE_GBPS=1] [SECONDS=4] [REPS=3]
#
# Root (namespaces, tc). Uses the names lf-* and the subnet 10.78.0.0/24; removes them
# at exit.
set -euo pipefail
RATE=${1:-1}; T=${2:-4}; REPS=${3:-3}
BITS=$(/usr/bin/python3 -c "print(int(float('$RATE') * 1e9))")
BR=lf-br
cleanup() { for n in lf-m0 lf-m1 $BR; do ip netns del $n 2>/dev/null || true; done; }
trap cleanup EXIT
cleanup
ip netns add $BR
ip -n $BR link add br0 type bridge
ip -n $BR link set br0 up
for i in 0 1; do
  ns=lf-m$i
  ip netns add $ns
  ip -n $ns link set lo up
  ip link add eth0 netns $ns type veth peer name m$i netns $BR
  ip -n $ns addr add 10.78.0.$((i + 1))/24 dev eth0
  ip -n $ns link set eth0 up
  ip -n $BR link set m$i master br0
  ip -n $BR link set m$i up
  tc -n $ns qdisc add dev eth0 root tbf rate "${BITS}bit" burst 131072 latency 20ms
  tc -n $BR qdisc add dev m$i root tbf rate "${BITS}bit" burst 131072 latency 20ms
done
JSON=$(mktemp)
run() {  # label, extra iperf3 client flags
  ip netns exec lf-m1 iperf3 -s -1 -B 10.78.0.2 -p 5301 >/dev/null 2>&1 &
  sleep 0.5
  ip netns exec lf-m0 iperf3 -c 10.78.0.2 -p 5301 -t "$T" -J "${@:2}" >"$JSON"
  wait
  /usr/bin/python3 - "$JSON" "$1" "$rep" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))["end"]
fwd = e["sum_received"]["bits_per_second"] / 1e9
rev = e.get("sum_received_bidir_reverse", {}).get("bits_per_second", 0) / 1e9
print(f"| {sys.argv[3]} | {sys.argv[2]} | {fwd:.3f} | " + (f"{rev:.3f} |" if rev else "– |"))
PY
}
echo "| rep | flows | machine 0 -> 1 (Gbit/s) | machine 1 -> 0 (Gbit/s) |"
echo "|---:|---|---:|---:|"
for rep in $(seq 1 "$REPS"); do
  run "one, one way"
  run "one each way" --bidir
  run "two each way" --bidir -P 2
done
rm -f "$JSON"
