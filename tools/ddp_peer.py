#!/usr/bin/python3
"""PyTorch DistributedDataParallel peer for tools/bench_throughput.py.

One process per emulated machine (rank 0 and 1), gloo backend over TCP. Same model
shapes as the p3 zoo (torchvision resnet50 / vgg19 with the same number of classes and
input size; the zoo's seq2seq_lstm rebuilt here module by module), same per-worker batch, random synthetic inputs, plain SGD. Measures the
time of each iteration (forward + backward with DDP's bucketed all-reduce overlapped
with backward + optimizer step) and writes a JSON result with the median samples/s
over the iterations after warm-up of (global batch = batch * world size) / iteration
time, the same definition as the launcher's summary.json.

  /usr/bin/python3 tools/ddp_peer.py --rank=0 --world=2 --master=10.77.0.1:29500 \
      --model=resnet50 --batch=8 --image_size=32 --iterations=8 --warmup=2 --out=r0.json
"""
import argparse
import json
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn


AUX_LOSS_WEIGHT = 0.4  # models/inception.h: InceptionV3Options::aux_loss_weight


class Attention(nn.Module):
    """MLP attention of the zoo's seq2seq_lstm (models/seq2seq_lstm.cc), same shapes."""

    def __init__(self, h):
        super().__init__()
        self.query = nn.Linear(h, h, bias=False)
        self.key = nn.Linear(h, h)
        self.score = nn.Linear(h, 1, bias=False)
        self.combine = nn.Linear(2 * h, h)

    def forward(self, enc, dec):
        hidden = torch.tanh(self.query(dec).unsqueeze(2) + self.key(enc).unsqueeze(1))
        weights = torch.softmax(self.score(hidden).squeeze(-1), dim=-1)
        return torch.tanh(self.combine(torch.cat([dec, torch.bmm(weights, enc)], -1)))


