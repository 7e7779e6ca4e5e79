"""results_lib.records: a run's records/worker_<rank>.csv."""
import math
import os
import tempfile
import unittest

from results_lib import records


def write(run, rank, rows):
    os.makedirs(os.path.join(run, "records"), exist_ok=True)
    with open(records.path(run, rank), "w") as f:
        f.write("iteration,loss,iteration_seconds,samples_per_second\n")
        for r in rows:
            f.write(",".join(str(x) for x in r) + "\n")


class RecordsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.run = self.tmp.name
        write(self.run, 0, [(0, 2.3, 1.0, 8.0), (1, 2.1, 0.5, 16.0), (2, 2.0, 0.5, 16.0)])
        write(self.run, 1, [(0, 2.3, 0.5, 16.0), (1, 2.1, 1.5, 8.0)])

    def tearDown(self):
        self.tmp.cleanup()

    def test_iteration_seconds_of_one_worker(self):
        self.assertEqual(records.iteration_seconds(self.run, 0), [1.0, 0.5, 0.5])
        self.assertEqual(records.iteration_seconds(self.run, 1), [0.5, 1.5])

    def test_mean_over_workers_needs_min_workers(self):
        self.assertEqual(records.mean_over_workers(self.run, "iteration_seconds"),
                         {0: 0.75, 1: 1.0, 2: 0.5})
        self.assertEqual(records.mean_over_workers(self.run, "samples_per_second", 2),
                         {0: 12.0, 1: 12.0})

    def test_wall_rate_is_samples_over_seconds_per_worker_then_the_mean(self):
        # worker 0 from iteration 1: 16 samples in 1 s; worker 1: 12 samples in 1.5 s.
        self.assertAlmostEqual(records.wall_rate(self.run, 1), (16.0 + 8.0) / 2)
        self.assertEqual(records.wall_rate(self.tmp.name + "/none", 0), 0.0)

    def test_throughput_takes_each_iteration_as_the_mean_over_workers(self):
        med, mean = records.throughput([[9.0, 1.0, 3.0], [9.0, 3.0, 1.0, 5.0]], 4, 1)
        # iterations 1 and 2 both average 2 s: 8 samples each.
        self.assertEqual((med, mean), (4.0, 4.0))
        med, _ = records.throughput([[1.0], [1.0]], 4, 1)
        self.assertTrue(math.isnan(med))

    def test_curves_with_and_without_epochs(self):
        rows = [{"iteration": "0", "loss": "2.5", "epoch": "1", "epoch_loss": "",
                 "test_accuracy": ""},
                {"iteration": "1", "loss": "2.0", "epoch": "1", "epoch_loss": "2.25",
                 "test_accuracy": "0.81"},
                {"iteration": "2", "loss": "1.5", "epoch": "2", "epoch_loss": "1.5",
                 "test_accuracy": ""}]
        its, losses, epochs = records.curves(rows)
        self.assertEqual((its, losses), ([0, 1, 2], [2.5, 2.0, 1.5]))
        self.assertEqual(epochs, [(2, 1, 2.25, 0.81), (3, 2, 1.5, None)])
        self.assertEqual(records.curves([{"iteration": "0", "loss": "1"}])[2], [])


if __name__ == "__main__":
    unittest.main()
