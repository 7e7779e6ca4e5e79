# A private two-node Slurm cluster on this machine, for tests: its own munged (own key and
# socket), a slurmctld and two slurmd processes (`slurmd -N n1`, `slurmd -N n2`), all with
# one config, state and logs in a folder of the caller's, on free loopback ports. The
# system's own munge and Slurm services (if any) are neither used nor disturbed. Needs
# root (slurmd starts job steps as the job's user) and Debian's munge, slurmctld, slurmd
# and slurm-client (tools/install_deps.sh).
#
# Usage, from a test (bash):
#   source tests/tools/slurm_cluster.sh
#   if reason=$(slurm_cluster_missing); then p3_skip "Slurm cases" "$reason"; ...; fi
#   trap slurm_cluster_stop EXIT            # stops every daemon it started, on every path
#   trap 'exit 143' TERM INT HUP            # (so that a signal runs the EXIT trap too)
#   slurm_cluster_start "$TMP/slurm" || fail "..."   # exports SLURM_CONF
#   sbatch --wait ...
#
# Every wait is bounded (slurm_cluster_start: at most SLURM_CLUSTER_START_S seconds, 60
# by default) and polls for readiness instead of sleeping a fixed time. The daemons run in
# the foreground (-F / -D) as this shell's children, so their PIDs are known and
# slurm_cluster_stop ends exactly them (SIGTERM, then SIGKILL after 10 s); should the
# shell itself be killed, they get SIGKILL (PR_SET_PDEATHSIG).

SLURM_CLUSTER_DIR=""
SLURM_CLUSTER_PIDS=()
# munged's socket and key and the slurmd spool folders (which hold the job steps'
# sockets): a short folder of its own under /tmp, because a socket path is at most 107
# bytes (a test's temp folder is longer) and munged wants every folder above its socket
# searchable by all (one under /root is not). Removed by slurm_cluster_stop.
SLURM_SOCKET_DIR=""

# slurm_cluster_missing: prints why a cluster cannot be started here and returns 0, or
# returns 1 when it can.
slurm_cluster_missing() {
  if [[ -n "${P3_TEST_SIMULATE_NOT_ROOT:-}" || $(id -u) -ne 0 ]]; then
    echo "need root to start slurmd (running as $(id -un))"
    return 0
  fi
  local tool
  for tool in /usr/bin/setpriv /usr/sbin/munged /usr/bin/munge /usr/sbin/slurmctld /usr/sbin/slurmd \
    /usr/bin/sbatch /usr/bin/scontrol /usr/bin/sinfo /usr/bin/srun; do
    if [[ ! -x "$tool" ]]; then
      echo "$tool is missing (apt-get install munge slurmctld slurmd slurm-client, or tools/install_deps.sh)"
      return 0
    fi
  done
  return 1
}

# _slurm_free_ports N: N distinct TCP ports free on loopback now, one per line.
_slurm_free_ports() {
  /usr/bin/python3 - "$1" <<'EOF'
import socket, sys
held = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    held.append(s)
for s in held:
    print(s.getsockname()[1])
EOF
}

# _slurm_wait SECONDS DESCRIPTION COMMAND...: polls COMMAND every 0.2 s until it succeeds
# or SECONDS pass (then prints what was awaited and returns 1). Also fails at once when a
# daemon started here has died.
_slurm_wait() {
  local seconds="$1" what="$2"
  shift 2
  local deadline=$((SECONDS + seconds)) pid
  until "$@" >/dev/null 2>&1; do
    for pid in "${SLURM_CLUSTER_PIDS[@]}"; do
      if ! kill -0 "$pid" 2>/dev/null; then
        echo "slurm_cluster: a daemon (pid $pid) exited while waiting for $what" >&2
        return 1
      fi
    done
    if ((SECONDS >= deadline)); then
      echo "slurm_cluster: no $what within ${seconds}s" >&2
      return 1
    fi
    sleep 0.2
  done
}

# _slurm_spawn LOG COMMAND...: starts a daemon in the foreground mode as this shell's
# child, output to LOG, and remembers its PID. setpriv --pdeathsig: it gets SIGKILL if
# this shell dies, even by SIGKILL (a test killed at its timeout leaves no daemon).
_slurm_spawn() {
  local log="$1"
  shift
  /usr/bin/setpriv --pdeathsig KILL "$@" >>"$log" 2>&1 &
  SLURM_CLUSTER_PIDS+=($!)
}

_slurm_munge_ok() {
  /usr/bin/munge -S "$SLURM_SOCKET_DIR/munge.socket" -n |
    /usr/bin/unmunge -S "$SLURM_SOCKET_DIR/munge.socket"
}

_slurm_controller_up() { /usr/bin/scontrol ping | grep -q 'is UP'; }

# Both nodes registered and idle.
_slurm_nodes_idle() {
  [[ "$(/usr/bin/sinfo -h -N -o '%N %t' | sort | tr '\n' ' ')" == "n1 idle n2 idle " ]]
}

_slurm_no_jobs() { [[ -z "$(/usr/bin/squeue -h -o %i 2>/dev/null)" ]]; }

