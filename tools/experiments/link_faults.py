#!/usr/bin/python3
"""Link-fault trials (docs/results/reliability/link_faults.md): faults on one emulated link.

Each trial runs launch_cluster on an emulated network (network.bandwidth_gbps > 0,
placement "separate": workers on machines 0..W-1, servers on W..W+S-1, so a machine's link
is one process's link) with a small real cluster (small_cnn on synthetic data, as
kill_trials.py), and when worker 0's log shows a random iteration it puts a fault on the
link of one random worker or server (docs/network.md names the pieces: the machine's
namespace p3-<launcher pid>-m<i> with eth0, its bridge-side veth m<i> in p3-<pid>-br):

  loss_1, loss_5  nftables `meta random` drop rules in the machine's namespace, both
                  directions on eth0, for --loss_s seconds (the table is then deleted)
  outage          the bridge-side veth down for --outage_s seconds (5), then up
  brownout        the link's tbf rate, both directions, cut to --brownout_rate_bits
                  (1 Mbit/s) for --brownout_s seconds (10), then restored as netem.h built it
  partition       the bridge-side veth down for --partition_s seconds (30), longer than the
                  run's peer timeout (--partition_peer_timeout_s): the run must end with an
                  error within that bound, not hang; once the partition is over the tool
                  starts the run again from the servers' newest common checkpoint
                  (checkpoint.every), and that run must end bit-identical

A short fault must be survived: param_l2 (and every worker's) bit-identical to an
undisturbed run of the same config. Trials interleave (trial t of every fault, then
t + 1). Every injection is undone whatever happens: after
its duration, when the run ends first, on an error, on ctrl-C or SIGTERM (the undo
commands of every live injection are kept in one list, run in reverse). An undo whose
namespace is gone already (the launcher removed its network) has nothing left to undo.

Needs root, `nft` (Debian's nftables; tools/install_deps.sh) and a built tree:

  /usr/bin/python3 tools/experiments/link_faults.py --trials 10 --partition_trials 3 \
      --csv docs/results/reliability/link_faults_2026-12-05.csv

Prints a table per fault; exits 1 if any trial failed its expectation.
"""

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import csv_io, runs  # noqa: E402
import link_probe  # noqa: E402

SHORT_FAULTS = ["loss_1", "loss_5", "outage", "brownout"]
FAULTS = SHORT_FAULTS + ["partition"]
# The nftables table that holds a loss fault's rules; one per machine namespace, deleted
# as a whole to undo the fault.
NFT_TABLE = "p3_link_fault"
FIELDS = ["fault", "target", "trial", "injected_at_iteration", "survived", "identical",
          "param_l2", "reference", "wall_s", "extra_wall_s", "fault_s", "error_after_s",
          "names_target", "stall_names_target", "resumed_at", "dropped", "seen", "error"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--launcher", default="bazel-bin/tools/launch_cluster")
    p.add_argument("--server_binary", default="bazel-bin/server/p3_server")
    p.add_argument("--worker_binary", default="bazel-bin/worker/p3_worker")
    p.add_argument("--faults", default=",".join(SHORT_FAULTS),
                   help=f"comma-separated, of {','.join(FAULTS)}")
    p.add_argument("--trials", type=int, default=10, help="trials per short fault")
    p.add_argument("--partition_trials", type=int, default=0,
                   help="partition trials (each takes > --partition_s); adds 'partition'")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--iterations", type=int, default=60)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--servers", type=int, default=2)
    p.add_argument("--mode", default="p3")
    p.add_argument("--batch_size", type=int, default=16)
    p.add_argument("--bandwidth_gbps", type=float, default=1.0)
    p.add_argument("--peer_timeout_s", type=float, default=20,
                   help="the short faults' runs: above the longest fault (and a TCP "
                        "retransmission's back-off after it)")
    p.add_argument("--loss_s", type=float, default=5)
    p.add_argument("--outage_s", type=float, default=5)
    p.add_argument("--brownout_s", type=float, default=10)
    p.add_argument("--brownout_rate_bits", type=int, default=1_000_000)
    p.add_argument("--partition_s", type=float, default=30)
    p.add_argument("--partition_peer_timeout_s", type=float, default=5)
    p.add_argument("--checkpoint_every", type=int, default=5,
                   help="the partition runs' checkpoint interval")
    p.add_argument("--run_timeout_s", type=float, default=240,
                   help="a run still going this long after its start is a hang: killed, "
                        "reported")
    p.add_argument("--csv", default="", help="write the trials here")
    p.add_argument("--out", default="", help="run folders here (default: a temporary one)")
    p.add_argument("--probe", action="store_true",
                   help="sample ss/ip/tc/bridge of every namespace every 0.5 s from the fault "
                        "to the run's end into <out>/<trial>.probe.log (link_probe.py)")
    args = p.parse_args(argv)
    args.fault_list = [f for f in args.faults.split(",") if f]
    for f in args.fault_list:
        if f not in FAULTS:
            p.error(f"--faults: unknown fault {f!r} (allowed: {', '.join(FAULTS)})")
    if args.partition_trials > 0 and "partition" not in args.fault_list:
        args.fault_list.append("partition")
    return args


