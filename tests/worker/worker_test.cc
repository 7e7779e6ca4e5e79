// The Worker (worker/worker.h) over the in-memory transport (worker/in_memory_transport.h):
// workers and ParameterShards in one process, each link with threads of its own. Two
// workers on two servers train what a local loop trains, in p3 and with Acks (baseline),
// and bit for bit what gRPC streams train; a failed server gives the workers its error,
// not a hang; a parameter without a gradient is refused; re-plans and the buffers' mean
// go through the seam too; the servers are opened all at once.
#include "worker/worker.h"

#include <torch/torch.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "models/model.h"
#include "p3/core/mode.h"
#include "p3/core/optimizer.h"
#include "p3/base/thread_policy.h"
#include "p3/core/parameter_shard.h"
#include "p3/core/wire_dtype.h"
#include "server/parameter_server.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/cluster/test_mlp.h"
#include "worker/in_memory_transport.h"

namespace p3 {
namespace {

using cluster_test::Flatten;
using cluster_test::GlobalBatch;
using cluster_test::kBatch;
using cluster_test::kSteps;
using cluster_test::Sgd;
using cluster_test::TrainLocal;

torch::Tensor FloatBuffers(models::BlockModel& model) {
  std::vector<torch::Tensor> parts;
  for (const torch::Tensor& b : model.buffers()) {
    if (b.scalar_type() == torch::kFloat32) parts.push_back(b.detach().flatten().clone());
  }
  return torch::cat(parts);
}

double RelativeError(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).norm() / b.norm()).item<double>();
}

struct RunSpec {
  Mode mode = Mode::kP3;
  int workers = 2;
  int servers = 2;
  int steps = kSteps;
  bool grpc = false;  // ParameterServers over gRPC instead of in-memory servers
  WireDType wire_dtype = WireDType::kFloat32;
  int64_t max_message_params = kDefaultMaxMessageParams;
  int64_t owner_params = 0;
  std::vector<std::pair<int64_t, int64_t>> replans;  // rank 0: (before iteration, size)
  bool batch_norm = false;
  bool average_buffers = false;  // after the last step
  // Called on the writer thread of a transport before each gradient write.
  std::function<void(int server, int slice, int64_t iteration)> before_gradient_write;
  absl::Duration stalled_write = absl::Seconds(1);  // WorkerOptions::stalled_write
  bool batch_io_threads = true;                      // WorkerOptions::batch_io_threads
};

struct RunResult {
  std::vector<torch::Tensor> params;  // per worker
  std::vector<absl::Status> status;   // the first error of each worker
  std::vector<int> replans;
  std::vector<int64_t> slice_params;
  std::vector<torch::Tensor> buffers_before;
  std::vector<torch::Tensor> buffers_after;
  std::vector<absl::Status> server_status;  // Wait() of each server
  std::vector<int> training_batch;  // each training thread in SCHED_BATCH at its end (0 / 1)
};

