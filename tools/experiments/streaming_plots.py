#!/usr/bin/env python3
"""CPU per GB and goodput of the streaming benchmark as plots (docs/results/streaming/
streaming.md, "Plots"), drawn from the committed CSVs of tools/bench_streaming.py; no
benchmark run. Each CSV is given as LABEL=path (--csv, repeatable, in the plot's order; a
label given twice pools its files' runs). Every command prints the medians it plots as
a markdown table, then draws the PNG if --png is given.

The three plots of the page, and the files behind them (one label per CSV; the table each
command prints gives every point's runs: 5 per rate and build in (a); 3 or 5 per sitting
and rate in (b); 14 and 5 per build in (c)):

  # (a) today: host CPU s per GB by path, p3 against iperf3 (memcpy for the shared-memory
  # row), and p3 ÷ iperf3 with the issue's 1.25 line: the interleaved A/B of 12:32
  /usr/bin/python3 tools/experiments/streaming_plots.py today \\
      --csv=before=docs/results/streaming/streaming_ab_2026-12-05c_before.csv \\
      --csv=after=docs/results/streaming/streaming_ab_2026-12-05c_after.csv \\
      --png=docs/results/streaming/cpu_per_gb_2026-12-05.png
  # (b) the history: goodput ÷ iperf3, CPU s per GB and p3 ÷ iperf3 CPU per sitting at
  # 2.5 and 5 Gbit/s and on loopback (--rates), with the issue's targets
  /usr/bin/python3 tools/experiments/streaming_plots.py history \\
      --csv="12-01 03:58=docs/results/streaming/streaming.csv" \\
      --csv="12-01 06:05=docs/results/streaming/streaming_after.csv" \\
      --csv="12-02 10:14=docs/results/streaming/streaming_2026-12-02.csv" \\
      --csv="12-03 01:19=docs/results/streaming/streaming_2026-12-03.csv" \\
      --csv="12-04 23:50=docs/results/streaming/streaming_2026-12-04.csv" \\
      --csv="12-05 06:49=docs/results/streaming/streaming_2026-12-05.csv" \\
      --csv="12-05 10:26=docs/results/streaming/streaming_2026-12-05b.csv" \\
      --csv="12-05 11:40=docs/results/streaming/streaming_2026-12-05c.csv" \\
      --csv="12-05 12:32=docs/results/streaming/streaming_ab_2026-12-05c_after.csv" \\
      --png=docs/results/streaming/history_2026-12-05.png
  # (c) the shared-memory path: goodput ÷ memcpy and CPU s per GB, per build, in the
  # A/B of the batches (12:16) and today's (12:32)
  /usr/bin/python3 tools/experiments/streaming_plots.py shm \\
      --csv="before 12:16=docs/results/streaming/shm_ab_2026-12-05_before.csv" \\
      --csv="after 12:16=docs/results/streaming/shm_ab_2026-12-05_after.csv" \\
      --csv="before 12:32=docs/results/streaming/streaming_ab_2026-12-05c_before.csv" \\
      --csv="after 12:32=docs/results/streaming/streaming_ab_2026-12-05c_after.csv" \\
      --png=docs/results/streaming/shm_2026-12-05.png

What each figure is, per CSV row (one run; tools/bench_streaming.py's header says how
they are measured):
- goodput ÷ iperf3: `ratio` (the run's goodput over the iperf3 run right before it);
  goodput ÷ memcpy: `goodput_to_memcpy`;
- p3's host CPU s per GB: `host_cpu_s_per_gb` (the whole host's busy time, softirq
  included, per GB across both directions); iperf3's: `iperf3_host_cpu_s_per_gb`; p3 ÷
  iperf3: `cpu_ratio_to_iperf3` (the two of the same run); memcpy's CPU s per GB:
  `memcpy_cpu_s_per_gb`, and p3 ÷ memcpy their quotient per run;
- p3's processes' CPU s per GB: `cpu_s_per_gb` (worker + server, all threads): the one
  CPU figure every CSV since 2026-12-01 has (the host's arrived on 2026-12-02, iperf3's
  on 2026-12-04; a sitting without them has no point there).
A plotted point is the median over the label's runs of that path (rate, or the shared-
memory path), its bar the runs' min – max; the table gives the number of runs and the
1-minute load average at their starts (`load1_start`). A sitting's commit is the
bench_streaming binary's (`commit`; "+dirty": built from a tree with changes), or, for a
binary without the stamp, "tree <driver_commit>" (the worktree the driver ran in).
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import csv_io  # noqa: E402

# Issue 35's targets: goodput ÷ iperf3 per rate (0 = loopback), host CPU per GB against
# iperf3's, goodput of the shared-memory path against memcpy's.
GOODPUT_TARGET = {2.5: 0.95, 5.0: 0.9, 0.0: 0.6}
CPU_RATIO_TARGET = 1.25
MEMCPY_TARGET = 0.5
SHM = "shared memory"
# The columns each command reads; a CSV without one of them is refused.
NEEDS = {
    "today": ["date", "commit", "rate_gbps", "load1_start", "ratio", "host_cpu_s_per_gb",
              "iperf3_host_cpu_s_per_gb", "cpu_ratio_to_iperf3"],
    "history": ["date", "commit", "rate_gbps", "load1_start", "ratio", "cpu_s_per_gb"],
    "shm": ["date", "commit", "rate_gbps", "load1_start", "shared_memory", "goodput_gbps",
            "memcpy_gbps", "goodput_to_memcpy", "cpu_s_per_gb", "host_cpu_s_per_gb",
            "memcpy_cpu_s_per_gb"],
}
# The shared-memory row of `today` also needs these.
NEEDS_SHM_ROW = ["goodput_to_memcpy", "memcpy_cpu_s_per_gb"]


class Source:
    """One label's runs: the rows of its CSV files, in file order."""

    def __init__(self, label, paths, rows):
        self.label, self.paths, self.rows = label, paths, rows

    def files(self):
        return ", ".join(os.path.basename(p) for p in self.paths)


