#!/usr/bin/env python3
"""P3 against PyTorch DDP, round by round (docs/results/throughput/throughput.md, "P3
against DDP"): the runs of `tools/bench_throughput.py run --ddp --modes=p3`, each round
running P3 and DDP once at every bandwidth, paired in the order they ran. P3's runs are those of one slice size per sweep
(`--sweep=LABEL=PATH@auto`: the launcher's automatic size; default 40000), so one raw
CSV with several sizes gives one sweep each.

  /usr/bin/python3 tools/experiments/p3_vs_ddp.py \\
      --sweep=2026-12-05=docs/results/throughput/p3_vs_ddp_2026-12-05_raw.csv \\
      --sweep=2026-12-02=docs/results/throughput/throughput_2026-12-02_raw.csv \\
      --csv=docs/results/throughput/p3_vs_ddp_2026-12-05.csv \\
      --plot=docs/results/throughput/p3_vs_ddp_2026-12-05.png

Per sweep, model and bandwidth: P3's and DDP's median samples/s (min – max over the
runs), P3 ÷ DDP as the median of the rounds' ratios (the k-th P3 run over the k-th DDP
run: a round's two runs are minutes apart, so they share the machine's state), and P3 ÷
the bandwidth bound (results_lib.models.bandwidth_bound: each link carries P values each
way per iteration at TCP's goodput). The issue's targets are printed beside them.
"""
import argparse
import collections
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import csv_io, models, raw_csv  # noqa: E402

MODELS = ["resnet50", "vgg19", "seq2seq_lstm", "inception_v3", "transformer"]
NAMES = {"resnet50": "ResNet-50", "vgg19": "VGG-19", "seq2seq_lstm": "LSTM",
         "inception_v3": "Inception-v3", "transformer": "Transformer"}
FIELDS = ["sweep", "model", "bandwidth_gbps", "runs", "p3_median_sps", "p3_min_sps",
          "p3_max_sps", "ddp_median_sps", "ddp_min_sps", "ddp_max_sps", "p3_over_ddp",
          "p3_over_ddp_min", "p3_over_ddp_max", "bound_sps", "p3_over_bound", "load1_median",
          "target_p3_over_ddp", "target_p3_over_bound"]


def target(model, bw):
    """Issue 35's targets: (P3 ÷ DDP, P3 ÷ bound), None where it sets none."""
    if bw == 1.0:
        return 1.1, 0.95
    if model in ("resnet50", "vgg19"):
        return 1.0, None
    return None, None


def p3_slice_matches(row, slices):
    """Whether a P3 run has the sweep's slice size: "default" (40000, given), "auto" (the
    launcher's automatic size, whatever it chose) or a number (given, not automatic)."""
    if slices == "auto":
        return raw_csv.slice_auto(row)
    want = raw_csv.DEFAULT_SLICE_PARAMS if slices == "default" else int(slices)
    return not raw_csv.slice_auto(row) and raw_csv.slice_params(row) == want


def points(label, path, slices="default"):
    """Rows of FIELDS for one sweep's raw.csv (2 workers; P3's runs of the slice size
    `slices`, see p3_slice_matches)."""
    runs = collections.defaultdict(lambda: {"p3": [], "ddp": []})
    loads = collections.defaultdict(list)
    rows = sorted(raw_csv.read_finished(path), key=lambda r: r["time_utc"])
    for r in rows:
        if r["workers"] != "2" or r["mode"] not in ("p3", "ddp") or raw_csv.is_traced(r):
            continue
        if r.get("wire_dtype", "") not in ("", "float32"):
            continue
        if r["mode"] == "p3" and not p3_slice_matches(r, slices):
            continue
        key = (r["model"], float(r["bandwidth_gbps"]))
        runs[key][r["mode"]].append(raw_csv.samples(r))
        if r.get("load1"):
            loads[key].append(float(r["load1"]))
    out = []
    for (model, bw), v in sorted(runs.items(), key=lambda kv: (
            MODELS.index(kv[0][0]) if kv[0][0] in MODELS else 99, kv[0][1] == 0, kv[0][1])):
        p3, ddp = v["p3"], v["ddp"]
        if not p3 or not ddp:
            continue
        ratios = [a / b for a, b in zip(p3, ddp)]
        batch = int(next(r["batch_per_worker"] for r in rows if r["model"] == model))
        bound = models.bandwidth_bound(model, bw, batch)
        t_ddp, t_bound = target(model, bw)
        out.append({
            "sweep": label, "model": model, "bandwidth_gbps": bw, "runs": len(ratios),
            "p3_median_sps": round(statistics.median(p3), 3), "p3_min_sps": min(p3),
            "p3_max_sps": max(p3), "ddp_median_sps": round(statistics.median(ddp), 3),
            "ddp_min_sps": min(ddp), "ddp_max_sps": max(ddp),
            "p3_over_ddp": round(statistics.median(ratios), 3),
            "p3_over_ddp_min": round(min(ratios), 3), "p3_over_ddp_max": round(max(ratios), 3),
            "bound_sps": "" if bound == float("inf") else round(bound, 3),
            "p3_over_bound": "" if bound == float("inf")
            else round(statistics.median(p3) / bound, 3),
            "load1_median": round(statistics.median(loads[(model, bw)]), 2)
            if loads[(model, bw)] else "",
            "target_p3_over_ddp": t_ddp or "", "target_p3_over_bound": t_bound or ""})
    return out


