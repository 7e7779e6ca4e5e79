"""Stand-ins for the binaries the experiment scripts run, and helpers their tests share.

Each stand-in follows the command-line contract of the real binary closely enough for a
script's whole flow to run in well under a second: the launcher (docs/launcher.md: a run
folder with summary.json, records/worker_<rank>.csv and results/worker_0.json), p3_sim
(its JSON result) and pipeline_train (its result JSON). What they return is made up but
deterministic, so that a test can assert what a script does with it.
"""
import os
import stat
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TESTDATA = os.path.join(HERE, "testdata")
# The repository root inside the test's runfiles (tests/tools/experiments/ -> ../../..).
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
PY = "/usr/bin/python3"

LAUNCHER = r'''#!/usr/bin/python3
import hashlib, json, os, sys
sets = dict(a[len("--set="):].split("=", 1) for a in sys.argv[1:] if a.startswith("--set="))
if sets.get("fail") == "true":
    sys.exit("config: no field fail")
out = sets["output_dir"]
workers = int(sets.get("cluster.workers", 2))
iterations = int(sets.get("training.iterations", 10))
# param_l2 depends on what a result depends on (seed, iterations, wire dtype), not on the
# mode: p3 trains bit-identically to local.
key = "|".join([sets.get("training.seed", "1"), str(iterations),
                sets.get("scheduling.wire_dtype", "float32")])
l2 = 100 + int(hashlib.sha256(key.encode()).hexdigest()[:6], 16) / 1e6
evaluate = sets.get("training.evaluate", "true") != "false"
os.makedirs(os.path.join(out, "records"), exist_ok=True)
os.makedirs(os.path.join(out, "results"), exist_ok=True)
for rank in range(workers):
    with open(os.path.join(out, "records", f"worker_{rank}.csv"), "w") as f:
        f.write("iteration,loss,iteration_seconds,samples_per_second\n")
        for i in range(iterations):
            f.write(f"{i},{2.0 - i / 100},{0.5 + 0.1 * (i % 2) + 0.05 * rank},16.0\n")
summary = {"mode": sets.get("mode", "p3"), "iterations": iterations,
           "samples_per_second": 640.0, "final_loss": 0.25,
           "test_accuracy": 0.85 if evaluate else None, "param_l2": l2, "wall_seconds": 1.5,
           "status": "ok", "workers_results": [{"bytes_sent": 1000, "param_l2": l2}] * workers}
if sets.get("scheduling.slice_params") == "0":  # automatic: the real launcher's choice
    summary["tuning"] = {"slice_params_auto": True, "slice_params": 160000}
json.dump(summary, open(os.path.join(out, "summary.json"), "w"))
json.dump({"iterations": iterations, "param_l2": l2},
          open(os.path.join(out, "results", "worker_0.json"), "w"))
with open(os.path.join(out, "args"), "w") as f:
    f.write("\n".join(sys.argv[1:]) + "\n")
# The resolved config, as far as the benchmark reads it back.
with open(os.path.join(out, "config.textproto"), "w") as f:
    if "model.output_pieces" in sets:
        f.write("model {\n  output_pieces: %s\n}\n" % sets["model.output_pieces"])
    if "scheduling.sized_reads" in sets:
        f.write("scheduling {\n  sized_reads: %s\n}\n" % sets["scheduling.sized_reads"])
'''

P3_SIM = r'''#!/usr/bin/python3
import json, sys
args = sys.argv[1:]
flag = lambda name, default: next((a.split("=", 1)[1] for a in args
                                   if a.startswith(name + "=")), default)
sets = dict(a[len("--set="):].split("=", 1) for a in args if a.startswith("--set="))
scale = float(flag("--compute_scale", "1"))
bw = float(sets.get("network.bandwidth_gbps", 0))
batch = int(sets.get("training.batch_size", 8))
it = 0.2 * scale + (0.1 / bw if bw > 0 else 0.0)
workers = int(sets.get("cluster.workers", 2 if sets.get("mode") != "local" else 1))
result = {"args": args, "iteration_seconds": it, "samples_per_second": batch * workers / it,
          "workers": [{"compute_s": 0.2 * scale, "exposed_comm_s": it - 0.2 * scale,
                       "idle_s": 0.0}],
          "cpu_s_per_iteration": {"compute": 0.2, "preempt": 0.01, "send": 0.05,
                                  "receive": 0.05, "update": 0.02, "ring": 0.0,
                                  "total": 0.33}}
json.dump(result, open(flag("--out", ""), "w"))
'''

PIPELINE_TRAIN = r'''#!/usr/bin/python3
import json, sys
args = sys.argv[1:]
sets = dict(a[len("--set="):].split("=", 1) for a in args if a.startswith("--set="))
out = next(a.split("=", 1)[1] for a in args if a.startswith("--result_file="))
stages = int(sets.get("pipeline.stages", 1))
epochs = int(sets.get("training.epochs", 1))
seed = int(sets.get("training.seed", 1))
blocks = ["lstm.0+lstm.1", "lstm.2+lstm.3+fc"][:stages] if stages <= 2 else \
    ["lstm.0", "lstm.1", "lstm.2", "lstm.3+fc"][:stages]
accuracy = lambda e: 0.5 + 0.1 * e + 0.001 * seed
json.dump({"epochs": [{"epoch": e, "test_accuracy": accuracy(e), "train_loss": 1.0 / e,
                       "seconds": 2.0, "samples_per_second": 500.0}
                      for e in range(1, epochs + 1)],
           "stage_blocks": blocks, "samples_per_second": 500.0,
           "test_accuracy": accuracy(epochs), "iterations": 60, "batch_size": 64,
           "bubble_fraction": 0.25}, open(out, "w"))
'''


def write_executable(folder, name, text):
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, stat.S_IRWXU)
    return path


def launcher(folder):
    return write_executable(folder, "launch_cluster", LAUNCHER)


def p3_sim(folder):
    return write_executable(folder, "p3_sim", P3_SIM)


class FakeP3SimTest(unittest.TestCase):
    """A test case whose scripts find the stand-in p3_sim (P3_SIM) in self.tmp.name."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        os.environ["P3_SIM"] = p3_sim(self.tmp.name)

    def tearDown(self):
        del os.environ["P3_SIM"]
        self.tmp.cleanup()


def pipeline_train(folder):
    return write_executable(folder, "pipeline_train", PIPELINE_TRAIN)


def script(name):
    """The path of tools/experiments/<name> in the runfiles."""
    return os.path.join(ROOT, "tools", "experiments", name)


def run(args, cwd=None, env=None, check=True):
    """Runs a command (a script: /usr/bin/python3 first); returns its stdout, or fails the
    calling test with its output when it exits non-zero and `check`."""
    p = subprocess.run(args, capture_output=True, text=True, cwd=cwd,
                       env=dict(os.environ, **(env or {})))
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    return p


def run_script(name, *args, **kw):
    return run([PY, script(name)] + list(args), **kw).stdout


def skip(test, what, reason):
    """Skips a test case the repository's way (tests/testing/skip.sh): a line
    "P3_SKIPPED: <what>: <reason>" that .ci/run counts as skipped, not passed."""
    line = f"P3_SKIPPED: {what}: {reason}"
    print(line, flush=True)
    warnings = os.environ.get("TEST_WARNINGS_OUTPUT_FILE")
    if warnings:
        with open(warnings, "a") as f:
            f.write(line + "\n")
    test.skipTest(reason)
