// RunTraining end to end on a small synthetic task: mode local in this process, and one
// worker against an in-process server on an OS-chosen loopback port.
#include "worker/trainer.h"

#include <torch/torch.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "p3/core/mode.h"
#include "p3/base/progress.h"
#include "proto/config.h"
#include "server/parameter_server.h"
#include "server/server_config.h"

namespace p3 {
namespace {

constexpr int kIterations = 40;

// An MLP on 512 synthetic 8x8 images, 40 iterations of 32 samples; `mode` and `workers` as
// given.
config::ExperimentConfig SmallConfig(const std::string& mode, int workers) {
  const std::string text = absl::StrCat(R"(
    mode: ")",
                                        mode, R"("
    cluster { workers: )",
                                        workers, R"( servers: 1 peer_timeout_s: 30 }
    model { name: "mlp" image_size: 8 in_channels: 1 }
    data { dataset: "synthetic" synthetic_size: 512 }
    optimizer { name: "sgd" lr: 0.05 }
    training {
      batch_size: )",
                                        32 / workers, R"(
      iterations: )",
                                        kIterations, R"(
      warmup_iterations: 2
      log_every: 10
      evaluate: true
      threads: 1
    }
    scheduling { slice_params: 500 }
  )");
  absl::StatusOr<config::ExperimentConfig> config = config::ParseConfig(text, {});
  CATCH_CAPTURE(config.status().ToString());
  CATCH_REQUIRE(config.ok());
  return *config;
}

double MeanLoss(const TrainResult& result, size_t first, size_t count) {
  double sum = 0;
  for (size_t i = first; i < first + count; ++i) sum += result.records[i].loss;
  return sum / static_cast<double>(count);
}

CATCH_TEST_CASE("a local run trains every iteration, reports progress and learns") {
  torch::set_num_threads(1);  // RunTraining leaves the thread count to its caller
  std::ostringstream progress;
  TrainerOptions options;
  options.progress = &progress;
  absl::StatusOr<TrainResult> result = RunTraining(SmallConfig("local", 2), options);
  CATCH_CAPTURE(result.status().ToString());
  CATCH_REQUIRE(result.ok());
  CATCH_CHECK(result->rank == 0);
  CATCH_CHECK(result->iterations == kIterations);
  CATCH_REQUIRE(result->records.size() == kIterations);
  for (int i = 0; i < kIterations; ++i) {
    CATCH_CHECK(result->records[i].iteration == i);
    CATCH_CHECK(std::isfinite(result->records[i].loss));
  }
  // Learns: the last 20 iterations' mean loss (final_loss) is well below the first 5's.
  CATCH_CHECK(result->final_loss == Approx(MeanLoss(*result, kIterations - 20, 20)));
  CATCH_CHECK(result->final_loss < 0.9 * MeanLoss(*result, 0, 5));
  CATCH_REQUIRE(result->test_accuracy.has_value());
  CATCH_CHECK(*result->test_accuracy > 0.5);  // chance is 0.1
  CATCH_CHECK(*result->test_accuracy <= 1.0);
  CATCH_CHECK(result->param_l2 > 0);
  // No cluster, no traffic.
  CATCH_CHECK(result->bytes_sent == 0);
  CATCH_CHECK(result->bytes_received == 0);

  // A PROGRESS line every 10 iterations, in the launcher's format.
  std::vector<ProgressLine> lines;
  for (absl::string_view line : absl::StrSplit(progress.str(), '\n', absl::SkipEmpty())) {
    std::optional<ProgressLine> parsed = ParseProgressLine(line);
    CATCH_CAPTURE(std::string(line));
    CATCH_REQUIRE(parsed.has_value());
    lines.push_back(*parsed);
  }
  CATCH_REQUIRE(lines.size() == 4);
  for (size_t i = 0; i < lines.size(); ++i) {
    CATCH_CHECK(lines[i].iteration == static_cast<int64_t>(10 * (i + 1)));
    CATCH_CHECK(lines[i].total == kIterations);
    CATCH_CHECK(lines[i].loss == Approx(result->records[10 * i + 9].loss).margin(1e-4));
    CATCH_CHECK(lines[i].samples_per_second.has_value());
    CATCH_REQUIRE(lines[i].sent_mbps.has_value());
    CATCH_CHECK(*lines[i].sent_mbps == 0.0);
    CATCH_REQUIRE(lines[i].received_mbps.has_value());
    CATCH_CHECK(*lines[i].received_mbps == 0.0);
  }

  // Epochs of 512 / 32 = 16 iterations: two whole ones and 8 iterations of a third.
  CATCH_REQUIRE(result->epochs.size() == 3);
  const std::vector<int64_t> ends = {16, 32, 40};
  for (size_t e = 0; e < 3; ++e) {
    CATCH_CAPTURE(e);
    CATCH_CHECK(result->epochs[e].epoch == static_cast<int64_t>(e + 1));
    CATCH_CHECK(result->epochs[e].end_iteration == ends[e]);
    const int64_t begin = e == 0 ? 0 : ends[e - 1];
    CATCH_CHECK(result->epochs[e].train_loss ==
                Approx(MeanLoss(*result, begin, ends[e] - begin)).epsilon(1e-12));
    CATCH_REQUIRE(result->epochs[e].test_accuracy.has_value());
  }
  // The last epoch's accuracy is the run's; training improves it.
  CATCH_CHECK(result->epochs[2].test_accuracy == result->test_accuracy);
  CATCH_CHECK(*result->epochs[2].test_accuracy > *result->epochs[0].test_accuracy);

  // The result JSON carries the same epochs (summary.json takes rank 0's).
  const nlohmann::json result_json = nlohmann::json::parse(result->ToJson());
  CATCH_REQUIRE(result_json["epochs"].size() == 3);
  CATCH_CHECK(result_json["epochs"][1]["end_iteration"] == 32);
  CATCH_CHECK(result_json["epochs"][2]["test_accuracy"] == *result->epochs[2].test_accuracy);

  // The CSV has a header and one row per record; the epoch figures on the epochs' last rows.
  const std::vector<std::string> csv =
      absl::StrSplit(result->RecordsCsv(), '\n', absl::SkipEmpty());
  CATCH_CHECK(csv.size() == kIterations + 1);
  CATCH_CHECK(csv[0] ==
              "iteration,loss,iteration_seconds,samples_per_second,epoch,epoch_loss,test_accuracy");
  CATCH_CHECK(absl::EndsWith(csv[1], ",1,,"));
  CATCH_CHECK(absl::EndsWith(csv[16], absl::StrFormat(",1,%.6f,%.6f", result->epochs[0].train_loss,
                                                      *result->epochs[0].test_accuracy)));
  CATCH_CHECK(absl::EndsWith(csv[17], ",2,,"));
  CATCH_CHECK(absl::EndsWith(csv[40], absl::StrFormat(",3,%.6f,%.6f", result->epochs[2].train_loss,
                                                      *result->epochs[2].test_accuracy)));
  const nlohmann::json json = nlohmann::json::parse(result->ToJson());
  CATCH_CHECK(json["iterations"] == 40);
  CATCH_CHECK(json["rank"] == 0);
  CATCH_CHECK(json["final_loss"] == result->final_loss);
}

