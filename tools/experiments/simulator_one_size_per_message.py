#!/usr/bin/env python3
"""A what-if of the simulator's validation (docs/results/simulator/simulator.md, "The
per-message cost of the sets with one slice size"): every calibration set whose streaming
runs have one slice size charged another per-message cost.

Such a set cannot tell its per-message cost from its per-byte cost, so `calibrate` gives it
simulator_calibration.ONE_SIZE_PER_MESSAGE_SET's (measured at two sizes). Here it is given
--per_message_us instead; its per-byte costs of sending and receiving change so that its
streaming runs' CPU per GB at 40,000 parameters a slice stays the measured one
(per_byte_less_messages), and its shared-memory cost likewise (shm_s_per_byte); the
writer's gap is kept. Sets measured at two sizes keep their own fit. Nothing committed is
changed.

  /usr/bin/python3 tools/experiments/simulator_one_size_per_message.py --per_message_us=5.7 \\
      --out=docs/results/simulator/simulator_validation_one_size_5.7us_whatif_issue36.csv
  /usr/bin/python3 tools/experiments/simulator.py score \\
      --before=docs/results/simulator/simulator_validation.csv \\
      --after=docs/results/simulator/simulator_validation_one_size_5.7us_whatif_issue36.csv
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import simulator  # noqa: E402
import simulator_calibration as calibration  # noqa: E402


def one_size_fields(fields, per_message, shm_cpu_s_per_gb, streaming_update):
    """A one-size calibration's fields charged `per_message` a message instead of its own:
    per-byte costs with the difference moved in, so that a message of the streaming run's
    size costs what it did, and the shared-memory cost for the new per-message cost."""
    per_byte = (fields["per_message_s"] - per_message) / calibration.STREAMING_MESSAGE_BYTES
    return {"per_message_s": per_message,
            "send_s_per_byte": fields["send_s_per_byte"] + per_byte,
            "recv_s_per_byte": fields["recv_s_per_byte"] + per_byte,
            "shm_s_per_byte": calibration.shm_s_per_byte(shm_cpu_s_per_gb, streaming_update,
                                                         per_message)}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per_message_us", type=float, required=True,
                    help="the one-size sets' per-message cost, µs")
    ap.add_argument("--out", required=True, help="the what-if's validation CSV")
    a = ap.parse_args()
    update = calibration.streaming_update_s_per_gb()
    one_size = {}  # each calibration file: its shared-memory CPU per GB, or None (two sizes)

    def replaced(cal_set, fields, point):
        f = cal_set["file"]
        if f not in one_size:
            second, _ = calibration.second_size_runs(cal_set)
            one_size[f] = None if second else calibration.sitting_shm(cal_set)[0]
            print(f"{f}: {'two sizes, kept' if second else 'one size'}", file=sys.stderr)
        if one_size[f] is None:
            return {}
        return one_size_fields(fields, a.per_message_us * 1e-6, one_size[f], update)

    simulator.validate(out=a.out, override=replaced)


if __name__ == "__main__":
    main()
