"""A run's records: <output_dir>/records/worker_<rank>.csv, one row per iteration, as
the trainer writes them (worker/trainer.h): iteration, loss, iteration_seconds,
samples_per_second, and on the row that ends an epoch epoch_loss and test_accuracy."""
import glob
import os
import statistics

from results_lib import csv_io


def path(run_dir, rank=0):
    return os.path.join(run_dir, "records", f"worker_{rank}.csv")


def read(run_dir, rank=0):
    """The rows of worker `rank`'s records, as dicts of strings."""
    return csv_io.read_rows(path(run_dir, rank))


def iteration_seconds(run_dir, rank=0):
    """Worker `rank`'s time of each iteration, in order."""
    return [float(r["iteration_seconds"]) for r in read(run_dir, rank)]


def mean_over_workers(run_dir, column, min_workers=1):
    """{iteration: the mean over the workers of `column`} over every worker's records in
    the run, for the iterations at least `min_workers` of them recorded."""
    per = {}
    for records in sorted(glob.glob(os.path.join(run_dir, "records", "worker_*.csv"))):
        for row in csv_io.read_rows(records):
            per.setdefault(int(row["iteration"]), []).append(float(row[column]))
    return {i: sum(v) / len(v) for i, v in sorted(per.items()) if len(v) >= min_workers}


def wall_rate(run_dir, first):
    """Samples per second over the wall time of the iterations from `first` on: per worker
    its samples over the sum of its iteration times, then the mean over the workers."""
    per_worker = []
    for records in sorted(glob.glob(os.path.join(run_dir, "records", "worker_*.csv"))):
        samples = seconds = 0.0
        for row in csv_io.read_rows(records):
            if int(row["iteration"]) >= first:
                t = float(row["iteration_seconds"])
                samples += float(row["samples_per_second"]) * t
                seconds += t
        if seconds > 0:
            per_worker.append(samples / seconds)
    return sum(per_worker) / len(per_worker) if per_worker else 0.0


def throughput(per_worker_seconds, batch, warmup):
    """(median, mean) samples/s over the iterations after warm-up, given each worker's
    iteration times. In synchronous training the workers take turns waiting, so one
    worker's iteration i can be short where another's is long: iteration i's time is the
    mean over the workers of their iteration i, and the median is over those iterations.
    The mean is the global batch times the iterations over their summed time (a
    cross-check that no phase pattern biases the median)."""
    n = min(len(s) for s in per_worker_seconds)
    times = [statistics.mean(s[i] for s in per_worker_seconds) for i in range(warmup, n)]
    if not times:
        return float("nan"), float("nan")
    g = batch * len(per_worker_seconds)
    return statistics.median(g / t for t in times), g * len(times) / sum(times)


def curves(rows):
    """(iterations, losses, epochs) of records rows; epochs are (the iteration after the
    epoch's last, epoch, its mean loss, test accuracy or None), from the rows that end an
    epoch. Records without the per-epoch columns (an older worker, a custom trainer) have
    no epochs."""
    iterations, losses, epochs = [], [], []
    for r in rows:
        iterations.append(int(r["iteration"]))
        losses.append(float(r["loss"]))
        if r.get("epoch_loss"):
            accuracy = r.get("test_accuracy") or None
            epochs.append((int(r["iteration"]) + 1, int(r["epoch"]), float(r["epoch_loss"]),
                           float(accuracy) if accuracy else None))
    return iterations, losses, epochs
