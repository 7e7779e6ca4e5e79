"""tools/bench_throughput.py (docs/results/throughput): `run` against a stand-in launcher
(the raw.csv row of each run, the throughput from its records), `report` through the
`bazel run` wrapper into a scratch workspace (the medians CSV, the tables, the plots), and
`trace` on a small trace."""
import json
import os
import tempfile
import unittest

import fakes
from results_lib import csv_io, raw_csv

TOOLS = os.path.join(fakes.ROOT, "tools")


class BenchThroughputTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def bench(self, *args, env=None):
        return fakes.run([fakes.PY, os.path.join(TOOLS, "bench_throughput.py")] + list(args),
                         cwd=fakes.ROOT, env=env).stdout

    def test_run_appends_one_row_per_run_with_the_records_throughput(self):
        env = {"P3_LAUNCHER": fakes.launcher(self.dir), "BUILD_WORKSPACE_DIRECTORY": fakes.ROOT}
        out = os.path.join(self.dir, "bench")
        self.bench("run", "--model=resnet50", "--bandwidths=0", "--modes=p3", "--local",
                   "--iterations=6", "--warmup=2", f"--out={out}", env=env)
        rows = raw_csv.read(os.path.join(out, "raw.csv"))
        self.assertEqual([(r["mode"], r["workers"], r["status"]) for r in rows],
                         [("local", "1", "ok"), ("p3", "2", "ok")])
        # The stand-in's iterations take 0.5 and 0.6 s alternately (+0.05 s on worker 1):
        # after the warm-up, 0.525, 0.625, 0.525, 0.625 s for 16 samples; the median.
        p3 = rows[1]
        self.assertAlmostEqual(float(p3["samples_per_second"]), (16 / 0.525 + 16 / 0.625) / 2,
                               places=2)
        self.assertEqual(p3["bytes_sent_rank0"], "1000")
        with open(os.path.join(p3["output_dir"], "args")) as f:
            args = f.read().split()
        self.assertIn("--set=training.iterations=6", args)
        self.assertIn("--set=scheduling.wire_dtype=float32", args)

    def p3_runs(self, *variants, env_extra=None):
        """One ResNet-50 p3 run at 5 Gbit/s per entry of `variants` (extra arguments each)
        through the stand-in launcher; the raw.csv rows, in order."""
        env = {"P3_LAUNCHER": fakes.launcher(self.dir), "BUILD_WORKSPACE_DIRECTORY": fakes.ROOT,
               **(env_extra or {})}
        out = os.path.join(self.dir, "bench")
        for extra in variants:
            self.bench("run", "--model=resnet50", "--bandwidths=5", "--modes=p3",
                       "--iterations=6", "--warmup=2", f"--out={out}", *extra, env=env)
        return raw_csv.read(os.path.join(out, "raw.csv"))

    def test_an_automatic_slice_size_is_recorded_as_the_launchers_choice(self):
        rows = self.p3_runs(["--slice_params=0"], [])
        self.assertEqual([(r["slice_params"], r["slice_auto"]) for r in rows],
                         [("160000", "1"), ("40000", "")])
        with open(os.path.join(rows[0]["output_dir"], "args")) as f:
            self.assertIn("--set=scheduling.slice_params=0", f.read().split())
        self.assertEqual([raw_csv.slice_auto(r) for r in rows], [True, False])

    def test_the_output_projections_pieces_are_recorded_from_the_resolved_config(self):
        rows = self.p3_runs(["--set=model.output_pieces=8"], [])
        self.assertEqual([r["output_pieces"] for r in rows], ["8", ""])
        self.assertEqual([raw_csv.output_pieces(r) for r in rows], [8, 1])

    def test_the_grpc_experiments_are_recorded_from_the_config_and_the_environment(self):
        rows = self.p3_runs(["--set=scheduling.sized_reads=true"],
                            ["--set=scheduling.sized_reads=false"], [])
        self.assertEqual([r["grpc_experiments"] for r in rows],
                         ["tcp_frame_size_tuning,tcp_rcv_lowat", "", ""])
        # The environment's own value wins in the processes, and so in the row.
        rows = self.p3_runs(["--set=scheduling.sized_reads=true"],
                            env_extra={"GRPC_EXPERIMENTS": "tcp_read_chunks"})
        self.assertEqual(rows[-1]["grpc_experiments"], "tcp_read_chunks")

    def test_a_run_traced_through_set_is_marked_traced(self):
        rows = self.p3_runs(["--set=trace=true"], [])
        self.assertEqual([raw_csv.is_traced(r) for r in rows], [True, False])

    def test_report_through_the_bazel_run_wrapper_into_the_workspace(self):
        workspace = os.path.join(self.dir, "ws")
        out = os.path.join(workspace, "out", "bench")
        os.makedirs(out)
        raw = [{"time_utc": "t", "model": "resnet50", "system": "p3", "mode": m,
                "bandwidth_gbps": bw, "batch_per_worker": "8", "workers": w,
                "slice_params": "40000", "iterations": "13", "warmup": "3",
                "samples_per_second": sps, "mean_samples_per_second": sps, "load1": "1.0",
                "status": "ok", "output_dir": f"runs/{m}_{bw}_{i}", "wire_dtype": "float32"}
               for i, (m, bw, w, sps) in enumerate([
                   ("local", "0.0", "1", "50.0"), ("p3", "1.0", "2", "16.0"),
                   ("baseline", "1.0", "2", "10.0"), ("p3", "1.0", "2", "17.0"),
                   ("baseline", "1.0", "2", "11.0")])]
        csv_io.write_rows(os.path.join(out, "raw.csv"), raw, raw_csv.FIELDS)
        runfiles = os.path.dirname(fakes.ROOT)
        fakes.run(["bash", os.path.join(TOOLS, "bench_throughput.sh"), "report"],
                  env={"RUNFILES_DIR": runfiles, "BUILD_WORKSPACE_DIRECTORY": workspace})
        results = os.path.join(workspace, "docs", "results", "throughput")
        medians = {(r["mode"], r["bandwidth_gbps"]): r
                   for r in csv_io.read_rows(os.path.join(results, "throughput.csv"))}
        self.assertEqual(medians[("p3", "1.0")]["median_sps"], "16.5")
        self.assertEqual(medians[("p3", "1.0")]["compute_bound_sps"], "100.0")
        self.assertEqual(medians[("p3", "1.0")]["bandwidth_bound_sps"], "18.723")
        with open(os.path.join(results, "throughput_tables.md")) as f:
            tables = f.read()
        self.assertIn("from out/bench/raw.csv; do not edit", tables)
        self.assertIn("| 1 | 10.5 (10.0–11.0) | 16.5 (16.0–17.0) | 100.0 | 18.7 | 1.57 (1.57) |",
                      tables)
        self.assertTrue(os.path.exists(os.path.join(results, "throughput_resnet50.png")))

    def test_trace_splits_worker_0s_iterations(self):
        trace = os.path.join(self.dir, "trace.json")
        ev = [{"ph": "M", "name": "thread_name", "pid": 100, "tid": 1,
               "args": {"name": "compute"}},
              {"ph": "M", "name": "thread_name", "pid": 100, "tid": 2,
               "args": {"name": "wait for parameters"}}]
        for it, start in ((0, 0), (1, 1_000_000)):
            ev += [{"ph": "X", "pid": 100, "tid": 1, "cat": "forward", "ts": start, "dur": 200_000,
                    "args": {"iteration": it}},
                   {"ph": "X", "pid": 100, "tid": 1, "cat": "backward", "ts": start + 300_000,
                    "dur": 400_000, "args": {"iteration": it}},
                   {"ph": "X", "pid": 100, "tid": 2, "cat": "wait", "ts": start + 700_000,
                    "dur": 100_000, "args": {}}]
        with open(trace, "w") as f:
            json.dump({"traceEvents": ev}, f)
        out = self.bench("trace", trace).splitlines()
        self.assertEqual(out[0], "iteration forward_s backward_s wait_s iteration_s")
        self.assertEqual(out[1], "0 0.200 0.400 0.100 1.000")
        self.assertEqual(out[2], "1 0.200 0.400 0.100 nan")