# ---- The pure part: configs, names and commands (tests/tools/experiments/link_faults_test.py).

def config_text(mode, iterations, workers, servers, bandwidth_gbps, peer_timeout_s,
                batch_size=16, checkpoint_dir="", checkpoint_every=0):
    """kill_trials.py's small cluster on an emulated network, one process per machine."""
    checkpoint = (f'checkpoint {{ dir: "{checkpoint_dir}" every: {checkpoint_every} }}\n'
                  if checkpoint_dir else "")
    return checkpoint + f"""name: "link_fault_trial"
mode: "{mode}"
cluster {{ workers: {workers} servers: {servers} peer_timeout_s: {peer_timeout_s:g} stall_report_s: 2 }}
model {{ name: "small_cnn" }}
data {{ dataset: "synthetic" synthetic_size: 2048 }}
training {{ batch_size: {batch_size} iterations: {iterations} log_every: 1 evaluate: false threads: 1 warmup_iterations: 2 }}
scheduling {{ slice_params: 5000 }}
network {{ bandwidth_gbps: {bandwidth_gbps:g} placement: "separate" machines: {workers + servers} }}
output {{ save_model: false }}
"""


def machine_of(target, workers):
    """The machine of "worker r" (r) or "server i" (workers + i) under placement separate."""
    role, index = target.split()
    return int(index) if role == "worker" else workers + int(index)


def link_of(launcher_pid, machine):
    """The names netem.h gives machine `machine`'s link in launcher `launcher_pid`'s run."""
    run_id = f"p3-{launcher_pid}"
    return {"ns": f"{run_id}-m{machine}", "bridge_ns": f"{run_id}-br", "port": f"m{machine}",
            "dev": "eth0"}


def tbf_burst_bytes(rate_bits):
    """netem.h's default bucket (EffectiveBurstBytes): max(128 KiB, 1 ms at the rate)."""
    return max(131072, int(rate_bits / 8 / 1000))


def tbf_args(rate_bits, burst_bytes, latency_ms=20):
    """The tbf part of netem.h's qdisc commands."""
    return ["root", "tbf", "rate", f"{rate_bits:.0f}bit", "burst", str(burst_bytes),
            "latency", f"{latency_ms}ms"]


def random_threshold(probability):
    """nft's `meta random` is a uniform 32-bit number: below this, with `probability`."""
    return int(round(probability * 2 ** 32))


def loss_commands(link, probability):
    """(inject, undo): nft rules in the machine's namespace dropping `probability` of the
    packets eth0 receives and sends; each direction also counts what it sees, so the drop
    ratio can be checked (nft_counters)."""
    nft = ["ip", "netns", "exec", link["ns"], "nft"]
    threshold = str(random_threshold(probability))
    inject = [nft + ["add", "table", "inet", NFT_TABLE]]
    for chain, hook, match in [("input", "input", "iifname"), ("output", "output", "oifname")]:
        inject.append(nft + ["add", "chain", "inet", NFT_TABLE, chain,
                             f"{{ type filter hook {hook} priority -10 ; }}"])
        inject.append(nft + ["add", "rule", "inet", NFT_TABLE, chain, match, link["dev"],
                             "counter", "comment", '"seen"'])
        inject.append(nft + ["add", "rule", "inet", NFT_TABLE, chain, match, link["dev"],
                             "meta", "random", "<", threshold, "counter", "drop"])
    return inject, [nft + ["delete", "table", "inet", NFT_TABLE]]


def link_down_commands(link):
    """(inject, undo): the machine's bridge-side veth down, then up (an outage, a partition)."""
    ip = ["ip", "-n", link["bridge_ns"], "link", "set", link["port"]]
    return [ip + ["down"]], [ip + ["up"]]