def parse_sources(specs, command):
    """Sources from --csv LABEL=path specs, labels in the order first given; exits naming
    the spec when it is not LABEL=path, the file is missing or lacks a column `command`
    reads."""
    sources = {}
    for spec in specs:
        label, sep, path = spec.partition("=")
        if not sep or not label.strip() or not path.strip():
            sys.exit(f"--csv={spec}: give LABEL=path (e.g. after=docs/results/streaming/"
                     f"streaming_ab_2026-12-05c_after.csv)")
        if not os.path.isfile(path):
            sys.exit(f"--csv={spec}: no such file: {path}")
        rows = csv_io.read_rows(path)
        columns = set(rows[0]) if rows else set()
        missing = [c for c in NEEDS[command] if c not in columns]
        if not rows or missing:
            sys.exit(f"--csv={spec}: {path} has no "
                     + (f"column {', '.join(missing)}" if rows else "runs")
                     + f" (`{command}` reads {', '.join(NEEDS[command])})")
        src = sources.setdefault(label, Source(label, [], []))
        src.paths.append(path)
        src.rows += rows
    return list(sources.values())


def path_of(row):
    """The run's path: SHM, or its rate in Gbit/s (0.0: loopback)."""
    if str(row.get("shared_memory") or "0").strip().lower() in ("1", "true"):
        return SHM
    return float(row["rate_gbps"])


def path_name(path):
    if path == SHM:
        return SHM
    return "loopback" if path == 0 else f"{path:g} Gbit/s"


def path_order(path):
    return (path == SHM, path == 0, 0 if path == SHM else path)


def values(rows, column):
    """The column's numbers over the rows that have it (runs without iperf3 have none)."""
    return [float(r[column]) for r in rows if (r.get(column) or "").strip() != ""]


def stat(vs):
    """(median, min, max) of the values, or None when there are none."""
    return (statistics.median(vs), min(vs), max(vs)) if vs else None


def quotients(rows, num, den):
    return [float(r[num]) / float(r[den]) for r in rows
            if (r.get(num) or "").strip() and (r.get(den) or "").strip() and float(r[den]) > 0]


