"""A run's Chrome trace (docs/tracing.md), as the launcher and p3_sim write it: its
complete events, each with the name of its track."""
import gzip
import json


def complete_events(path):
    """The trace's complete ("X") events, each with its track's name as "track" (from the
    thread_name metadata; "" where there is none). A path ending in .gz is read as its
    gzip'd JSON."""
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        t = json.load(f)
    ev = t["traceEvents"] if isinstance(t, dict) else t
    tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev
              if e.get("ph") == "M" and e.get("name") == "thread_name"}
    return [dict(e, track=tracks.get((e["pid"], e["tid"]), "")) for e in ev if e.get("ph") == "X"]