// A learning-rate schedule from the config: warm-up over 5 iterations, then halved
// every 10.
void AddSchedule(config::ExperimentConfig* config) {
  config::LrScheduleConfig* s = config->mutable_optimizer()->mutable_schedule();
  s->set_name("step");
  s->set_step_size(10);
  s->set_gamma(0.5);
  s->set_warmup_iterations(5);
  s->set_warmup_start_factor(0.2);
}

// A stream that notes how many lines it holds each time it is flushed.
class FlushCountingBuffer : public std::stringbuf {
 public:
  std::vector<int64_t> lines_at_flush;

 protected:
  int sync() override {
    const std::string text = str();
    lines_at_flush.push_back(std::count(text.begin(), text.end(), '\n'));
    return 0;
  }
};

// Every CSV row without its timing columns (iteration_seconds, samples_per_second).
std::vector<std::string> RowsWithoutTimes(const std::string& csv) {
  std::vector<std::string> rows;
  for (absl::string_view line : absl::StrSplit(csv, '\n', absl::SkipEmpty())) {
    std::vector<std::string> cells = absl::StrSplit(line, ',');
    CATCH_REQUIRE(cells.size() == 7);
    cells[2] = cells[3] = "";
    rows.push_back(absl::StrJoin(cells, ","));
  }
  return rows;
}