// `spec.workers` workers, one thread each, on the servers at `addresses` (already up),
// reached through `factory` (null: gRPC).
RunResult Train(const RunSpec& spec, const std::vector<std::string>& addresses,
                const TransportFactory& factory) {
  RunResult result;
  result.params.resize(spec.workers);
  result.status.resize(spec.workers);
  result.training_batch.resize(spec.workers);
  result.replans.resize(spec.workers);
  result.slice_params.resize(spec.workers);
  result.buffers_before.resize(spec.workers);
  result.buffers_after.resize(spec.workers);
  std::vector<std::pair<torch::Tensor, torch::Tensor>> batches;
  for (int step = 0; step < spec.steps; ++step) {
    batches.push_back(GlobalBatch(step, spec.workers));
  }
  // Ranks other than 0 start from other values: the servers hand out rank 0's.
  std::vector<std::shared_ptr<models::BlockModel>> models;
  for (int r = 0; r < spec.workers; ++r) {
    const uint64_t seed = r == 0 ? 1 : 77 + r;
    if (spec.batch_norm) {
      models.push_back(MakeTestBnMlp(seed));
    } else {
      models.push_back(MakeTestMlp(seed));
    }
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < spec.workers; ++r) {
    threads.emplace_back([&, r] {
      std::shared_ptr<models::BlockModel> model = models[r];
      WorkerOptions wo;
      wo.servers = addresses;
      wo.rank = r;
      wo.num_workers = spec.workers;
      wo.mode = spec.mode;
      wo.slice_params = 50;
      wo.split_threshold = 1000;  // fc2's weight (1200) is split over the servers
      wo.peer_timeout = absl::Seconds(30);
      wo.max_message_params = spec.max_message_params;
      wo.wire_dtype = spec.wire_dtype;
      wo.owner_params = spec.owner_params;
      wo.before_gradient_write = spec.before_gradient_write;
      wo.stalled_write = spec.stalled_write;
      wo.batch_io_threads = spec.batch_io_threads;
      wo.transport_factory = factory;
      absl::StatusOr<std::unique_ptr<Worker>> worker = Worker::Create(wo, model);
      if (!worker.ok()) {
        result.status[r] = worker.status();
        return;
      }
      absl::Status& status = result.status[r];
      for (int64_t step = 0; step < spec.steps && status.ok(); ++step) {
        for (const auto& [before, size] : spec.replans) {
          if (r == 0 && before == step) status = (*worker)->RequestReplan(size).status();
        }
        if (!status.ok()) break;
        const auto& [x, y] = batches[step];
        absl::StatusOr<torch::Tensor> out = (*worker)->Forward(x.narrow(0, r * kBatch, kBatch));
        status = out.ok() ? (*worker)->Backward(model->Loss(*out, y.narrow(0, r * kBatch, kBatch)))
                          : out.status();
      }
      if (status.ok() && spec.average_buffers) {
        result.buffers_before[r] = FloatBuffers(*model);
        status = (*worker)->AverageBuffers();
        result.buffers_after[r] = FloatBuffers(*model);
      }
      if (status.ok()) status = (*worker)->Finish();
      result.training_batch[r] = ThisThreadIsBatch();
      result.replans[r] = (*worker)->replans();
      result.slice_params[r] = (*worker)->plan().options().slice_params;
      result.params[r] = Flatten(*model);
    });
  }
  for (std::thread& t : threads) t.join();
  return result;
}

ShardOptions Shard(const RunSpec& spec, int s) {
  ShardOptions shard;
  shard.server_index = s;
  shard.num_workers = spec.workers;
  shard.optimizer = Sgd();
  shard.wire_dtype = spec.wire_dtype;
  return shard;
}

// The run on in-memory servers, or on ParameterServers over gRPC (spec.grpc).
RunResult Run(const RunSpec& spec) {
  std::vector<std::string> addresses;
  if (spec.grpc) {
    std::vector<std::unique_ptr<ParameterServer>> servers;
    for (int s = 0; s < spec.servers; ++s) {
      ServerOptions so;
      so.shard = Shard(spec, s);
      so.max_message_params = spec.max_message_params;
      absl::StatusOr<std::unique_ptr<ParameterServer>> server = ParameterServer::Start(so);
      CATCH_REQUIRE(server.ok());
      addresses.push_back(absl::StrCat("127.0.0.1:", (*server)->port()));
      servers.push_back(*std::move(server));
    }
    RunResult result = Train(spec, addresses, nullptr);
    for (auto& server : servers) result.server_status.push_back(server->Wait());
    return result;
  }
  std::vector<std::unique_ptr<InMemoryServer>> servers;
  std::vector<InMemoryServer*> links;
  for (int s = 0; s < spec.servers; ++s) {
    servers.push_back(std::make_unique<InMemoryServer>(Shard(spec, s)));
    links.push_back(servers.back().get());
    addresses.push_back(absl::StrCat("memory:", s));
  }
  RunResult result = Train(spec, addresses, InMemoryTransportFactory(links));
  for (auto& server : servers) result.server_status.push_back(server->Wait());
  return result;
}

void RequireOk(const RunResult& run) {
  for (size_t r = 0; r < run.status.size(); ++r) {
    CATCH_CAPTURE(r, run.status[r].ToString());
    CATCH_REQUIRE(run.status[r].ok());
  }
  for (size_t s = 0; s < run.server_status.size(); ++s) {
    CATCH_CAPTURE(s, run.server_status[s].ToString());
    CATCH_REQUIRE(run.server_status[s].ok());
  }
}