class Seq2SeqLstm(nn.Module):
    """The zoo's Sockeye-shaped seq2seq_lstm in PyTorch: same modules, shapes and order
    (58,114,816 parameters at vocabulary 32,000, hidden 512). Input tokens [B, 2, L]."""

    def __init__(self, vocab, h=512):
        super().__init__()
        self.source_embed = nn.Embedding(vocab, h)
        self.target_embed = nn.Embedding(vocab, h)
        self.encoder0 = nn.LSTM(h, h // 2, batch_first=True, bidirectional=True)
        self.encoder1 = nn.LSTM(h, h, batch_first=True)
        self.decoder0 = nn.LSTM(h, h, batch_first=True)
        self.decoder1 = nn.LSTM(h, h, batch_first=True)
        self.attention = Attention(h)
        self.output = nn.Linear(h, vocab)

    def forward(self, tokens):
        src = self.encoder1(self.encoder0(self.source_embed(tokens[:, 0]))[0])[0]
        tgt = self.decoder1(self.decoder0(self.target_embed(tokens[:, 1]))[0])[0]
        return self.output(self.attention(src, tgt))


class Transformer(nn.Module):
    """The zoo's transformer (models/transformer.cc) in PyTorch: one embedding shared by
    source and target, sinusoidal positions, 6 + 6 post-norm layers (d 512, 8 heads, FFN
    2048, dropout 0.1), untied output layer; 76,938,496 parameters at vocabulary 32,000."""

    def __init__(self, vocab, d=512, heads=8, ffn=2048, layers=6, dropout=0.1):
        super().__init__()
        self.d = d
        self.embed = nn.Embedding(vocab, d)
        self.dropout = nn.Dropout(dropout)
        self.encoder = nn.ModuleList(nn.TransformerEncoderLayer(d, heads, ffn, dropout)
                                     for _ in range(layers))
        self.decoder = nn.ModuleList(nn.TransformerDecoderLayer(d, heads, ffn, dropout)
                                     for _ in range(layers))
        self.output = nn.Linear(d, vocab)

    def positions(self, length):
        import math
        pos = torch.arange(length, dtype=torch.float32).unsqueeze(1)
        rate = torch.exp(torch.arange(0, self.d, 2, dtype=torch.float32) *
                         (-math.log(10000.0) / self.d))
        pe = torch.zeros(length, self.d)
        pe[:, 0::2] = torch.sin(pos * rate)
        pe[:, 1::2] = torch.cos(pos * rate)[:, :self.d // 2]
        return pe

    def forward(self, tokens):
        length = tokens.size(2)
        pe = self.positions(length)
        src = self.dropout(self.embed(tokens[:, 0]) * self.d ** 0.5 + pe)
        tgt = self.dropout(self.embed(tokens[:, 1]) * self.d ** 0.5 + pe)
        memory = src.transpose(0, 1)  # [L, B, d]: the layers' default layout
        for layer in self.encoder:
            memory = layer(memory)
        causal = torch.full((length, length), float("-inf")).triu(1)
        out = tgt.transpose(0, 1)
        for layer in self.decoder:
            out = layer(out, memory, tgt_mask=causal)
        return self.output(out.transpose(0, 1))


def small_input_aux(aux):
    """torchvision's InceptionAux.forward, with models/inception.cc's pool: torchvision's
    (5x5, stride 3) needs the 17x17 maps of 299x299 images; smaller maps (75x75 images:
    3x3) are pooled adaptively to 5x5, as the zoo's are."""
    def forward(x):
        if x.shape[2] >= 17 and x.shape[3] >= 17:
            x = nn.functional.avg_pool2d(x, kernel_size=5, stride=3)
        else:
            x = nn.functional.adaptive_avg_pool2d(x, 5)
        x = aux.conv1(aux.conv0(x))
        x = nn.functional.adaptive_avg_pool2d(x, 1)
        return aux.fc(torch.flatten(x, 1))
    return forward


def make_model(name, num_classes, vocab):
    import torchvision
    if name in ("resnet50", "vgg19", "vgg16"):
        return getattr(torchvision.models, name)(num_classes=num_classes)
    if name == "inception_v3":  # with the auxiliary classifier, as the zoo's
        model = torchvision.models.inception_v3(num_classes=num_classes, aux_logits=True,
                                                init_weights=False)
        model.AuxLogits.forward = small_input_aux(model.AuxLogits)
        return model
    if name == "transformer":
        return Transformer(vocab)
    if name == "seq2seq_lstm":
        return Seq2SeqLstm(vocab)
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
    p.add_argument("--seq_len", type=int, default=16, help="token models: tokens per side")
    p.add_argument("--vocab", type=int, default=32000, help="token models: vocabulary")
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
    model = make_model(a.model, a.num_classes, a.vocab)
    params = sum(p.numel() for p in model.parameters())
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=a.bucket_mb)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.001, momentum=0.9, weight_decay=1e-4)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(100 + a.rank)
    tokens = a.model in ("seq2seq_lstm", "transformer")
    if tokens:  # as the zoo's synthetic_tokens: source and target ids in [2, vocab)
        x = torch.randint(2, a.vocab, (a.batch, 2, a.seq_len), generator=g)
        y = torch.randint(2, a.vocab, (a.batch, a.seq_len), generator=g)
    else:
        x = torch.randn(a.batch, 3, a.image_size, a.image_size, generator=g)
        y = torch.randint(0, 10, (a.batch,), generator=g)

    times = []
    for it in range(a.iterations):
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad()
        out = ddp(x)
        if tokens:
            loss = loss_fn(out.reshape(-1, out.size(-1)), y.reshape(-1))
        elif isinstance(out, tuple):  # inception_v3 in training mode: + the zoo's aux loss
            loss = loss_fn(out[0], y) + AUX_LOSS_WEIGHT * loss_fn(out[1], y)
        else:
            loss = loss_fn(out, y)
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
