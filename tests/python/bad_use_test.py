"""Misuse of the `p3` package gets a clear Python exception (p3.Error, a RuntimeError
carrying the C++ Status), and nothing hangs: step() before backward(), a model changed
after distribute (a parameter replaced, one added), a server gone (bounded by the config's
peer_timeout_s), no environment, blocks that leave a parameter out. One worker, in this
process, on a real p3_server.
"""

import os
import sys
import time
import unittest

try:
    import torch
except ImportError:
    print("P3_SKIPPED: Python bad-use cases: /usr/bin/python3 cannot import torch")
    sys.exit(0)

import p3
import p3_cluster


def batch(step=0):
    return p3_cluster.global_batch(step, 1)


def train_step(model, step=0):
    x, y = batch(step)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    model.step()


class BadUseTest(unittest.TestCase):

    def setUp(self):
        torch.set_num_threads(1)
        self.folder = p3_cluster.temp_dir()
        self.config = p3_cluster.write_config(os.path.join(self.folder, "c.textproto"),
                                              peer_timeout_s=3)
        self.servers = p3_cluster.Servers(self.config, 1, self.folder)
        self.ctx = p3.init(rank=0, world_size=1, servers=self.servers.addresses,
                           config=self.config)

    def tearDown(self):
        self.servers.__exit__()

    def test_blocks_are_the_top_level_children_in_registration_order(self):
        model = p3.distribute(p3_cluster.make_model())
        self.assertEqual(model.block_names, ["conv1", "conv2", "fc1", "fc2"])
        self.assertEqual(model.mode, "p3")
        train_step(model)
        self.assertEqual(model.iteration, 1)
        model.finish()

    def test_step_before_backward_is_refused_and_training_goes_on(self):
        model = p3.distribute(p3_cluster.make_model())
        with self.assertRaisesRegex(p3.Error, "iteration 0 has no gradient yet"):
            model.step()
        x, _ = batch()
        model(x)  # a forward pass alone is not enough either
        with self.assertRaisesRegex(p3.Error, "no gradient yet"):
            model.step()
        self.assertTrue(issubclass(p3.Error, RuntimeError))
        train_step(model)
        train_step(model, 1)
        self.assertEqual(model.iteration, 2)
        model.finish()

    def test_a_parameter_replaced_after_distribute_is_refused(self):
        net = p3_cluster.make_model()
        model = p3.distribute(net)
        train_step(model)
        net.fc2.bias = torch.nn.Parameter(torch.zeros(10))
        x, _ = batch(1)
        with self.assertRaisesRegex(p3.Error, "changed after p3.distribute.*fc2.bias"):
            model(x)
        with self.assertRaisesRegex(p3.Error, "changed after p3.distribute"):
            model.step()

    def test_a_parameter_added_after_distribute_is_refused(self):
        net = p3_cluster.make_model()
        model = p3.distribute(net)
        net.extra = torch.nn.Linear(2, 2)
        x, _ = batch()
        with self.assertRaisesRegex(p3.Error, "changed after p3.distribute.*extra.bias"):
            model(x)

    def test_a_second_backward_before_step_ends_the_run_naming_the_parameter(self):
        model = p3.distribute(p3_cluster.make_model())
        x, y = batch()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward(retain_graph=True)
        loss.backward()
        with self.assertRaisesRegex(p3.Error, r"parameter fc2\.bias \(fc2/1\) received a "
                                    "second gradient in iteration 0"):
            model.step()

    def test_a_server_gone_raises_within_the_peer_timeout(self):
        model = p3.distribute(p3_cluster.make_model())
        train_step(model)
        self.servers.kill(0)
        start = time.time()
        with self.assertRaises(p3.Error) as caught:
            for step in range(1, 20):
                train_step(model, step)
        took = time.time() - start
        self.assertLess(took, 20, "peer_timeout_s is 3")
        self.assertRegex(str(caught.exception), "server 0")

    def test_blocks_given_must_cover_every_parameter(self):
        net = p3_cluster.make_model()
        with self.assertRaisesRegex(p3.Error, "parameter fc2.weight is in no block"):
            p3.distribute(net, blocks=[net.conv1, net.conv2, net.fc1])
        model = p3.distribute(net, blocks=[("features", net.conv1), net.conv2, net.fc1, net.fc2])
        self.assertEqual(model.block_names, ["features", "conv2", "fc1", "fc2"])
        train_step(model)
        model.finish()

    def test_init_without_the_environment_names_the_variable(self):
        saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("P3_")}
        try:
            with self.assertRaisesRegex(p3.Error, "P3_RANK is not set"):
                p3.init()
        finally:
            os.environ.update(saved)

    def test_a_config_that_disagrees_with_the_servers_given_is_refused(self):
        with self.assertRaisesRegex(p3.Error, "INVALID_ARGUMENT: servers: 2 given"):
            p3.distribute(p3_cluster.make_model(), context=p3.init(
                rank=0, world_size=1, servers=self.servers.addresses * 2, config=self.config))


if __name__ == "__main__":
    unittest.main(verbosity=2)