def commit_of(rows):
    """The binaries' commit of the runs (see the module's docstring)."""
    stamped = [r["commit"] for r in rows if r["commit"] not in ("", "unstamped", "unknown")]
    if not stamped:
        trees = sorted({r.get("driver_commit", "").replace("+dirty", "") for r in rows} - {""})
        return "tree " + "/".join(trees) if trees else "unknown"
    clean = list(dict.fromkeys(c.replace("+dirty", "") for c in stamped))
    return "/".join(clean) + ("+dirty" if any(c.endswith("+dirty") for c in stamped) else "")


def when(rows):
    """'2026-12-05 12:32 – 12:35' from the runs' start times (UTC)."""
    dates = sorted(r["date"] for r in rows if r.get("date"))
    first, last = dates[0].rstrip("Z").split("T"), dates[-1].rstrip("Z").split("T")
    end = last[1][:5] if first[0] == last[0] else f"{last[0]} {last[1][:5]}"
    return f"{first[0]} {first[1][:5]} – {end}"


def group(src, path):
    return [r for r in src.rows if path_of(r) == path]


def common(src, rows, path):
    loads = values(rows, "load1_start")
    return {"label": src.label, "commit": commit_of(rows), "when": when(rows),
            "files": src.files(), "path": path, "runs": len(rows),
            "load1": (min(loads), max(loads)) if loads else None}


def today_points(sources):
    """Per source and path (rates, then shared memory): p3's and the yardstick's host CPU
    s per GB, their per-run quotient, and goodput over the yardstick."""
    out = []
    for src in sources:
        for path in sorted({path_of(r) for r in src.rows}, key=path_order):
            rows = group(src, path)
            p = common(src, rows, path)
            if path == SHM:
                missing = [c for c in NEEDS_SHM_ROW if c not in rows[0]]
                if missing:
                    sys.exit(f"{src.files()}: shared-memory runs without {', '.join(missing)}")
                p.update(yardstick="memcpy", ref_cpu=stat(values(rows, "memcpy_cpu_s_per_gb")),
                         cpu_ratio=stat(quotients(rows, "host_cpu_s_per_gb",
                                                  "memcpy_cpu_s_per_gb")),
                         goodput_ratio=stat(values(rows, "goodput_to_memcpy")))
            else:
                p.update(yardstick="iperf3",
                         ref_cpu=stat(values(rows, "iperf3_host_cpu_s_per_gb")),
                         cpu_ratio=stat(values(rows, "cpu_ratio_to_iperf3")),
                         goodput_ratio=stat(values(rows, "ratio")))
            p["p3_cpu"] = stat(values(rows, "host_cpu_s_per_gb"))
            out.append(p)
    return out


def history_points(sources, rates):
    """Per source (a sitting) and rate: goodput ÷ iperf3, p3's processes' and host CPU s
    per GB, iperf3's host CPU s per GB and p3 ÷ iperf3; None where the CSV has no such
    figure. A sitting without runs at a rate has no point there."""
    out = []
    for src in sources:
        for rate in rates:
            rows = group(src, rate)
            if not rows:
                continue
            p = common(src, rows, rate)
            p.update(goodput_ratio=stat(values(rows, "ratio")),
                     p3_cpu=stat(values(rows, "cpu_s_per_gb")),
                     p3_host_cpu=stat(values(rows, "host_cpu_s_per_gb")),
                     ref_cpu=stat(values(rows, "iperf3_host_cpu_s_per_gb")),
                     cpu_ratio=stat(values(rows, "cpu_ratio_to_iperf3")))
            out.append(p)
    return out


