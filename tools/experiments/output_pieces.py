#!/usr/bin/env python3
"""The sequence models' output projection in pieces (`model.output_pieces`,
docs/models.md), P3 with the layer whole and in pieces against PyTorch DDP, round by
round (docs/results/throughput/throughput.md, "The output projection in pieces").

  # the runs: per round and model, under the machine lock, as root (P3_LAUNCHER etc. set)
  /usr/bin/python3 tools/bench_throughput.py run --model=<m> --iterations=17 --warmup=2 \\
      --bandwidths=<b> --runs=1 --slice_params=0 --modes=p3 --set=model.output_pieces=<k> \\
      --out=<DIR>/<m>/k<k>            # DDP: --modes= --ddp --out=<DIR>/<m>/ddp
  # one raw CSV, a column output_pieces added (0: DDP's run)
  /usr/bin/python3 tools/experiments/output_pieces.py merge <DIR> OUT_raw.csv
  # the table (and --csv, --plot)
  /usr/bin/python3 tools/experiments/output_pieces.py table OUT_raw.csv \\
      [--predicted=docs/results/throughput/output_pieces_predicted_2026-12-06.csv]

Per model, link and piece count: P3's median samples/s (min – max), the rounds' median of
P3 ÷ the same round's P3 with the layer whole (1 piece), and of P3 ÷ the same round's DDP,
and P3 ÷ the bandwidth bound (results_lib.models.bandwidth_bound). A round is the k-th run
of each configuration at that model and link.
"""
import argparse
import collections
import glob
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import csv_io, models, raw_csv  # noqa: E402

NAMES = {"seq2seq_lstm": "LSTM", "transformer": "Transformer"}
FIELDS = ["model", "bandwidth_gbps", "output_pieces", "rounds", "slices", "p3_median_sps",
          "p3_min_sps", "p3_max_sps", "over_whole", "over_whole_min", "over_whole_max",
          "over_ddp", "over_ddp_min", "over_ddp_max", "ddp_median_sps", "bound_sps",
          "p3_over_bound", "predicted_sps", "load1_median"]


def merge(directory, out):
    """Every finished run under directory/<model>/{k<pieces>,ddp,local}/raw.csv, in time
    order, with the column output_pieces of results_lib.raw_csv (empty: whole)."""
    rows = []
    for path in sorted(glob.glob(os.path.join(directory, "*", "*", "raw.csv"))):
        label = os.path.basename(os.path.dirname(path))
        # Runs of bench_throughput.py before it recorded the column: the directory's.
        pieces = int(label.lstrip("k")) if label.startswith("k") else 1
        for r in raw_csv.read_finished(path):
            if pieces > 1:
                r["output_pieces"] = pieces
            rows.append(r)
    rows.sort(key=lambda r: r["time_utc"])
    csv_io.write_rows(out, rows, raw_csv.FIELDS)
    print(f"{len(rows)} runs -> {out}")


def median_range(values):
    return statistics.median(values), min(values), max(values)


def points(path, predicted_path=None):
    runs = collections.defaultdict(list)  # (model, bw, pieces) -> samples/s in time order
    loads = collections.defaultdict(list)
    slices = collections.defaultdict(set)  # the sizes the runs had (the launcher's choice)
    batch = {}
    for r in sorted(raw_csv.read_finished(path), key=lambda r: r["time_utc"]):
        if r["mode"] not in ("p3", "ddp"):
            continue
        pieces = 0 if r["mode"] == "ddp" else raw_csv.output_pieces(r)  # 0: DDP's runs
        key = (r["model"], float(r["bandwidth_gbps"]), pieces)
        runs[key].append(raw_csv.samples(r))
        if r["mode"] != "ddp":
            slices[key].add(raw_csv.slice_params(r))
        batch[r["model"]] = int(r["batch_per_worker"])
        if r.get("load1"):
            loads[key].append(float(r["load1"]))
    predicted = {}
    if predicted_path:
        for p in csv_io.read_rows(predicted_path):
            predicted[(p["model"], float(p["bandwidth_gbps"]), int(p["output_pieces"]))] = float(
                p["predicted_samples_per_second"])
    out = []
    for (model, bw, pieces), sps in sorted(runs.items(), key=lambda kv: (
            kv[0][0], kv[0][1] == 0, kv[0][1], kv[0][2] == 0, kv[0][2])):
        whole = runs.get((model, bw, 1), [])
        ddp = runs.get((model, bw, 0), [])
        over_whole = [a / b for a, b in zip(sps, whole)]
        over_ddp = [a / b for a, b in zip(sps, ddp)]
        bound = models.bandwidth_bound(model, bw, batch[model])
        med, lo, hi = median_range(sps)
        row = {"model": model, "bandwidth_gbps": bw, "output_pieces": pieces,
               "rounds": len(sps),
               "slices": "/".join(str(x) for x in sorted(slices[(model, bw, pieces)])),
               "p3_median_sps": round(med, 3), "p3_min_sps": lo,
               "p3_max_sps": hi, "ddp_median_sps": round(statistics.median(ddp), 3)
               if ddp else "",
               "bound_sps": "" if bound == float("inf") else round(bound, 3),
               "p3_over_bound": "" if bound == float("inf") else round(med / bound, 3),
               "predicted_sps": predicted.get((model, bw, pieces), ""),
               "load1_median": round(statistics.median(loads[(model, bw, pieces)]), 2)
               if loads[(model, bw, pieces)] else ""}
        for name, ratios in (("over_whole", over_whole), ("over_ddp", over_ddp)):
            if ratios and pieces != 0:
                m, a, b = median_range(ratios)
                row.update({name: round(m, 3), f"{name}_min": round(a, 3),
                            f"{name}_max": round(b, 3)})
            else:
                row.update({name: "", f"{name}_min": "", f"{name}_max": ""})
        out.append(row)
    return out