// One worker, two servers: the first gradient write of iteration 1 to server 1 stalls, as
// to a peer that stopped reading, until all of server 0's gradients of that iteration have
// been handed to its stream, or `cap` passes. Returns whether they had been.
bool ServerZeroGoesOnWhileServerOneStalls(RunSpec spec, absl::Duration cap, bool grpc) {
  absl::Mutex mu;
  std::map<std::pair<int64_t, int>, int> writes;  // (iteration, server) -> writes started
  bool held = false;
  bool released_by_progress = false;
  spec.workers = 1;
  spec.grpc = grpc;
  spec.before_gradient_write = [&](int server, int, int64_t iteration) {
    absl::MutexLock lock(&mu);
    ++writes[{iteration, server}];
    if (server != 1 || iteration != 1 || held) return;
    held = true;
    auto zero_done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      return writes[{1, 0}] == writes[{0, 0}];
    };
    released_by_progress = mu.AwaitWithTimeout(absl::Condition(&zero_done), cap);
  };
  const RunResult run = Run(spec);
  RequireOk(run);
  CATCH_CHECK(RelativeError(run.params[0], TrainLocal(1)) <= 1e-5);
  absl::MutexLock lock(&mu);
  CATCH_CHECK(held);
  CATCH_CHECK(writes[{0, 0}] > 1);
  return released_by_progress;
}

CATCH_TEST_CASE("a server that stops reading holds only its own stream once stalled_write passes") {
  torch::set_num_threads(1);
  for (bool grpc : {false, true}) {
    CATCH_CAPTURE(grpc);
    CATCH_CHECK(ServerZeroGoesOnWhileServerOneStalls({.stalled_write = absl::Milliseconds(100)},
                                                     absl::Seconds(20), grpc));
  }
}

CATCH_TEST_CASE("with stalled_write never, a stalled write holds the whole link (credit 0)") {
  torch::set_num_threads(1);
  CATCH_CHECK_FALSE(ServerZeroGoesOnWhileServerOneStalls(
      {.stalled_write = absl::InfiniteDuration()}, absl::Seconds(1), false));
}

CATCH_TEST_CASE("two workers on two in-memory servers train what the local loop trains") {
  torch::set_num_threads(1);
  const torch::Tensor want = TrainLocal(2);
  // p3 takes values with the push; the baseline gets an Ack and Pulls them.
  for (Mode mode : {Mode::kP3, Mode::kBaseline}) {
    CATCH_CAPTURE(ModeName(mode));
    const RunResult run = Run({.mode = mode});
    RequireOk(run);
    for (int r = 0; r < 2; ++r) {
      CATCH_CAPTURE(r);
      CATCH_CHECK(RelativeError(run.params[r], want) <= 1e-5);
    }
    CATCH_CHECK(torch::equal(run.params[0], run.params[1]));
    // Trained: the parameters left rank 0's initial values.
    CATCH_CHECK(RelativeError(run.params[0], Flatten(*MakeTestMlp(1))) > 1e-3);
  }
}

CATCH_TEST_CASE("the in-memory transport trains bit for bit what gRPC streams train") {
  torch::set_num_threads(1);
  // Small messages (slices travel in parts both ways); 16-bit wires, whose gradients the
  // writer encodes from what the message carries.
  for (Mode mode : {Mode::kP3, Mode::kBaseline}) {
    for (WireDType dtype : {WireDType::kFloat32, WireDType::kBFloat16, WireDType::kFloat16}) {
      CATCH_CAPTURE(ModeName(mode), WireDTypeName(dtype));
      RunSpec spec{.mode = mode, .wire_dtype = dtype, .max_message_params = 20};
      const RunResult memory = Run(spec);
      spec.grpc = true;
      const RunResult grpc = Run(spec);
      RequireOk(memory);
      RequireOk(grpc);
      for (int r = 0; r < 2; ++r) {
        CATCH_CAPTURE(r);
        CATCH_CHECK(torch::equal(memory.params[r], grpc.params[r]));
      }
    }
  }
}

