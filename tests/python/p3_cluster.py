"""What the tests of the `p3` Python package share: a small CNN (the twin of the zoo's
small_cnn, models/small_cnn.cc: same names, shapes and blocks), deterministic batches,
the plain single-process reference, and real p3_server processes on loopback (port 0,
--port_file) with Python worker processes given the launcher's P3_* environment.

Paths are relative to the runfiles root, where `bazel test` starts a test.
"""

import os
import subprocess
import sys
import tempfile
import time

import torch
from torch import nn

SERVER = "server/p3_server"
PACKAGE_DIR = os.path.abspath("worker/python")  # holds the package folder p3/

LR = 0.05
MOMENTUM = 0.9
WEIGHT_DECAY = 1e-4


class SmallCnn(nn.Module):
    """The zoo's small_cnn in PyTorch (models/small_cnn.cc)."""

    def __init__(self, image_size=12, in_channels=1, num_classes=10):
        super().__init__()
        side = image_size // 4
        self.conv1 = nn.Sequential(nn.Conv2d(in_channels, 16, 5, padding=2), nn.ReLU(),
                                   nn.MaxPool2d(2))
        self.conv2 = nn.Sequential(nn.Conv2d(16, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2))
        self.fc1 = nn.Sequential(nn.Flatten(), nn.Linear(32 * side * side, 128), nn.ReLU())
        self.fc2 = nn.Linear(128, num_classes)

    def forward(self, x):
        return self.fc2(self.fc1(self.conv2(self.conv1(x))))


# The models the tests train, and the shape of their input (channels, side).
INPUTS = {"small_cnn": (1, 12), "resnet18": (3, 64)}


def make_model(seed=1, name="small_cnn"):
    torch.manual_seed(seed)
    if name == "resnet18":
        import torchvision
        return torchvision.models.resnet18(num_classes=10)
    return SmallCnn()


def global_batch(step, workers, batch=4, model="small_cnn"):
    """Step `step`'s batch of all workers: rows [r*batch, (r+1)*batch) are worker r's."""
    channels, side = INPUTS[model]
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(workers * batch, channels, side, side, generator=g)
    y = torch.randint(0, 10, (workers * batch,), generator=g)
    return x, y


def train_local(workers, steps, seed=1, model="small_cnn", batch=4):
    """Plain PyTorch SGD on the workers' batches: `local` mode's semantics (the gradient is
    the mean of the workers'). Each worker's rows go through the model on their own, as
    on the cluster (BatchNorm normalises each worker's batch, as DDP without SyncBatchNorm);
    without BatchNorm that is the same as one pass over their union."""
    net = make_model(seed, model)
    opt = torch.optim.SGD(net.parameters(), lr=LR, momentum=MOMENTUM,
                          weight_decay=WEIGHT_DECAY)
    for step in range(steps):
        x, y = global_batch(step, workers, batch, model)
        opt.zero_grad()
        loss = sum(nn.functional.cross_entropy(net(x[r * batch:(r + 1) * batch]),
                                               y[r * batch:(r + 1) * batch])
                   for r in range(workers)) / workers
        loss.backward()
        opt.step()
    return flatten(net)


def flatten(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def write_config(path, mode="p3", workers=1, servers=1, peer_timeout_s=20, extra="",
                 rejoin_timeout_s=0):
    with open(path, "w") as f:
        f.write("""name: "python_test"
mode: "{mode}"
cluster {{ workers: {workers} servers: {servers} peer_timeout_s: {timeout}
          rejoin_timeout_s: {rejoin} }}
model {{ name: "small_cnn" image_size: 12 in_channels: 1 }}
data {{ dataset: "synthetic" synthetic_size: 64 }}
training {{ batch_size: 4 iterations: 3 evaluate: false }}
optimizer {{ name: "sgd" lr: {lr} momentum: {momentum} weight_decay: {wd} }}
scheduling {{ slice_params: 3000 }}
output_dir: "{out}"
{extra}
""".format(mode=mode, workers=workers, servers=servers, timeout=peer_timeout_s,
           rejoin=rejoin_timeout_s, lr=LR,
           momentum=MOMENTUM, wd=WEIGHT_DECAY, out=os.path.dirname(path) + "/out",
           extra=extra))
    return path


class Servers:
    """`count` p3_server processes on loopback for the config at `config`; a context manager."""

    def __init__(self, config, count, folder):
        self.procs = []
        self.logs = []
        ports = []
        for s in range(count):
            port_file = os.path.join(folder, "s{}.port".format(s))
            log = open(os.path.join(folder, "server_{}.log".format(s)), "w")
            self.logs.append(log)
            self.procs.append(subprocess.Popen(
                [SERVER, "--config=" + config, "--server_index={}".format(s),
                 "--port_file=" + port_file], stdout=log, stderr=subprocess.STDOUT))
            ports.append(port_file)
        self.addresses = []
        for port_file in ports:
            deadline = time.time() + 30
            while not (os.path.exists(port_file) and os.path.getsize(port_file) > 0):
                if time.time() > deadline:
                    raise RuntimeError("server did not start: no " + port_file)
                time.sleep(0.05)
            with open(port_file) as f:
                self.addresses.append("127.0.0.1:" + f.read().strip())

    def kill(self, s):
        self.procs[s].kill()
        self.procs[s].wait()

    def wait(self, timeout=60):
        return [p.wait(timeout=timeout) for p in self.procs]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for log in self.logs:
            log.close()


def worker_env(rank, world_size, addresses, config, **extra):
    """The environment launch_cluster gives a worker program (docs/python.md)."""
    env = dict(os.environ)
    env.update(P3_RANK=str(rank), P3_WORLD_SIZE=str(world_size), P3_SERVERS=",".join(addresses),
               P3_CONFIG=config, P3_REJOIN="0", P3_TRACE_FILE="",
               P3_RUN_DIR=os.path.dirname(config))
    env.update(extra)
    env["PYTHONPATH"] = PACKAGE_DIR + os.pathsep + os.path.abspath(os.path.dirname(__file__)) + \
        os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def start_worker(script_args, rank, world_size, addresses, config, **extra_env):
    """`python3 script_args...` as worker `rank`, with the P3_* environment."""
    env = worker_env(rank, world_size, addresses, config, **extra_env)
    return subprocess.Popen([sys.executable] + script_args, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)


def run_workers(script_args, world_size, addresses, config, timeout=120):
    """Runs `python3 script_args...` once per rank with the P3_* environment; waits for all.

    Returns [(returncode, output)] per rank.
    """
    procs = [start_worker(script_args, r, world_size, addresses, config)
             for r in range(world_size)]
    return wait_workers(procs, timeout)


def wait_workers(procs, timeout=120):
    """[(returncode, output)] of each process, killed after `timeout` seconds."""
    out = []
    for p in procs:
        try:
            text, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            text, _ = p.communicate()
            text = (text or b"") + b"\n[killed: timed out]"
        out.append((p.returncode, text.decode(errors="replace")))
    return out


def temp_dir():
    return tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