class PeerTunablesTest(unittest.TestCase):
    """The DDP peer's (and Python workers') heap in huge pages, as the launcher gives p3's."""

    def tunables(self, environ):
        import importlib.util
        spec = importlib.util.spec_from_file_location(
            "bench_throughput_module", os.path.join(TOOLS, "bench_throughput.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.peer_glibc_tunables(environ)

    def test_huge_pages_unless_glibc_tunables_says_otherwise(self):
        base = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=1073741824"
        self.assertEqual(self.tunables({}), base + ":glibc.malloc.hugetlb=1")
        self.assertEqual(self.tunables({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}),
                         base + ":glibc.malloc.hugetlb=1")
        self.assertEqual(self.tunables({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0"}),
                         base + ":glibc.malloc.hugetlb=0")
        self.assertEqual(
            self.tunables({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=2:glibc.malloc.hugetlbx=0"}),
            base + ":glibc.malloc.hugetlb=2")


class DdpPeerTest(unittest.TestCase):
    def test_two_ranks_of_a_small_model_on_loopback(self):
        probe = fakes.run([fakes.PY, "-c", "import torch, torchvision"], check=False)
        if probe.returncode != 0:
            fakes.skip(self, "ddp_peer", "python3-torch or python3-torchvision is not installed")
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with tempfile.TemporaryDirectory() as d:
            import subprocess
            procs = [subprocess.Popen(
                [fakes.PY, os.path.join(TOOLS, "ddp_peer.py"), f"--rank={r}", "--world=2",
                 f"--master=127.0.0.1:{port}", "--model=seq2seq_lstm", "--vocab=64",
                 "--seq_len=4", "--batch=2", "--iterations=3", "--warmup=1",
                 f"--out={d}/r{r}.json"],
                env=dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1"),
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in range(2)]
            logs = [p.communicate(timeout=120)[0] for p in procs]
            for p, log in zip(procs, logs):
                self.assertEqual(p.returncode, 0, log)
            with open(f"{d}/r0.json") as f:
                r0 = json.load(f)
        self.assertEqual((r0["world"], r0["iterations"]), (2, 3))
        self.assertEqual(len(r0["iteration_seconds"]), 3)
        self.assertGreater(r0["samples_per_second"], 0)


    def test_inception_v3_takes_75_pixel_images_with_the_zoos_auxiliary_pool(self):
        probe = fakes.run([fakes.PY, "-c", "import torch, torchvision"], check=False)
        if probe.returncode != 0:
            fakes.skip(self, "ddp_peer", "python3-torch or python3-torchvision is not installed")
        code = (
            "import sys, torch\n"
            f"sys.path.insert(0, {TOOLS!r})\n"
            "import ddp_peer\n"
            "torch.set_num_threads(1)\n"
            "m = ddp_peer.make_model('inception_v3', 1000, 0).train()\n"
            "out = m(torch.randn(2, 3, 75, 75))\n"  # torchvision's own pool: 768x0x0, refused
            "print(tuple(out.logits.shape), tuple(out.aux_logits.shape),"
            " sum(p.numel() for p in m.parameters()))\n")
        run = fakes.run([fakes.PY, "-c", code], check=False)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        # The zoo's count (models/inception.cc; configs/sim/profiles/inception_v3_b8_i75_cpu.json).
        self.assertEqual(run.stdout.split()[-1], "27161264")
        self.assertIn("(2, 1000) (2, 1000)", run.stdout)

if __name__ == "__main__":
    unittest.main()
