#!/usr/bin/env python3
"""Two builds (or settings) of one bench_throughput configuration, run in interleaved
rounds into two raw CSVs (tools/bench_throughput.py run --out=A, then --out=B, round after
round): each file's runs in time order are the rounds, matched by position; printed and
optionally written: each side's median samples/s (min - max) and the median (min - max)
of the per-round B / A, per model, system and bandwidth.

  /usr/bin/python3 tools/experiments/throughput_ab.py \\
      --before=docs/results/throughput/hugepages_vgg19_before_2026-12-05_raw.csv \\
      --after=docs/results/throughput/hugepages_vgg19_after_2026-12-05_raw.csv

(docs/results/streaming/streaming.md, "Huge pages for the heap"). Or one raw CSV whose
runs differ in one column (`--split`: its empty or 0 value is A, every other value B),
per model, system, bandwidth, workers and placement:

  /usr/bin/python3 tools/experiments/throughput_ab.py --split=credit_bytes \
      --raw=docs/results/simulator/simulator_credit_2026-12-07_raw.csv

(docs/results/simulator/simulator.md, "The credit where a process has several remote
peers").
"""
import argparse
import collections
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import csv_io  # noqa: E402


def read(path, keep=None, rows=None):
    """{(model, system, bandwidth, workers, placement): [samples/s of the ok runs (those
    `keep` takes, where given), in time order]}; workers and placement "" where the CSV has
    no such column. rows: the CSV's rows already read."""
    out = collections.OrderedDict()
    for r in sorted(rows if rows is not None else csv_io.read_rows(path),
                    key=lambda r: r["time_utc"]):
        if r.get("status", "ok") != "ok" or (keep and not keep(r)):
            continue
        key = (r["model"], r["system"], float(r["bandwidth_gbps"]), r.get("workers", ""),
               r.get("placement", ""))
        out.setdefault(key, []).append(float(r["samples_per_second"]))
    return out


def split(path, field):
    """(A, B) of read(): the runs whose `field` is empty or 0, and the others (one value
    of it; exits when the others hold several)."""
    rows = csv_io.read_rows(path)
    values = {r.get(field) or "0" for r in rows} - {"0"}
    if len(values) > 1:
        sys.exit(f"throughput_ab: {path}'s {field} holds several values besides 0: "
                 f"{', '.join(sorted(values))}")
    a = read(path, lambda r: (r.get(field) or "0") == "0", rows)
    b = read(path, lambda r: (r.get(field) or "0") != "0", rows)
    return a, b


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
            "model": key[0], "system": key[1], "bandwidth_gbps": key[2],
            "workers": key[3], "placement": key[4], "rounds": n,
            "before": statistics.median(a[:n]), "before_min": min(a[:n]), "before_max": max(a[:n]),
            "after": statistics.median(b[:n]), "after_min": min(b[:n]), "after_max": max(b[:n]),
            "ratio": statistics.median(ratios), "ratio_min": min(ratios),
            "ratio_max": max(ratios), "faster_rounds": sum(r > 1 for r in ratios),
        })
    return rows


def table(rows):
    layout = any(r["workers"] or r["placement"] for r in rows)
    lines = ["| model | system | Gbit/s |" + (" workers | placement |" if layout else "")
             + " before, samples/s | after, samples/s | after ÷ before, "
             "rounds' median (min – max) | rounds faster | rounds |",
             "|---|---|---:|" + ("---:|---|" if layout else "") + "---:|---:|---:|---:|---:|"]
    for r in rows:
        where = f" {r['workers']} | {r['placement'] or 'colocated'} |" if layout else ""
        lines.append(
            f"| {r['model']} | {r['system']} | {r['bandwidth_gbps']:g} |{where} "
            f"{r['before']:.2f} ({r['before_min']:.2f} – {r['before_max']:.2f}) | "
            f"{r['after']:.2f} ({r['after_min']:.2f} – {r['after_max']:.2f}) | "
            f"**{r['ratio']:.3f}** ({r['ratio_min']:.3f} – {r['ratio_max']:.3f}) | "
            f"{r['faster_rounds']} | {r['rounds']} |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--before", default="", help="raw.csv of the first build or setting")
    p.add_argument("--after", default="", help="raw.csv of the second")
    p.add_argument("--raw", default="", help="one raw.csv of both, told apart by --split")
    p.add_argument("--split", default="",
                   help="with --raw: the column that tells them apart (empty or 0: before)")
    p.add_argument("--csv", default="", help="also write the rows here")
    a = p.parse_args(argv)
    if a.raw and a.split:
        rows = compare(*split(a.raw, a.split))
    elif a.before and a.after and not (a.raw or a.split):
        rows = compare(read(a.before), read(a.after))
    else:
        sys.exit("throughput_ab: give --before and --after, or --raw and --split")
    if not rows:
        sys.exit("throughput_ab: no configuration is in both files")
    print(table(rows))
    if a.csv:
        csv_io.write_rows(a.csv, [{k: round(v, 4) if isinstance(v, float) else v
                                   for k, v in r.items()} for r in rows])


if __name__ == "__main__":
    main()
