#!/usr/bin/env python3
"""The GPU check: one prepared command for the borrowed GPU machine (issue "The whole
system on GPUs"), which writes a Markdown report and a CSV to a folder.

  # on the GPU machine, after tools/gpu/build.sh (binaries in p3-bundle/bin):
  python3 p3-bundle/tools/gpu/check.py --out=/tmp/gpu-check            # at most ~8 min
  # here, to prove it end to end (device cpu, small sizes), from the repository:
  /usr/bin/python3 tools/gpu/check.py --out=/tmp/cpu-check --device=cpu --quick --bin=bazel-bin

Sections (--sections=a,b,c,d,e; each command has a time limit, and one that fails is
reported as such, never skipped silently):
  a  every zoo model: the device's forward against the CPU's (TF32 off; target <= 1e-4
     relative), and forward + backward + SGD samples/s against PyTorch eager's on an H200
     (tools/gpu/h200_pytorch_eager.csv; target >= 0.95) in fp32 and bf16
  b  equivalence: 2 workers share the device with 2 CPU servers, 10 iterations, every mode;
     param_l2 against `local` on the device (TF32 off; target <= 1e-5 relative)
  c  throughput, ResNet-50 (b64 224^2): 1 worker on the device + 2 servers on the same
     machine (shared memory), P3 / local (target >= 0.9) beside the baseline, fp32 and bf16;
     2 workers sharing the device over emulated 10 and 25 Gbit/s links (root), P3 / baseline
  d  pipeline: 2 stages on the device, every weight mode: loss against a CPU run, samples/s
     against one stage
  e  the data path: bench_streaming on loopback, through shared memory, and on loopback
     as 3 streams (3 servers) against one, goodput; gRPC alone on P3's pattern on its two
     APIs (grpc_api_probe) in SCHED_BATCH, beside iperf3 and P3's loopback run

CSV columns: section,item,measured,target,verdict,detail (verdict: pass, fail, report).
"""
import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MODES = ["p3", "baseline", "slicing_only", "priority_only", "values_only",
         "no_backward_overlap", "no_forward_overlap", "no_overlap"]
WEIGHTS = ["spectrain", "pipedream", "stale", "vanilla", "data_parallel"]


def iperf3_flags():
    """bench_streaming's iperf3 flags on this machine: none without iperf3. Both directions
    at once are two opposite one-way pairs (-R, in every iperf3 3), so no version check."""
    return ["--iperf3_seconds=2"] if shutil.which("iperf3") else []