def shm_points(sources):
    """Per source: the shared-memory runs' goodput, memcpy's, their quotient, p3's
    processes' and host CPU s per GB, and memcpy's. Exits when a source has none."""
    out = []
    for src in sources:
        rows = group(src, SHM)
        if not rows:
            sys.exit(f"--csv={src.label}={src.paths[0]}: no shared-memory runs "
                     f"(shared_memory=1) to plot")
        p = common(src, rows, SHM)
        p.update(goodput=stat(values(rows, "goodput_gbps")),
                 memcpy=stat(values(rows, "memcpy_gbps")),
                 goodput_ratio=stat(values(rows, "goodput_to_memcpy")),
                 p3_cpu=stat(values(rows, "cpu_s_per_gb")),
                 p3_host_cpu=stat(values(rows, "host_cpu_s_per_gb")),
                 ref_cpu=stat(values(rows, "memcpy_cpu_s_per_gb")))
        out.append(p)
    return out


def fmt(s, f=".2f", spread=True):
    """'0.960 (0.936 – 0.968)' of a stat, '–' of None."""
    if s is None:
        return "–"
    return f"{s[0]:{f}} ({s[1]:{f}} – {s[2]:{f}})" if spread else f"{s[0]:{f}}"


def fmt_load(p):
    return "–" if p["load1"] is None else f"{p['load1'][0]:.1f} – {p['load1'][1]:.1f}"


def today_table(points):
    lines = ["| build (commit) | path | runs | p3 host CPU s/GB | yardstick's host CPU s/GB | "
             "p3 ÷ yardstick CPU (target ≤ 1.25 for iperf3) | goodput ÷ yardstick | load1 "
             "| data |", "|---|---|---:|---:|---:|---:|---:|---|---|"]
    for p in points:
        lines.append(
            f"| {p['label']} ({p['commit']}) | {path_name(p['path'])} | {p['runs']} | "
            f"{fmt(p['p3_cpu'])} | {p['yardstick']} {fmt(p['ref_cpu'])} | "
            f"{fmt(p['cpu_ratio'])} | {fmt(p['goodput_ratio'], '.3f')} | {fmt_load(p)} "
            f"| {p['files']} |")
    return "\n".join(lines)


def history_table(points):
    lines = ["| sitting | commit | when (UTC) | rate | runs | goodput ÷ iperf3 (target) | "
             "p3 CPU s/GB: processes | host | iperf3 host | p3 ÷ iperf3 host CPU "
             "(target ≤ 1.25) | load1 | data |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---|---|"]
    for p in points:
        target = GOODPUT_TARGET.get(p["path"])
        lines.append(
            f"| {p['label']} | {p['commit']} | {p['when']} | {path_name(p['path'])} | "
            f"{p['runs']} | {fmt(p['goodput_ratio'], '.3f')}"
            f"{f' (≥ {target:g})' if target else ''} | {fmt(p['p3_cpu'])} | "
            f"{fmt(p['p3_host_cpu'])} | {fmt(p['ref_cpu'])} | {fmt(p['cpu_ratio'])} | "
            f"{fmt_load(p)} | {p['files']} |")
    return "\n".join(lines)


