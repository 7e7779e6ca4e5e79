"""A Python worker that takes a C++ p3_worker's place in a job: it trains p3_cluster's
SmallCnn (the zoo's small_cnn) on exactly the batches the C++ trainer would give its rank
(p3._p3.TrainingData: the same data set and sharded sampler), then saves its state dict
to argv[1].

Rank, servers and config come from the P3_* environment, as under launch_cluster.
"""

import sys

import torch

import p3
from p3 import _p3
import p3_cluster


def main():
    torch.set_num_threads(1)
    ctx = p3.init()
    model = p3_cluster.make_model(seed=99)  # not rank 0: the servers' values replace these
    net = p3.distribute(model)
    data = _p3.TrainingData(config=ctx.config, overrides=[], rank=ctx.rank)
    iterations = int(sys.argv[2])
    for it in range(iterations):
        x, y = data.batch(it)
        torch.nn.functional.cross_entropy(net(x), y).backward()
        net.step()
    net.finish()
    torch.save(model.state_dict(), sys.argv[1])


if __name__ == "__main__":
    main()
