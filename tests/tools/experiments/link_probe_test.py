"""link_probe.py's pure parts: the sample script names every namespace of the run, and a
probe log reads back as one row per (sample, connection) with ss's figures."""
import unittest

import link_probe as lp

# Two samples of one machine, cut from a real probe log (link_faults.md): a connection
# whose BBR took a bandwidth sample across the outage, with ss's cgroup noise line.
LOG = """=== t=-0.002
--- p3-1-m1 ss
Failed to find cgroup2 mount
State Recv-Q Send-Q      Local Address:Port        Peer Address:Port Process
ESTAB 0      354672 [::ffff:10.77.0.2]:44538 [::ffff:10.77.0.3]:34359 timer:(on,204ms,0) ino:2 sk:5 <->
\t skmem:(r0) ts sack bbr wscale:10,10 rto:204 rtt:1.457/2.005 cwnd:198 bbr:(bw:771369712bps,mrtt:0.008) pacing_rate 954570016bps lastrcv:12 lastack:12 unacked:198
--- p3-1-m1 link
2: eth0@if4: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc tbf state UP
=== event t=+5.001 undo done: ok
=== t=+6.000
--- p3-1-m1 ss
State Recv-Q Send-Q      Local Address:Port        Peer Address:Port Process
ESTAB 0      351810 [::ffff:10.77.0.2]:44538 [::ffff:10.77.0.3]:34359 timer:(on,9.528ms,0) ino:2 sk:5 <->
\t skmem:(r0) ts sack bbr rto:4560 backoff:1 rtt:225.124/449.157 cwnd:4 bytes_retrans:4344 bbr:(bw:11040bps,mrtt:0.008) pacing_rate 13664bps lastsnd:476 lastrcv:2880 lastack:476 unacked:198 retrans:0/3 lost:196
ESTAB 0      0      [::ffff:10.77.0.2]:59080 [::ffff:10.77.0.4]:35959 ino:3 sk:6 <->
\t skmem:(r0) ts sack bbr rto:204 cwnd:164 bbr:(bw:9000000bps,mrtt:0.008) pacing_rate 12000000bps
--- p3-1-br bridge
4: m1@if2: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 master br0 state forwarding
"""


class LinkProbeTest(unittest.TestCase):
    def test_sample_script_reads_every_machine_and_the_bridge(self):
        script = lp.sample_script(77, 2)
        for text in ["ss -N p3-77-m0 -tinmoe", "ss -N p3-77-m1 -tinmoe",
                     "tc -n p3-77-m1 -s qdisc show dev eth0", "bridge -n p3-77-br link",
                     "ip -n p3-77-br -d link show br0", "tc -n p3-77-br -s qdisc"]:
            self.assertIn(text, script)
        self.assertNotIn("p3-77-m2", script)

    def test_connections_reads_each_socket_of_each_sample(self):
        rows = lp.connections(LOG)
        self.assertEqual(len(rows), 3)
        first, later, idle = rows
        self.assertEqual((first["t"], first["ns"], first["send_q"], first["unacked"]),
                         (-0.002, "p3-1-m1", 354672, "198"))
        self.assertEqual(first["peer"], "[::ffff:10.77.0.3]:34359")
        self.assertEqual(first["bw"], "771369712bps")
        self.assertEqual((later["t"], later["rto"], later["backoff"], later["lost"]),
                         (6.0, "4560", "1", "196"))
        self.assertEqual((later["timer"], later["retrans"], later["cwnd"]),
                         ("on,9.528ms,0", "0/3", "4"))
        self.assertEqual((later["bw"], later["pacing_rate"]), ("11040bps", "13664bps"))
        self.assertEqual(idle["unacked"], "")

    def test_stuck_keeps_the_connections_with_data_unacked_at_the_end(self):
        stuck = lp.stuck(lp.connections(LOG))
        self.assertEqual(list(stuck), [("p3-1-m1", "[::ffff:10.77.0.2]:44538",
                                        "[::ffff:10.77.0.3]:34359")])
        self.assertEqual(len(stuck[list(stuck)[0]]), 2)

    def test_slowest_pacing_names_the_connection_and_its_rate(self):
        rows = lp.connections(LOG)
        self.assertEqual(lp.pacing_bits(rows[1]), 13664)
        self.assertEqual(lp.pacing_bits({"pacing_rate": ""}), None)


if __name__ == "__main__":
    unittest.main()