def shm_table(points):
    lines = ["| build | commit | when (UTC) | runs | p3 Gbit/s | memcpy Gbit/s | goodput ÷ "
             "memcpy (target ≥ 0.5) | p3 CPU s/GB: processes | host | memcpy CPU s/GB "
             "| load1 | data |", "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for p in points:
        lines.append(
            f"| {p['label']} | {p['commit']} | {p['when']} | {p['runs']} | "
            f"{fmt(p['goodput'])} | {fmt(p['memcpy'], '.1f')} | "
            f"{fmt(p['goodput_ratio'], '.3f')} | {fmt(p['p3_cpu'], '.3f')} | "
            f"{fmt(p['p3_host_cpu'], '.3f')} | {fmt(p['ref_cpu'], '.3f')} | {fmt_load(p)} "
            f"| {p['files']} |")
    return "\n".join(lines)


def pyplot():
    try:
        import matplotlib
    except ImportError:
        sys.exit("--png needs matplotlib: apt-get install python3-matplotlib, and run "
                 "/usr/bin/python3")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def err(stats):
    """errorbar's yerr of a list of stats (None: no bar)."""
    return [[s[0] - s[1] if s else 0 for s in stats], [s[2] - s[0] if s else 0 for s in stats]]


def med(stats):
    return [s[0] if s else float("nan") for s in stats]


def bars(ax, x, stats, width, **kw):
    ax.bar(x, med(stats), width, yerr=err(stats), capsize=3, **kw)


def plot_today(points, png):
    plt = pyplot()
    labels = list(dict.fromkeys(p["label"] for p in points))
    paths = sorted({p["path"] for p in points}, key=path_order)
    tcp = [x for x in paths if x != SHM]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2),
                                      gridspec_kw={"width_ratios": [len(paths), max(1, len(tcp))]})
    n = len(labels)
    w = 0.8 / (2 * n)
    for i, label in enumerate(labels):
        pts = {p["path"]: p for p in points if p["label"] == label}
        first = next(iter(pts.values()))
        xs = [j for j, x in enumerate(paths) if x in pts]
        got = [pts[x] for x in paths if x in pts]
        name = f"{label} ({first['commit']})"
        bars(left, [x + (2 * i) * w - 0.4 + w / 2 for x in xs], [p["p3_cpu"] for p in got], w,
             color=f"C{i}", label=f"p3, {name}")
        bars(left, [x + (2 * i + 1) * w - 0.4 + w / 2 for x in xs], [p["ref_cpu"] for p in got],
             w, color=f"C{i}", alpha=0.35, hatch="//",
             label=f"iperf3 / memcpy, in {label}'s runs")
        rs = [pts[x] for x in tcp if x in pts]
        rw = 0.8 / n
        bars(right, [j + i * rw - 0.4 + rw / 2 for j, x in enumerate(tcp) if x in pts],
             [p["cpu_ratio"] for p in rs], rw, color=f"C{i}", label=name)
    left.set_xticks(range(len(paths)))
    left.set_xticklabels([path_name(x) for x in paths])
    left.set_ylabel("host CPU s per GB moved")
    left.set_title("CPU per GB: p3 against iperf3 (memcpy for shared memory)", fontsize=10)
    left.legend(fontsize=7)
    right.axhline(CPU_RATIO_TARGET, color="gray", ls="--", lw=1, label="target ≤ 1.25")
    right.set_xticks(range(len(tcp)))
    right.set_xticklabels([path_name(x) for x in tcp])
    right.set_ylabel("p3 ÷ iperf3, host CPU per GB")
    right.set_title("p3 ÷ iperf3 CPU per GB (median of the runs' ratios)", fontsize=10)
    right.set_ylim(bottom=0)
    right.legend(fontsize=7)
    save(fig, png, "bars: median of the runs; error bars: min – max")


def plot_history(points, rates, png):
    plt = pyplot()
    labels = list(dict.fromkeys(p["label"] for p in points))
    commits = {p["label"]: p["commit"] for p in points}
    fig, axes = plt.subplots(3, len(rates), figsize=(4.6 * len(rates), 9.5), sharex=True,
                             squeeze=False)
    for c, rate in enumerate(rates):
        pts = [p for p in points if p["path"] == rate]
        xs = [labels.index(p["label"]) for p in pts]
        top, mid, low = axes[0][c], axes[1][c], axes[2][c]

        def series(ax, key, **kw):
            keep = [(x, p[key]) for x, p in zip(xs, pts) if p[key]]
            if keep:
                ax.errorbar([x for x, _ in keep], med([s for _, s in keep]),
                            yerr=err([s for _, s in keep]), capsize=3, **kw)

        series(top, "goodput_ratio", marker="o", color="C0")
        if rate in GOODPUT_TARGET:
            top.axhline(GOODPUT_TARGET[rate], color="gray", ls="--", lw=1,
                        label=f"target ≥ {GOODPUT_TARGET[rate]:g}")
            top.legend(fontsize=7, loc="lower right")
        top.set_title(path_name(rate))
        series(mid, "p3_cpu", marker="o", color="C1", label="p3: worker + server processes")
        series(mid, "p3_host_cpu", marker="s", color="C3", label="p3: whole host")
        series(mid, "ref_cpu", marker="^", color="C2", label="iperf3: whole host")
        mid.set_ylim(bottom=0)
        series(low, "cpu_ratio", marker="o", color="C3")
        low.axhline(CPU_RATIO_TARGET, color="gray", ls="--", lw=1, label="target ≤ 1.25")
        low.legend(fontsize=7, loc="lower right")
        low.set_ylim(bottom=0)
        low.set_xticks(range(len(labels)))
        low.set_xticklabels([f"{x}\n{commits[x]}" for x in labels], rotation=60, ha="right",
                            fontsize=7)
    axes[0][0].set_ylabel("goodput ÷ iperf3")
    axes[1][0].set_ylabel("CPU s per GB moved")
    axes[2][0].set_ylabel("p3 ÷ iperf3, host CPU per GB")
    axes[1][0].legend(fontsize=7)
    save(fig, png, "points: median of the sitting's runs; bars: min – max")