def table(rows):
    lines = ["| model | link | output | slices | samples/s, median (min – max) | ÷ whole, rounds' median "
             "(min – max) | ÷ DDP, rounds' median (min – max) | ÷ bound | predicted "
             "samples/s | rounds |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        bw = "unlimited" if r["bandwidth_gbps"] == 0 else f"{r['bandwidth_gbps']:g} Gbit/s"
        what = ("DDP (whole)" if r["output_pieces"] == 0 else
                "P3, whole" if r["output_pieces"] == 1 else f"P3, {r['output_pieces']} pieces")

        def ratio(name):
            if r[name] == "":
                return "–"
            return f"**{r[name]:.3f}** ({r[name + '_min']:.3f} – {r[name + '_max']:.3f})"
        pred = r["predicted_sps"]
        lines.append(
            f"| {NAMES.get(r['model'], r['model'])} | {bw} | {what} | {r['slices'] or '–'} | "
            f"{r['p3_median_sps']:.2f} ({r['p3_min_sps']:.2f} – {r['p3_max_sps']:.2f}) | "
            f"{ratio('over_whole') if r['output_pieces'] > 1 else '–'} | {ratio('over_ddp')} | "
            f"{'–' if r['p3_over_bound'] == '' else format(r['p3_over_bound'], '.3f')} | "
            f"{'–' if pred == '' else format(pred, '.2f')} | {r['rounds']} |")
    return "\n".join(lines)


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    model_list = sorted({r["model"] for r in rows})
    links = sorted({r["bandwidth_gbps"] for r in rows}, key=lambda b: (b == 0, b))
    fig, grid = plt.subplots(len(model_list), len(links), figsize=(3.6 * len(links),
                                                                     3.2 * len(model_list)),
                             squeeze=False)
    for ax, (model, bw) in ((grid[i][j], (m, b)) for i, m in enumerate(model_list)
                            for j, b in enumerate(links)):
        sel = [r for r in rows if (r["model"], r["bandwidth_gbps"]) == (model, bw)]
        if not sel:
            ax.axis("off")
            continue
        labels = ["DDP" if r["output_pieces"] == 0 else
                  "whole" if r["output_pieces"] == 1 else f"{r['output_pieces']} pieces"
                  for r in sel]
        med = [r["p3_median_sps"] for r in sel]
        err = [[m - r["p3_min_sps"] for m, r in zip(med, sel)],
               [r["p3_max_sps"] - m for m, r in zip(med, sel)]]
        colors = ["#999999" if r["output_pieces"] == 0 else "#4c72b0" for r in sel]
        ax.bar(labels, med, yerr=err, color=colors, capsize=3)
        if sel[0]["bound_sps"] != "":
            ax.axhline(sel[0]["bound_sps"], color="#c44e52", ls="--", lw=1,
                       label="bandwidth bound")
            ax.axhline(0.95 * sel[0]["bound_sps"], color="#c44e52", ls=":", lw=1,
                       label="0.95 of it")
            ax.legend(fontsize=7, loc="lower right")
        link = "unlimited" if bw == 0 else f"{bw:g} Gbit/s"
        ax.set_title(f"{NAMES.get(model, model)}, {link}", fontsize=9)
        ax.set_ylabel("samples/s (median, min – max)", fontsize=8)
        ax.tick_params(labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot -> {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    m = sub.add_parser("merge")
    m.add_argument("directory")
    m.add_argument("out")
    t = sub.add_parser("table")
    t.add_argument("raw")
    t.add_argument("--predicted", default="")
    t.add_argument("--csv", default="")
    t.add_argument("--plot", default="")
    a = ap.parse_args()
    if a.command == "merge":
        merge(a.directory, a.out)
        return
    rows = points(a.raw, a.predicted or None)
    print(table(rows))
    if a.csv:
        csv_io.write_rows(a.csv, rows, FIELDS)
    if a.plot:
        plot(rows, a.plot)


if __name__ == "__main__":
    main()
