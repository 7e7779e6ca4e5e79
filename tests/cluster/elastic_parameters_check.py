#!/usr/bin/python3
"""Compares an elastic run's saved parameters with `local` replaying its membership and
with `local` kept at 2 workers (the control), for the elastic launcher tests.

  elastic_parameters_check.py ELASTIC.pt REPLAY.pt TWO.pt [LABEL]

Passes (exit 0) when the replay's relative L2 distance from the elastic run is within the
tolerance and the control's is beyond twice it, so the check can tell them apart.
"""
import sys

import torch

TOLERANCE = 5e-6


def distance(a, b):
    """|a - b| / |a| over every floating-point tensor of the two state dicts."""
    keys = [k for k in a if a[k].is_floating_point()]
    diff = sum(float(((a[k].double() - b[k].double()) ** 2).sum()) for k in keys)
    return (diff / sum(float((a[k].double() ** 2).sum()) for k in keys)) ** 0.5


def main(argv):
    elastic, replay, two = (torch.load(f) for f in argv[1:4])
    label = " (%s)" % argv[4] if len(argv) > 4 else ""
    err, err_two = distance(elastic, replay), distance(elastic, two)
    print("parameters%s: local replay relative distance %.3g, local 2 workers %.3g; "
          "tolerance %g" % (label, err, err_two, TOLERANCE))
    return 0 if err <= TOLERANCE and err_two > 2 * TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