CATCH_TEST_CASE("the links' writers yield to the computation (SCHED_BATCH); training threads do not") {
  torch::set_num_threads(1);
  for (bool batch : {true, false}) {
    CATCH_CAPTURE(batch);
    std::atomic<int> writes{0};
    std::atomic<int> batch_writes{0};
    RunSpec spec;
    spec.grpc = true;
    spec.steps = 2;
    spec.batch_io_threads = batch;
    spec.before_gradient_write = [&](int, int, int64_t) {
      ++writes;
      if (ThisThreadIsBatch()) ++batch_writes;
    };
    const RunResult run = Run(spec);
    RequireOk(run);
    CATCH_CHECK(writes.load() > 0);
    CATCH_CHECK(batch_writes.load() == (batch ? writes.load() : 0));
    for (int training : run.training_batch) CATCH_CHECK(training == 0);
  }
}

CATCH_TEST_CASE("a worker whose server fails gets that server's error, not a hang") {
  torch::set_num_threads(1);
  std::vector<std::unique_ptr<InMemoryServer>> servers;
  RunSpec spec;
  for (int s = 0; s < 2; ++s) servers.push_back(std::make_unique<InMemoryServer>(Shard(spec, s)));
  // Server 1 dies as the first gradient of iteration 1 is written to it.
  std::once_flag once;
  spec.steps = 6;
  spec.before_gradient_write = [&](int server, int, int64_t iteration) {
    if (server != 1 || iteration != 1) return;
    std::call_once(once, [&] { servers[1]->Fail(absl::UnavailableError("server 1 crashed")); });
  };
  const RunResult run = Train(spec, {"memory:0", "memory:1"},
                              InMemoryTransportFactory({servers[0].get(), servers[1].get()}));
  for (int r = 0; r < 2; ++r) {
    CATCH_CAPTURE(r, run.status[r].ToString());
    CATCH_CHECK(absl::IsUnavailable(run.status[r]));
    CATCH_CHECK(
        absl::StrContains(run.status[r].message(), "server 1 (memory:1): server 1 crashed"));
  }
  CATCH_CHECK(servers[1]->Wait() == absl::UnavailableError("server 1 crashed"));
  // Server 0 saw the workers leave before their Done.
  CATCH_CHECK(absl::StrContains(servers[0]->Wait().message(), "before it was done"));
}

CATCH_TEST_CASE("a worker opens all its servers at once and reports the first refusal in server order") {
  torch::set_num_threads(1);
  InMemoryServer server0(ShardOptions{.server_index = 0, .num_workers = 1});
  const TransportFactory memory = InMemoryTransportFactory({&server0});
  absl::Mutex mu;
  int arrived = 0;
  bool server2_answered = false;
  std::vector<bool> together(3, false);
  // Each call waits for the other two before it answers: opened one after another, the
  // first would wait alone (20 s) and the others would come after it had answered.
  // Server 0 links; servers 1 and 2 refuse, server 2 first.
  const TransportFactory open =
      [&](const TransportOptions& link) -> absl::StatusOr<std::unique_ptr<Transport>> {
    const int s = link.server_index;
    {
      absl::MutexLock lock(&mu);
      ++arrived;
      together[s] = mu.AwaitWithTimeout(
          absl::Condition(+[](int* n) { return *n >= 3; }, &arrived), absl::Seconds(20));
    }
    if (s == 0) return memory(link);
    if (s == 1) {
      absl::MutexLock lock(&mu);
      mu.AwaitWithTimeout(absl::Condition(&server2_answered), absl::Seconds(20));
      return absl::UnavailableError("server 1 is down");
    }
    absl::MutexLock lock(&mu);
    server2_answered = true;
    return absl::UnavailableError("server 2 is down");
  };
  WorkerOptions wo;
  wo.servers = {"memory:0", "memory:1", "memory:2"};
  wo.peer_timeout = absl::Seconds(30);
  wo.transport_factory = open;
  absl::StatusOr<std::unique_ptr<Worker>> worker =
      Worker::Create(wo, MakeTestMlp(1));
  CATCH_CAPTURE(worker.status().ToString());
  CATCH_CHECK(together == std::vector<bool>{true, true, true});
  CATCH_CHECK(absl::IsUnavailable(worker.status()));
  CATCH_CHECK(absl::StrContains(worker.status().message(), "server 1 is down"));
  // The link to server 0 was closed again: its run ends instead of waiting for the worker.
  CATCH_CHECK(absl::StrContains(server0.Wait().message(), "worker 0 disconnected"));
}

