"""Where things are: the repository, docs/results, the binaries; the commit; the load."""
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(ROOT, "docs", "results")


def results(*parts):
    """A path under docs/results, e.g. results("throughput", "throughput.csv")."""
    return os.path.join(RESULTS, *parts)


def binary(env, default):
    """A binary the scripts run: $env when set (`bazel run` wrappers set P3_LAUNCHER,
    P3_SERVER, P3_WORKER), else `default` under the repository (bazel-bin/...)."""
    return os.environ.get(env) or os.path.join(ROOT, default)


def launcher():
    return binary("P3_LAUNCHER", "bazel-bin/tools/launch_cluster")


def server():
    return binary("P3_SERVER", "bazel-bin/server/p3_server")


def worker():
    return binary("P3_WORKER", "bazel-bin/worker/p3_worker")


def git_commit(root=ROOT, mark_dirty=False):
    """The short hash of HEAD ("" outside git); with mark_dirty, "+dirty" appended when
    tracked files have changes, so that a figure never names a commit it was not built from."""
    def git(*args):
        return subprocess.run(["git", "-C", root] + list(args), capture_output=True,
                              text=True).stdout.strip()
    commit = git("rev-parse", "--short", "HEAD")
    if mark_dirty and git("status", "--porcelain", "--untracked-files=no"):
        commit += "+dirty"
    return commit


def load1():
    """The 1-minute load average: every run records it, the machine being shared."""
    return os.getloadavg()[0]
