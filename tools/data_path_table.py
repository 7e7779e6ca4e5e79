#!/usr/bin/python3
"""Before/after table of the data-path work (docs/results/throughput.md, "Data path"):
medians over runs of bench_throughput's raw CSVs of the binaries before and after, side
by side with PyTorch DDP and the bounds, checked against the targets of the data-path
issue.

  /usr/bin/python3 tools/data_path_table.py \
      --after=docs/results/throughput_raw.csv --before=docs/results/throughput_before_raw.csv \
      --csv=docs/results/data_path.csv          # prints the markdown table

Bounds as in docs/results/throughput.md: bandwidth bound = global batch / (4 bytes x
parameters / goodput), goodput = 0.957 x rate; compute bound = 2 x `local` (one process,
same batch) measured in the same session as the "after" runs.
"""
import argparse
import collections
import csv
import statistics
import sys

PARAMS = {"resnet50": 25557032, "vgg19": 143667240, "seq2seq_lstm": 58114816}
TCP_GOODPUT = 0.957
ORDER = ["resnet50", "vgg19", "seq2seq_lstm"]


def load(path):
    """{(model, mode, bandwidth, workers): [samples/s, ...]} of the runs that ended ok."""
    runs = collections.defaultdict(list)
    batch = {}
    for row in csv.DictReader(open(path)):
        if row["status"] != "ok":
            continue
        key = (row["model"], row["mode"], float(row["bandwidth_gbps"] or 0), int(row["workers"]))
        runs[key].append(float(row["samples_per_second"]))
        batch[row["model"]] = int(row["batch_per_worker"])
    return runs, batch


def med(values):
    return statistics.median(values) if values else None


def fmt(x, digits=1):
    return "–" if x is None else f"{x:.{digits}f}"


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--after", required=True)
    p.add_argument("--before", required=True)
    p.add_argument("--csv", default="")
    args = p.parse_args()
    after, batch = load(args.after)
    before, _ = load(args.before)
    rows = []
    for model in ORDER:
        if model not in batch:
            continue
        local = med(after.get((model, "local", 0.0, 1), []))
        compute = 2 * local if local else None
        for bw in (1.0, 2.5, 5.0, 0.0):
            p3_after = after.get((model, "p3", bw, 2), [])
            if not p3_after:
                continue
            p3_before = before.get((model, "p3", bw, 2), [])
            ddp = after.get((model, "ddp", bw, 2), [])
            bandwidth = (2 * batch[model] / (4 * PARAMS[model] / (bw * 1e9 / 8 * TCP_GOODPUT))
                         if bw > 0 else None)
            bounds = [b for b in (compute, bandwidth) if b is not None]
            bound = min(bounds) if bounds else None
            rows.append({
                "model": model, "bandwidth_gbps": bw or "unlimited",
                "p3_before": med(p3_before), "p3_after": med(p3_after),
                "runs_before": len(p3_before), "runs_after": len(p3_after),
                "ddp": med(ddp), "runs_ddp": len(ddp), "local": local,
                "bandwidth_bound": bandwidth, "compute_bound": compute, "lower_bound": bound,
                "after_over_before": ratio(med(p3_after), med(p3_before)),
                "p3_over_ddp": ratio(med(p3_after), med(ddp)),
                "p3_over_bound": ratio(med(p3_after), bound),
            })
        one_after = after.get((model, "p3", 0.0, 1), [])
        if one_after:
            local_before = med(before.get((model, "local", 0.0, 1), []))
            one_before = med(before.get((model, "p3", 0.0, 1), []))
            rows.append({
                "model": model, "bandwidth_gbps": "1 worker + 1 server, unlimited",
                "p3_before": one_before, "p3_after": med(one_after),
                "runs_before": len(before.get((model, "p3", 0.0, 1), [])),
                "runs_after": len(one_after), "ddp": None, "runs_ddp": 0, "local": local,
                "bandwidth_bound": None, "compute_bound": local, "lower_bound": local,
                "after_over_before": ratio(med(one_after), one_before),
                "p3_over_ddp": None, "p3_over_bound": ratio(med(one_after), local),
                "before_over_its_local": ratio(one_before, local_before),
            })
    print("| model | Gbit/s | p3 before | p3 after | after ÷ before | PyTorch DDP | p3 ÷ DDP "
          "| lower bound | p3 ÷ bound | runs (before / after / DDP) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['model']} | {r['bandwidth_gbps']} | {fmt(r['p3_before'], 2)} | "
              f"{fmt(r['p3_after'], 2)} | {fmt(r['after_over_before'], 2)} | {fmt(r['ddp'], 2)} | "
              f"{fmt(r['p3_over_ddp'], 2)} | {fmt(r['lower_bound'], 2)} | "
              f"{fmt(r['p3_over_bound'], 2)} | {r['runs_before']} / {r['runs_after']} / "
              f"{r['runs_ddp']} |")
    if args.csv:
        fields = ["model", "bandwidth_gbps", "p3_before", "p3_after", "after_over_before", "ddp",
                  "p3_over_ddp", "local", "compute_bound", "bandwidth_bound", "lower_bound",
                  "p3_over_bound", "before_over_its_local", "runs_before", "runs_after",
                  "runs_ddp"]
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
            w.writeheader()
            for r in rows:
                w.writerow({k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in r.items()})
        print(f"wrote {args.csv}", file=sys.stderr)


if __name__ == "__main__":
    main()
