"""results_lib.models: parameter counts and the link bound."""
import unittest

from results_lib import models


class ModelsTest(unittest.TestCase):
    def test_bandwidth_bound_matches_the_throughput_page(self):
        # docs/results/throughput/throughput.csv: ResNet-50, batch 8, 1 Gbit/s -> 18.723.
        self.assertAlmostEqual(models.bandwidth_bound("resnet50", 1.0, 8), 18.723, places=3)
        self.assertAlmostEqual(models.bandwidth_bound("vgg19", 2.5, 4), 4.163, places=3)

    def test_a_16_bit_wire_doubles_it_and_no_limit_has_none(self):
        self.assertAlmostEqual(models.bandwidth_bound("vgg19", 1.0, 4, bytes_per_value=2),
                               2 * models.bandwidth_bound("vgg19", 1.0, 4))
        self.assertEqual(models.bandwidth_bound("resnet50", 0, 8), float("inf"))

    def test_token_models_have_parameters(self):
        for m in models.TOKEN_MODELS:
            self.assertIn(m, models.PARAMS)


if __name__ == "__main__":
    unittest.main()
