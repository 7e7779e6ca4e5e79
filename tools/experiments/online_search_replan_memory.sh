#!/bin/bash
# The server memory and the switch transient of the online search's re-plans, on VGG-19:
#   tools/experiments/online_search_replan_memory.sh BINARIES_DIR OUTPUT_DIR   (absolute paths)
# BINARIES_DIR holds launch_cluster, p3_server and p3_worker (e.g. copies of bazel-bin's);
# run as root (emulated links). VGG-19, 2 workers + 2 servers, 5 Gbit/s, 24 iterations from
# slice_params 160000 with scheduling.online_search forced on (4 re-plans). Prints the peak
# resident memory of the larger server (polled every 0.5 s) and the search's line;
# OUTPUT_DIR/results/worker_0.json has every timed iteration and param_l2.
# docs/simulator.md, "Online search and re-plan"; docs/results/online_search/replan_memory.csv.
set -u
B=${1:?usage: online_search_replan_memory.sh BINARIES_DIR OUTPUT_DIR}
O=${2:?usage: online_search_replan_memory.sh BINARIES_DIR OUTPUT_DIR}
rm -rf "$O" "$O.peak"
echo 0 >"$O.peak"
( peak=0; while true; do r=$(ps -o rss= -C p3_server | sort -n | tail -1); [ -n "$r" ] && [ "$r" -gt "$peak" ] && peak=$r && echo $peak > "$O.peak"; sleep 0.5; done ) &
P=$!
cd "$(dirname "$0")/../.." && "$B/launch_cluster" --config=configs/bench/vgg19.textproto \
  --server_binary="$B/p3_server" --worker_binary="$B/p3_worker" \
  --set=output_dir="$O" --set=training.iterations=24 --set=training.warmup_iterations=2 --set=network.bandwidth_gbps=5 \
  --set=scheduling.slice_params=160000 --set=scheduling.online_search=true --set=cluster.workers=2 --set=cluster.servers=2 > "$O.log" 2>&1
rc=$?
kill $P
echo "peak server RSS KiB: $(cat "$O.peak")"; grep "online search" "$O.log"
exit $rc
