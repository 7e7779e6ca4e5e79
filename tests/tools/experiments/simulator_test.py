"""The simulator page's scripts (docs/results/simulator): how simulator.py reads measured
points and asks p3_sim for its predictions (against a stand-in p3_sim), the calibration's
readers, the noise statistics and the host-contention table (the scale-out grid:
scaling_test.py)."""
import json
import os
import tempfile
import unittest
from unittest import mock

import fakes
import simulator
import simulator_calibration
import simulator_fresh
import simulator_noise
import simulator_points as sp
import simulator_preemption_cost
import simulator_protocol as protocol
from results_lib import raw_csv

T = fakes.TESTDATA


def load_at(path):
    with open(path) as f:
        return json.load(f)


def simulator_protocol_sets():
    return protocol.FRESH_SETS


class SimulatorTest(fakes.FakeP3SimTest):
    def test_run_points_are_medians_per_point_with_the_wire_dtype(self):
        rows = raw_csv.read(f"{T}/wire_dtype_raw.csv")
        pts = {(p["system"], p["wire_dtype"]): p for p in sp.run_points("wire", "w.csv", rows)}
        self.assertEqual(pts[("p3", "")]["measured"], 17.911)  # float32: ""
        self.assertEqual(pts[("p3", "bfloat16")]["runs"], 3)
        self.assertEqual(pts[("local", "")]["workers"], 1)
        self.assertEqual(pts[("p3", "")]["slice_params"], 40000)
        self.assertEqual(pts[("p3", "")]["source"], "w.csv")

    def test_every_set_names_a_calibration_that_exists(self):
        for name, _ in (sp.FRESH_SETS + sp.SITTING_SETS + sp.SWEEP_SETS + sp.CC_SETS
                        + sp.WIRE_SETS):
            self.assertIn("file", sp.calibration_of(name))
        self.assertEqual(sp.calibration_of("cc-bbr")["file"], "configs/sim/calibration_cpu_cc.json")
        # A sitting's set has a calibration with preemption runs (its own, or a sitting's
        # of the same VM that day: models-2026-12-06), and is in the page's tables
        # (SET_ORDER) but not scored as fresh.
        for name, _ in sp.SITTING_SETS:
            self.assertIn("preemption", sp.calibration_of(name))
            self.assertIn(name, simulator.SET_ORDER)
            self.assertNotIn(name, protocol.FRESH_SETS)

    def test_every_model_a_set_runs_has_a_committed_profile(self):
        for model in sp.BATCH:
            path = os.path.join(sp.paths.ROOT, "configs", "sim", "profiles",
                                sp.profile_name(model))
            self.assertTrue(os.path.exists(path), path)
            self.assertEqual(load_at(path)["batch"], sp.BATCH[model])
        self.assertEqual(sp.profile_name("inception_v3"), "inception_v3_b8_i75_cpu.json")
        self.assertEqual(sp.calibration_of("models-2026-12-06"), sp.SETS["fresh-2026-12-06"])

    def test_the_launchers_calibration_is_its_sets_with_the_set_named(self):
        # The committed file: the set's values exactly, and a set measured at two slice
        # sizes (its per-message cost told from the per-byte one); no measured set is
        # predicted with it, so refitting it moves no validation point.
        def load(name):
            with open(os.path.join(sp.paths.ROOT, name)) as f:
                return json.load(f)
        launcher = load(sp.LAUNCHER["file"])
        own = load(sp.SETS[sp.LAUNCHER["set"]]["file"])
        source = launcher.pop("_source")
        self.assertIn(f"calibration set {sp.LAUNCHER['set']}", source)
        self.assertIn("per_message_s with slices of", source)  # what calibrate says of two sizes
        own.pop("_source")
        self.assertEqual(launcher, own)
        for s in sp.SETS.values():
            self.assertNotEqual(s["file"], sp.LAUNCHER["file"])
        # `calibrate --only=launcher` writes it again from the set's file.
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, "configs", "sim"))
            with open(os.path.join(root, sp.SETS[sp.LAUNCHER["set"]]["file"]), "w") as f:
                json.dump({"_source": "the set's", "per_message_s": 1e-5}, f)
            path = simulator_calibration.write_launcher_calibration(root)
            self.assertEqual(path, os.path.join(root, sp.LAUNCHER["file"]))
            written = load_at(path)
            self.assertEqual(written["per_message_s"], 1e-5)
            self.assertTrue(written["_source"].endswith("that set's: the set's"))

    def test_a_sitting_sets_points_and_local_come_from_its_raw_rows(self):
        with mock.patch.object(sp, "results", lambda name: f"{T}/{os.path.basename(name)}"), \
                mock.patch.object(sp, "FRESH_SETS", []), \
                mock.patch.object(sp, "WIRE_SETS", []), \
                mock.patch.object(sp, "CC_FILE", "missing.csv"), \
                mock.patch.object(sp, "SITTING_SETS", [("sit", "wire_dtype_raw.csv")]):
            pts = [p for _, f, rows in sp.raw_sets() for p in sp.run_points("sit", f, rows)]
            self.assertEqual(sp.local_of(pts, "sit", "resnet50"),
                             next(p["measured"] for p in pts if p["system"] == "local"))
        self.assertTrue(any(p["system"] == "p3" and p["runs"] == 3 for p in pts))

    def test_compute_scale_interpolates_to_the_measured_local(self):
        # The stand-in's `local` iteration is 0.2 s x compute_scale; ResNet-50's batch is 8.
        self.assertAlmostEqual(simulator_calibration.compute_scale("resnet50", 20.0, "c.json"),
                               2.0)

    def test_predict_asks_for_the_points_system_placement_and_iterations(self):
        p = {"model": "resnet50", "system": "ddp", "bandwidth": 1.0, "workers": 3,
             "slice_params": 40000, "placement": "", "wire_dtype": "bfloat16",
             "iterations": 13, "warmup": 3}
        args = simulator.predict(p, "cal.json", 1.5, {"shared_memory": False})["args"]
        for a in ("--set=mode=p3", "--allreduce", "--set=scheduling.shared_memory=false",
                  "--set=scheduling.wire_dtype=bfloat16", "--set=cluster.workers=3",
                  "--machines_per_host=3", "--compute_scale=1.5", "--iterations=13",
                  "--warmup=3", "--calibration=cal.json"):
            self.assertIn(a, args)
        self.assertNotIn("--machines_per_host=2", args)
        sep = simulator.predict(dict(p, system="p3", workers=2, placement="separate"),
                                "cal.json", 1.0, {})["args"]
        self.assertIn("--set=network.placement=separate", sep)
        self.assertIn("--machines_per_host=4", sep)
        self.assertIn("--set=mode=p3", sep)
        cut = simulator.predict(dict(p, system="p3", workers=2, output_pieces=8), "cal.json",
                                1.0, {})["args"]
        self.assertIn("--set=model.output_pieces=8", cut)
        self.assertIn("--set=model.output_pieces=1", args)  # whole, whatever the config says

    def test_streaming_medians_per_rate(self):
        m = simulator_calibration.streaming_measured(f"{T}/streaming.csv")
        self.assertEqual(sorted(m), [0.0, 1.0, 2.5, 5.0])
        self.assertEqual(m[1.0]["runs"], 2)

    def test_streaming_medians_leave_out_the_shared_memory_runs(self):
        with open(f"{T}/streaming.csv") as f:
            lines = f.read().splitlines()
        loop = [x for x in lines[1:] if x.split(",")[2] == "0.0"]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.csv")
            with open(path, "w") as f:
                f.write(lines[0] + ",shared_memory\n")
                f.write("\n".join(x + ",0" for x in lines[1:]) + "\n")
                # The shared-memory path: rate 0 too, far faster and cheaper per GB.
                for x in loop * 3:
                    cols = x.split(",")
                    cols[5], cols[7] = "40.0", "0.2"
                    f.write(",".join(cols) + ",1\n")
            m = simulator_calibration.streaming_measured(path)
        want = simulator_calibration.streaming_measured(f"{T}/streaming.csv")
        self.assertEqual(m[0.0]["runs"], want[0.0]["runs"])
        self.assertEqual(m[0.0]["goodput"], want[0.0]["goodput"])
        self.assertEqual(m[0.0]["cpu_s_per_gb"], want[0.0]["cpu_s_per_gb"])

    def test_noise_point_runs_and_the_median_variance_table(self):
        with mock.patch.object(sp, "results", lambda name: f"{T}/{os.path.basename(name)}"), \
                mock.patch.object(sp, "FRESH_SETS", []), \
                mock.patch.object(sp, "SITTING_SETS", []), \
                mock.patch.object(sp, "WIRE_SETS", [("wire", "wire_dtype_raw.csv")]), \
                mock.patch.object(sp, "CC_FILE", "missing.csv"), \
                mock.patch.object(sp, "SWEEP_RAW", {}), \
                mock.patch.object(sp, "AGGREGATED_RAW", {}), \
                mock.patch.object(sp, "SWEEP_SETS", [("2026-11-30", "sweep_aggregated.csv")]):
            with open(f"{T}/sweep_aggregated.csv") as f:
                self.assertIn("median_sps", f.readline())
            runs = simulator_noise.point_runs()
        self.assertEqual(sorted(runs[("wire", "resnet50", "p3", 1.0, 2, 40000, "", "bfloat16", 1, 0)]),
                         [27.486, 28.614, 29.493])
        # An aggregated point of 2 runs stands for them by its min and max.
        self.assertEqual(runs[("2026-11-30", "resnet50", "p3", 1.0, 2, 40000, "", "", 1, 0)],
                         [15.993, 17.183])
        self.assertEqual(simulator_noise.MEDIAN_VAR[1], 1.0)

    def test_host_contention_table_from_its_csv(self):
        out = fakes.run_script("simulator_host_contention.py", "--table",
                               f"--csv={T}/host_contention.csv")
        self.assertIn("| 1 | 17.80 / 18.92 | 1.000 | 1.000 |", out)
        self.assertIn("| 2 | 37.02 / 33.12 | 1.915 | 0.958 | 1.00 / 1.00 | 1.00 |", out)

    def test_preemption_conditions_parse_and_bad_ones_are_refused(self):
        self.assertEqual(simulator_preemption_cost.parse_condition("same:1000:0"),
                         ("same", 1000.0, 0))
        self.assertEqual(simulator_preemption_cost.parse_condition("other:64"), ("other", 0, 64))
        self.assertEqual(simulator_preemption_cost.parse_condition("batch:1000:4096"),
                         ("batch", 1000.0, 4096))
        with self.assertRaises(SystemExit):
            simulator_preemption_cost.parse_condition("same:fast")
        with self.assertRaises(SystemExit):
            simulator_preemption_cost.parse_condition("batch:1000")

    def test_streaming_costs_take_off_the_streaming_runs_own_update(self):
        m = {0.0: {"cpu_s_per_gb": 1.6, "commit": "c", "runs": 3},
             1.0: {"cpu_s_per_gb": 2.6}, 2.5: {"cpu_s_per_gb": 2.2}, 5.0: {"cpu_s_per_gb": 1.9}}
        cal = simulator_calibration.streaming_costs("x", {"streaming": "s.csv", "binaries": "b"},
                                                    m, 0.9, 4e-5, 0.3e-9, 0.05)
        # 1.6 s/GB crossing holds the streaming server's own update, 0.05 s/GB of it.
        self.assertAlmostEqual(cal["send_s_per_byte"] * 1e9, (1.6 - 0.05) / 2)
        self.assertAlmostEqual(cal["recv_s_per_byte"] * 1e9, (1.6 - 0.05) / 2)
        # The cluster's update is the hot loop's, charged apart by the simulator.
        self.assertEqual(cal["update_s_per_byte"], 0.3e-9)
        # The shaped links' extra over loopback is unchanged by it.
        self.assertAlmostEqual(cal["shaped_s_per_byte_at_1g"] * 1e9, (2.6 - 1.6) / 2)
        # Simulated with its own update (a parameter byte crosses twice and is updated
        # once), the streaming run uses the measured CPU per GB crossing, not more.
        own = simulator_calibration.streaming_update_s_per_byte(0.05)
        self.assertAlmostEqual(own * 1e9, 0.1)
        total = (cal["send_s_per_byte"] + cal["recv_s_per_byte"] + own / 2) * 1e9
        self.assertAlmostEqual(total, 1.6)

    def test_streaming_update_is_the_median_of_the_optimizer_group(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "b.csv")
            with open(path, "w") as f:
                f.write("label,commit,mode,run,group,share,cpu_s_per_gb\n"
                        "before,c,loopback,1,server: the optimizer,0.04,0.041\n"
                        "before,c,loopback,2,server: the optimizer,0.05,0.055\n"
                        "before,c,loopback,3,server: the optimizer,0.04,0.048\n"
                        "after,d,loopback,1,server: the optimizer,0.04,0.010\n"
                        "before,c,loopback,1,kernel: socket copies,0.2,0.186\n")
            self.assertAlmostEqual(simulator_calibration.streaming_update_s_per_gb(path), 0.048)

    def test_comm_interference_is_the_copiers_cost_beyond_the_shared_speed(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "p.csv")
            with open(path, "w") as f:
                f.write("round,condition,extra_core_s_per_iteration,disturber_core_s_per_iteration\n"
                        "1,other:8388608,0.03,0.3\n2,other:8388608,0.06,0.3\n"
                        "3,other:8388608,0.045,0.3\n1,same:1000:0,0.5,0.003\n")
            # Median 0.15 core-s per core-s of copying; sharing at 0.8 already costs 0.25.
            self.assertAlmostEqual(simulator_calibration.comm_interference(1.0, path), 0.15)
            self.assertAlmostEqual(simulator_calibration.comm_interference(0.95, path),
                                   0.15 - (1 / 0.95 - 1))
            self.assertEqual(simulator_calibration.comm_interference(0.8, path), 0.0)

    def test_shared_memory_cost_is_its_streaming_runs_cpu_less_update_and_messages(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.csv")
            with open(path, "w") as f:
                f.write("rate_gbps,shared_memory,cpu_s_per_gb\n0.0,0,0.9\n0.0,1,0.50\n"
                        "0.0,1,0.56\n0.0,1,0.53\n1.0,0,1.4\n")
            self.assertAlmostEqual(simulator_calibration.shm_measured(path), 0.53)
            with open(path, "w") as f:
                f.write("rate_gbps,cpu_s_per_gb\n0.0,0.9\n")
            self.assertIsNone(simulator_calibration.shm_measured(path))
        # 0.53 s per GB crossing less its update (0.05) and 8 us per 160 kB message on each
        # side (0.1 ns a byte): 0.38 ns a byte.
        self.assertAlmostEqual(
            simulator_calibration.shm_s_per_byte(0.53, 0.05, 8e-6) * 1e9, 0.38)
        # Where the per-message cost alone exceeds the measured CPU: none per byte.
        self.assertEqual(simulator_calibration.shm_s_per_byte(0.53, 0.05, 40e-6), 0.0)

    def test_kernel_buffer_is_the_payload_a_full_send_buffer_of_a_network_connection_holds(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.csv")
            with open(path, "w") as f:
                f.write("network,tb,w,notsent,unacked,mss\n"
                        "1,4000,4000,2000,1,1800\n"      # full: 3800 of 4000 payload
                        "1,4000,2000,1000,0,1448\n"      # half full: 1000 of 2000
                        "1,4000,0,0,0,1448\n"            # empty: no ratio
                        "1,2000,0,0,0,1448\n"
                        "0,99999,99999,0,0,65483\n")     # within a machine: left out
            # median tb 4000 x median payload per queued byte (0.95, 0.5 -> 0.725)
            self.assertEqual(simulator_calibration.kernel_buffer_bytes(path), 2900)

    def test_ring_link_share_is_the_median_share_of_the_bucket_runs_per_shaped_rate_pooled(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "r.csv")
            with open(path, "w") as f:
                f.write("rate_gbps,size,link_share\n1.0,bucket25mb,0.95\n1.0,bucket25mb,0.93\n"
                        "1.0,bucket25mb,0.96\n1.0,vgg19,0.5\n2.5,bucket25mb,0.9\n"
                        "0.0,bucket25mb,\n")
            # vgg19's run and loopback (no share) stay out; rates as the C++ side reads them.
            self.assertEqual(simulator_calibration.ring_link_share([path]),
                             {"1": 0.95, "2.5": 0.9})
            # Two sittings pooled: the median of all their runs.
            other = os.path.join(d, "r2.csv")
            with open(other, "w") as f:
                f.write("rate_gbps,size,link_share\n2.5,bucket25mb,0.8\n2.5,bucket25mb,0.7\n")
            self.assertEqual(simulator_calibration.ring_link_share([path, other])["2.5"], 0.8)
            # Runs beside a computation: only in the beside table, and alone only in the other.
            beside = os.path.join(d, "r3.csv")
            with open(beside, "w") as f:
                f.write("rate_gbps,size,beside_compute,link_share\n1.0,bucket25mb,1,0.86\n"
                        "1.0,bucket25mb,0,0.94\n")
            self.assertEqual(simulator_calibration.ring_link_share([beside]), {"1": 0.94})
            self.assertEqual(
                simulator_calibration.ring_link_share([path, beside], beside_compute=True),
                {"1": 0.86})

    def test_per_byte_costs_lose_the_per_message_cost_they_hold(self):
        cal = {"send_s_per_byte": 1e-9, "recv_s_per_byte": 1e-9}
        less = simulator_calibration.per_byte_less_messages(cal, 16e-6)
        # 16 µs per 160 kB message: 0.1 ns per byte on each side.
        self.assertAlmostEqual(less["send_s_per_byte"] * 1e9, 0.9)
        self.assertAlmostEqual(less["recv_s_per_byte"] * 1e9, 0.9)
        self.assertEqual(less["per_message_s"], 16e-6)

    def test_update_cost_is_the_hot_loops_old_build_at_two_workers(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "hot.csv")
            with open(path, "w") as f:
                f.write("build,run,optimizer,workers,slice_params,slices,iterations,ns_per_value\n"
                        "old,1,sgd,4,40000,64,20,4.0\nold,2,sgd,4,40000,64,20,3.0\n"
                        "old,1,sgd,1,40000,64,20,1.5\nnew,1,sgd,1,40000,64,20,0.1\n"
                        "old,1,adam,1,40000,64,20,9.0\nold,1,sgd,1,4096,8,200,0.2\n")
            # W = 1: 1.5 ns a value; W = 4: 3.5; linear: 2.1667 at W = 2, per byte and worker / 8.
            self.assertAlmostEqual(simulator_calibration.update_s_per_byte(path) * 1e9,
                                   (1.5 + 2.0 / 3) / 8)

    def test_fresh_points_cover_the_issues_list_and_their_runs_ask_for_them(self):
        first = simulator_fresh.points_of("fresh-2026-12-05")
        kinds = {(p["model"], p["bandwidth"], p["workers"], p["placement"], p["wire_dtype"])
                 for p in first}
        for k in (("resnet50", 2.0, 2, "colocated", ""), ("resnet50", 1.0, 3, "colocated", ""),
                  ("resnet50", 1.0, 2, "separate", ""), ("vgg19", 4.0, 2, "colocated", ""),
                  ("resnet50", 2.5, 2, "colocated", "bfloat16")):
            self.assertIn(k, kinds)
        for name in simulator_fresh.FRESH:
            self.assertIn(name, dict(sp.FRESH_SETS))
            self.assertIn(name, sp.SETS)  # its own sitting's calibration
        # The newest set is scored as fresh (the model frozen before its runs).
        self.assertIn(simulator_fresh.NEWEST, simulator_protocol_sets())
        calls = []
        with mock.patch.object(simulator_fresh.subprocess, "run",
                               lambda a, check: calls.append(a)):
            sep = next(p for p in first if p["placement"] == "separate")
            simulator_fresh.bench(sep, "o", 43, 3)
            wire = next(p for p in first if p["wire_dtype"])
            simulator_fresh.bench(wire, "o", 43, 3)
        self.assertIn("--set=network.placement=separate", calls[0])
        self.assertIn("--runs=1", calls[0])
        self.assertIn("--wire_dtypes=bfloat16", calls[1])
        self.assertIn("--bandwidths=2.5", calls[1])

    def test_a_fresh_ddp_point_runs_bench_throughputs_ddp_and_no_p3_mode(self):
        ddp = next(p for p in simulator_fresh.points_of("fresh-2026-12-05c")
                   if p["system"] == "ddp" and p["bandwidth"] == 3.0)
        calls = []
        with mock.patch.object(simulator_fresh.subprocess, "run",
                               lambda a, check: calls.append(a)):
            simulator_fresh.bench(ddp, "o", 43, 3)
            simulator_fresh.bench(dict(ddp, system="p3"), "o", 43, 3)
        self.assertIn("--ddp", calls[0])
        self.assertIn("--modes=", calls[0])
        self.assertIn("--bandwidths=3", calls[0])
        self.assertIn("--iterations=43", calls[0])
        self.assertFalse([a for a in calls[0] if a.startswith("--workers")])
        self.assertNotIn("--ddp", calls[1])
        self.assertIn("--modes=p3", calls[1])
        # The set's streaming runs take the shared-memory path too (its own shm cost);
        # the earlier set's did not.
        self.assertIn("--shared_memory", simulator_fresh.streaming_command(
            simulator_fresh.FRESH["fresh-2026-12-05c"], "/nonexistent.csv"))
        self.assertNotIn("--shared_memory", simulator_fresh.streaming_command(
            simulator_fresh.FRESH["fresh-2026-12-05b"], "/nonexistent.csv"))
        # The committed prediction of a DDP point is gloo's ring (--allreduce), as in
        # validation.
        runs = []
        with mock.patch.object(simulator.p3_sim, "run",
                               lambda *a: runs.append(a) or {"samples_per_second": 1.0}):
            simulator.predict(ddp, "c.json", 1.0, {})
        self.assertIn("--allreduce", runs[0][4])
        self.assertIn("mode=p3", runs[0][3])
        self.assertIn("network.bandwidth_gbps=3.0", runs[0][3])

    def test_a_sitting_with_its_own_preemption_runs_is_calibrated_with_them(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "preemption_cost_sitting.csv")
            with open(path, "w") as f:
                f.write("round,condition,us_per_preemption,extra_core_s_per_iteration,"
                        "disturber_core_s_per_iteration\n"
                        "1,none,,,0\n1,same:1000:0,12.0,0.003,0.003\n"
                        "1,other:8388608,,0.02,0.25\n2,same:1000:0,20.0,0.004,0.003\n"
                        "2,other:8388608,,0.03,0.25\n")
            own = {"preemption": path}
            # 16 us (median of 12 and 20); (0.08 + 0.12) / 2 less 1 / 1.0 - 1.
            p, i = simulator_calibration.sitting_preemption(own, 1.0, 38.9e-6, 0.0358)
            self.assertAlmostEqual(p, 16e-6)
            self.assertAlmostEqual(i, 0.10)
            # A set without such runs, or whose CSV is not there yet: the shared values.
            self.assertEqual(simulator_calibration.sitting_preemption({}, 1.0, 38.9e-6, 0.0358),
                             (38.9e-6, 0.0358))
            missing = {"preemption": os.path.join(d, "none.csv")}
            self.assertEqual(simulator_calibration.sitting_preemption(missing, 1.0, 1e-6, 0.1),
                             (1e-6, 0.1))
        # The newest fresh set's sitting runs them, one numbered round at a time.
        self.assertIn("preemption", sp.SETS[simulator_fresh.NEWEST])
        cmd = simulator_fresh.preemption_command("o", 3)
        self.assertIn("--first_round=3", cmd)
        self.assertIn("--rounds=1", cmd)
        self.assertIn("--conditions=none,same:1000:0,other:8388608", cmd)

    def test_a_new_fresh_set_repeats_no_configuration_of_an_earlier_one(self):
        def kind(p):
            return (p["model"], p["system"], p["bandwidth"], p["workers"],
                    p.get("placement") or "colocated", p.get("wire_dtype") or "",
                    p["slice_params"])
        names = [n for n, f in simulator_fresh.FRESH.items() if not f.get("remeasure")]
        self.assertEqual(names[-1], simulator_fresh.NEWEST)
        seen = set()
        for name in names:
            pts = simulator_fresh.points_of(name)
            self.assertGreaterEqual(len(pts), 6)
            kinds = {kind(p) for p in pts}
            self.assertEqual(len(kinds), len(pts))
            self.assertFalse(kinds & seen, name)
            seen |= kinds
            # Every model of the set has a `local` run per round (its compute_scale).
            self.assertTrue({p["model"] for p in pts} <= set(
                simulator_fresh.FRESH[name]["iterations"]))
        # Nor one of any other committed set: predict refuses such a point.
        newest = simulator_fresh.points_of(simulator_fresh.NEWEST)
        self.assertEqual(simulator_fresh.measured_before(simulator_fresh.NEWEST, newest), [])
        seen_elsewhere = dict(newest[2], set="auto-2026-12-05", measured=40.0, runs=5)
        self.assertEqual(simulator_fresh.measured_before(
            simulator_fresh.NEWEST, newest + [seen_elsewhere]), [newest[2]])
        own_runs = dict(newest[2], measured=40.0, runs=5)  # the set's own, once measured
        self.assertEqual(simulator_fresh.measured_before(
            simulator_fresh.NEWEST, newest + [own_runs]), [])
        with mock.patch.object(simulator_fresh.sp, "points", lambda: [seen_elsewhere]), \
                self.assertRaises(SystemExit):
            simulator_fresh.predict(mock.Mock(set=simulator_fresh.NEWEST))

    def test_a_two_size_set_measures_streaming_at_both_sizes_and_its_points_sizes(self):
        fresh = simulator_fresh.FRESH["fresh-2026-12-05d"]
        calls = []
        with tempfile.TemporaryDirectory() as d, \
                mock.patch.object(simulator_fresh.subprocess, "run",
                                  lambda a, check: calls.append(a)):
            simulator_fresh.measure(mock.Mock(set="fresh-2026-12-05d", out=d, rounds=1))
            csv_arg = f"--csv={os.path.join(d, 'streaming.csv')}"
        streaming = [c for c in calls if c[1].endswith("bench_streaming.py")]
        self.assertEqual(len(streaming), 2)
        first, second = streaming
        self.assertIn(csv_arg, first)
        self.assertIn("--shared_memory", first)
        self.assertFalse([a for a in first if a.startswith("--slice_params")])
        # The second size, into the same CSV after the first (so --append), over a socket.
        self.assertLess(calls.index(first), calls.index(second))
        self.assertIn(csv_arg, second)
        self.assertIn("--slice_params=640000", second)
        self.assertIn("--rates=2.5,5,0", second)
        self.assertIn("--append", second)
        self.assertNotIn("--shared_memory", second)
        # A set without a second size runs the benchmark once a round, as before.
        self.assertIsNone(simulator_fresh.second_streaming_command(
            simulator_fresh.FRESH["fresh-2026-12-05c"], "/nonexistent.csv"))
        # Each model's `local`, the preemption round, every point once.
        benches = [c for c in calls if c[1].endswith("bench_throughput.py")]
        self.assertEqual(sum("--local" in c for c in benches), len(fresh["iterations"]))
        self.assertEqual(len(benches), len(fresh["iterations"]) + len(fresh["points"]))
        self.assertEqual(sum(c[1].endswith("simulator_preemption_cost.py") for c in calls), 1)
        # A point's slice size reaches its runs and its folder; the default size is named in neither.
        sliced = [c for c in benches if "--slice_params=1280000" in c]
        self.assertEqual(len(sliced), 1)
        self.assertTrue(any(a.endswith("_s1280000") for a in sliced[0]))
        plain = next(c for c in benches if "--modes=baseline" in c)
        self.assertFalse([a for a in plain if a.startswith("--slice_params") or "_s40000" in a])

    def test_a_fresh_wire_point_at_a_slice_size_asks_for_both_in_its_run_and_prediction(self):
        wire = next(p for p in simulator_fresh.points_of("fresh-2026-12-05d") if p["wire_dtype"])
        calls = []
        with mock.patch.object(simulator_fresh.subprocess, "run",
                               lambda a, check: calls.append(a)):
            simulator_fresh.bench(wire, "o", 43, 3)
        self.assertIn("--wire_dtypes=bfloat16", calls[0])
        self.assertIn("--slice_params=320000", calls[0])
        self.assertIn("--bandwidths=2.5", calls[0])
        self.assertIn("--modes=p3", calls[0])
        runs = []
        with mock.patch.object(simulator.p3_sim, "run",
                               lambda *a: runs.append(a) or {"samples_per_second": 1.0}):
            simulator.predict(wire, "c.json", 1.0, {})
        self.assertIn("scheduling.wire_dtype=bfloat16", runs[0][3])
        self.assertIn("scheduling.slice_params=320000", runs[0][3])
        # collect reads the runs from the folders measure wrote them into.
        collected = []
        with mock.patch.object(simulator_fresh.subprocess, "run",
                               lambda a, check: collected.append(a)), \
                mock.patch.object(simulator_fresh.shutil, "copy"):
            simulator_fresh.collect(mock.Mock(set="fresh-2026-12-05d", out="o"))
        self.assertIn(f"o/{simulator_fresh.name(wire)}=colocated", collected[0])
        self.assertTrue(simulator_fresh.name(wire).endswith("_bfloat16_s320000"))

    def test_a_sets_packs_reach_its_p3_and_baseline_runs_and_predictions_not_ddp(self):
        packed = simulator_fresh.points_of("fresh-2026-12-06")
        by_system = {p["system"]: p for p in packed}
        self.assertEqual(by_system["p3"]["pack_params"], 65536)
        self.assertEqual(by_system["baseline"]["pack_params"], 65536)
        self.assertEqual(by_system["ddp"]["pack_params"], 0)
        # A set from before packs: none anywhere (its predictions stay as committed).
        self.assertEqual({p["pack_params"] for p in simulator_fresh.points_of(
            "fresh-2026-12-05d")}, {0})
        calls = []
        with tempfile.TemporaryDirectory() as d, \
                mock.patch.object(simulator_fresh.subprocess, "run",
                                  lambda a, check: calls.append(a)):
            simulator_fresh.measure(mock.Mock(set="fresh-2026-12-06", out=d, rounds=1))
            simulator_fresh.bench(simulator_fresh.points_of("fresh-2026-12-05d")[0], d, 43, 3)
        benches = [c for c in calls if c[1].endswith("bench_throughput.py")]
        flag = "--set=scheduling.pack_params=65536"
        for c in benches[:-1]:
            self.assertEqual(flag in c, "--modes=p3" in c or "--modes=baseline" in c, c)
        self.assertEqual(sum(flag in c for c in benches), 5)
        self.assertFalse([a for a in benches[-1] if "pack_params" in a])
        # The prediction simulates the packs the runs are given (validation: the packs
        # their rows record), and none for DDP.
        runs = []
        with mock.patch.object(simulator.p3_sim, "run",
                               lambda *a: runs.append(a) or {"samples_per_second": 1.0}):
            simulator.predict(by_system["p3"], "c.json", 1.0, {})
            simulator.predict(by_system["ddp"], "c.json", 1.0, {})
        self.assertIn("scheduling.pack_params=65536", runs[0][3])
        self.assertIn("scheduling.pack_params=0", runs[-1][3])
        # The predictions' CSV says each point's packs; an older set's has no such column.
        written = {}
        local = [dict(p, set="fresh-2026-12-05d", system="local", measured=10.0)
                 for p in packed]
        with tempfile.TemporaryDirectory() as d, \
                mock.patch.object(simulator_fresh.sp, "points", lambda: local), \
                mock.patch.object(simulator_fresh.sp, "results", lambda n: os.path.join(d, "x")), \
                mock.patch.object(simulator_fresh.calibration, "compute_scale", lambda *a: 1.0), \
                mock.patch.object(simulator_fresh.simulator, "predict",
                                  lambda *a: {"samples_per_second": 1.0}), \
                mock.patch.object(simulator_fresh.csv_io, "write_rows",
                                  lambda path, rows: written.setdefault("rows", rows)):
            simulator_fresh.predict(mock.Mock(set="fresh-2026-12-06"))
        self.assertEqual([r["pack_params"] for r in written["rows"]],
                         [p["pack_params"] for p in packed])

    def test_protocol_hit_is_within_10pct_of_the_median_or_inside_the_runs(self):
        runs = [8.0, 10.0, 13.0]
        # 11 % above the median but inside the runs: a hit.
        self.assertTrue(protocol.score_point(11.1, 10.0, runs, 3)["hit"])
        # 10 % below the median, outside the runs: a hit by the tolerance.
        self.assertTrue(protocol.score_point(9.0, 10.0, [9.5, 10.0, 10.2], 3)["hit"])
        # 11 % above, beyond every run: a miss.
        s = protocol.score_point(11.1, 10.0, [9.5, 10.0, 10.2], 3)
        self.assertFalse(s["hit"])
        self.assertAlmostEqual(s["error"], 0.11)
        # Below the slowest run and more than 10 % under the median: a miss.
        self.assertFalse(protocol.score_point(7.9, 10.0, runs, 3)["hit"])

    def test_protocol_needs_3_runs_and_5_for_a_fresh_point(self):
        self.assertFalse(protocol.score_point(10.0, 10.0, [9.0, 11.0], 2)["checkable"])
        self.assertTrue(protocol.score_point(10.0, 10.0, [9.0, 10.0, 11.0], 3)["checkable"])
        self.assertFalse(protocol.score_point(10.0, 10.0, [9.0, 10.0, 11.0], 3,
                                              fresh=True)["checkable"])
        self.assertTrue(protocol.score_point(10.0, 10.0, [9, 10, 10, 10, 11], 5,
                                             fresh=True)["checkable"])

    def test_protocol_summary_counts_uncheckable_points_apart_and_leaves_out_fitted(self):
        def row(set_name, ratio, checkable, hit, fitted=False):
            return {"set": set_name, "ratio": ratio, "checkable": checkable,
                    "protocol_hit": hit, "fitted": fitted}
        rows = [row("a", 1.02, True, True), row("a", 1.30, True, False),
                row("a", 1.00, False, True), row("a", 1.0, True, True, fitted=True),
                row("b", 0.95, True, True), row(protocol.FRESH_SETS[0], 1.20, True, False),
                row(protocol.FRESH_SETS[0], 1.04, True, True)]
        s = {x["set"]: x for x in protocol.summary(rows)}
        self.assertEqual((s["a"]["checkable"], s["a"]["hits"], s["a"]["not_checkable"]),
                         (2, 1, 1))
        self.assertAlmostEqual(s["a"]["median_abs_error"], 0.16)
        self.assertEqual((s["all"]["checkable"], s["all"]["hits"], s["all"]["not_checkable"]),
                         (5, 3, 1))
        fresh = s[protocol.FRESH_SUMMARY]
        self.assertEqual((fresh["checkable"], fresh["hits"]), (2, 1))
        self.assertFalse(protocol.targets_met(s["all"]))
        self.assertTrue(protocol.targets_met(s["b"]))
        self.assertFalse(protocol.targets_met(fresh, fresh=True))

    def test_validation_rows_take_their_runs_only_when_all_are_on_record(self):
        base = {"set": "s", "model": "resnet50", "system": "p3", "bandwidth": 1.0,
                "workers": 2, "slice_params": 40000, "measured": 10.0, "predicted": 11.5}
        rows = [dict(base, runs=3), dict(base, system="baseline", runs=3)]
        runs = {("s", "resnet50", "p3", 1.0, 2, 40000, "", "", 1, 0): [9.0, 10.0, 12.0],
                ("s", "resnet50", "baseline", 1.0, 2, 40000, "", "", 1, 0): [9.0, 12.0],
                # The output in pieces, or another credit: another point.
                ("s", "resnet50", "p3", 1.0, 2, 40000, "", "", 8, 0): [20.0, 21.0, 22.0],
                ("s", "resnet50", "p3", 1.0, 2, 40000, "", "", 1, 1048576): [20.0, 21.0, 22.0]}
        simulator.score_rows(rows, runs)
        self.assertTrue(rows[0]["protocol_hit"])  # inside 9 - 12
        self.assertEqual(rows[0]["runs_max"], 12.0)
        # 2 runs on record for a point of 3: its range is unknown, only its median counts.
        self.assertFalse(rows[1]["protocol_hit"])
        self.assertEqual(rows[1]["runs_max"], 10.0)
        pieces = [dict(base, runs=3, output_pieces=8)]
        simulator.score_rows(pieces, runs)
        self.assertEqual(pieces[0]["runs_max"], 22.0)
        credit = [dict(base, runs=3, measured=21.0, credit_bytes=1048576)]
        simulator.score_rows(credit, runs)
        self.assertEqual(credit[0]["runs_min"], 20.0)

    def test_the_command_lines_start(self):
        for name in ("simulator.py", "simulator_cpu_breakdown.py", "simulator_side_by_side.py",
                     "scaling.py", "simulator_fresh.py"):
            self.assertIn("usage", fakes.run_script(name, "--help"))


if __name__ == "__main__":
    unittest.main()
