"""CSV files of rows (dicts): read, written whole, or appended to run by run."""
import csv
import os


def read_rows(path):
    """Every row of the CSV at `path`, as dicts of strings."""
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def write_rows(path, rows, fields=None):
    """Replaces `path` with `rows` under a header of `fields` (default: every key of the
    rows, in the order first seen); missing values are written empty."""
    if fields is None:
        fields = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, restval="")
        w.writeheader()
        w.writerows(rows)


def append_rows(path, rows, fields):
    """Appends `rows` to the CSV at `path`, creating it (and its folder) with a header of
    `fields` if it does not exist. An existing file keeps its own header: a CSV from before
    a column was added gets the columns it has, and keys it lacks are dropped."""
    new = not os.path.exists(path)
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    if not new:
        with open(path, newline="") as f:
            fields = next(csv.reader(f))
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, restval="", extrasaction="ignore")
        if new:
            w.writeheader()
        w.writerows(rows)
