"""soak_faults.py's pure parts: the schedule of kills and link faults, and the RSS figures
per process. The soak itself runs real clusters on an emulated network (root, an hour):
docs/results/reliability/soak.md."""
import unittest

import soak_faults as sf


def hour(**kw):
    argv = ["--rss", "r.csv", "--events", "e.csv", "--json", "v.json"]
    for k, v in kw.items():
        argv.append(f"--{k}={v}")
    return sf.parse_args(argv)


class ScheduleTest(unittest.TestCase):
    def test_an_hour_has_30_worker_kills_5_server_kills_and_12_link_faults(self):
        plan = sf.schedule(hour())
        kinds = [k for _, k, _ in plan]
        self.assertEqual(kinds.count("worker_kill"), 30)
        # At 660, 1260, ..., 3060 s: the sixth would be past the hour.
        self.assertEqual(kinds.count("server_kill"), 5)
        faults = [e for e in plan if e[1] not in ("worker_kill", "server_kill")]
        self.assertEqual(len(faults), 12)
        self.assertEqual([k for _, k, _ in faults[:4]], ["loss_1", "loss_5", "outage", "brownout"])
        self.assertEqual([t for t, _, _ in plan], sorted(t for t, _, _ in plan))
        self.assertLessEqual(plan[-1][0], 3600)

    def test_every_link_fault_meets_every_target(self):
        faults = [e for e in sf.schedule(hour(faults_for_s=16 * 300))
                  if e[1] not in ("worker_kill", "server_kill")]
        pairs = {(k, target) for _, k, target in faults}
        self.assertEqual(len(pairs), 16)

    def test_servers_are_killed_in_turn_and_workers_by_a_seeded_draw(self):
        plan = sf.schedule(hour())
        servers = [target for _, k, target in plan if k == "server_kill"]
        self.assertEqual(servers, ["server 0", "server 1", "server 0", "server 1", "server 0"])
        workers = [target for _, k, target in plan if k == "worker_kill"]
        self.assertEqual(set(workers), {"worker 0", "worker 1"})
        self.assertEqual(workers, [t for _, k, t in sf.schedule(hour()) if k == "worker_kill"])
        self.assertNotEqual(workers, [t for _, k, t in sf.schedule(hour(seed=2))
                                      if k == "worker_kill"])

    def test_no_two_events_within_10_seconds(self):
        times = [t for t, _, _ in sf.schedule(hour())]
        self.assertGreaterEqual(min(b - a for a, b in zip(times, times[1:])), 10)

    def test_end_guard_defaults_to_two_percent(self):
        self.assertEqual(hour(iterations=50000).end_guard, 1000)
        self.assertEqual(hour(iterations=100).end_guard, 20)


class RssFiguresTest(unittest.TestCase):
    def test_first_last_max_and_the_last_process_of_a_label(self):
        samples = [
            {"t_s": 5, "run": "soak", "process": "worker_1", "pid": 10, "rss_kb": 100},
            {"t_s": 10, "run": "soak", "process": "worker_1", "pid": 10, "rss_kb": 300},
            {"t_s": 15, "run": "soak", "process": "worker_1", "pid": 11, "rss_kb": 150},
            {"t_s": 20, "run": "soak", "process": "worker_1", "pid": 11, "rss_kb": 160},
            {"t_s": 5, "run": "reference", "process": "worker_1", "pid": 20, "rss_kb": 90},
        ]
        f = sf.rss_figures(samples)
        w = f["soak/worker_1"]
        self.assertEqual((w["first_kb"], w["last_kb"], w["max_kb"], w["processes"]),
                         (100, 160, 300, 2))
        self.assertEqual(w["last_process"], {"pid": 11, "from_s": 15, "to_s": 20,
                                             "first_kb": 150, "last_kb": 160, "max_kb": 160})
        self.assertEqual(f["reference/worker_1"]["processes"], 1)


class ReportTest(unittest.TestCase):
    def test_the_tables_give_the_verdict_and_every_process(self):
        samples = [{"t_s": 5, "run": "soak", "process": "server_0", "pid": 1, "rss_kb": 20480},
                   {"t_s": 65, "run": "soak", "process": "server_0", "pid": 1, "rss_kb": 22528}]
        verdict = {"started_utc": "2026-12-05T05:12:15Z", "soak_seconds": 3900, "iterations": 80000,
                   "workers": 2, "servers": 2, "batch_size": 16, "mode": "p3",
                   "events_done": {"worker_kill": 30, "server_kill": 5, "loss_1": 3, "outage": 3},
                   "events_not_done": [], "launcher": {"worker_restarts": 30, "server_restarts": 5},
                   "soak_exit": 0, "soak_status": "ok", "reference_exit": 0,
                   "soak_param_l2": 1.5, "reference_param_l2": 1.5, "identical": True,
                   "load1_before": 3.0, "load1_median": 19.5, "rss": sf.rss_figures(samples)}
        text = sf.report(verdict)
        self.assertIn("| length | 65.0 min, 80000 iterations", text)
        self.assertIn("| link faults | loss_1 3, outage 3 |", text)
        self.assertIn("| param_l2 soak = reference | 1.5 = 1.5 (every worker's equal too: True) |",
                      text)
        self.assertIn("| soak/server_0 | 1 | 20.0 | 22.0 | 22.0 | 20.0 | 22.0 | 22.0 | 1.0 |", text)


if __name__ == "__main__":
    unittest.main()
