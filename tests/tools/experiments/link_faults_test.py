"""link_faults.py's pure parts: the config, the names of a machine's link, the commands that
inject and undo each fault, the undo list (on every path, a half-done injection too), the
nft counters and the verdicts. The trials themselves run real clusters on an emulated
network in //tests/tools:link_faults_test (root and nft)."""
import argparse
import subprocess
import unittest

import link_faults as lf

NS = "p3-4242-m3"
NFT = ["ip", "netns", "exec", NS, "nft"]


def args(**kw):
    a = dict(bandwidth_gbps=1.0, loss_s=5, outage_s=5, brownout_s=10,
             brownout_rate_bits=1_000_000, partition_s=30)
    a.update(kw)
    return argparse.Namespace(**a)


class FakeRunner:
    """Records every command; fails those whose argv contains `fail_on`."""

    def __init__(self, fail_on=None):
        self.commands = []
        self.fail_on = fail_on

    def __call__(self, argv, check=True):
        self.commands.append(argv)
        failed = self.fail_on is not None and self.fail_on in argv
        if failed and check:
            raise RuntimeError(f"{' '.join(argv)} failed")
        return subprocess.CompletedProcess(argv, 1 if failed else 0, "", "boom" if failed else "")


class LinkFaultsTest(unittest.TestCase):
    def setUp(self):
        self.namespace_exists = lf.namespace_exists

    def tearDown(self):
        lf.namespace_exists = self.namespace_exists

    def test_config_puts_each_process_on_its_own_machine(self):
        text = lf.config_text("p3", 60, 2, 2, 1.0, 20, checkpoint_dir="/c", checkpoint_every=5)
        self.assertIn('checkpoint { dir: "/c" every: 5 }', text)
        self.assertIn('network { bandwidth_gbps: 1 placement: "separate" machines: 4 }', text)
        self.assertIn("peer_timeout_s: 20 ", text)
        self.assertNotIn("checkpoint", lf.config_text("p3", 60, 2, 2, 1.0, 20))

    def test_workers_then_servers_on_the_machines_and_netem_names(self):
        self.assertEqual(lf.machine_of("worker 1", 2), 1)
        self.assertEqual(lf.machine_of("server 1", 2), 3)
        self.assertEqual(lf.link_of(4242, 3), {"ns": NS, "bridge_ns": "p3-4242-br",
                                               "port": "m3", "dev": "eth0"})

    def test_loss_drops_with_meta_random_both_ways_and_undo_deletes_the_table(self):
        inject, undo, seconds = lf.fault_commands("loss_5", lf.link_of(4242, 3), args())
        self.assertEqual(seconds, 5)
        self.assertEqual(inject[0], NFT + ["add", "table", "inet", "p3_link_fault"])
        threshold = str(round(0.05 * 2 ** 32))
        self.assertIn(NFT + ["add", "rule", "inet", "p3_link_fault", "input", "iifname", "eth0",
                             "meta", "random", "<", threshold, "counter", "drop"], inject)
        self.assertIn(NFT + ["add", "rule", "inet", "p3_link_fault", "output", "oifname", "eth0",
                             "meta", "random", "<", threshold, "counter", "drop"], inject)
        self.assertIn(NFT + ["add", "chain", "inet", "p3_link_fault", "output",
                             "{ type filter hook output priority -10 ; }"], inject)
        self.assertEqual(undo, [NFT + ["delete", "table", "inet", "p3_link_fault"]])
        one, _, _ = lf.fault_commands("loss_1", lf.link_of(4242, 3), args())
        self.assertIn(str(round(0.01 * 2 ** 32)), one[3])
        self.assertEqual(lf.random_threshold(1.0), 2 ** 32)

    def test_outage_and_partition_take_the_bridge_side_veth_down_then_up(self):
        link = lf.link_of(4242, 3)
        for fault, seconds in [("outage", 5), ("partition", 30)]:
            inject, undo, s = lf.fault_commands(fault, link, args())
            self.assertEqual(inject, [["ip", "-n", "p3-4242-br", "link", "set", "m3", "down"]])
            self.assertEqual(undo, [["ip", "-n", "p3-4242-br", "link", "set", "m3", "up"]])
            self.assertEqual(s, seconds)

    def test_brownout_changes_both_tbf_qdiscs_and_restores_netems_values(self):
        inject, undo, seconds = lf.fault_commands("brownout", lf.link_of(4242, 3), args())
        self.assertEqual(seconds, 10)
        tail = ["burst", "131072", "latency", "20ms"]
        self.assertEqual(inject, [
            ["tc", "-n", NS, "qdisc", "change", "dev", "eth0", "root", "tbf", "rate",
             "1000000bit"] + tail,
            ["tc", "-n", "p3-4242-br", "qdisc", "change", "dev", "m3", "root", "tbf", "rate",
             "1000000bit"] + tail])
        self.assertEqual(undo, [
            ["tc", "-n", NS, "qdisc", "change", "dev", "eth0", "root", "tbf", "rate",
             "1000000000bit"] + tail,
            ["tc", "-n", "p3-4242-br", "qdisc", "change", "dev", "m3", "root", "tbf", "rate",
             "1000000000bit"] + tail])
        # netem.h's bucket: 1 ms at the rate once that is above 128 KiB.
        self.assertEqual(lf.tbf_burst_bytes(10e9), 1250000)
        with self.assertRaises(ValueError):
            lf.fault_commands("delay", lf.link_of(1, 0), args())

    def test_undo_runs_even_when_the_injection_fails_halfway(self):
        run = FakeRunner(fail_on="output")
        injections = lf.Injections(run)
        inject, undo, _ = lf.fault_commands("loss_1", lf.link_of(4242, 3), args())
        with self.assertRaises(RuntimeError):
            injections.inject("t", inject, undo)
        self.assertEqual(injections.pending(), ["t"])
        lf.namespace_exists = lambda name: True
        self.assertEqual(injections.undo_all(), [])
        self.assertEqual(run.commands[-1], undo[0])
        self.assertEqual(injections.pending(), [])
        self.assertEqual(injections.undo_all(), [])  # nothing twice

    def test_undo_all_in_reverse_and_skips_gone_namespaces(self):
        run = FakeRunner()
        injections = lf.Injections(run)
        a = lf.fault_commands("outage", lf.link_of(1, 0), args())
        b = lf.fault_commands("brownout", lf.link_of(2, 1), args())
        injections.inject("a", a[0], a[1])
        injections.inject("b", b[0], b[1])
        lf.namespace_exists = lambda name: not name.startswith("p3-2-")
        injections.undo_all()
        self.assertEqual(run.commands[-1], a[1][0])  # b's namespaces are gone: not run
        self.assertEqual(len(run.commands), 1 + 2 + 1)
        failing = lf.Injections(FakeRunner(fail_on="up"))
        failing.inject("a", a[0], a[1])
        lf.namespace_exists = lambda name: True
        self.assertEqual(len(failing.undo_all()), 1)  # a real undo failure is reported

    def test_namespace_of_each_command(self):
        self.assertEqual(lf.namespace_of(NFT + ["list", "ruleset"]), NS)
        self.assertEqual(lf.namespace_of(["ip", "-n", "x", "link"]), "x")
        self.assertEqual(lf.namespace_of(["tc", "-n", "y", "qdisc"]), "y")
        self.assertIsNone(lf.namespace_of(["nft", "list", "ruleset"]))

    def test_nft_counters_split_seen_and_dropped(self):
        listing = """table inet p3_link_fault {
	chain input {
		type filter hook input priority filter - 10; policy accept;
		iifname "eth0" counter packets 100 bytes 9000 comment "seen"
		iifname "eth0" meta random < 42949673 counter packets 2 bytes 180 drop
	}
	chain output {
		oifname "eth0" counter packets 50 bytes 5000 comment "seen"
		oifname "eth0" meta random < 42949673 counter packets 1 bytes 60 drop
	}
}"""
        self.assertEqual(lf.nft_counters(listing), (150, 3))

    def test_verdicts_and_the_table(self):
        short = {k: "" for k in lf.FIELDS}
        short.update(fault="outage", survived=1, identical=1, extra_wall_s="6.0")
        self.assertTrue(lf.passed(short, 8))
        self.assertFalse(lf.passed(dict(short, identical=0), 8))
        part = dict(short, fault="partition", error_after_s="5.6", names_target=1)
        self.assertTrue(lf.passed(part, 8))
        self.assertFalse(lf.passed(dict(part, error_after_s="9.0"), 8))
        self.assertFalse(lf.passed(dict(part, names_target=0), 8))
        self.assertTrue(lf.names_target("waited for worker 1's gradients", "worker 1", "10.77.0.2"))
        self.assertTrue(lf.names_target("server 0 (10.77.0.3:5000): closed", "server 0",
                                        "10.77.0.3"))
        self.assertFalse(lf.names_target("worker 1: waited 5s", "worker 0", "10.77.0.1"))
        table = lf.summary_table([short, part], 8)
        self.assertIn("| outage | 1 | 1 | 1 | 1 | 6.00 |", table)
        self.assertIn("| partition | 1 | 1 | 1 | 1 |", table)

    def test_unknown_fault_is_refused_and_partition_trials_add_it(self):
        with self.assertRaises(SystemExit):
            lf.parse_args(["--faults=loss_1,delay"])
        a = lf.parse_args(["--faults=outage", "--partition_trials=2"])
        self.assertEqual(a.fault_list, ["outage", "partition"])


if __name__ == "__main__":
    unittest.main()