class Check:
    def __init__(self, args):
        self.args = args
        self.out = os.path.abspath(args.out)
        self.logs = os.path.join(self.out, "logs")
        os.makedirs(self.logs, exist_ok=True)
        self.rows = []
        self.md = []
        self.bin = os.path.abspath(args.bin)
        self.started = time.time()
        self.p3_loopback = None  # bench_streaming's loopback result (section e), if it ran

    def binary(self, path):
        return os.path.join(self.bin, path)

    def row(self, section, item, measured, target, verdict, detail=""):
        self.rows.append({"section": section, "item": item, "measured": measured,
                          "target": target, "verdict": verdict, "detail": detail})
        print(f"[{time.time() - self.started:6.0f}s] {section} {item}: {measured} "
              f"({verdict}{'; ' + detail if detail else ''})", flush=True)

    def run(self, name, argv, timeout, cwd=None):
        """Runs argv with its output in logs/<name>.log; returns (ok, output)."""
        log = os.path.join(self.logs, name + ".log")
        start = time.time()
        try:
            p = subprocess.run(argv, cwd=cwd or self.bin, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=timeout)
            out, ok = p.stdout, p.returncode == 0
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or "") if isinstance(e.stdout, str) else ""
            out += f"\n[check] killed after {timeout} s"
            ok = False
        with open(log, "w") as f:
            f.write(" ".join(argv) + "\n\n" + out)
        print(f"[{time.time() - self.started:6.0f}s] ran {name} in {time.time() - start:.0f} s"
              f"{'' if ok else ' (FAILED: ' + log + ')'}", flush=True)
        return ok, out

    def launch(self, name, config, sets, timeout):
        """launch_cluster on `config` with overrides; returns summary.json or None."""
        out_dir = os.path.join(self.out, "runs", name)
        shutil.rmtree(out_dir, ignore_errors=True)
        argv = [self.binary("tools/launch_cluster"), f"--config={config}", "--plot=false",
                f"--set=name={name}", f"--set=output_dir={out_dir}"]
        # No packs (scheduling.pack_params, the default since 2026-12-05 evening): the
        # simulator's predictions of this check (docs/results/gpu/predictions_2026-12-05.md)
        # were filed for plans without them, and the check measures what was predicted.
        if not any(s.startswith("scheduling.pack_params=") for s in sets):
            argv.append("--set=scheduling.pack_params=0")
        argv += [f"--set={s}" for s in sets]
        ok, _ = self.run(name, argv, timeout)
        path = os.path.join(out_dir, "summary.json")
        if not ok or not os.path.exists(path):
            return None
        with open(path) as f:
            return json.load(f)

    # --- a: the zoo ---------------------------------------------------------------------
    def models(self):
        a = self.args
        ref = {}
        ref_path = os.path.join(HERE, "h200_pytorch_eager.csv")
        if os.path.exists(ref_path):
            for r in csv.reader(l for l in open(ref_path) if not l.startswith("#")):
                if r and r[0] == "ref":
                    ref[(r[1], r[2])] = float(r[8])
        if a.quick:
            sizes = [("small_cnn", 16, 0), ("mlp", 16, 0), ("resnet50", 4, 32)]
        else:
            sizes = [("resnet50", 64, 224), ("vgg19", 64, 224), ("inception_v3", 32, 299),
                     ("seq2seq_lstm", 64, 0)]
        # The device's forward against the CPU's, every zoo model, TF32 off.
        table = os.path.join(self.logs, "compare.csv")
        if os.path.exists(table):
            os.remove(table)
        ok, _ = self.run("a_compare", [self.binary("models/model_bench"), f"--device={a.device}",
                                       "--compare_cpu", "--tf32=false", "--runs=1", "--batch=2",
                                       f"--csv={table}"], a.timeout)
        if ok:
            for r in csv.reader(open(table)):
                if r[7]:
                    d = float(r[7])
                    self.row("a", f"{r[0]} forward, device vs CPU", f"{d:.2e}", "<= 1e-4",
                             "pass" if d <= 1e-4 else "fail")
        else:
            self.row("a", "forward, device vs CPU", "-", "<= 1e-4", "fail", "model_bench failed")
        for precision in ["fp32", "bf16"]:
            for name, batch, image in sizes:
                table = os.path.join(self.logs, f"bench_{name}_{precision}.csv")
                if os.path.exists(table):
                    os.remove(table)
                argv = [self.binary("models/model_bench"), f"--device={a.device}",
                        f"--precision={precision}", "--step", f"--models={name}",
                        f"--batch={batch}", f"--runs={3 if a.quick else 10}", f"--csv={table}"]
                if image:
                    argv.append(f"--image_size={image}")
                ok, _ = self.run(f"a_{name}_{precision}", argv, a.timeout)
                if not ok:
                    self.row("a", f"{name} {precision} samples/s", "-", ">= 0.95 x PyTorch",
                             "fail", "model_bench failed")
                    continue
                r = next(csv.reader(open(table)))
                rate = float(r[6])
                base = ref.get((name, precision))
                if base and not a.quick:
                    ratio = rate / base
                    self.row("a", f"{name} b{batch} {precision} samples/s", f"{rate:.0f}",
                             ">= 0.95 x PyTorch", "pass" if ratio >= 0.95 else "fail",
                             f"PyTorch eager {base:.0f}: {ratio:.2f}x")
                else:
                    self.row("a", f"{name} b{batch} {precision} samples/s", f"{rate:.1f}",
                             "-", "report", "no PyTorch figure for this size")

    # --- b: equivalence -------------------------------------------------------------------
    def equivalence(self):
        a = self.args
        config = os.path.join(self.bin, "configs/default.textproto")
        sets = ["training.iterations=10", "training.evaluate=false", f"training.device={a.device}",
                "training.tf32=false", "data.dataset=synthetic", "data.synthetic_size=640",
                "output.save_model=false"]
        local = self.launch("b_local", config, sets + ["mode=local"], a.timeout)
        if local is None:
            self.row("b", "local", "-", "runs", "fail", "launch_cluster failed")
            return
        self.row("b", "local param_l2", f"{local['param_l2']:.9g}", "-", "report")
        for mode in MODES:
            s = self.launch(f"b_{mode}", config, sets + [f"mode={mode}"], a.timeout)
            if s is None:
                self.row("b", mode, "-", "<= 1e-5", "fail", "launch_cluster failed")
                continue
            rel = abs(s["param_l2"] - local["param_l2"]) / abs(local["param_l2"])
            self.row("b", f"{mode} param_l2 vs local", f"{rel:.1e}", "<= 1e-5",
                     "pass" if rel <= 1e-5 else "fail", f"param_l2 {s['param_l2']:.9g}")

    # --- c: throughput ---------------------------------------------------------------------
    def throughput(self):
        a = self.args
        config = os.path.join(self.bin, "configs/bench/resnet50.textproto")
        size = (["training.batch_size=4", "model.image_size=32", "training.iterations=6",
                 "training.warmup_iterations=2"] if a.quick else
                ["training.batch_size=64", "model.image_size=224", "training.iterations=25",
                 "training.warmup_iterations=5"])
        base = size + [f"training.device={a.device}", "training.threads=0",
                       "data.synthetic_size=1024"]
        for precision in ["fp32", "bf16"]:
            rates = {}
            for mode in ["local", "p3", "baseline"]:
                sets = base + [f"training.precision={precision}", f"mode={mode}",
                               "cluster.workers=1", "cluster.servers=2",
                               "network.bandwidth_gbps=0"]
                s = self.launch(f"c_1gpu_{mode}_{precision}", config, sets, a.timeout)
                rates[mode] = s["samples_per_second"] if s else None
                self.row("c", f"1 worker + 2 servers, {mode}, {precision} samples/s",
                         f"{rates[mode]:.1f}" if rates[mode] else "-", "-",
                         "report" if rates[mode] else "fail")
            if rates.get("local") and rates.get("p3"):
                r = rates["p3"] / rates["local"]
                self.row("c", f"P3 / local, {precision}", f"{r:.2f}", ">= 0.9",
                         "pass" if r >= 0.9 else "fail",
                         f"baseline / local {rates['baseline'] / rates['local']:.2f}"
                         if rates.get("baseline") else "")
        for gbps in [10, 25]:
            rates = {}
            for mode in ["p3", "baseline"]:
                sets = base + [f"mode={mode}", "cluster.workers=2", "cluster.servers=2",
                               f"network.bandwidth_gbps={gbps}"]
                s = self.launch(f"c_2gpu_{mode}_{gbps}g", config, sets, a.timeout)
                rates[mode] = s["samples_per_second"] if s else None
            if rates["p3"] and rates["baseline"]:
                self.row("c", f"2 workers at {gbps} Gbit/s, P3 / baseline",
                         f"{rates['p3'] / rates['baseline']:.2f}", "-", "report",
                         f"P3 {rates['p3']:.1f}, baseline {rates['baseline']:.1f} samples/s")
            else:
                self.row("c", f"2 workers at {gbps} Gbit/s", "-", "-", "fail",
                         "a run failed (emulated links need root and network namespaces)")

    # --- d: pipeline ------------------------------------------------------------------------
    def pipeline(self):
        a = self.args
        iters = 8 if a.quick else 60

        def config(name, weights, devices):
            # pipeline.devices is repeated: --set cannot give it, so each run has a file.
            path = os.path.join(self.out, "runs", name + ".textproto")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(f"""name: "{name}"
mode: "pipeline"
model {{ name: "small_cnn" num_classes: 10 }}
data {{ dataset: "synthetic" synthetic_size: 2048 }}
optimizer {{ name: "sgd" lr: 0.05 momentum: 0.9 weight_decay: 1e-4 }}
training {{ batch_size: 32 iterations: {iters} seed: 1 evaluate: false log_every: 20
           threads: 1 tf32: false }}
pipeline {{ weights: "{weights}" stages: {len(devices)} profile_batches: 3
           {" ".join(f'devices: "{d}"' for d in devices)} }}
output_dir: "{os.path.join(self.out, "runs", name)}"
""")
            return path

        def run(name, weights, devices):
            result = os.path.join(self.out, "runs", name + ".json")
            ok, _ = self.run(name, [self.binary("tools/pipeline_train"),
                                    f"--config={config(name, weights, devices)}",
                                    f"--result_file={result}"], a.timeout)
            if not ok or not os.path.exists(result):
                return None
            return json.load(open(result))

        one = run("d_one_stage", "spectrain", [a.device])
        for weights in WEIGHTS:
            on_device = run(f"d_{weights}", weights, [a.device, a.device])
            on_cpu = run(f"d_{weights}_cpu", weights, ["cpu", "cpu"])
            if on_device is None:
                self.row("d", f"{weights}, 2 stages", "-", "runs", "fail", "pipeline_train failed")
                continue
            detail = []
            if on_cpu and on_device.get("final_loss") is not None and on_cpu.get("final_loss"):
                d = abs(on_device["final_loss"] - on_cpu["final_loss"])
                detail.append(f"final loss {on_device['final_loss']:.4f} vs CPU "
                              f"{on_cpu['final_loss']:.4f} (|diff| {d:.1e})")
            if one:
                detail.append(f"{on_device['samples_per_second'] / one['samples_per_second']:.2f}x "
                              f"one stage")
            memory = [m.get("peak_bytes", 0) for m in on_device.get("memory", [])]
            if memory:
                detail.append("peak memory per stage " + ", ".join(f"{m / 2**20:.0f} MiB"
                                                                   for m in memory))
            self.row("d", f"{weights}, 2 stages samples/s",
                     f"{on_device['samples_per_second']:.1f}", "-", "report", "; ".join(detail))

    # --- e: the data path --------------------------------------------------------------------
    def streaming(self):
        a = self.args
        params = 2_000_000 if a.quick else 25_000_000
        # iperf3 beside the loopback run where the machine has it (its CPU per GB is the
        # floor for TCP), one way and both directions at once (two opposite pairs, as P3's
        # traffic); the shared-memory run times memcpy itself.
        loopback = iperf3_flags()
        # And loopback as 3 streams (3 servers; issue 35's lever "several streams per link"):
        # on 2 cores each added stream cost goodput and CPU per byte
        # (docs/results/streaming/streaming.md); whether 16 cores turn that around.
        one_stream = None
        for name, extra in [("loopback", loopback), ("shared memory", ["--shared_memory"]),
                            ("loopback over 3 streams", ["--servers=3"])]:
            result = os.path.join(self.logs, f"e_{name.replace(' ', '_')}.json")
            ok, _ = self.run(f"e_{name.replace(' ', '_')}",
                             [self.binary("tools/bench_streaming"),
                              f"--server_binary={self.binary('server/p3_server')}",
                              f"--params={params}", f"--result_json={result}",
                              f"--iterations={3 if a.quick else 10}"] + extra, a.timeout)
            if not ok:
                self.row("e", f"streaming, {name}", "-", "-", "fail", "bench_streaming failed")
                continue
            r = json.load(open(result))
            detail = [f"{r['cpu_s_per_gb']:.2f} CPU s/GB (worker + server)"]
            if "iperf3_gbps" in r:
                detail.append(f"iperf3 {r['iperf3_gbps']:.2f} Gbit/s, goodput ÷ iperf3 "
                              f"{r['ratio']:.2f}")
            if "cpu_ratio_to_iperf3" in r:
                detail.append(f"host CPU per GB ÷ iperf3's {r['cpu_ratio_to_iperf3']:.2f}")
            if "iperf3_bidir_gbps" in r:
                how = {"two_pairs": "two opposite iperf3 pairs",
                       "bidir": "iperf3 --bidir"}.get(r.get("iperf3_bidir_method"), "iperf3 --bidir")
                detail.append(f"both ways at once ({how}) "
                              f"{r['iperf3_bidir_gbps']:.2f} Gbit/s each way, "
                              f"goodput ÷ it {r['ratio_to_iperf3_bidir']:.2f}")
            if "cpu_ratio_to_iperf3_bidir" in r:
                detail.append("host CPU per GB ÷ both ways' "
                              f"{r['cpu_ratio_to_iperf3_bidir']:.2f}")
            if "memcpy_gbps" in r:
                detail.append(f"memcpy {r['memcpy_gbps']:.1f} Gbit/s, goodput ÷ memcpy "
                              f"{r['goodput_to_memcpy']:.2f}")
            if name == "loopback":
                one_stream = r
                self.p3_loopback = r
            elif r.get("servers", 1) > 1 and one_stream is not None:
                detail.append(f"÷ one stream: goodput "
                              f"{r['goodput_up_gbps'] / one_stream['goodput_up_gbps']:.2f}, "
                              f"CPU per GB {r['cpu_s_per_gb'] / one_stream['cpu_s_per_gb']:.2f}")
            self.row("e", f"streaming goodput, {name} (Gbit/s each way)",
                     f"{r['goodput_up_gbps']:.2f}", "-", "report", "; ".join(detail))
        self.grpc_apis()

    def grpc_apis(self):
        """gRPC alone on P3's stream pattern, loopback, on its synchronous API and with both
        ends on its callback API (tools/grpc_api_probe; on 2 cores the callback API moved
        1.22 times as much there, 1.07 with every thread in SCHED_BATCH, and P3's worker
        did not gain from it: docs/results/streaming/streaming.md, "gRPC's two APIs on
        P3's pattern"): whether 16 cores and gRPC's 8 callback threads change that. Every
        thread in SCHED_BATCH where chrt exists, as P3's communication threads run; iperf3
        first in each round where the machine has it, and the loopback run of P3 above
        set beside gRPC alone: on 2 cores side by side P3 moved 0.72 - 0.81 of gRPC alone on
        loopback and gRPC alone 0.55 - 0.64 of iperf3, short of issue 35's 0.6 (streaming.md,
        "P3 beside gRPC alone at every message size")."""
        a = self.args
        table = os.path.join(self.logs, "e_grpc_apis.csv")
        if os.path.exists(table):
            os.remove(table)
        batch = ["chrt", "-b", "0"] if shutil.which("chrt") else []
        ok, _ = self.run("e_grpc_apis", batch + [
            self.binary("tools/grpc_api_probe"), "--runs=3",
            f"--megabytes={200 if a.quick else 2000}", "--apis=sync,callback",
            f"--csv={table}", f"--out_dir={os.path.join(self.out, 'runs', 'grpc_apis')}"]
            + iperf3_flags(), a.timeout)
        if not ok:
            self.row("e", "gRPC alone on P3's pattern, loopback", "-", "-", "fail",
                     "grpc_api_probe failed")
            return
        runs = list(csv.DictReader(open(table)))

        def median(api, key):
            values = [float(r[key]) for r in runs if r["api"] == api and r.get(key)]
            return statistics.median(values) if values else None
        p3 = self.p3_loopback
        for api in ("sync", "callback"):
            goodput = median(api, "goodput_gbps")
            detail = [f"{median(api, 'cpu_s_per_gb'):.2f} CPU s/GB (both processes)"]
            if median(api, "ratio") is not None:
                detail.append(f"goodput ÷ iperf3 {median(api, 'ratio'):.2f}")
            if median(api, "cpu_ratio_to_iperf3") is not None:
                detail.append("host CPU per GB ÷ iperf3's "
                              f"{median(api, 'cpu_ratio_to_iperf3'):.2f}")
            if p3 is not None:
                detail.append(f"P3's loopback run ÷ this: goodput "
                              f"{p3['goodput_up_gbps'] / goodput:.2f}")
            detail.append("in SCHED_BATCH" if batch else "chrt missing: the default policy")
            self.row("e", f"gRPC alone on P3's pattern, loopback, {api} API (Gbit/s each way)",
                     f"{goodput:.2f}", "-", "report", "; ".join(detail) + "; median of 3 runs")

    def write(self):
        with open(os.path.join(self.out, "check.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, ["section", "item", "measured", "target", "verdict", "detail"])
            w.writeheader()
            w.writerows(self.rows)
        passed = sum(r["verdict"] == "pass" for r in self.rows)
        failed = sum(r["verdict"] == "fail" for r in self.rows)
        lines = [f"# GPU check, device {self.args.device}{' (quick)' if self.args.quick else ''}",
                 "", f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
                 f"{time.time() - self.started:.0f} s; {passed} passed, {failed} failed, "
                 f"{len(self.rows) - passed - failed} reported. Logs: `logs/`; data: `check.csv`.",
                 ""]
        titles = {"a": "a. The zoo", "b": "b. Equivalence", "c": "c. Throughput",
                  "d": "d. Pipeline", "e": "e. The data path"}
        for section in "abcde":
            rows = [r for r in self.rows if r["section"] == section]
            if not rows:
                continue
            lines += [f"## {titles[section]}", "", "| item | measured | target | verdict | detail |",
                      "|---|---:|---|---|---|"]
            lines += [f"| {r['item']} | {r['measured']} | {r['target']} | {r['verdict']} | "
                      f"{r['detail']} |" for r in rows]
            lines.append("")
        with open(os.path.join(self.out, "report.md"), "w") as f:
            f.write("\n".join(lines))
        print(f"check.py: {passed} passed, {failed} failed; {self.out}/report.md", flush=True)
        return failed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--bin", default=os.path.join(REPO, "bin"),
                        help="folder of the binaries by package (the bundle's bin/, or bazel-bin)")
    parser.add_argument("--quick", action="store_true", help="small sizes (the CPU proof)")
    parser.add_argument("--sections", default="abcde")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per command")
    args = parser.parse_args()
    check = Check(args)
    if not os.path.exists(check.binary("tools/launch_cluster")):
        sys.exit(f"check.py: no tools/launch_cluster under {check.bin} (--bin)")
    if not os.path.exists(os.path.join(check.bin, "configs")):
        sys.exit(f"check.py: no configs/ under {check.bin}: link the repository's configs there")
    sections = {"a": check.models, "b": check.equivalence, "c": check.throughput,
                "d": check.pipeline, "e": check.streaming}
    for s in args.sections:
        sections[s]()
    check.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
