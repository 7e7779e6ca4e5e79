#!/usr/bin/python3
"""The throughput table and plot of docs/results/wire_dtype/wire_dtype.md from a
bench_throughput raw.csv with runs of several scheduling.wire_dtype values (`run --wire_dtypes=...`).

  sudo bazel run //tools:bench_throughput -- run --model=vgg19 --bandwidths=1 --modes=p3 \\
      --wire_dtypes=float32,bfloat16,float16 --runs=3 --out=$PWD/out/bench_wire
  (the same with --model=resnet50)
  /usr/bin/python3 tools/experiments/wire_dtype_throughput.py --raw=out/bench_wire/raw.csv

Per model, mode and bandwidth: the median over runs of each run's samples/s (itself the
median over the iterations after warm-up), the ratio to float32's median, and the link
bound for 4- and 2-byte values (results_lib.models.bandwidth_bound). `local` runs (one
process, no wire) get wire dtype "none" and no ratio or bound; the plot draws them as a
line. Writes docs/results/wire_dtype/wire_dtype_throughput.csv and its .png.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import csv_io, models, paths, raw_csv, runs  # noqa: E402

DTYPES = ["float32", "bfloat16", "float16"]
NO_WIRE = "none"  # the wire dtype of a `local` run


def timing(run):
    """(compute, wait) seconds per iteration of a run, the mean over its workers
    (summary.json's worker_timing): what the iteration spent computing and waiting for
    values."""
    workers = runs.summary_or_empty(run["output_dir"]).get("worker_timing") or []
    if not workers:
        return None
    return (statistics.mean(w["compute_seconds"] for w in workers),
            statistics.mean(w["wait_seconds"] for w in workers))


def bound(model, bw, batch, dtype, bytes_per_value):
    """The link bound in samples/s; "" where there is none (no link limit, or no wire)."""
    if dtype == NO_WIRE or bw <= 0:
        return ""
    return round(models.bandwidth_bound(model, bw, batch, bytes_per_value=bytes_per_value), 3)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--raw", default="out/bench_wire/raw.csv")
    parser.add_argument("--csv", default=paths.results("wire_dtype", "wire_dtype_throughput.csv"))
    parser.add_argument("--plot", default=paths.results("wire_dtype", "wire_dtype_throughput.png"))
    a = parser.parse_args()
    groups = {}
    for r in raw_csv.read_finished(a.raw):
        key = (r["model"], r["mode"], float(r["bandwidth_gbps"]), int(r["batch_per_worker"]))
        groups.setdefault(key, {}).setdefault(raw_csv.wire_dtype(r) or NO_WIRE, []).append(r)
    table = []
    for (model, mode, bw, batch), by_dtype in sorted(groups.items()):
        base = by_dtype.get("float32")
        base_median = statistics.median(float(r["samples_per_second"]) for r in base) \
            if base else None
        for dtype in DTYPES + [NO_WIRE]:
            runs = by_dtype.get(dtype)
            if not runs:
                continue
            sps = [float(r["samples_per_second"]) for r in runs]
            median = statistics.median(sps)
            times = [t for t in (timing(r) for r in runs) if t is not None]
            table.append({
                "model": model, "mode": mode, "bandwidth_gbps": bw, "batch_per_worker": batch,
                "wire_dtype": dtype, "runs": len(sps),
                "median_samples_per_second": round(median, 3),
                "min_samples_per_second": round(min(sps), 3),
                "max_samples_per_second": round(max(sps), 3),
                "ratio_to_float32": round(median / base_median, 3)
                if base_median and dtype != NO_WIRE else "",
                "bound_4_bytes": bound(model, bw, batch, dtype, 4),
                "bound_2_bytes": bound(model, bw, batch, dtype, 2),
                "bytes_sent_rank0_median": statistics.median(
                    int(r["bytes_sent_rank0"]) for r in runs if r["bytes_sent_rank0"]),
                "compute_seconds_median": round(statistics.median(t[0] for t in times), 3)
                if times else "",
                "wait_seconds_median": round(statistics.median(t[1] for t in times), 3)
                if times else "",
                "load1_median": statistics.median(float(r["load1"]) for r in runs),
                "first_run_utc": min(r["time_utc"] for r in runs),
            })
    csv_io.write_rows(a.csv, table)
    print("| model | mode | Gbit/s | wire dtype | runs | median samples/s (min–max) | ÷ float32 | "
          "link bound 4 B | link bound 2 B | compute / wait s per iteration | load |")
    print("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for t in table:
        b4, b2 = (f"{b:.2f}" if b != "" else "–" for b in (t["bound_4_bytes"], t["bound_2_bytes"]))
        print(f"| {t['model']} | {t['mode']} | {t['bandwidth_gbps'] or 'unlimited'} | "
              f"{t['wire_dtype']} | {t['runs']} | "
              f"{t['median_samples_per_second']:.2f} ({t['min_samples_per_second']:.2f}–"
              f"{t['max_samples_per_second']:.2f}) | {t['ratio_to_float32']} | {b4} | {b2} | "
              f"{t['compute_seconds_median']} / {t['wait_seconds_median']} | "
              f"{t['load1_median']} |")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    local = {t["model"]: t for t in table if t["wire_dtype"] == NO_WIRE}
    keys = sorted({(t["model"], t["bandwidth_gbps"]) for t in table if t["wire_dtype"] != NO_WIRE})
    fig, axes = plt.subplots(1, len(keys), figsize=(5 * len(keys), 4), squeeze=False)
    for ax, (model, bw) in zip(axes[0], keys):
        mine = [t for t in table if t["model"] == model and t["bandwidth_gbps"] == bw
                and t["wire_dtype"] != NO_WIRE]
        names = [t["wire_dtype"] for t in mine]
        med = [t["median_samples_per_second"] for t in mine]
        err = [[m - t["min_samples_per_second"] for m, t in zip(med, mine)],
               [t["max_samples_per_second"] - m for m, t in zip(med, mine)]]
        ax.bar(names, med, yerr=err, color=["#888", "#3a7", "#37a"][:len(names)], capsize=4)
        if mine[0]["bound_4_bytes"] != "":
            ax.axhline(mine[0]["bound_4_bytes"], color="k", ls="--",
                       label="link bound, 4-byte values")
            ax.axhline(mine[0]["bound_2_bytes"], color="r", ls=":",
                       label="link bound, 2-byte values")
        if model in local:
            ax.axhline(local[model]["median_samples_per_second"], color="#a60", ls="-.",
                       label="local (1 process, no wire)")
        ax.set_title(f"{model}, p3, " + (f"{bw:g} Gbit/s" if bw > 0 else "no link limit"))
        ax.set_ylabel("samples/s (median over runs)")
        ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(a.plot, dpi=110)
    print(f"wrote {a.csv} and {a.plot}")


if __name__ == "__main__":
    main()
