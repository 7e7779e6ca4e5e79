#!/usr/bin/env python3
"""Two builds (or settings) of one bench_throughput configuration, run in interleaved
rounds into two raw CSVs (tools/bench_throughput.py run --out=A, then --out=B, round after
round): each file's runs in time order are the rounds, matched by position; printed and
optionally written: each side's median samples/s (min - max) and the median (min - max)
of the per-round B / A, per model, system and bandwidth.

  /usr/bin/python3 tools/experiments/throughput_ab.py \\
      --before=docs/results/throughput/hugepages_vgg19_before_2026-12-05_raw.csv \\
      --after=docs/results/throughput/hugepages_vgg19_after_2026-12-05_raw.csv

(docs/results/streaming/streaming.md, "Huge pages for the heap").
"""
import argparse
import collections
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import csv_io  # noqa: E402


def read(path):
    """{(model, system, bandwidth): [samples/s of the ok runs, in time order]}."""
    out = collections.OrderedDict()
    for r in sorted(csv_io.read_rows(path), key=lambda r: r["time_utc"]):
        if r.get("status", "ok") != "ok":
            continue
        key = (r["model"], r["system"], float(r["bandwidth_gbps"]))
        out.setdefault(key, []).append(float(r["samples_per_second"]))
    return out


def compare(before, after):
    """Rows: one per configuration in both files, with the per-round ratios."""
    rows = []
    for key, a in before.items():
        b = after.get(key)
        if not b:
            continue
        n = min(len(a), len(b))
        ratios = [y / x for x, y in zip(a[:n], b[:n])]
        rows.append({
            "model": key[0], "system": key[1], "bandwidth_gbps": key[2], "rounds": n,
            "before": statistics.median(a[:n]), "before_min": min(a[:n]), "before_max": max(a[:n]),
            "after": statistics.median(b[:n]), "after_min": min(b[:n]), "after_max": max(b[:n]),
            "ratio": statistics.median(ratios), "ratio_min": min(ratios),
            "ratio_max": max(ratios), "faster_rounds": sum(r > 1 for r in ratios),
        })
    return rows


def table(rows):
    lines = ["| model | system | Gbit/s | before, samples/s | after, samples/s | after ÷ before, "
             "rounds' median (min – max) | rounds faster | rounds |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['system']} | {r['bandwidth_gbps']:g} | "
            f"{r['before']:.2f} ({r['before_min']:.2f} – {r['before_max']:.2f}) | "
            f"{r['after']:.2f} ({r['after_min']:.2f} – {r['after_max']:.2f}) | "
            f"**{r['ratio']:.3f}** ({r['ratio_min']:.3f} – {r['ratio_max']:.3f}) | "
            f"{r['faster_rounds']} | {r['rounds']} |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--before", required=True, help="raw.csv of the first build or setting")
    p.add_argument("--after", required=True, help="raw.csv of the second")
    p.add_argument("--csv", default="", help="also write the rows here")
    a = p.parse_args(argv)
    rows = compare(read(a.before), read(a.after))
    if not rows:
        sys.exit("throughput_ab: no configuration is in both files")
    print(table(rows))
    if a.csv:
        csv_io.write_rows(a.csv, [{k: round(v, 4) if isinstance(v, float) else v
                                   for k, v in r.items()} for r in rows])


if __name__ == "__main__":
    main()
