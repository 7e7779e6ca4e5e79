"""One Python worker of the tests' jobs: trains p3_cluster's SmallCnn on its rows of the
global batches with `import p3`, then saves its final parameters (flattened) to argv[2].

    train_worker.py STEPS OUT_FILE [distribute|optimizer [MODEL [BATCH]]]

MODEL: small_cnn (default) or resnet18 (torchvision's; its BatchNorm buffers are averaged
at the end, and saved beside the parameters as OUT_FILE.buffers).

Rank, servers and config come from the P3_* environment, as under launch_cluster. With
P3_TEST_DIE_AFTER=K the process kills itself (SIGKILL) after iteration K's step(), unless it
is a rejoining replacement (P3_REJOIN=1), which resumes at the cluster's iteration; with
P3_TEST_DIE_RANK=R only rank R does. With P3_TEST_MARK_AFTER=K and P3_TEST_MARK_FILE=F, rank 0
of a process that started at iteration 0 creates F after iteration K's step() (a test then
acts on the cluster, e.g. kills a server); P3_TEST_STEP_SLEEP_S sleeps after every step
(a run long enough for that act to land mid-run).
"""

import os
import signal
import sys
import time

import torch

import p3
import p3_cluster


def main():
    steps, out_file = int(sys.argv[1]), sys.argv[2]
    style = sys.argv[3] if len(sys.argv) > 3 else "distribute"
    name = sys.argv[4] if len(sys.argv) > 4 else "small_cnn"
    b = int(sys.argv[5]) if len(sys.argv) > 5 else 4
    torch.set_num_threads(1)
    ctx = p3.init()
    # Every rank builds the model with another seed: rank 0's values must win.
    model = p3_cluster.make_model(1 if ctx.rank == 0 else 50 + ctx.rank, name)
    if style == "optimizer":
        optimizer = torch.optim.SGD(model.parameters(), lr=p3_cluster.LR)
        optimizer = p3.DistributedOptimizer(optimizer, model)
        net, finish = model, optimizer.finish
    else:
        net = p3.distribute(model)
        optimizer, finish = net, net.finish
    die_after = int(os.environ.get("P3_TEST_DIE_AFTER", "-1"))
    mark_after = int(os.environ.get("P3_TEST_MARK_AFTER", "-1"))
    step_sleep_s = float(os.environ.get("P3_TEST_STEP_SLEEP_S", "0"))
    start = (optimizer.model if style == "optimizer" else net).iteration
    print("worker {} starts at iteration {}".format(ctx.rank, start), flush=True)
    for step in range(start, steps):
        x, y = p3_cluster.global_batch(step, ctx.world_size, b, name)
        x, y = x[ctx.rank * b:(ctx.rank + 1) * b], y[ctx.rank * b:(ctx.rank + 1) * b]
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        optimizer.step()
        if step == die_after and not ctx.rejoin and \
                int(os.environ.get("P3_TEST_DIE_RANK", ctx.rank)) == ctx.rank:
            os.kill(os.getpid(), signal.SIGKILL)
        if step == mark_after and start == 0 and ctx.rank == 0:
            with open(os.environ["P3_TEST_MARK_FILE"], "w") as f:
                f.write(str(step))
        if step_sleep_s > 0:
            time.sleep(step_sleep_s)
    out_file = out_file.replace("RANK", str(ctx.rank))
    if name == "resnet18":
        net.average_buffers()
        torch.save([b.clone() for b in model.buffers()], out_file + ".buffers")
    finish()
    torch.save(p3_cluster.flatten(model), out_file)
    print("worker {} done: {} iterations".format(ctx.rank, steps))


if __name__ == "__main__":
    main()