def plot_shm(points, png):
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    names = [f"{p['label']}\n{p['commit']}\n{p['runs']} runs" for p in points]
    xs = range(len(points))
    bars(left, xs, [p["goodput_ratio"] for p in points], 0.6,
         color=[f"C{i}" for i in xs])
    left.axhline(MEMCPY_TARGET, color="gray", ls="--", lw=1, label="target ≥ 0.5")
    left.legend(fontsize=7)
    left.set_ylim(0, max([0.6] + [p["goodput_ratio"][2] * 1.1 for p in points
                                  if p["goodput_ratio"]]))
    left.set_xticks(list(xs))
    left.set_xticklabels(names, fontsize=8)
    left.set_ylabel("goodput ÷ memcpy (one thread)")
    left.set_title("shared memory: goodput against memcpy", fontsize=10)
    w = 0.27
    for k, (key, name, hatch) in enumerate([("p3_cpu", "p3: worker + server processes", ""),
                                            ("p3_host_cpu", "p3: whole host", ".."),
                                            ("ref_cpu", "memcpy", "//")]):
        bars(right, [x + (k - 1) * w for x in xs], [p[key] for p in points], w,
             color=f"C{k + 3}", hatch=hatch, label=name)
    right.set_xticks(list(xs))
    right.set_xticklabels(names, fontsize=8)
    right.set_ylabel("CPU s per GB moved")
    right.set_title("shared memory: CPU per GB", fontsize=10)
    right.legend(fontsize=7)
    save(fig, png, "bars: median of the runs; error bars: min – max")


def save(fig, png, note):
    fig.text(0.995, 0.005, note, ha="right", va="bottom", fontsize=7, color="gray")
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    fig.savefig(png, dpi=100)
    print(f"wrote {png}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    for name, what in [("today", "host CPU per GB by path, p3 against iperf3 and memcpy"),
                       ("history", "goodput and CPU per GB across sittings"),
                       ("shm", "the shared-memory path per build")]:
        s = sub.add_parser(name, help=what)
        s.add_argument("--csv", action="append", required=True, metavar="LABEL=path",
                       help="a bench_streaming.py CSV and its label (repeatable)")
        s.add_argument("--png", default="", help="draw the plot here")
        if name == "history":
            s.add_argument("--rates", default="2.5,5,0",
                           help="Gbit/s, one column each (0: loopback); default 2.5,5,0")
    a = ap.parse_args(argv)
    sources = parse_sources(a.csv, a.command)
    if a.command == "today":
        points = today_points(sources)
        print(today_table(points))
        if a.png:
            plot_today(points, a.png)
    elif a.command == "history":
        try:
            rates = [float(x) for x in a.rates.split(",") if x.strip()]
        except ValueError:
            sys.exit(f"--rates={a.rates}: give Gbit/s separated by commas, e.g. 2.5,5,0")
        points = history_points(sources, rates)
        if not points:
            sys.exit(f"no runs at {a.rates} Gbit/s in the CSVs given")
        print(history_table(points))
        if a.png:
            plot_history(points, rates, a.png)
    else:
        points = shm_points(sources)
        print(shm_table(points))
        if a.png:
            plot_shm(points, a.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
