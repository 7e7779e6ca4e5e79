"""tools/experiments/throughput_cpu_breakdown.py (docs/results/throughput): perf's samples
of a training run read from `perf script`, counted by process kind and group in the timed
window, and the table of P3 against DDP, on canned perf output (no perf, no run)."""
import os
import tempfile
import unittest

import throughput_cpu_breakdown as breakdown
from results_lib import csv_io

# perf report --tasks: pid tid ppid | comm
TASKS = [
    "       pid       tid      ppid  comm",
    "       900       900         1 |  cc1plus",
    "       100       100        99 |  perf",
    "       101       101       100 |   python3",
    "       110       110       101 |    launch_cluster",
    "       120       120       110 |     p3_server",
    "       120       121       120 |      grpcpp_sync_ser",
    "       130       130       110 |     p3_worker",
    "       140       140       101 |    python3",
    "       300       300         1 |  p3_worker",
]

# perf script -F comm,pid,tid,time,ip,sym,dso, with call chains
SCRIPT = """\
p3_worker   130/130     10.500: 
\t    7f00 at::native::conv2d (/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13)

grpcpp_sync_ser   120/121     10.600: 
\tffffffff82242009 pvm_irq_enable ([kernel.kallsyms])
\tffffffff82241f31 __raw_callee_save_pvm_irq_enable ([kernel.kallsyms])
\tffffffff81111111 _raw_spin_unlock_irqrestore ([kernel.kallsyms])
\tffffffff81222222 tcp_sendmsg_locked ([kernel.kallsyms])

grpcpp_sync_ser   120/121     10.700: 
\tffffffff82242009 pvm_irq_enable ([kernel.kallsyms])
\tffffffff81333333 try_to_wake_up ([kernel.kallsyms])

p3_server   120/120     10.800: 
\t    1234 p3::SliceOptimizer::ApplySum (/opt/bin/p3_server)

python3   140/140     10.850: 
\t    7f01 [unknown] (/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13)
\t    7f02 at::TensorIteratorBase::serial_for_each (/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13)

python3   140/140     10.900: 
\t    5678 gloo::sum<float> (/usr/lib/libgloo.so.0)

python3   140/140     11.000: 
\t    5678 _PyEval_EvalFrameDefault (/usr/bin/python3.11)

cc1plus   900/900     10.950: 
\t    abcd [unknown] (/usr/lib/gcc/x86_64-linux-gnu/12/cc1plus)

p3_worker   130/130     99.000: 
\t    7f00 at::native::conv2d (/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13)

p3_worker   300/300     10.960: 
\t    7f00 at::native::conv2d (/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13)
""".splitlines()


class ThroughputCpuBreakdownTest(unittest.TestCase):
    def setUp(self):
        self.tids = breakdown.streaming.our_pids(TASKS, "python3")
        self.kinds = breakdown.process_kinds(TASKS, self.tids)

    def test_the_run_is_perfs_child_and_its_descendants_each_of_a_kind(self):
        self.assertEqual(self.kinds, {101: "benchmark script", 110: "launcher", 120: "server",
                                      121: "server", 130: "worker", 140: "DDP rank"})

    def test_a_deferred_interrupts_sample_goes_to_the_first_real_caller(self):
        got = breakdown.samples(SCRIPT)
        self.assertEqual(breakdown.group_of(got[1][2]), "kernel: TCP and the rest")
        self.assertEqual(breakdown.group_of(got[2][2]), "kernel: scheduling and wake-ups")

    def test_a_site_is_the_real_kernel_frame_and_the_first_p3_or_aten_caller(self):
        got = breakdown.samples(SCRIPT)
        self.assertEqual(breakdown.site_of(got[1][2]), ("tcp_sendmsg_locked", "–"))
        self.assertEqual(breakdown.site_of([("libc.so.6", "__memmove_avx512"),
                                            ("p3_server", "p3::DecodeSegments"),
                                            ("p3_server", "p3::ParameterShard::Gradient")]),
                         ("__memmove_avx512", "p3::DecodeSegments"))

    def test_samples_in_the_window_count_by_kind_and_group_others_apart(self):
        counts = breakdown.tally(breakdown.samples(SCRIPT), self.kinds, 10.0, 12.0)
        model = "libtorch, oneDNN, OpenBLAS: the model's other kernels"
        self.assertEqual(counts, {
            ("worker", model): 1,  # the sample at 99 s is after the window
            ("server", "kernel: TCP and the rest"): 1,
            ("server", "kernel: scheduling and wake-ups"): 1,
            ("server", "server: the optimizer"): 1,
            ("DDP rank", "gloo (DDP's all-reduce)"): 1,
            ("DDP rank", breakdown.ELEMENTWISE): 1,  # by its caller
            ("DDP rank", "Python and torch's bindings (DDP)"): 1,
            ("outside the run", "all"): 2,  # cc1plus and another engineer's p3_worker
        })

    def test_the_table_gives_ms_per_iteration_and_p3_minus_ddp(self):
        got = breakdown.samples(SCRIPT)
        rows = []
        for system, run in (("p3", 1), ("p3", 2), ("ddp", 1)):
            meta = {"system": system, "window": {"start": 10.0, "end": 12.0},
                    "raw": {"samples_per_second": "50.0", "load1": "2.0"}}
            kinds = {t: k for t, k in self.kinds.items()
                     if (k == "DDP rank") == (system == "ddp")}
            counts = breakdown.tally(got, kinds, 10.0, 12.0)
            rows += breakdown.rows_for("x", run, meta, counts, 2, 1.0)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "b.csv")
            csv_io.write_rows(path, rows, breakdown.FIELDS)
            back = csv_io.read_rows(path)
        text = breakdown.table(back)
        # 1 sample = 1 ms over 2 iterations: 0.5 ms per iteration.
        self.assertIn("| server: the optimizer | 0.0 | 0.5 | – | 0.5 | 0.0 | 0.0 | +0.5 |", text)
        self.assertIn("| gloo (DDP's all-reduce) | 0.0 | 0.0 | – | 0.0 | 0.5 | 0.5 | -0.5 |",
                      text)
        self.assertIn("| **all** | **0.5** | **1.5** | **–** | **2.0** | **1.5** | **1.5** "
                      "| **+0.5** |", text)
        self.assertIn("P3: 2 runs; iteration 1000 ms", text)


if __name__ == "__main__":
    unittest.main()
