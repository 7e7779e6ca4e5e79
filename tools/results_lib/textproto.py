"""Configs in Protocol Buffers text format (configs/*.textproto, a run's resolved
config.textproto), read the simple way the scripts need: one scalar field."""
import os
import re

from results_lib import paths

_MISSING = object()


def int_field(path, field, default=_MISSING):
    """The first `field: N` of the config at `path` (at any depth; comments ignored), or
    `default`; KeyError naming the file when it has none and no default is given."""
    pattern = re.compile(rf"^{re.escape(field)}\s*:\s*(-?\d+)")
    with open(path) as f:
        for line in f:
            m = pattern.match(line.split("#")[0].strip())
            if m:
                return int(m.group(1))
    if default is _MISSING:
        raise KeyError(f"{path}: no {field}")
    return default


def bench_config(model, root=paths.ROOT):
    """configs/bench/<model>.textproto, the documented config of each benchmarked model
    (batch, iterations, warm-up chosen per model); others start from the generic
    configs/bench_throughput.textproto."""
    own = os.path.join(root, "configs", "bench", model + ".textproto")
    return own if os.path.exists(own) else os.path.join(root, "configs",
                                                        "bench_throughput.textproto")