def brownout_commands(link, rate_bits, brownout_rate_bits, burst_bytes, latency_ms=20):
    """(inject, undo): both tbf qdiscs of the link (upload on eth0 in the machine, download
    on the bridge-side port) changed to `brownout_rate_bits`, then back to `rate_bits`,
    the same bucket and queue bound as netem.h builds them."""
    up = ["tc", "-n", link["ns"], "qdisc", "change", "dev", link["dev"]]
    down = ["tc", "-n", link["bridge_ns"], "qdisc", "change", "dev", link["port"]]
    slow = tbf_args(brownout_rate_bits, burst_bytes, latency_ms)
    normal = tbf_args(rate_bits, burst_bytes, latency_ms)
    return [up + slow, down + slow], [up + normal, down + normal]


def fault_commands(fault, link, args):
    """(inject, undo, seconds) of `fault` on `link` with the durations and rates of `args`."""
    rate = args.bandwidth_gbps * 1e9
    if fault in ("loss_1", "loss_5"):
        inject, undo = loss_commands(link, int(fault.split("_")[1]) / 100)
        return inject, undo, args.loss_s
    if fault == "outage":
        return (*link_down_commands(link), args.outage_s)
    if fault == "partition":
        return (*link_down_commands(link), args.partition_s)
    if fault == "brownout":
        return (*brownout_commands(link, rate, args.brownout_rate_bits, tbf_burst_bytes(rate)),
                args.brownout_s)
    raise ValueError(f"unknown fault {fault!r}")


def namespace_of(argv):
    """The namespace a command acts in (`ip netns exec NS`, `ip -n NS`, `tc -n NS`)."""
    if argv[:3] == ["ip", "netns", "exec"]:
        return argv[3]
    if len(argv) > 2 and argv[1] == "-n":
        return argv[2]
    return None


def nft_counters(listing):
    """(seen, dropped) packets from `nft list table` output of loss_commands' rules."""
    seen = dropped = 0
    for line in listing.splitlines():
        if "counter packets" not in line:
            continue
        packets = int(line.split("counter packets")[1].split()[0])
        if " drop" in line:
            dropped += packets
        else:
            seen += packets
    return seen, dropped


def names_target(text, target, address):
    """Whether a report names the faulty machine: its role and index ("worker 1"), or its
    address."""
    return target in text or address in text


# ---- Running commands, and undoing every injection whatever happens.

def stop_processes(procs, grace_s):
    """SIGTERM to each of `procs` still running (a launcher stops its processes and removes
    its network), then SIGKILL to any not ended within `grace_s` seconds."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()


class Injections:
    """The undo commands of every injection in place, run in reverse by undo_all() (after
    the fault's time, on error, at exit, on SIGINT/SIGTERM). Thread-safe."""

    def __init__(self, run=None):
        self._run = run or run_command
        # Re-entrant: a signal handler may undo while the main thread is inside inject().
        self._mu = threading.RLock()
        self._pending = []  # (key, [argv, ...])

    def inject(self, key, inject, undo):
        """Registers `undo` first, then runs `inject`: a half-done injection is undone too."""
        with self._mu:
            self._pending.append((key, undo))
        for argv in inject:
            self._run(argv, check=True)

    def undo(self, key):
        """Runs the undo commands of `key`; returns the errors (a gone namespace is none)."""
        with self._mu:
            found = [u for k, u in self._pending if k == key]
            self._pending = [(k, u) for k, u in self._pending if k != key]
        errors = []
        for undo in found:
            for argv in undo:
                ns = namespace_of(argv)
                if ns and not namespace_exists(ns):
                    continue
                p = self._run(argv, check=False)
                if p.returncode != 0 and not (ns and not namespace_exists(ns)):
                    errors.append(f"{' '.join(argv)}: {p.stderr.strip()}")
        return errors

    def pending(self):
        with self._mu:
            return [k for k, _ in self._pending]

    def undo_all(self):
        errors = []
        for key in reversed(self.pending()):
            errors += self.undo(key)
        return errors


def run_command(argv, check=True):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=30)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed (exit {p.returncode}): {p.stderr.strip()}")
    return p


def namespace_exists(name):
    return os.path.exists(f"/var/run/netns/{name}")


# ---- The trials.

