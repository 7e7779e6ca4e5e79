"""Fashion-MNIST with PyTorch, on a P3 cluster: train_plain.py converted (docs/python.md
shows the diff). Run by launch_cluster (worker.command) or run.sh, once per worker.
"""

import argparse
import gzip

import numpy as np
import torch
from torch import nn

import p3


def load(folder, kind):
    with gzip.open("{}/{}-images-idx3-ubyte.gz".format(folder, kind)) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open("{}/{}-labels-idx1-ubyte.gz".format(folder, kind)) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    x = torch.from_numpy(images.astype(np.float32) / 255.0)
    return (x - 0.2860) / 0.3530, torch.from_numpy(labels.astype(np.int64))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Sequential(nn.Conv2d(1, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2))
        self.conv2 = nn.Sequential(nn.Conv2d(16, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2))
        self.fc1 = nn.Sequential(nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU())
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        return self.fc2(self.fc1(self.conv2(self.conv1(x))))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--limit", type=int, default=0, help="train on this many images only")
    args = parser.parse_args()
    ctx = p3.init()
    torch.manual_seed(1)
    x_train, y_train = load(args.data, "train")
    x_test, y_test = load(args.data, "t10k")
    if args.limit:
        x_train, y_train = x_train[:args.limit], y_train[:args.limit]
    x_train, y_train = x_train[ctx.rank::ctx.world_size], y_train[ctx.rank::ctx.world_size]

    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    optimizer = p3.DistributedOptimizer(optimizer, model)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(args.epochs):
        order = torch.randperm(len(x_train))
        for i in range(0, len(order) - args.batch_size + 1, args.batch_size):
            idx = order[i:i + args.batch_size]
            optimizer.zero_grad()
            loss = criterion(model(x_train[idx]), y_train[idx])
            loss.backward()
            optimizer.step()
        print("epoch {} loss {:.4f}".format(epoch + 1, loss.item()), flush=True)
    optimizer.finish()

    model.eval()
    with torch.no_grad():
        correct = (model(x_test).argmax(1) == y_test).sum().item()
    print("accuracy {:.4f}".format(correct / len(x_test)))


if __name__ == "__main__":
    main()