CATCH_TEST_CASE("a run that streams its records keeps at most an epoch of them, rows unchanged") {
  torch::set_num_threads(1);
  absl::StatusOr<TrainResult> kept = RunTraining(SmallConfig("local", 2), {});
  CATCH_REQUIRE(kept.ok());
  FlushCountingBuffer buffer;
  std::ostream records(&buffer);
  TrainerOptions options;
  options.records = &records;
  absl::StatusOr<TrainResult> streamed = RunTraining(SmallConfig("local", 2), options);
  CATCH_CAPTURE(streamed.status().ToString());
  CATCH_REQUIRE(streamed.ok());
  // Written an epoch (16 iterations) at a time, the header first; nothing left in memory.
  CATCH_CHECK(buffer.lines_at_flush == std::vector<int64_t>{1 + 16, 1 + 32, 1 + 40});
  CATCH_CHECK(streamed->records.empty());
  // The same rows as the run that kept them, the last epoch's test accuracy included.
  CATCH_CHECK(RowsWithoutTimes(buffer.str()) == RowsWithoutTimes(kept->RecordsCsv()));
  CATCH_CHECK(absl::EndsWith(buffer.str(), absl::StrFormat(",3,%.6f,%.6f\n",
                                                           streamed->epochs[2].train_loss,
                                                           *streamed->test_accuracy)));
  // The summary is the same, bit for bit where it does not depend on timing.
  CATCH_CHECK(streamed->final_loss == kept->final_loss);
  CATCH_CHECK(streamed->param_l2 == kept->param_l2);
  CATCH_CHECK(streamed->samples_per_second > 0);
}

CATCH_TEST_CASE("one worker and one server train what the local run trains, schedule included") {
  torch::set_num_threads(1);
  config::ExperimentConfig local_config = SmallConfig("local", 1);
  AddSchedule(&local_config);
  absl::StatusOr<TrainResult> local = RunTraining(local_config, {});
  CATCH_REQUIRE(local.ok());
  // The schedule changes what local trains.
  absl::StatusOr<TrainResult> unscheduled = RunTraining(SmallConfig("local", 1), {});
  CATCH_REQUIRE(unscheduled.ok());
  CATCH_CHECK(unscheduled->param_l2 != Approx(local->param_l2).epsilon(1e-4));

  config::ExperimentConfig config = SmallConfig("p3", 1);
  AddSchedule(&config);
  // As p3_server runs it: cluster.host 127.0.0.1, port 0.
  absl::StatusOr<ServerOptions> so = ServerOptionsFromConfig(config, {});
  CATCH_REQUIRE(so.ok());
  absl::StatusOr<std::unique_ptr<ParameterServer>> server = ParameterServer::Start(*so);
  CATCH_REQUIRE(server.ok());
  TrainerOptions options;
  options.servers = {absl::StrCat("127.0.0.1:", (*server)->port())};
  absl::StatusOr<TrainResult> cluster = RunTraining(config, options);
  CATCH_CAPTURE(cluster.status().ToString());
  CATCH_REQUIRE(cluster.ok());
  CATCH_CHECK((*server)->Wait().ok());

  CATCH_CHECK(cluster->iterations == kIterations);
  CATCH_REQUIRE(cluster->records.size() == local->records.size());
  for (size_t i = 0; i < local->records.size(); ++i) {
    CATCH_CHECK(cluster->records[i].loss == Approx(local->records[i].loss).epsilon(1e-4));
  }
  CATCH_CHECK(cluster->param_l2 == Approx(local->param_l2).epsilon(1e-5));
  // The epochs' accuracies, the first two measured mid-run after Sync().
  CATCH_REQUIRE(cluster->epochs.size() == local->epochs.size());
  for (size_t e = 0; e < local->epochs.size(); ++e) {
    CATCH_REQUIRE(cluster->epochs[e].test_accuracy.has_value());
    CATCH_CHECK(*cluster->epochs[e].test_accuracy ==
                Approx(*local->epochs[e].test_accuracy).margin(0.01));
  }
  // Worker 0 and server 0 share a machine: every value went through shared memory.
  CATCH_CHECK(cluster->bytes_shared > 0);
  CATCH_CHECK(cluster->bytes_sent == 0);
  CATCH_CHECK(cluster->bytes_received == 0);

  // Without shared memory the same run moves the same bytes over the stream.
  config::ExperimentConfig streamed = config;
  streamed.mutable_scheduling()->set_shared_memory(false);
  absl::StatusOr<std::unique_ptr<ParameterServer>> server2 = ParameterServer::Start(*so);
  CATCH_REQUIRE(server2.ok());
  options.servers = {absl::StrCat("127.0.0.1:", (*server2)->port())};
  absl::StatusOr<TrainResult> over_stream = RunTraining(streamed, options);
  CATCH_CAPTURE(over_stream.status().ToString());
  CATCH_REQUIRE(over_stream.ok());
  CATCH_CHECK((*server2)->Wait().ok());
  CATCH_CHECK(over_stream->param_l2 == cluster->param_l2);  // bit for bit
  CATCH_CHECK(over_stream->bytes_shared == 0);
  CATCH_CHECK(over_stream->bytes_sent + over_stream->bytes_received == cluster->bytes_shared);
}

