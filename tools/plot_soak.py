#!/usr/bin/env python3
"""Draws the soak test's RSS samples (tools/soak.py --csv) per process over time, with the
kills (--kills) marked.

  /usr/bin/python3 tools/plot_soak.py docs/results/soak_rss.csv docs/results/soak_kills.csv \\
      docs/results/soak_rss.png
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    rss_path, kills_path, out = sys.argv[1:]
    with open(rss_path) as f:
        rows = list(csv.DictReader(f))
    with open(kills_path) as f:
        kills = list(csv.DictReader(f))
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for proc in sorted({r["process"] for r in rows}):
        pts = [(float(r["t_s"]) / 60, int(r["rss_kb"]) / 1024) for r in rows if r["process"] == proc]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", linewidth=1, label=proc)
    for k in kills:
        ax.axvline(float(k["t_s"]) / 60, color="grey", linestyle=":", linewidth=0.8)
    ax.set_xlabel("minutes (dotted: a worker SIGKILLed)")
    ax.set_ylabel("RSS (MiB)")
    ax.set_title("Soak: resident memory of every process")
    ax.legend(fontsize=8, ncol=3)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print("wrote", out)


if __name__ == "__main__":
    main()
