"""Python workers (`import p3`, tests/python/train_worker.py) train p3_cluster's small CNN
on real p3_server processes, 1, 2 and 3 workers, in modes p3 and baseline (and through
p3.DistributedOptimizer in no_forward_overlap): every worker ends with the parameters of
plain single-process PyTorch SGD on the same global batches (`local` mode's semantics:
the mean of the workers' gradients), within float tolerance, and they left the initial
values. Every other cluster mode of p3/core/mode.h with 2 workers. The same for
torchvision's resnet18 with no block list, and for a job whose
worker 1 is killed and replaced by a rejoining process.
"""

import os
import sys
import unittest

try:
    import torch
except ImportError:
    print("P3_SKIPPED: Python equivalence cases: /usr/bin/python3 cannot import torch")
    sys.exit(0)

import p3_cluster

STEPS = 3
SERVERS = 2
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "train_worker.py")


class EquivalenceTest(unittest.TestCase):

    def check(self, mode, workers, style="distribute", model="small_cnn", tolerance=1e-5,
              steps=STEPS, batch=4):
        folder = p3_cluster.temp_dir()
        config = p3_cluster.write_config(os.path.join(folder, "c.textproto"), mode=mode,
                                         workers=workers, servers=SERVERS)
        with p3_cluster.Servers(config, SERVERS, folder) as servers:
            outs = [os.path.join(folder, "params_{}.pt".format(r)) for r in range(workers)]
            results = p3_cluster.run_workers(
                [WORKER, str(steps), os.path.join(folder, "params_RANK.pt"), style, model,
                 str(batch)], workers,
                servers.addresses, config)
            for r, (code, text) in enumerate(results):
                self.assertEqual(code, 0, "worker {}:\n{}".format(r, text))
            self.assertEqual(servers.wait(), [0] * SERVERS)
        want = p3_cluster.train_local(workers, steps, model=model, batch=batch)
        initial = p3_cluster.flatten(p3_cluster.make_model(1, model))
        self.assertGreater(float((want - initial).norm() / initial.norm()), 1e-3)
        for r in range(workers):
            got = torch.load(outs[r])
            err = float((got - want).norm() / want.norm())
            self.assertLessEqual(err, tolerance, "mode {}, {} workers, rank {}".format(
                mode, workers, r))
            self.assertLessEqual(float((got - want).abs().max()), tolerance)
        return folder, outs

    def test_mode_p3(self):
        for workers in (1, 2, 3):
            with self.subTest(workers=workers):
                self.check("p3", workers)

    def test_mode_baseline(self):
        for workers in (1, 2, 3):
            with self.subTest(workers=workers):
                self.check("baseline", workers)

    def test_every_other_cluster_mode_with_two_workers(self):
        for mode in ("slicing_only", "priority_only", "values_only", "no_overlap",
                     "no_backward_overlap"):
            with self.subTest(mode=mode):
                self.check(mode, 2)

    def test_torchvision_resnet18_without_a_block_list(self):
        # BatchNorm normalises each worker's rows; its buffers are averaged at the end.
        # (64x64 images, 4 per worker: with 32x32 and 2, layer4's BatchNorm sees two values
        # per channel and a 1e-7 change of the initial values moves the result by 0.3.)
        folder, outs = self.check("p3", 2, model="resnet18", tolerance=1e-4, steps=2,
                                  batch=4)
        buffers = [torch.load(o + ".buffers") for o in outs]
        for a, b in zip(*buffers):
            self.assertTrue(torch.equal(a, b))

    def test_a_killed_python_worker_rejoins_and_the_result_is_unchanged(self):
        # Worker 1 dies after iteration 1; its replacement (P3_REJOIN=1) resumes at the
        # cluster's iteration with the servers' values.
        steps = 5
        folder = p3_cluster.temp_dir()
        config = p3_cluster.write_config(os.path.join(folder, "c.textproto"), workers=2,
                                         servers=SERVERS, rejoin_timeout_s=30)
        out = os.path.join(folder, "params_RANK.pt")
        args = [WORKER, str(steps), out]
        with p3_cluster.Servers(config, SERVERS, folder) as servers:
            a = servers.addresses
            first = p3_cluster.start_worker(args, 0, 2, a, config)
            doomed = p3_cluster.start_worker(args, 1, 2, a, config, P3_TEST_DIE_AFTER="1")
            self.assertEqual(doomed.wait(timeout=120), -9, doomed.communicate()[0])
            again = p3_cluster.start_worker(args, 1, 2, a, config, P3_REJOIN="1")
            for r, (code, text) in enumerate(p3_cluster.wait_workers([first, again])):
                self.assertEqual(code, 0, "worker {}:\n{}".format(r, text))
            self.assertEqual(servers.wait(), [0] * SERVERS)
        want = p3_cluster.train_local(2, steps)
        for r in range(2):
            got = torch.load(out.replace("RANK", str(r)))
            self.assertLessEqual(float((got - want).norm() / want.norm()), 1e-5)

    def test_distributed_optimizer_no_forward_overlap(self):
        self.check("no_forward_overlap", 2, style="optimizer")


if __name__ == "__main__":
    unittest.main(verbosity=2)