def table(rows):
    lines = ["| sweep | model | Gbit/s | P3 samples/s | DDP samples/s | P3 ÷ DDP, rounds' median "
             "(min – max) | target | P3 ÷ bound | target | runs |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        bw = "unlimited" if r["bandwidth_gbps"] == 0 else f"{r['bandwidth_gbps']:g}"
        met = ""
        if r["target_p3_over_ddp"]:
            met = " ✓" if r["p3_over_ddp"] >= r["target_p3_over_ddp"] else " ✗"
        met_b = ""
        if r["target_p3_over_bound"] and r["p3_over_bound"] != "":
            met_b = " ✓" if r["p3_over_bound"] >= r["target_p3_over_bound"] else " ✗"
        lines.append(
            f"| {r['sweep']} | {NAMES.get(r['model'], r['model'])} | {bw} | "
            f"{r['p3_median_sps']:.2f} ({r['p3_min_sps']:.2f} – {r['p3_max_sps']:.2f}) | "
            f"{r['ddp_median_sps']:.2f} ({r['ddp_min_sps']:.2f} – {r['ddp_max_sps']:.2f}) | "
            f"**{r['p3_over_ddp']:.3f}**{met} ({r['p3_over_ddp_min']:.3f} – "
            f"{r['p3_over_ddp_max']:.3f}) | {r['target_p3_over_ddp'] or '–'} | "
            f"{r['p3_over_bound'] if r['p3_over_bound'] == '' else format(r['p3_over_bound'], '.3f')}"
            f"{met_b} | {r['target_p3_over_bound'] or '–'} | {r['runs']} |")
    return "\n".join(lines)


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    sweeps = list(dict.fromkeys(r["sweep"] for r in rows))
    present = [m for m in MODELS if any(r["model"] == m for r in rows)]
    fig, axes = plt.subplots(1, len(present), figsize=(4 * len(present), 3.8), sharey=True,
                             squeeze=False)
    axes = axes[0]
    for ax, model in zip(axes, present):
        for i, s in enumerate(sweeps):
            pts = [r for r in rows if r["sweep"] == s and r["model"] == model]
            if not pts:
                continue
            xs = [r["bandwidth_gbps"] or 10.0 for r in pts]
            ys = [r["p3_over_ddp"] for r in pts]
            err = [[r["p3_over_ddp"] - r["p3_over_ddp_min"] for r in pts],
                   [r["p3_over_ddp_max"] - r["p3_over_ddp"] for r in pts]]
            ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=s, color=f"C{i}",
                        alpha=1.0 if i == 0 else 0.55)
        ax.axhline(1.0, color="gray", ls="--", lw=1)
        ax.set_xscale("log")
        ax.set_xticks([1, 2.5, 5, 10])
        ax.set_xticklabels(["1", "2.5", "5", "unlim."])
        ax.set_title(NAMES[model])
        ax.set_xlabel("link, Gbit/s")
    axes[0].set_ylabel("P3 ÷ DDP (rounds' median, min–max)")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sweep", action="append", required=True,
                    help="LABEL=raw.csv[@SLICES] of bench_throughput.py run (repeatable; first "
                         "= newest). SLICES picks P3's runs: default (40000), auto (the "
                         "launcher's choice, slice_auto) or a number")
    ap.add_argument("--csv", default="", help="write the points here")
    ap.add_argument("--plot", default="", help="write P3 ÷ DDP per model here (PNG)")
    a = ap.parse_args()
    rows = []
    for s in a.sweep:
        label, _, path = s.partition("=")
        path, _, slices = path.partition("@")
        if not path:
            sys.exit(f"--sweep={s}: give LABEL=path[@SLICES]")
        slices = slices or "default"
        if slices not in ("default", "auto") and not slices.isdigit():
            sys.exit(f"--sweep={s}: SLICES is default, auto or a number of parameters")
        rows += points(label, path, slices)
    print(table(rows))
    if a.csv:
        csv_io.write_rows(a.csv, rows, FIELDS)
        print(f"wrote {a.csv}")
    if a.plot:
        plot(rows, a.plot)


if __name__ == "__main__":
    main()
