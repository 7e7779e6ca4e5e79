"""The throughput benchmark's raw.csv (tools/bench_throughput.py): one row per run, written
as each run ends, and the filters the reports apply to it.

Every script that tables runs of the benchmark (the throughput page, the ablation, the
congestion controls, the 16-bit wire, the simulator's validation) reads the rows here."""
from results_lib import csv_io

FIELDS = ["time_utc", "model", "system", "mode", "bandwidth_gbps", "batch_per_worker", "workers",
          "slice_params", "iterations", "warmup", "samples_per_second", "mean_samples_per_second",
          "rank0_samples_per_second", "wall_seconds", "bytes_sent_rank0", "load1", "status",
          "output_dir", "wire_dtype", "congestion_control", "slice_auto", "pack_params",
          "output_pieces", "grpc_experiments", "credit_bytes"]
# The slice size of runs that record none (DDP) or ran the default.
DEFAULT_SLICE_PARAMS = 40000


def pack_params(row):
    """The packs a run trained with (scheduling.pack_params, as its resolved config says):
    0 for a row that records none -- every run before packs existed, DDP and local."""
    return int(row.get("pack_params") or 0)


def output_pieces(row):
    """The pieces of a sequence model's output projection the run trained with
    (model.output_pieces, above 1 only): 1, the layer whole, for a row that records none --
    every run before the option existed, DDP and local."""
    return max(1, int(row.get("output_pieces") or 1))


def credit_bytes(row):
    """The credit of the run's send queues (scheduling.credit_bytes, as its resolved config
    says): 0, one message at a time, for a row that records none -- every run before the
    column existed (they all ran at 0), DDP and local. Also reads simulator points and
    validation rows, which carry the same column."""
    return int(row.get("credit_bytes") or 0)


def read(path):
    """Every row of a raw.csv (failed runs included), as dicts of strings."""
    return csv_io.read_rows(path)


def append(path, row):
    """Appends one run's row (keys of FIELDS) to the raw.csv at `path`."""
    csv_io.append_rows(path, [row], FIELDS)


def finished(rows):
    """The runs that ended with a result (status "ok"); a failed run's status says why."""
    return [r for r in rows if r["status"] == "ok"]


def read_finished(path):
    return finished(read(path))


def is_traced(row):
    """A run with trace=true (`run --trace_at`): tracing slows it, so reports leave it out."""
    return "_trace" in row.get("output_dir", "")


def wire_dtype(row):
    """The run's scheduling.wire_dtype; None for `local` (one process, no wire). Rows from
    before the column was added ran float32."""
    if row["mode"] == "local":
        return None
    return row.get("wire_dtype") or "float32"


def bandwidth(row):
    """Gbit/s per machine and direction; 0 = unlimited."""
    return float(row["bandwidth_gbps"] or 0)


def slice_params(row):
    """The slice size the run trained with: for an automatic one (`slice_auto`), the size
    the launcher chose, which the row records in place of the 0 it was given."""
    return int(row.get("slice_params") or DEFAULT_SLICE_PARAMS)


def slice_auto(row):
    """Whether the run was given scheduling.slice_params 0: the launcher's automatic slice
    size (docs/config.md), recorded in `slice_params`."""
    return row.get("slice_auto", "") == "1"


def samples(row):
    """The run's figure: samples/s, the median over the iterations after warm-up."""
    return float(row["samples_per_second"])


def group(rows, key):
    """{key(row): [samples/s of each row]}, in the rows' order."""
    out = {}
    for r in rows:
        out.setdefault(key(r), []).append(samples(r))
    return out
