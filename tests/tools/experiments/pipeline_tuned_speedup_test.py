"""tools/experiments/pipeline_tuned_speedup.sh (docs/results/pipeline): rounds of one stage
and every pipelined weight mode with 2 stages, one CSV line per run, against a stand-in
pipeline_train that answers with a RESULT line built from its --set overrides."""
import tempfile
import unittest

import fakes

PIPELINE_TRAIN = """#!/bin/sh
weights=""; stages=""
for a in "$@"; do
  case "$a" in
    --set=pipeline.weights=*) weights=${a#--set=pipeline.weights=} ;;
    --set=pipeline.stages=*) stages=${a#--set=pipeline.stages=} ;;
    --set=training.iterations=*) iterations=${a#--set=training.iterations=} ;;
  esac
done
echo "PROGRESS iteration=1"
echo "RESULT {\\"samples_per_second\\": ${stages}0.5, \\"wall_seconds\\": $iterations}"
"""


class PipelineTunedSpeedupTest(unittest.TestCase):
    def test_rounds_run_one_stage_then_every_weight_mode_with_two(self):
        with tempfile.TemporaryDirectory() as d:
            binary = fakes.write_executable(d, "pipeline_train", PIPELINE_TRAIN)
            out = fakes.run(["bash", fakes.script("pipeline_tuned_speedup.sh"), binary, "2", "7"]
                            ).stdout
        lines = out.splitlines()
        self.assertEqual(lines[0], "round,weights,stages,samples_per_second,wall_seconds,"
                                   "load1_before")
        self.assertEqual(len(lines), 1 + 2 * 5)
        first = lines[1].split(",")
        self.assertEqual(first[:5], ["1", "spectrain", "1", "10.5", "7"])
        self.assertEqual([l.split(",")[1:3] for l in lines[2:6]],
                         [["spectrain", "2"], ["pipedream", "2"], ["stale", "2"], ["vanilla", "2"]])
        self.assertTrue(lines[-1].startswith("2,vanilla,2,20.5,7,"))


if __name__ == "__main__":
    unittest.main()
