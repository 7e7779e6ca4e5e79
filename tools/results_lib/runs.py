"""A launcher run's output folder (docs/launcher.md): summary.json, the resolved
config.textproto, the logs; and starting one run of the launcher."""
import json
import os
import re
import subprocess
import sys
import time


def log_has(path, text):
    """Whether the log at `path` holds `text` (a missing log holds nothing)."""
    try:
        with open(path, "rb") as f:
            return text.encode() in f.read()
    except OSError:
        return False


def wait_for(predicate, proc, timeout_s, poll_s=0.002):
    """Polls `predicate` every `poll_s` until true; False if the process `proc` (a Popen)
    ends first (after one last look) or `timeout_s` passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        if proc.poll() is not None:
            return predicate()
        time.sleep(poll_s)
    return False


def summary(run_dir):
    """The run's summary.json."""
    with open(os.path.join(run_dir, "summary.json")) as f:
        return json.load(f)


def _resolved(run_dir, field, value_pattern):
    """The text of a field (its last name) whose value matches `value_pattern` in the config
    the launcher wrote for the run's processes; None when it says nothing or cannot be read."""
    try:
        with open(os.path.join(run_dir, "config.textproto")) as f:
            text = f.read()
    except OSError:
        return None
    m = re.search(rf"^\s*{field}:\s*({value_pattern})\s*$", text, re.M)
    return m.group(1) if m else None


def resolved_int(run_dir, field):
    """An integer field (its last name, e.g. "pack_params") in the config the launcher
    wrote for the run's processes; None when it says nothing or cannot be read."""
    value = _resolved(run_dir, field, r"\d+")
    return None if value is None else int(value)


def resolved_bool(run_dir, field):
    """A boolean field (its last name, e.g. "sized_reads"), as resolved_int reads one."""
    value = _resolved(run_dir, field, "true|false")
    return None if value is None else value == "true"


# The GRPC_EXPERIMENTS that scheduling.sized_reads sets (p3/base/grpc_experiments.h).
SIZED_READ_EXPERIMENTS = "tcp_frame_size_tuning,tcp_rcv_lowat"


def grpc_experiments(run_dir, environ=None):
    """The GRPC_EXPERIMENTS the run's processes ran with: the environment's own value where
    it has one (it wins there, even empty), else SIZED_READ_EXPERIMENTS where the run's
    config asks for reads sized to the message (scheduling.sized_reads), else ""; None
    when the config says nothing (a run from before the field)."""
    env = os.environ if environ is None else environ
    if "GRPC_EXPERIMENTS" in env:
        return env["GRPC_EXPERIMENTS"]
    sized = resolved_bool(run_dir, "sized_reads")
    return None if sized is None else SIZED_READ_EXPERIMENTS if sized else ""


def resolved_pack_params(run_dir):
    """scheduling.pack_params of the run (the launcher states the default when the config
    left it out); None when its config says nothing."""
    return resolved_int(run_dir, "pack_params")


def resolved_output_pieces(run_dir):
    """model.output_pieces of the run; None when its config says nothing (the default: the
    output projection whole)."""
    return resolved_int(run_dir, "output_pieces")


def resolved_credit_bytes(run_dir):
    """scheduling.credit_bytes of the run; None when its config says nothing (the default,
    0). An automatic credit (-1) is not left there: the launcher writes its choice."""
    return resolved_int(run_dir, "credit_bytes")


def summary_or_empty(run_dir):
    """summary.json, or {} when the run wrote none (it failed)."""
    try:
        return summary(run_dir)
    except OSError:
        return {}


def worker_log(run_dir, rank=0):
    return os.path.join(run_dir, "logs", f"worker_{rank}.log")


def progress_iteration(log):
    """The iteration the worker has reached by its log (its last PROGRESS line; the
    counter starts at 1, "iteration=k" is printed after iteration k-1); 0 before one."""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, os.path.getsize(log) - 4096))
            tail = f.read().decode(errors="replace")
    except OSError:
        return 0
    hits = re.findall(r"PROGRESS iteration=(\d+)", tail)
    return int(hits[-1]) if hits else 0


def launch(launcher, config, out_dir, overrides, extra_args=()):
    """One run of the launcher with `config` and `--set` overrides, its output in
    `out_dir`; exits with the launcher's output on failure. Returns the run's
    summary.json and the facts of the run (command, seconds, load before and after)."""
    cmd = [launcher, f"--config={config}", f"--set=output_dir={out_dir}"]
    cmd += [f"--set={o}" for o in overrides] + list(extra_args)
    load_before = os.getloadavg()[0]
    start = time.time()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-3000:]}")
    facts = {"command": " ".join(cmd), "load1_before": round(load_before, 2),
             "load1_after": round(os.getloadavg()[0], 2),
             "seconds": round(time.time() - start, 1)}
    return summary(out_dir), facts