// TestMlp's shape with a parameter the loss never reaches, in block 1.
class MlpWithUnused : public models::BlockModel {
 public:
  MlpWithUnused() {
    fc1_ = register_module("fc1", torch::nn::Linear(12, 8));
    fc2_ = register_module("fc2", torch::nn::Linear(8, 5));
    unused_ = register_parameter("unused", torch::zeros({3}));
  }
  int64_t num_blocks() const override { return 2; }
  torch::Tensor ForwardBlock(int64_t i, const torch::Tensor& x) override {
    return i == 0 ? torch::tanh(fc1_->forward(x)) : fc2_->forward(x);
  }
  std::vector<torch::Tensor> BlockParameters(int64_t i) override {
    if (i == 0) return {fc1_->weight, fc1_->bias};
    return {fc2_->weight, fc2_->bias, unused_};
  }
  std::string BlockName(int64_t i) const override { return i == 0 ? "fc1" : "fc2"; }

 private:
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
  torch::Tensor unused_;
};

CATCH_TEST_CASE("a Backward that leaves a parameter without a gradient is refused, naming it") {
  torch::set_num_threads(1);
  InMemoryServer server(ShardOptions{.server_index = 0, .num_workers = 1});
  WorkerOptions wo;
  wo.servers = {"memory:0"};
  wo.peer_timeout = absl::Seconds(30);
  wo.transport_factory = InMemoryTransportFactory({&server});
  torch::manual_seed(1);
  auto model = std::make_shared<MlpWithUnused>();
  absl::StatusOr<std::unique_ptr<Worker>> worker = Worker::Create(wo, model);
  CATCH_REQUIRE(worker.ok());
  auto [x, y] = GlobalBatch(0, 1);
  absl::StatusOr<torch::Tensor> out = (*worker)->Forward(x);
  CATCH_REQUIRE(out.ok());
  const absl::Status refused = (*worker)->Backward(model->Loss(*out, y));
  CATCH_CAPTURE(refused.ToString());
  CATCH_CHECK(absl::IsFailedPrecondition(refused));
  CATCH_CHECK(
      absl::StrContains(refused.message(), "parameter unused (fc2/2) received no gradient"));
  // The run is over: the next call says why.
  CATCH_CHECK((*worker)->Backward(model->Loss(*out, y)) == refused);
  worker->reset();
  CATCH_CHECK(absl::StrContains(server.Wait().message(), "worker 0 disconnected"));
}

CATCH_TEST_CASE("re-plans through the in-memory transport train bit for bit what one plan trains") {
  torch::set_num_threads(1);
  RunSpec spec{.steps = 6, .owner_params = 100};
  const RunResult fixed = Run(spec);
  spec.replans = {{1, 20}, {3, 100}};
  const RunResult replanned = Run(spec);
  RequireOk(fixed);
  RequireOk(replanned);
  for (int r = 0; r < 2; ++r) {
    CATCH_CAPTURE(r);
    CATCH_CHECK(fixed.replans[r] == 0);
    CATCH_CHECK(replanned.replans[r] == 2);
    CATCH_CHECK(replanned.slice_params[r] == 100);
    CATCH_CHECK(torch::equal(replanned.params[r], fixed.params[r]));
  }
}

CATCH_TEST_CASE("every worker ends with the mean of the workers' buffers, through server 0") {
  torch::set_num_threads(1);
  const RunResult run = Run({.batch_norm = true, .average_buffers = true});
  RequireOk(run);
  const torch::Tensor mean = (run.buffers_before[0] + run.buffers_before[1]) / 2;
  CATCH_CHECK_FALSE(torch::equal(run.buffers_before[0], run.buffers_before[1]));
  for (int r = 0; r < 2; ++r) {
    CATCH_CAPTURE(r);
    CATCH_CHECK(torch::allclose(run.buffers_after[r], mean, 1e-6, 1e-7));
  }
  CATCH_CHECK(torch::equal(run.buffers_after[0], run.buffers_after[1]));
}

}  // namespace
}  // namespace p3
