"""tools/experiments/socket_buffers.py: which connections of `ss` output it keeps and what
it reads from them (the runs themselves need root and namespaces)."""
import unittest

import socket_buffers

# `ss -tmipnH state established` in one emulated machine: a worker's connection across the
# link, the same worker's within the machine, a server's, and another program's.
SS = """\
0      0      [::ffff:10.77.0.1]:42068 [::ffff:10.77.0.2]:35307 users:(("p3_worker",pid=101,fd=9))
\t skmem:(r0,rb131072,t0,tb4194304,f0,w4223488,o0,bl0,d0) bbr wscale:7,7 mss:1448
\t cwnd:1872 unacked:1845 notsent:1498680
0      0      [::ffff:10.77.0.1]:36268 [::ffff:10.77.0.1]:34547 users:(("p3_worker",pid=101,fd=10))
\t skmem:(r0,rb131072,t0,tb3939840,f0,w858,o0,bl0,d0) mss:51200 cwnd:17 unacked:1
0      0      [::ffff:10.77.0.1]:34547 [::ffff:10.77.0.2]:35656 users:(("p3_server",pid=102,fd=7))
\t skmem:(r0,rb131072,t0,tb4194304,f0,w0,o0,bl0,d0) mss:1448 cwnd:10
0      0      10.77.0.1:22 10.77.0.9:5000 users:(("sshd",pid=7,fd=3))
\t skmem:(r0,rb131072,t0,tb87040,f0,w0,o0,bl0,d0) mss:1448 cwnd:10
"""


class SocketBuffersTest(unittest.TestCase):
    def test_keeps_p3_processes_of_the_run_and_reads_their_buffers(self):
        rows = socket_buffers.parse(SS, "p3-1-m0", lambda pid: True)
        self.assertEqual([r["process"] for r in rows], ["p3_worker", "p3_worker", "p3_server"])
        first = rows[0]
        self.assertEqual(first["network"], 1)
        self.assertEqual((first["tb"], first["w"]), (4194304, 4223488))
        self.assertEqual((first["notsent"], first["unacked"], first["mss"], first["cwnd"]),
                         (1498680, 1845, 1448, 1872))
        # Within one machine (a colocated pair's stream): kept, marked as not crossing the link.
        self.assertEqual(rows[1]["network"], 0)
        self.assertEqual(rows[2]["notsent"], 0)

    def test_leaves_out_processes_of_other_runs(self):
        rows = socket_buffers.parse(SS, "p3-1-m0", lambda pid: pid == 102)
        self.assertEqual([r["process"] for r in rows], ["p3_server"])


if __name__ == "__main__":
    unittest.main()
