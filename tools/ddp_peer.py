#!/usr/bin/python3
"""PyTorch DistributedDataParallel peer for tools/bench_throughput.py.

One process per emulated machine (rank 0 and 1), gloo backend over TCP. Same model
shapes as the p3 zoo (torchvision resnet50 / vgg19 with the same number of classes and
input size), same per-worker batch, random synthetic inputs, plain SGD. Measures the
time of each iteration (forward + backward with DDP's bucketed all-reduce overlapped
with backward + optimizer step) and writes a JSON result with the median samples/s
over the iterations after warm-up of (global batch = batch * world size) / iteration
time, the same definition as the launcher's summary.json.

  /usr/bin/python3 tools/ddp_peer.py --rank=0 --world=2 --master=10.77.0.1:29500 \
      --model=resnet50 --batch=8 --image_size=32 --iterations=8 --warmup=2 --out=r0.json
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn


def make_model(name, num_classes):
    import torchvision
    if name in ("resnet50", "vgg19", "vgg16"):
        return getattr(torchvision.models, name)(num_classes=num_classes)
    raise SystemExit(f"ddp_peer: unsupported model {name!r}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--master", required=True, help="host:port of rank 0's TCP store")
    p.add_argument("--model", default="resnet50")
    p.add_argument("--num_classes", type=int, default=1000)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--image_size", type=int, default=32)
    p.add_argument("--iterations", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--bucket_mb", type=float, default=25.0)
    p.add_argument("--out", required=True)
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)  # same initial parameters on every rank (DDP broadcasts anyway)
    dist.init_process_group("gloo", init_method=f"tcp://{a.master}", rank=a.rank,
                            world_size=a.world)
    model = make_model(a.model, a.num_classes)
    params = sum(p.numel() for p in model.parameters())
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=a.bucket_mb)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.001, momentum=0.9, weight_decay=1e-4)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(100 + a.rank)
    x = torch.randn(a.batch, 3, a.image_size, a.image_size, generator=g)
    y = torch.randint(0, 10, (a.batch,), generator=g)

    times = []
    for it in range(a.iterations):
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(ddp(x), y)
        loss.backward()  # DDP all-reduces buckets during backward
        opt.step()
        times.append(time.perf_counter() - t0)
        if a.rank == 0:
            print(f"ddp iter {it + 1}/{a.iterations} {times[-1]:.3f} s loss {loss.item():.3f}",
                  flush=True)
    measured = times[a.warmup:] or times
    med = statistics.median(measured)
    # the launcher's definition: median over iterations of samples/s
    sps = statistics.median(a.batch * a.world / t for t in measured)
    result = {
        "rank": a.rank, "world": a.world, "model": a.model, "params": params,
        "batch_size_per_worker": a.batch, "iterations": a.iterations, "warmup": a.warmup,
        "iteration_seconds": times, "median_iteration_seconds": med,
        "samples_per_second": sps,
    }
    with open(a.out, "w") as f:
        json.dump(result, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