# slurm_cluster_start DIR: starts munged, slurmctld and slurmd n1 and n2 with everything
# under DIR (created); returns when both nodes are idle. Exports SLURM_CONF (the client
# commands and jobs find the cluster through it). On failure prints the daemons' logs'
# last lines and returns 1 (call slurm_cluster_stop all the same).
slurm_cluster_start() {
  local dir="$1" limit="${SLURM_CLUSTER_START_S:-60}"
  SLURM_CLUSTER_DIR="$dir"
  mkdir -p "$dir/state" "$dir/log"
  SLURM_SOCKET_DIR=$(mktemp -d /tmp/p3_slurm.XXXXXX) || return 1
  local munge="$SLURM_SOCKET_DIR"
  # Searchable by everyone, writable only by its owner; a key only its owner reads.
  chmod 755 "$munge"
  head -c 1024 /dev/urandom >"$munge/munge.key"
  chmod 400 "$munge/munge.key"
  _slurm_spawn "$dir/log/munged.out" /usr/sbin/munged -F --socket="$munge/munge.socket" \
    --key-file="$munge/munge.key" --pid-file="$munge/munged.pid" \
    --log-file="$dir/log/munged.log" --seed-file="$munge/munged.seed" --num-threads=2
  _slurm_wait "$limit" "munge credential" _slurm_munge_ok || { _slurm_cluster_logs; return 1; }

  local ports host
  mapfile -t ports < <(_slurm_free_ports 3)
  host=$(hostname -s)
  cat >"$dir/slurm.conf" <<EOF
# A private two-node cluster for tests (tests/tools/slurm_cluster.sh).
ClusterName=p3test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=${ports[0]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$SLURM_SOCKET_DIR/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# The nodes share this machine's CPUs: take the CPU counts below as given.
SlurmdParameters=config_overrides
ReturnToService=2
MailProg=/bin/true
KillWait=5
InactiveLimit=0
MinJobAge=300
NodeName=n1 NodeHostname=$host NodeAddr=127.0.0.1 Port=${ports[1]} CPUs=2 State=UNKNOWN
NodeName=n2 NodeHostname=$host NodeAddr=127.0.0.1 Port=${ports[2]} CPUs=2 State=UNKNOWN
PartitionName=p3test Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF="$dir/slurm.conf"
  _slurm_spawn "$dir/log/slurmctld.out" /usr/sbin/slurmctld -D -i -f "$SLURM_CONF"
  _slurm_wait "$limit" "slurmctld answering" _slurm_controller_up || { _slurm_cluster_logs; return 1; }
  local node
  for node in n1 n2; do
    mkdir -p "$SLURM_SOCKET_DIR/spool/$node"
    _slurm_spawn "$dir/log/slurmd-$node.out" /usr/sbin/slurmd -D -N "$node" -f "$SLURM_CONF"
  done
  _slurm_wait "$limit" "idle nodes n1 and n2" _slurm_nodes_idle || { _slurm_cluster_logs; return 1; }
}

# The last lines of every daemon's log, for a failure message.
_slurm_cluster_logs() {
  local log
  for log in "$SLURM_CLUSTER_DIR"/log/*; do
    [[ -s "$log" ]] || continue
    echo "--- last lines of $log ---"
    tail -n 15 "$log"
  done >&2
  [[ -n "${SLURM_CONF:-}" ]] && /usr/bin/sinfo -N -l >&2 2>&1
  return 0
}

# slurm_cluster_stop: cancels every job (waiting at most 20 s for them to end), stops the
# daemons started by slurm_cluster_start (SIGTERM, SIGKILL after 10 s) and any job step
# of this cluster left behind. Safe to call twice or without a start.
slurm_cluster_stop() {
  if ((${#SLURM_CLUSTER_PIDS[@]} == 0)); then
    [[ -n "$SLURM_SOCKET_DIR" ]] && rm -rf "$SLURM_SOCKET_DIR"
    SLURM_SOCKET_DIR=""
    return 0
  fi
  local pid i
  if [[ -n "${SLURM_CONF:-}" ]]; then
    # Jobs first, while the daemons still run: their steps end cleanly.
    timeout 10 /usr/bin/scancel --full --user=root >/dev/null 2>&1
    _slurm_wait 20 "the jobs to end" _slurm_no_jobs 2>/dev/null
  fi
  # slurmd first, then slurmctld, then munged: reverse start order.
  for ((i = ${#SLURM_CLUSTER_PIDS[@]} - 1; i >= 0; i--)); do
    kill -TERM "${SLURM_CLUSTER_PIDS[$i]}" 2>/dev/null
  done
  for pid in "${SLURM_CLUSTER_PIDS[@]}"; do
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.2
    done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  SLURM_CLUSTER_PIDS=()
  # A job step that outlived its slurmd (slurmstepd is not our child: slurmd starts it
  # detached) is ours if it has our SLURM_CONF, which it inherits from slurmd.
  local steps=()
  for pid in $(pgrep -x slurmstepd); do
    if { tr '\0' '\n' <"/proc/$pid/environ"; } 2>/dev/null | grep -qxF "SLURM_CONF=$SLURM_CONF"; then
      steps+=("$pid")
    fi
  done
  if ((${#steps[@]} > 0)); then
    echo "slurm_cluster: stopping job steps left behind: ${steps[*]}" >&2
    kill -TERM "${steps[@]}" 2>/dev/null
    sleep 1
    kill -KILL "${steps[@]}" 2>/dev/null
  fi
  [[ -n "$SLURM_SOCKET_DIR" ]] && rm -rf "$SLURM_SOCKET_DIR"
  SLURM_SOCKET_DIR=""
  return 0
}
