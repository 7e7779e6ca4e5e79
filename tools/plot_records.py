#!/usr/bin/env python3
"""Draws a run's training curves: <output_dir>/curves.png from records/worker_0.csv.

  /usr/bin/python3 tools/plot_records.py out/default

The launcher runs it after writing summary.json (launch_cluster --plot). Top panel:
rank 0's training loss per iteration and its mean per epoch; bottom panel: test accuracy
after each epoch (docs/launcher.md). A records file without the per-epoch columns (an
older worker, a custom trainer) gives the loss curve alone.

Exit status: 0 drawn; 2 bad usage or unreadable records; 3 matplotlib is missing (the
message says which package to install).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_lib import csv_io, records  # noqa: E402


def read_records(path):
    return records.curves(csv_io.read_rows(path))


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out_dir = argv[1]
    records = os.path.join(out_dir, "records", "worker_0.csv")
    try:
        iterations, losses, epochs = read_records(records)
    except (OSError, KeyError, ValueError) as e:
        print(f"cannot read {records}: {e}", file=sys.stderr)
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("python3-matplotlib is not installed (apt-get install python3-matplotlib); "
              "no curves drawn", file=sys.stderr)
        return 3
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(7, 6))
    top.plot(iterations, losses, color="tab:blue", alpha=0.35, linewidth=0.8,
             label="loss per iteration (rank 0's batch)")
    if epochs:
        top.plot([e[0] for e in epochs], [e[2] for e in epochs], "o-", color="tab:blue",
                 label="mean loss of the epoch")
    top.set_ylabel("training loss")
    top.legend(loc="upper right")
    top.grid(alpha=0.3)
    measured = [e for e in epochs if e[3] is not None]
    if measured:
        bottom.plot([e[0] for e in measured], [100 * e[3] for e in measured], "o-",
                    color="tab:green")
        for end, epoch, _, accuracy in measured:
            bottom.annotate(f"{100 * accuracy:.2f} %", (end, 100 * accuracy),
                            textcoords="offset points", xytext=(0, 6), ha="center")
    else:
        bottom.text(0.5, 0.5, "no test accuracy in the records", ha="center", va="center",
                    transform=bottom.transAxes)
    bottom.set_ylabel("test accuracy after the epoch (%)")
    bottom.set_xlabel("iteration")
    bottom.grid(alpha=0.3)
    fig.suptitle(os.path.basename(os.path.normpath(out_dir)))
    fig.tight_layout()
    png = os.path.join(out_dir, "curves.png")
    tmp = png + ".tmp.png"
    fig.savefig(tmp, dpi=100)
    os.replace(tmp, png)  # never a half-written file
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
