"""How far the measurements themselves reproduce (docs/results/simulator/simulator.md, "How
far the measurements themselves reproduce"): per set of points, the runs' pooled spread,
what a predictor that knew each point's true throughput would be expected to meet, and
whether each of the simulator's misses lies within the point's own runs. Reads the runs
behind every checked point and simulator_validation.csv; simulates nothing. Used by
tools/experiments/simulator.py (`noise`)."""
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import simulator_points as sp  # noqa: E402
from results_lib import csv_io, paths, raw_csv  # noqa: E402

# Variance of the median of n draws of a unit normal (n <= 5 exact; beyond, pi / 2n).
VALIDATION = "simulator/simulator_validation.csv"
MEDIAN_VAR = {1: 1.0, 2: 0.5, 3: 0.4487, 4: 0.3433, 5: 0.2868}


def point_key(r):
    """A validation row's (or point's) key in point_runs()."""
    return (r["set"], r["model"], r["system"], float(r["bandwidth"]), int(r["workers"]),
            int(r["slice_params"]), r.get("placement") or "", r.get("wire_dtype") or "",
            int(r.get("output_pieces") or 1), raw_csv.credit_bytes(r))


def point_runs():
    """The samples/s of every run behind each validated point, keyed as the rows of
    simulator_validation.csv: (set, model, system, bandwidth, workers, slice_params,
    placement, wire dtype, output pieces, credit). For throughput_2026-11-30.csv, which
    keeps only min, median and max, a point's runs are known where it has at most 3; else
    (min, max) stand in."""
    groups = {}

    def add(set_name, rows):
        for (model, mode, bw, workers, slices, placement, wire, _, _, _, pieces, credit), v \
                in sp.run_groups(rows).items():
            groups.setdefault((set_name, model, mode, bw, workers, slices, placement, wire,
                               pieces, credit), []).extend(v)

    for set_name, _, rows in sp.raw_sets():
        add(set_name, rows)
    for set_name, file_name in list(sp.SWEEP_RAW.items()) + list(sp.AGGREGATED_RAW.items()):
        add(set_name, raw_csv.read(sp.results(file_name)))
    for r in csv_io.read_rows(sp.results(dict(sp.SWEEP_SETS)["2026-11-30"])):
        n = int(r["runs"])
        lo, med, hi = float(r["min_sps"]), float(r["median_sps"]), float(r["max_sps"])
        groups[("2026-11-30", r["model"], r["mode"], float(r["bandwidth_gbps"]),
                int(r["workers"]), int(r["slice_params"] or raw_csv.DEFAULT_SLICE_PARAMS),
                "", "", 1, 0)] = {1: [med], 2: [lo, hi], 3: [lo, med, hi]}.get(n, [lo, hi])
    return groups


def noise():
    """How far the measurements themselves reproduce: per set, the runs' pooled spread, what
    a predictor that knew each point's true throughput would be expected to meet, and
    whether each miss lies within the runs' own range."""
    runs = point_runs()
    checked = [r for r in csv_io.read_rows(sp.results(VALIDATION))
               if r["fitted"] == "False"]
    by_set = {}
    for r in checked:
        key = point_key(r)
        v = runs.get(key)
        if v is None:
            sys.exit(f"noise: no runs on record for {key}")
        complete = len(v) == int(r["runs"])
        if complete and abs(statistics.median(v) - float(r["measured"])) > 0.01:
            sys.exit(f"noise: the runs of {key} have median {statistics.median(v)}, "
                     f"simulator_validation.csv says {r['measured']}")
        by_set.setdefault(r["set"], []).append((r, v, complete))
    lo_log, hi_log = math.log(0.9), math.log(1.1)

    def phi(x):
        return 0.5 * (1 + math.erf(x / math.sqrt(2)))

    out = []
    for set_name, pts in by_set.items():
        sq, dof = 0.0, 0
        for _, v, complete in pts:
            if complete and len(v) >= 2:
                logs = [math.log(x) for x in v]
                mean = sum(logs) / len(logs)
                sq += sum((x - mean) ** 2 for x in logs)
                dof += len(logs) - 1
        sigma = math.sqrt(sq / dof)
        expected, p_all, own, hits, within_runs, beyond = 0.0, 1.0, 0, 0, 0, 0
        for r, v, _ in pts:
            n = int(r["runs"])
            sd = sigma * math.sqrt(MEDIAN_VAR.get(n, math.pi / (2 * n)))
            p_hit = phi(hi_log / sd) - phi(lo_log / sd)
            expected += p_hit
            p_all *= p_hit
            med, pred = float(r["measured"]), float(r["predicted"])
            own += min(v) >= 0.9 * med and max(v) <= 1.1 * med
            if r["within_10pct"] == "True":
                hits += 1
            elif any(0.9 * x <= pred <= 1.1 * x for x in v):
                within_runs += 1
            else:
                beyond += 1
        out.append({"set": set_name, "points": len(pts),
                    "runs_per_point": f"{statistics.median(int(r['runs']) for r, _, _ in pts):g}",
                    "sigma_log": round(sigma, 4), "sigma_dof": dof,
                    "points_whose_runs_lie_within_10pct": own,
                    "expected_hits_of_exact_predictor": round(expected, 1),
                    "chance_exact_predictor_meets_all": p_all,
                    "hits": hits, "misses_within_10pct_of_a_run": within_runs,
                    "misses_beyond_every_run": beyond})
    total = {"set": "all", "points": sum(o["points"] for o in out), "runs_per_point": "",
             "sigma_log": "", "sigma_dof": sum(o["sigma_dof"] for o in out)}
    for k in ("points_whose_runs_lie_within_10pct", "expected_hits_of_exact_predictor", "hits",
              "misses_within_10pct_of_a_run", "misses_beyond_every_run"):
        total[k] = round(sum(o[k] for o in out), 1)
    total["chance_exact_predictor_meets_all"] = math.prod(
        o["chance_exact_predictor_meets_all"] for o in out)
    out.append(total)
    path = sp.results("simulator/simulator_noise.csv")
    csv_io.write_rows(path, out)
    print("| set | points | runs per point | σ of one run | points whose runs lie within "
          "±10 % of their median | expected hits of an exact predictor | chance it meets all | hits | misses "
          "within 10 % of a run | misses beyond every run |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for o in out:
        sig = f"{o['sigma_log']:.3f}" if o["sigma_log"] != "" else ""
        print(f"| {o['set']} | {o['points']} | {o['runs_per_point']} | {sig} | "
              f"{o['points_whose_runs_lie_within_10pct']} | "
              f"{o['expected_hits_of_exact_predictor']} | "
              f"{o['chance_exact_predictor_meets_all']:.2g} | {o['hits']} | "
              f"{o['misses_within_10pct_of_a_run']} | {o['misses_beyond_every_run']} |")
    print(f"-> {os.path.relpath(path, paths.ROOT)}")