log_has = runs.log_has


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def wait_for(predicate, proc, timeout_s):
    return runs.wait_for(predicate, proc, timeout_s, poll_s=0.005)


def launch(args, out_dir, config_path, extra=()):
    cmd = [args.launcher, f"--config={config_path}", f"--server_binary={args.server_binary}",
           f"--worker_binary={args.worker_binary}", f"--set=output_dir={out_dir}",
           "--plot=false", "--kill_grace_s=2", *extra]
    log = open(out_dir + ".launcher.log", "w")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), log


def finish(proc, log, start, timeout_s):
    """Waits for the launcher; a run past `timeout_s` since `start` is killed as a hang.
    Returns (exit code or None for a hang, wall seconds)."""
    try:
        rc = proc.wait(timeout=max(1.0, start + timeout_s - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        rc = None
    log.close()
    return rc, time.monotonic() - start


def failure_text(launcher_log):
    """The launcher's report of the first failure and what followed (docs/reliability.md)."""
    lines = [l for l in read(launcher_log).splitlines()
             if "first failure" in l or "follow-on" in l or "FAILED" in l]
    return " | ".join(lines)[:600]


def result_of(out_dir):
    s = runs.summary(out_dir)
    return s["param_l2"], [w["param_l2"] for w in s["workers_results"]]


class Trials:
    def __init__(self, args, root, injections):
        self.args = args
        self.root = root
        self.injections = injections
        self.references = {}
        self.live = []  # launchers started; stop_launchers() ends those still running

    def stop_launchers(self):
        """SIGTERM to every launcher still running (it stops its processes and removes its
        network), SIGKILL after 15 s."""
        stop_processes(self.live, 15)

    def config(self, tag, peer_timeout_s, checkpoint_dir=""):
        a = self.args
        path = os.path.join(self.root, tag + ".textproto")
        with open(path, "w") as f:
            f.write(config_text(a.mode, a.iterations, a.workers, a.servers, a.bandwidth_gbps,
                                peer_timeout_s, a.batch_size, checkpoint_dir,
                                a.checkpoint_every if checkpoint_dir else 0))
        return path

    def reference(self, partition):
        """The undisturbed run of the short faults' config, or of the partition's."""
        if partition not in self.references:
            tag = "ref_partition" if partition else "ref"
            ckpt = os.path.join(self.root, tag + "_ckpt") if partition else ""
            timeout = self.args.partition_peer_timeout_s if partition else self.args.peer_timeout_s
            out_dir = os.path.join(self.root, tag)
            start = time.monotonic()
            proc, log = launch(self.args, out_dir, self.config(tag, timeout, ckpt))
            self.live.append(proc)
            rc, wall = finish(proc, log, start, self.args.run_timeout_s)
            if rc != 0:
                sys.exit(f"link_faults: the undisturbed run failed (exit {rc}); see {log.name}")
            l2, all_l2 = result_of(out_dir)
            self.references[partition] = {"param_l2": l2, "all_l2": all_l2, "wall_s": wall}
        return self.references[partition]

    def run(self, fault, trial, rng):
        a = self.args
        partition = fault == "partition"
        ref = self.reference(partition)
        target = rng.choice([f"worker {r}" for r in range(a.workers)] +
                            [f"server {i}" for i in range(a.servers)])
        at = rng.randrange(3, max(4, a.iterations // 2))
        tag = f"{fault}_{trial:02d}"
        ckpt = os.path.join(self.root, tag + "_ckpt") if partition else ""
        config = self.config(tag, a.partition_peer_timeout_s if partition else a.peer_timeout_s,
                             ckpt)
        out_dir = os.path.join(self.root, tag)
        row = {k: "" for k in FIELDS}
        row.update(fault=fault, target=target, trial=trial, injected_at_iteration=at,
                   survived=0, identical=0, reference=repr(ref["param_l2"]))
        start = time.monotonic()
        proc, log = launch(a, out_dir, config)
        self.live.append(proc)
        worker_log = os.path.join(out_dir, "logs", "worker_0.log")
        machine = machine_of(target, a.workers)
        link = link_of(proc.pid, machine)
        address = f"10.77.0.{machine + 1}"
        probe = (link_probe.Probe(proc.pid, a.workers + a.servers, out_dir + ".probe.log")
                 if a.probe else link_probe.NoProbe())
        errors = []
        injected = ended = None
        try:
            # PROGRESS counts from 1: "iteration=k" is printed after iteration k-1.
            if wait_for(lambda: log_has(worker_log, f"PROGRESS iteration={at + 1} "), proc,
                        a.run_timeout_s):
                inject, undo, seconds = fault_commands(fault, link, a)
                probe.start()
                self.injections.inject(tag, inject, undo)
                injected = time.monotonic()
                print(f"  {tag}: {fault} on {target}'s link ({link['ns']}, "
                      f"{link['bridge_ns']}/{link['port']}) for {seconds:g} s", flush=True)
                # Held for its time, or until the run ends (its network goes with it).
                # The counters are read as it goes: the run may end, and take them along.
                next_count = injected
                while time.monotonic() < injected + seconds:
                    if ended is None and proc.poll() is not None:
                        ended = time.monotonic()
                        if not partition:
                            break
                    if fault.startswith("loss") and time.monotonic() >= next_count:
                        next_count += 0.25
                        p = run_command(["ip", "netns", "exec", link["ns"], "nft", "list",
                                         "table", "inet", NFT_TABLE], check=False)
                        if p.returncode == 0:
                            row["seen"], row["dropped"] = nft_counters(p.stdout)
                    time.sleep(0.02)
                row["fault_s"] = f"{time.monotonic() - injected:.2f}"
                probe.mark(f"injected at +0, undo starts ({fault} on {target})")
                errors += self.injections.undo(tag)
                probe.mark(f"undo done: {'; '.join(errors) or 'ok'}")
            else:
                errors.append(f"worker 0 never logged iteration {at + 1}: no fault injected")
        except Exception as e:  # noqa: BLE001 — reported in the row, the undo still runs
            errors.append(f"{type(e).__name__}: {e}")
            errors += self.injections.undo(tag)
        rc, wall = finish(proc, log, start, a.run_timeout_s)
        probe.mark(f"run ended, exit {rc}")
        probe.stop()
        ended = ended or time.monotonic()
        row["wall_s"] = f"{wall:.3f}"
        if rc is None:
            errors.append(f"hang: the run was still going after {a.run_timeout_s:g} s; killed")
        if partition and injected is not None:
            row["error_after_s"] = f"{ended - injected:.2f}"
            self.after_partition(row, rc, log.name, config, out_dir, ref, target, address, errors)
        elif rc == 0 and injected is not None:
            l2, all_l2 = result_of(out_dir)
            row.update(survived=1, param_l2=repr(l2), extra_wall_s=f"{wall - ref['wall_s']:.3f}",
                       identical=int(l2 == ref["param_l2"] and all_l2 == ref["all_l2"]))
        elif rc is not None and rc != 0:
            errors.append(f"run failed (exit {rc}): {failure_text(log.name)}")
        row["error"] = "; ".join(errors)
        return row

    def after_partition(self, row, rc, launcher_log, config, out_dir, ref, target, address,
                        errors):
        """The partitioned run must have failed within the bound, naming the link; then it is
        started again from the newest common checkpoint and must end bit-identical."""
        a = self.args
        text = failure_text(launcher_log)
        # The first failure only: the follow-on ones name every process anyway.
        first = next((l for l in text.split(" | ") if "first failure" in l), "")
        row["names_target"] = int(names_target(first, target, address))
        # The [stall] lines the launcher shows from the processes' logs, before the error.
        stalls = [l for l in read(launcher_log).splitlines() if l.startswith("[stall]")]
        row["stall_names_target"] = int(any(names_target(l, target, address) for l in stalls))
        if rc == 0:
            errors.append("the run completed through the partition")
        elif rc is not None:
            errors.append(f"partitioned run: exit {rc}: {text}")
        resume_dir = out_dir + "_resumed"
        start = time.monotonic()
        proc, log = launch(a, resume_dir, config, ["--set=checkpoint.resume=true",
                                                   "--set=checkpoint.resume_iteration=-1"])
        self.live.append(proc)
        rc2, wall = finish(proc, log, start, a.run_timeout_s)
        w = read(os.path.join(resume_dir, "logs", "worker_0.log"))
        row["resumed_at"] = (w.split("RESUMED iteration=")[1].split()[0]
                             if "RESUMED iteration=" in w else "0")
        if rc2 == 0:
            l2, all_l2 = result_of(resume_dir)
            row.update(survived=1, param_l2=repr(l2),
                       identical=int(l2 == ref["param_l2"] and all_l2 == ref["all_l2"]))
            row["extra_wall_s"] = f"{float(row['wall_s']) + wall - ref['wall_s']:.3f}"
        else:
            errors.append(f"the restart from the checkpoint failed (exit {rc2}): "
                          f"{failure_text(log.name)}")
        row["wall_s"] = f"{float(row['wall_s']) + wall:.3f}"


def passed(row, error_bound_s):
    """A short fault: survived and identical. A partition: failed within the bound (naming
    the faulty link), then resumed bit-identical."""
    if row["fault"] != "partition":
        return bool(row["survived"] and row["identical"])
    return bool(row["identical"] and row["error_after_s"] != "" and
                float(row["error_after_s"]) <= error_bound_s and row["names_target"] == 1)


def summary_table(rows, error_bound_s):
    lines = ["| fault | trials | survived | identical | passed | median extra wall s | note |",
             "|---|---|---|---|---|---|---|"]
    for fault in dict.fromkeys(r["fault"] for r in rows):
        rs = [r for r in rows if r["fault"] == fault]
        extra = sorted(float(r["extra_wall_s"]) for r in rs if r["extra_wall_s"] != "")
        median = f"{extra[len(extra) // 2]:.2f}" if extra else "-"
        note = ""
        if fault.startswith("loss"):
            seen = sum(int(r["seen"] or 0) for r in rs)
            dropped = sum(int(r["dropped"] or 0) for r in rs)
            note = f"{dropped} of {seen} packets dropped" if seen else ""
        if fault == "partition":
            after = [r["error_after_s"] for r in rs if r["error_after_s"] != ""]
            note = (f"failed {', '.join(after)} s after the cut; names the link "
                    f"{sum(int(r['names_target'] or 0) for r in rs)}/{len(rs)}")
        lines.append(f"| {fault} | {len(rs)} | {sum(int(r['survived']) for r in rs)} | "
                     f"{sum(int(r['identical']) for r in rs)} | "
                     f"{sum(passed(r, error_bound_s) for r in rs)} | {median} | {note} |")
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    if os.geteuid() != 0:
        sys.exit("link_faults: needs root (network namespaces, nft, tc)")
    root = args.out or tempfile.mkdtemp(prefix="link_faults_")
    os.makedirs(root, exist_ok=True)
    root = os.path.abspath(root)
    injections = Injections()
    trials = Trials(args, root, injections)

    def on_signal(signum, _frame):
        # Faults first (their namespaces are still there), then the runs.
        errors = injections.undo_all()
        trials.stop_launchers()
        print(f"link_faults: signal {signum}: every fault undone, every run stopped"
              + (f" (errors: {errors})" if errors else ""), file=sys.stderr, flush=True)
        sys.exit(128 + signum)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    rng = random.Random(args.seed)
    # Bound for a partition's error: the peer timeout, plus the launcher's wait for the
    # other processes to stop (--kill_grace_s=2) and a second of slack.
    bound = args.partition_peer_timeout_s + 3
    rows = []
    try:
        count = max(args.trials, args.partition_trials)
        for t in range(count):
            for fault in args.fault_list:
                n = args.partition_trials if fault == "partition" else args.trials
                if t >= n:
                    continue
                row = trials.run(fault, t, rng)
                rows.append(row)
                print(f"{fault:<9} trial {t:2d}  {row['target']:<8} at iteration "
                      f"{row['injected_at_iteration']:>2}  survived={row['survived']} "
                      f"identical={row['identical']}  param_l2={row['param_l2'] or '-'}  "
                      f"wall {row['wall_s']} s (+{row['extra_wall_s'] or '-'})"
                      + (f"  error after {row['error_after_s']} s" if row["error_after_s"] else "")
                      + (f"  dropped {row['dropped']}/{row['seen']}" if row["seen"] else "")
                      + (f"\n    {row['error']}" if row["error"] else ""), flush=True)
    finally:
        leftover = injections.undo_all()
        trials.stop_launchers()
        if leftover:
            print(f"link_faults: undo errors: {leftover}", file=sys.stderr)
        if args.csv and rows:
            csv_io.write_rows(args.csv, rows, FIELDS)
    print(summary_table(rows, bound))
    good = sum(passed(r, bound) for r in rows)
    print(f"{good} of {len(rows)} trials as expected (seed {args.seed}; runs in {root})")
    sys.exit(0 if good == len(rows) else 1)


if __name__ == "__main__":
    main()
