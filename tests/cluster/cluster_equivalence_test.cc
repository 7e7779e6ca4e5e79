// End to end over real gRPC on loopback: W workers and S in-process servers on
// OS-chosen ports must train the same parameters as the plain libtorch loop (`local`)
// on the union of the workers' batches, in every mode: with SGD, with Adam, with a
// learning-rate schedule (the rate set on libtorch's optimizer per iteration, as mode
// `local` does), and with a model that has batch normalisation. The other sources of
// this test: re-plans (replan_equivalence_test.cc), the 16-bit wire
// (wire_dtype_equivalence_test.cc), resuming from checkpoints (checkpoint_resume_test.cc).
#include <torch/torch.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <iostream>
#include <vector>

#include "p3/core/lr_schedule.h"
#include "p3/core/mode.h"
#include "p3/core/optimizer.h"
#include "p3/core/wire_dtype.h"
#include "tests/cluster/cluster_fixture.h"

namespace p3::cluster_test {
namespace {

CATCH_TEST_CASE("every mode trains the same parameters as local on the union of the batches") {
  torch::set_num_threads(1);
  double worst = 0;
  const std::vector<Mode> modes = ClusterModes();
  CATCH_CHECK(modes.size() == 8);
  for (Mode mode : modes) {
    for (int workers : {1, 2, 3}) {
      const torch::Tensor want = TrainLocal(workers);
      for (int servers : {1, 2}) {
        CATCH_CAPTURE(ModeName(mode), workers, servers);
        ClusterResult got = TrainCluster(mode, workers, servers);
        for (int r = 0; r < workers; ++r) {
          CATCH_CAPTURE(r, got.status[r].ToString());
          CATCH_REQUIRE(got.status[r].ok());
          const double error = RelativeError(got.params[r], want);
          worst = std::max(worst, error);
          CATCH_CHECK(error <= 1e-5);
        }
      }
    }
  }
  std::cout << "largest relative error against local over all runs: " << worst << "\n";
}

CATCH_TEST_CASE("values through shared memory train bit for bit what values over the streams do") {
  torch::set_num_threads(1);
  for (Mode mode : {Mode::kP3, Mode::kBaseline, Mode::kValuesOnly}) {
    for (int servers : {1, 2}) {
      CATCH_CAPTURE(ModeName(mode), servers);
      ClusterResult streams = TrainCluster(
          RunSpec{.mode = mode, .workers = 3, .servers = servers, .shared_memory = false});
      ClusterResult shared =
          TrainCluster(RunSpec{.mode = mode, .workers = 3, .servers = servers});
      for (int r = 0; r < 3; ++r) {
        CATCH_CAPTURE(r, streams.status[r].ToString(), shared.status[r].ToString());
        CATCH_REQUIRE(streams.status[r].ok());
        CATCH_REQUIRE(shared.status[r].ok());
        CATCH_CHECK(torch::equal(shared.params[r], streams.params[r]));
        CATCH_CHECK(streams.stats[r].bytes_shared == 0);
        if (r < servers) {
          // Its own server's slices went through shared memory, the others' over a stream.
          CATCH_CHECK(shared.stats[r].bytes_shared > 0);
          if (servers == 1) CATCH_CHECK(shared.stats[r].bytes_sent == 0);
          if (servers == 1) CATCH_CHECK(shared.stats[r].bytes_received == 0);
          CATCH_CHECK(shared.stats[r].bytes_shared + shared.stats[r].bytes_sent +
                          shared.stats[r].bytes_received ==
                      streams.stats[r].bytes_sent + streams.stats[r].bytes_received);
        } else {
          CATCH_CHECK(shared.stats[r].bytes_shared == 0);  // no server on its machine
        }
      }
    }
  }
}

// Every cluster mode on 2 workers and 2 servers against `want`; returns the largest
// relative error.
double WorstErrorOverModes(const torch::Tensor& want, const OptimizerOptions& optimizer,
                           ModelKind model) {
  double worst = 0;
  for (Mode mode : ClusterModes()) {
    CATCH_CAPTURE(ModeName(mode));
    ClusterResult got = TrainCluster(
        RunSpec{.mode = mode, .workers = 2, .servers = 2, .optimizer = optimizer, .model = model});
    for (int r = 0; r < 2; ++r) {
      CATCH_CAPTURE(r, got.status[r].ToString());
      CATCH_REQUIRE(got.status[r].ok());
      const double error = RelativeError(got.params[r], want);
      worst = std::max(worst, error);
      CATCH_CHECK(error <= 1e-5);
    }
  }
  return worst;
}

CATCH_TEST_CASE("with a learning-rate schedule every mode equals local with the same schedule") {
  torch::set_num_threads(1);
  const torch::Tensor want = TrainLocal(2, ScheduledSgd());
  // The schedule changes the result, so a server that ignored it would fail below.
  CATCH_CHECK(RelativeError(TrainLocal(2, Sgd()), want) > 1e-3);
  std::cout << "schedule (SGD, warm-up + cosine): largest relative error against local "
            << WorstErrorOverModes(want, ScheduledSgd(), ModelKind::kMlp) << "\n";
}

CATCH_TEST_CASE("with Adam and a step schedule every mode equals local") {
  torch::set_num_threads(1);
  const torch::Tensor want = TrainLocal(2, ScheduledAdam());
  OptimizerOptions constant = ScheduledAdam();
  constant.schedule = LrScheduleOptions();
  CATCH_CHECK(RelativeError(TrainLocal(2, constant), want) > 1e-4);
  std::cout << "Adam + step schedule: largest relative error against local "
            << WorstErrorOverModes(want, ScheduledAdam(), ModelKind::kMlp) << "\n";
}

CATCH_TEST_CASE("with batch normalisation every mode equals local over per-worker batches") {
  torch::set_num_threads(1);
  const torch::Tensor want = TrainLocal(2, ScheduledSgd(), ModelKind::kBatchNorm);
  // Normalising the union instead gives other parameters: the reference must be per worker.
  CATCH_CHECK(RelativeError(TrainLocal(2, ScheduledSgd(), ModelKind::kBatchNorm, true), want) >
              1e-4);
  std::cout << "batch normalisation: largest relative error against local "
            << WorstErrorOverModes(want, ScheduledSgd(), ModelKind::kBatchNorm) << "\n";
}

CATCH_TEST_CASE("every worker ends with the mean of the workers' batch-norm statistics") {
  torch::set_num_threads(1);
  for (const Mode mode : {Mode::kP3, Mode::kBaseline}) {
    for (const bool shared_memory : {true, false}) {
      CATCH_CAPTURE(ModeName(mode), shared_memory);
      ClusterResult run = TrainCluster(RunSpec{.mode = mode,
                                               .workers = 3,
                                               .servers = 2,
                                               .shared_memory = shared_memory,
                                               .model = ModelKind::kBatchNorm,
                                               .average_buffers = true});
      for (const absl::Status& s : run.status) {
        CATCH_CAPTURE(s.ToString());
        CATCH_REQUIRE(s.ok());
      }
      // Each worker's statistics follow its own batches: they differ before.
      CATCH_REQUIRE(run.buffers_before[0].numel() > 0);
      CATCH_CHECK_FALSE(torch::equal(run.buffers_before[0], run.buffers_before[1]));
      // After: the mean, summed in rank order, on every worker, bit for bit.
      const torch::Tensor want =
          ((run.buffers_before[0] + run.buffers_before[1]) + run.buffers_before[2]) / 3.0f;
      for (int r = 0; r < 3; ++r) {
        CATCH_CAPTURE(r);
        CATCH_CHECK(torch::equal(run.buffers_after[r], want));
      }
      // The parameters are not touched: still every worker's the same.
      CATCH_CHECK(torch::equal(run.params[0], run.params[2]));
    }
  }
}

CATCH_TEST_CASE("slices and tensors sent in parts train the same parameters as sent whole") {
  torch::set_num_threads(1);
  const torch::Tensor want = TrainLocal(2);
  // 7 values per message: every slice (50) and tensor (up to 1200 values, split over the
  // servers at 1000) travels in parts, the last one shorter, in both directions.
  for (Mode mode : {Mode::kP3, Mode::kBaseline, Mode::kPriorityOnly, Mode::kValuesOnly}) {
    CATCH_CAPTURE(ModeName(mode));
    ClusterResult got =
        TrainCluster(RunSpec{.mode = mode,
                             .workers = 2,
                             .servers = 2,
                             .max_message_params = 7,
                             .shared_memory = false});  // every value through the stream
    for (int r = 0; r < 2; ++r) {
      CATCH_CAPTURE(r, got.status[r].ToString());
      CATCH_REQUIRE(got.status[r].ok());
      CATCH_CHECK(RelativeError(got.params[r], want) <= 1e-5);
    }
  }
}

// The launcher's automatic slice size (scheduling.slice_params absent or 0) may differ from
// run to run of one config: it must not change what is trained. Without ownership stripes
// (the default), another size also deals the slices to other servers.
CATCH_TEST_CASE("every slice size trains bit for bit the same parameters, without stripes") {
  torch::set_num_threads(1);
  for (int workers : {2, 3}) {
    RunSpec spec{.mode = Mode::kP3, .workers = workers, .servers = 2};
    const ClusterResult base = TrainCluster(spec);  // kSliceParams (50)
    for (int64_t slice_params : {int64_t{7}, int64_t{20}, int64_t{400}, int64_t{100000}}) {
      CATCH_CAPTURE(workers, slice_params);
      spec.slice_params = slice_params;
      const ClusterResult other = TrainCluster(spec);
      for (int r = 0; r < workers; ++r) {
        CATCH_CAPTURE(r, base.status[r].ToString(), other.status[r].ToString());
        CATCH_REQUIRE(base.status[r].ok());
        CATCH_REQUIRE(other.status[r].ok());
        CATCH_CHECK(other.final_slice_params[r] == slice_params);
        CATCH_CHECK(torch::equal(other.params[r], base.params[r]));
      }
    }
  }
}

// Packs of 200: TestMlp's fc2.b, fc3.w and fc3.b (185 values, blocks 1 and 2) share a
// slice, and TestBnMlp's fc1.b, bn1.w and bn1.b too (120, block 0). A pack is sent when
// its last gradient is in and has its first tensor's priority; the servers' arithmetic is
// per value, so what is trained is the same bit for bit.
CATCH_TEST_CASE("packs of small tensors train bit for bit what a slice per tensor trains") {
  torch::set_num_threads(1);
  for (ModelKind model : {ModelKind::kMlp, ModelKind::kBatchNorm}) {
    for (WireDType dtype : {WireDType::kFloat32, WireDType::kBFloat16}) {
      for (bool shared : {true, false}) {
        for (Mode mode : {Mode::kP3, Mode::kNoOverlap}) {
          CATCH_CAPTURE(static_cast<int>(model), WireDTypeName(dtype), shared, ModeName(mode));
          RunSpec spec{.mode = mode, .workers = 2, .servers = 2, .shared_memory = shared,
                       .model = model, .wire_dtype = dtype, .owner_params = 100};
          const ClusterResult base = TrainCluster(spec);
          spec.pack_params = 200;
          const ClusterResult packed = TrainCluster(spec);
          // And re-planned mid-run: the packs stay whole and on their servers.
          spec.replans = {{1, 20}};
          const ClusterResult replanned = TrainCluster(spec);
          for (int r = 0; r < 2; ++r) {
            CATCH_CAPTURE(r, base.status[r].ToString(), packed.status[r].ToString(),
                          replanned.status[r].ToString());
            CATCH_REQUIRE(base.status[r].ok());
            CATCH_REQUIRE(packed.status[r].ok());
            CATCH_REQUIRE(replanned.status[r].ok());
            CATCH_CHECK(replanned.replans[r] == 1);
            CATCH_CHECK(torch::equal(packed.params[r], base.params[r]));
            CATCH_CHECK(torch::equal(replanned.params[r], base.params[r]));
          }
        }
      }
    }
  }
}

CATCH_TEST_CASE("the trained parameters actually move away from the initial ones") {
  torch::set_num_threads(1);
  const torch::Tensor initial = Flatten(*MakeModel(1));
  ClusterResult got = TrainCluster(Mode::kP3, 2, 2);
  CATCH_REQUIRE(got.status[0].ok());
  CATCH_CHECK(RelativeError(got.params[0], initial) > 1e-3);
}

}  // namespace
}  // namespace p3::cluster_test