CATCH_TEST_CASE("the worker's options carry the config's scheduling fields, credit included") {
  config::ExperimentConfig config = SmallConfig("values_only", 2);
  TrainerOptions options;
  options.rank = 1;
  options.servers = {"127.0.0.1:1", "127.0.0.1:2"};

  absl::StatusOr<WorkerOptions> defaults =
      WorkerOptionsFromConfig(config, Mode::kValuesOnly, options);
  CATCH_REQUIRE(defaults.ok());
  CATCH_CHECK(defaults->credit_bytes == 0);  // one message at a time, as before the field

  config.mutable_scheduling()->set_credit_bytes(1 << 20);
  config.mutable_scheduling()->set_max_message_params(4096);
  absl::StatusOr<WorkerOptions> wo = WorkerOptionsFromConfig(config, Mode::kValuesOnly, options);
  CATCH_REQUIRE(wo.ok());
  CATCH_CHECK(wo->credit_bytes == (1 << 20));
  CATCH_CHECK(wo->max_message_params == 4096);
  CATCH_CHECK(wo->slice_params == 500);
  CATCH_CHECK(wo->mode == Mode::kValuesOnly);
  CATCH_CHECK(wo->rank == 1);
  CATCH_CHECK(wo->num_workers == 2);
  CATCH_CHECK(wo->servers == options.servers);
  CATCH_CHECK(wo->initial_workers == 0);  // not elastic

  // Elastic: the servers and the Hello count every rank that may take part.
  config.mutable_cluster()->mutable_elastic()->set_max_workers(3);
  absl::StatusOr<WorkerOptions> elastic =
      WorkerOptionsFromConfig(config, Mode::kValuesOnly, options);
  CATCH_REQUIRE(elastic.ok());
  CATCH_CHECK(elastic->num_workers == 3);
  CATCH_CHECK(elastic->initial_workers == 2);
  absl::StatusOr<ServerOptions> so = ServerOptionsFromConfig(config, {});
  CATCH_REQUIRE(so.ok());
  CATCH_CHECK(so->shard.num_workers == 3);
  CATCH_CHECK(so->shard.initial_workers == 2);
}

CATCH_TEST_CASE("an elastic run whose membership never changes trains what a fixed one does") {
  torch::set_num_threads(1);
  auto train = [](const config::ExperimentConfig& config) -> double {
    absl::StatusOr<ServerOptions> so = ServerOptionsFromConfig(config, {});
    CATCH_REQUIRE(so.ok());
    absl::StatusOr<std::unique_ptr<ParameterServer>> server = ParameterServer::Start(*so);
    CATCH_REQUIRE(server.ok());
    TrainerOptions options;
    options.servers = {absl::StrCat("127.0.0.1:", (*server)->port())};
    absl::StatusOr<TrainResult> result = RunTraining(config, options);
    CATCH_CAPTURE(result.status().ToString());
    CATCH_REQUIRE(result.ok());
    // Rank 1 never joins: the server ends once rank 0, the only one present, is done.
    CATCH_CHECK((*server)->Wait().ok());
    return result->param_l2;
  };
  config::ExperimentConfig fixed = SmallConfig("p3", 1);
  config::ExperimentConfig elastic = fixed;
  elastic.mutable_cluster()->mutable_elastic()->set_max_workers(2);
  CATCH_CHECK(train(elastic) == train(fixed));  // bit for bit
}

CATCH_TEST_CASE("a config the trainer cannot run is an error naming what is wrong") {
  config::ExperimentConfig config = SmallConfig("local", 1);
  config.set_mode("fastest");
  absl::StatusOr<TrainResult> result = RunTraining(config, {});
  CATCH_REQUIRE_FALSE(result.ok());
  CATCH_CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(std::string(result.status().message()).find("fastest") != std::string::npos);

  config = SmallConfig("local", 1);
  config.mutable_model()->set_name("no_such_model");
  result = RunTraining(config, {});
  CATCH_REQUIRE_FALSE(result.ok());
  CATCH_CHECK(std::string(result.status().message()).find("no_such_model") != std::string::npos);

  config = SmallConfig("local", 1);
  config.mutable_data()->set_dataset("fashion_mnist");
  config.mutable_data()->set_path("/nonexistent/fashion-mnist");
  result = RunTraining(config, {});
  CATCH_REQUIRE_FALSE(result.ok());
  CATCH_CHECK(std::string(result.status().message()).find("/nonexistent/fashion-mnist") !=
              std::string::npos);

  // A cluster mode needs servers to talk to.
  result = RunTraining(SmallConfig("p3", 1), {});
  CATCH_REQUIRE_FALSE(result.ok());
  CATCH_CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace p3
