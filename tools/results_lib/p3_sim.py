"""The simulator's command line (//tools:p3_sim, docs/simulator.md): one simulation, its
JSON result."""
import json
import os
import subprocess
import sys
import tempfile

from results_lib import paths

BINARY = os.path.join(paths.ROOT, "bazel-bin", "tools", "p3_sim")
PROFILES = os.path.join(paths.ROOT, "configs", "sim", "profiles")


def run(config, profile, calibration=None, sets=(), flags=(), binary=None):
    """Runs p3_sim on `config` (relative to the repository) with `profile`, `calibration`
    (none: the built-in one), `--set` overrides and other flags; returns its JSON result
    (iteration_seconds, samples_per_second, workers, cpu_s_per_iteration, ...). Exits with
    the command and p3_sim's errors when it fails. The binary: `binary`, else $P3_SIM,
    else bazel-bin's."""
    binary = binary or os.environ.get("P3_SIM") or BINARY
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [binary, f"--config={config}", f"--profile={profile}", f"--out={out.name}"]
        if calibration:
            cmd.append(f"--calibration={calibration}")
        cmd += [f"--set={s}" for s in sets] + list(flags)
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=paths.ROOT)
        if p.returncode != 0:
            sys.exit(f"p3_sim failed: {' '.join(cmd)}\n{p.stderr}")
        with open(out.name) as f:
            return json.load(f)
