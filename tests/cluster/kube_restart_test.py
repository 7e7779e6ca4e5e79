#!/usr/bin/python3
"""Servers restarted the way Kubernetes restarts them, over the real binaries.

There is no Kubernetes cluster here, so this test plays kubelet: it generates the
manifests with `launch_cluster --kubernetes --max_restarts`, takes the server
StatefulSet's and the worker Job's container commands out of p3.yaml, and runs every
"pod" as a local process with the manifest's own shell command (paths moved under a temp
folder, each server on its own loopback port instead of one port on its own pod IP). A
"container" that exits non-zero is started again with the identical command, as
restartPolicy Always (servers) and OnFailure (workers) do; a worker pod keeps its
/var/p3/state (the rejoin marker) across restarts of its container, like an emptyDir.
Nothing tells a process from which iteration to resume: the servers find the newest
checkpoint common to all of them (checkpoint.resume_iteration -1, written into the
ConfigMap's config by the generator) and the workers follow the servers.

Cases (2 servers, 2 workers, small_cnn on synthetic data, 40 iterations, checkpoints
every 5):
  uninterrupted   no kill: the reference param_l2.
  server_killed   server 1 SIGKILLed once worker 0 has done iteration 17: every process
                  ends up restarted from the newest checkpoint both servers have (15;
                  later when the test's kill came late, 10 when server 1's checkpoint
                  writer had not yet written 15 under load); server 0 is kept instead when
                  it is still at that version (the kill right after a checkpoint both
                  have), and the workers rejoin it there; param_l2 equal.
  corrupt_newest  as server_killed, and server 1's newest checkpoint (15, usually) is
                  corrupted before its container restarts: all servers resume from the
                  newest one before it that both have (10), never mixing iterations;
                  param_l2 equal.
The kill cannot be placed at an exact iteration from outside (under load the run goes on
for a few iterations before the test sees the progress line), so the expected iteration
is read from the checkpoint files once server 1 is dead; checkpoint.keep is 4 so that an
older common checkpoint is still there.
Prints "ok: ..." per check, "FAIL: ..." per failure; exit status 1 on any failure.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import yaml

ITERATIONS = 40
KILL_AT = 17
failures = 0


def fail(message):
    global failures
    failures += 1
    print("FAIL: " + message, flush=True)


def ok(message):
    print("ok: " + message, flush=True)


def free_ports(n):
    """n distinct free loopback ports: the sockets stay bound until all are picked. (One at
    a time, the kernel may hand out the same port twice. CI saw that once, when gRPC's
    SO_REUSEPORT still let both servers listen on it and workers were refused by the
    server they did not address; now the second server cannot start at all.)"""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


class Pod:
    """One pod: a shell command run again, unchanged, whenever it exits non-zero."""

    def __init__(self, name, script, env, log, max_restarts):
        self.name, self.script, self.env, self.log = name, script, env, log
        self.max_restarts = max_restarts
        self.restarts = 0
        self.proc = None
        self.exit_codes = []
        self.hold = False  # the test keeps it down for a moment (to corrupt a file)

    def start(self):
        with open(self.log, "a") as log:
            log.write("=== %s: container start %d\n" % (self.name, self.restarts))
            log.flush()
            self.proc = subprocess.Popen(["/bin/sh", "-c", self.script], env=self.env,
                                         stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    def poll(self):
        """kubelet's part: returns 'running', 'succeeded' or 'failed' (no restarts left)."""
        if self.proc is None:
            return "failed"
        code = self.proc.poll()
        if code is None:
            return "running"
        if code == 0:
            return "succeeded"
        if not self.exit_codes or self.exit_codes[-1][0] is not self.proc:
            self.exit_codes.append((self.proc, code))
        if self.hold:
            return "running"
        if self.restarts >= self.max_restarts:
            return "failed"
        self.restarts += 1
        time.sleep(0.2)  # kubelet's back-off, shortened
        self.start()
        return "running"

    def child_pid(self, binary):
        """The pid of `binary` started by the pod's shell."""
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid), "-f", binary],
                             capture_output=True, text=True).stdout.split()
        return int(out[0]) if out else None

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def manifests(tmp, name, bin_dir):
    """Generates p3.yaml and returns (config text, server script, worker script, job)."""
    out = os.path.join(tmp, name, "gen")
    cmd = ["tools/launch_cluster", "--config=configs/synthetic_smoke.textproto",
           "--kubernetes", "--max_restarts=2", "--kube_checkpoint_claim=p3-ckpt",
           "--kube_binary_dir=" + bin_dir, "--set=output_dir=" + out,
           "--set=name=kube_" + name,
           "--set=training.iterations=%d" % ITERATIONS, "--set=training.log_every=1",
           "--set=checkpoint.dir=ckpt", "--set=checkpoint.every=5", "--set=checkpoint.keep=4",
           "--set=cluster.peer_timeout_s=20", "--set=cluster.rejoin_timeout_s=30"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError("launch_cluster --kubernetes failed: " + run.stdout + run.stderr)
    docs = [d for d in yaml.safe_load_all(open(os.path.join(out, "kubernetes", "p3.yaml"))) if d]
    by_kind = {d["kind"]: d for d in docs}
    config = by_kind["ConfigMap"]["data"]["config.textproto"]
    server = by_kind["StatefulSet"]["spec"]["template"]["spec"]["containers"][0]["args"][0]
    worker = by_kind["Job"]["spec"]["template"]["spec"]["containers"][0]["args"][0]
    return config, server, worker, by_kind["Job"]["spec"]


def checkpoints(folder):
    """{iteration: file name} of the checkpoint files in one server's folder."""
    out = {}
    for f in os.listdir(folder) if os.path.isdir(folder) else []:
        m = re.fullmatch(r"ckpt_(\d+)\.bin", f)
        if m:
            out[int(m.group(1))] = f
    return out


def kept_at(server_log, restarts, at):
    """Server 0 was not restarted and both workers rejoined it at version `at` or later:
    when the kill comes right after a checkpoint both servers have, server 0 has nothing
    to go back to. It may have moved past it (version at + 1: it had every gradient of
    iteration `at` while server 1 had not yet written a newer checkpoint); the workers then
    resume at the oldest version, and param_l2 (checked first) shows the run unchanged."""
    if restarts.get("server_0", 0) != 0:
        return False
    for rank in (0, 1):
        m = re.search(r"worker %d rejoined; its slices here are at version (\d+) " % rank,
                      server_log)
        if not m or int(m.group(1)) < at:
            return False
    return True


def run_cluster(tmp, name, kill=False, corrupt_newest=False):
    """Runs one experiment under the fake kubelet.

    Returns (param_l2 per rank, logs dir, restarts, expected resume iteration): the last is
    the newest iteration both servers had a valid checkpoint of when server 1 died.
    """
    bin_dir = os.path.join(tmp, "bin")
    os.makedirs(bin_dir, exist_ok=True)
    for b in ("server/p3_server", "worker/p3_worker"):
        target = os.path.join(bin_dir, os.path.basename(b))
        if not os.path.exists(target):
            os.symlink(os.path.abspath(b), target)
    config, server_script, worker_script, job = manifests(tmp, name, bin_dir)
    root = os.path.join(tmp, name)
    shared_out = os.path.join(root, "out")            # the output claim
    shared_ckpt = os.path.join(root, "checkpoints")   # the checkpoint claim (ReadWriteMany)
    etc = os.path.join(root, "etc")
    logs = os.path.join(root, "logs")
    for d in (shared_out, shared_ckpt, etc, logs):
        os.makedirs(d, exist_ok=True)

    def local(text):
        return (text.replace("/etc/p3", etc).replace("/var/p3/out", shared_out)
                .replace("/var/p3/checkpoints", shared_ckpt))

    with open(os.path.join(etc, "config.textproto"), "w") as f:
        f.write(local(config))
    if 'resume_iteration: -1' not in config or '"/var/p3/checkpoints"' not in config:
        fail(name + ": the ConfigMap's config does not resume from the newest common checkpoint")
    servers, workers = 2, 2
    ports = free_ports(servers)
    m = re.search(r"--servers=(\S+)", worker_script)
    addresses = m.group(1).split(",")
    script_w = local(worker_script)
    for i, address in enumerate(addresses):
        script_w = script_w.replace(address, "127.0.0.1:%d" % ports[i])
    base = re.search(r"--port=(\d+)", server_script).group(1)
    script_s = local(server_script).replace("--port=" + base, "--port=$P3_TEST_PORT")
    backoff = job["backoffLimit"]
    env = dict(os.environ)
    pods = []
    for i in range(servers):
        e = dict(env, HOSTNAME="p3-kube-%s-server-%d" % (name, i), P3_TEST_PORT=str(ports[i]))
        pods.append(Pod("server_%d" % i, script_s, e, os.path.join(logs, "server_%d.log" % i),
                        max_restarts=100))
    for r in range(workers):
        state = os.path.join(root, "pod_worker_%d" % r)  # the pod's emptyDir
        os.makedirs(state, exist_ok=True)
        script = script_w.replace("/var/p3/state", state)
        e = dict(env, JOB_COMPLETION_INDEX=str(r))
        pods.append(Pod("worker_%d" % r, script, e, os.path.join(logs, "worker_%d.log" % r),
                        max_restarts=backoff))
    for p in pods:
        p.start()
    killed = False
    expected = None
    deadline = time.time() + 240
    outcome = "timeout"
    try:
        while time.time() < deadline:
            if kill and not killed:
                with open(pods[2].log) as f:
                    if re.search(r"^PROGRESS iteration=%d " % KILL_AT, f.read(), re.M):
                        pid = pods[1].child_pid("p3_server")
                        if pid is None:
                            fail(name + ": server 1 not running at iteration %d" % KILL_AT)
                            break
                        pods[1].hold = True
                        os.kill(pid, signal.SIGKILL)
                        killed = True
                        pods[1].proc.wait()
                        # Server 0 cannot pass server 1 by more than one version, and
                        # keep=4 leaves the older files in place: these sets are final.
                        ckpt0 = checkpoints(os.path.join(shared_ckpt, "server_0"))
                        ckpt1 = checkpoints(os.path.join(shared_ckpt, "server_1"))
                        if corrupt_newest and ckpt1:
                            newest = max(ckpt1)
                            path = os.path.join(shared_ckpt, "server_1", ckpt1.pop(newest))
                            with open(path, "r+b") as f:
                                f.seek(40)
                                f.write(b"\x7f\x7f\x7f\x7f")
                            corrupted.append(newest)
                        expected = max(set(ckpt0) & set(ckpt1), default=0)
                        pods[1].hold = False
            states = [p.poll() for p in pods]
            if "failed" in states:
                outcome = "failed: " + ", ".join(
                    p.name for p, s in zip(pods, states) if s == "failed")
                break
            if all(s == "succeeded" for s in states[servers:]):
                outcome = "complete"
                break
            time.sleep(0.05)
    finally:
        for p in pods:
            p.stop()
    restarts = {p.name: p.restarts for p in pods}
    if outcome != "complete":
        fail("%s: the Job did not complete (%s); restarts %s" % (name, outcome, restarts))
        for p in pods:
            print("--- " + p.log)
            print("".join(open(p.log).readlines()[-15:]))
        return None, logs, restarts, expected
    l2 = []
    for r in range(workers):
        with open(os.path.join(shared_out, "results", "worker_%d.json" % r)) as f:
            l2.append(repr(json.load(f)["param_l2"]))
    return l2, logs, restarts, expected


corrupted = []


def show_logs(logs):
    """Prints every pod's log without its PROGRESS lines: what a failure needs to be understood."""
    for log in sorted(os.listdir(logs)):
        print("--- " + log)
        with open(os.path.join(logs, log)) as f:
            print("".join(l for l in f if not l.startswith("PROGRESS")), end="")


def main():
    if not os.path.exists("server/p3_server"):
        print("SKIPPED: the binaries are not here (run under bazel test)")
        return 0
    tmp = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()
    want, _, _, _ = run_cluster(tmp, "uninterrupted")
    if want is None:
        return 1
    ok("uninterrupted: param_l2 %s" % want[0])

    before = failures
    got, logs, restarts, at = run_cluster(tmp, "server_killed", kill=True)
    if got is not None:
        other = r"resuming from iteration (?!%d\b)\d+" % at
        s1 = open(os.path.join(logs, "server_1.log")).read()
        s0 = open(os.path.join(logs, "server_0.log")).read()
        w1 = open(os.path.join(logs, "worker_1.log")).read()
        if got != want:
            fail("server_killed: param_l2 %s, uninterrupted %s" % (got, want))
        elif at < 10:
            fail("server_killed: the newest checkpoint both servers had at the kill is %d, "
                 "not 10 or later" % at)
        elif "newest checkpoint that all 2 servers have is iteration %d" % at not in s1:
            fail("server_killed: server 1 did not restart from the common checkpoint %d" % at)
        elif "resuming from iteration %d" % at not in s0 and not kept_at(s0, restarts, at):
            fail("server_killed: server 0 was neither restarted from iteration %d nor kept at "
                 "it or later for the rejoining workers" % at)
        elif re.search(other, s0 + s1):
            fail("server_killed: a server resumed from another iteration than %d" % at)
        elif not re.search(r"^RESUMED iteration=%d$" % at, w1, re.M):
            fail("server_killed: worker 1 did not resume at iteration %d" % at)
        else:
            ok("server_killed: server 1 SIGKILLed once worker 0 had done iteration %d; every "
               "process restarted with its own command (server 0: %s), all resumed from %d; "
               "restarts %s; param_l2 %s = %s"
               % (KILL_AT, "kept, still at it" if kept_at(s0, restarts, at) else "restarted",
                  at, restarts, got[0], want[0]))

    if got is not None and failures > before:
        show_logs(logs)

    before = failures
    got, logs, restarts, at = run_cluster(tmp, "corrupt_newest", kill=True, corrupt_newest=True)
    if got is not None:
        bad = corrupted[-1] if corrupted else -1
        other = r"resuming from iteration (?!%d\b)\d+" % at
        s0 = open(os.path.join(logs, "server_0.log")).read()
        s1 = open(os.path.join(logs, "server_1.log")).read()
        if got != want:
            fail("corrupt_newest: param_l2 %s, uninterrupted %s" % (got, want))
        elif not 0 < at < bad:
            fail("corrupt_newest: server 1's newest checkpoint %d was corrupted, and the newest "
                 "valid one both servers had is %d" % (bad, at))
        elif "passed over iteration %d" % bad not in s1 or "checksum" not in s1:
            fail("corrupt_newest: server 1 does not say it passed over the corrupt iteration %d"
                 % bad)
        elif re.search(other, s0 + s1):
            fail("corrupt_newest: a server resumed from another iteration than %d "
                 "(mixing checkpoints)" % at)
        elif ("resuming from iteration %d" % at not in s0 or
              "resuming from iteration %d" % at not in s1):
            fail("corrupt_newest: not every server resumed from iteration %d" % at)
        else:
            ok("corrupt_newest: server 1's checkpoint %d corrupted; both servers resumed from %d; "
               "restarts %s; param_l2 %s = %s" % (bad, at, restarts, got[0], want[0]))
    if got is not None and failures > before:
        show_logs(logs)
    print("%d failure(s)" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
