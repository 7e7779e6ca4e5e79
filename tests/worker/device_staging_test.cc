// The device path of the Worker (worker/device_staging.h) run on the CPU through the same
// interfaces, so that CI proves everything but the GPU's kernels: a copy engine whose copies
// to the host complete later, in order, on a thread of its own (as a GPU's copy stream
// does), and a separate "device" parameter buffer. Training through it is bit-identical to
// the CPU path in every kind of mode; a gradient's slices wait for its own copy and backward
// does not; the buffers' mean crosses too.
#include "worker/device_staging.h"

#include <torch/torch.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "p3/core/mode.h"
#include "p3/core/parameter_shard.h"
#include "tests/cluster/test_mlp.h"
#include "worker/copy_engine.h"
#include "worker/in_memory_transport.h"
#include "worker/worker.h"

namespace p3 {
namespace {

// Copies to the host run later on a thread of their own, in order; while the gate is
// closed, none runs. Copies to the "device" happen at once (the CPU then computes at once,
// as a GPU's compute stream would wait for them).
class ThreadedCopyEngine : public CopyEngine {
 public:
  explicit ThreadedCopyEngine(bool open = true) : open_(open) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~ThreadedCopyEngine() override {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      open_ = true;
    }
    thread_.join();
  }

  std::unique_ptr<CopyFence> ToHost(const torch::Tensor& dst, const torch::Tensor& src) override {
    auto job = std::make_shared<Job>();
    job->dst = dst;
    job->src = src;
    absl::MutexLock lock(&mu_);
    jobs_.push_back(job);
    ++issued_;
    return std::make_unique<JobFence>(job);
  }
  void ToDevice(const torch::Tensor& dst, const torch::Tensor& src) override {
    torch::NoGradGuard no_grad;
    dst.copy_(src);
    ++uploads_;
  }

  void Open() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }
  int64_t issued() {
    absl::MutexLock lock(&mu_);
    return issued_;
  }
  int64_t uploads() const { return uploads_.load(); }

 private:
  struct Job {
    torch::Tensor dst;
    torch::Tensor src;
    absl::Notification done;
  };
  class JobFence : public CopyFence {
   public:
    explicit JobFence(std::shared_ptr<Job> job) : job_(std::move(job)) {}
    void Wait() override { job_->done.WaitForNotification(); }

   private:
    std::shared_ptr<Job> job_;
  };

  void Loop() {
    for (;;) {
      std::shared_ptr<Job> job;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [this] {
          mu_.AssertHeld();
          return (open_ && !jobs_.empty()) || (stopping_ && jobs_.empty());
        };
        mu_.Await(absl::Condition(&ready));
        if (jobs_.empty()) return;
        job = jobs_.front();
        jobs_.pop_front();
      }
      {
        torch::NoGradGuard no_grad;
        job->dst.copy_(job->src);
      }
      job->done.Notify();
    }
  }

  absl::Mutex mu_;
  std::deque<std::shared_ptr<Job>> jobs_ ABSL_GUARDED_BY(mu_);
  bool open_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t issued_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int64_t> uploads_{0};
  std::thread thread_;
};

constexpr int kWorkers = 2;
constexpr int kServers = 2;
constexpr int kSteps = 4;
constexpr int64_t kBatch = 4;

torch::Tensor Flatten(models::BlockModel& model) {
  std::vector<torch::Tensor> parts;
  for (auto& [name, p] : model.OrderedParameters()) parts.push_back(p.detach().reshape(-1));
  for (const torch::Tensor& b : model.buffers()) {
    if (b.scalar_type() == torch::kFloat32) parts.push_back(b.detach().reshape(-1));
  }
  return torch::cat(parts).clone();
}

struct Run {
  std::vector<torch::Tensor> params;  // per worker, then the float buffers
  std::vector<absl::Status> status;
};

// kWorkers workers on kServers in-memory servers for kSteps; `engine(r)` gives worker r's
// copy engine (null: the CPU path).
Run Train(Mode mode, bool batch_norm,
          const std::function<std::shared_ptr<CopyEngine>(int)>& engine) {
  std::vector<std::unique_ptr<InMemoryServer>> servers;
  std::vector<InMemoryServer*> links;
  std::vector<std::string> addresses;
  for (int s = 0; s < kServers; ++s) {
    ShardOptions shard;
    shard.server_index = s;
    shard.num_workers = kWorkers;
    shard.optimizer.lr = 0.1;
    shard.optimizer.momentum = 0.9;
    servers.push_back(std::make_unique<InMemoryServer>(shard));
    links.push_back(servers.back().get());
    addresses.push_back(absl::StrCat("memory:", s));
  }
  // The batches, made here: the threads share libtorch's generator.
  std::vector<std::pair<torch::Tensor, torch::Tensor>> batches;
  for (int step = 0; step < kSteps; ++step) {
    torch::manual_seed(100 + step);
    batches.emplace_back(torch::randn({kBatch * kWorkers, 12}),
                         torch::randint(0, 5, {kBatch * kWorkers}));
  }
  // The models too: their initialisation draws from the same generator.
  std::vector<std::shared_ptr<models::BlockModel>> models;
  for (int r = 0; r < kWorkers; ++r) {
    const uint64_t seed = r == 0 ? 1 : 9;  // rank 1 starts elsewhere: the servers take rank 0's
    if (batch_norm) {
      models.push_back(MakeTestBnMlp(seed));
    } else {
      models.push_back(MakeTestMlp(seed));
    }
  }
  Run run;
  run.params.resize(kWorkers);
  run.status.resize(kWorkers);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorkers; ++r) {
    threads.emplace_back([&, r] {
      std::shared_ptr<models::BlockModel> model = models[r];
      WorkerOptions wo;
      wo.servers = addresses;
      wo.rank = r;
      wo.num_workers = kWorkers;
      wo.mode = mode;
      wo.slice_params = 50;
      wo.split_threshold = 1000;
      wo.peer_timeout = absl::Seconds(30);
      wo.transport_factory = InMemoryTransportFactory(links);
      wo.copy_engine = engine(r);
      absl::Status& status = run.status[r];
      absl::StatusOr<std::unique_ptr<Worker>> worker = Worker::Create(wo, model);
      if (!worker.ok()) {
        status = worker.status();
        return;
      }
      for (int step = 0; step < kSteps && status.ok(); ++step) {
        const torch::Tensor x = batches[step].first.narrow(0, r * kBatch, kBatch);
        const torch::Tensor y = batches[step].second.narrow(0, r * kBatch, kBatch);
        absl::StatusOr<torch::Tensor> out = (*worker)->Forward(x);
        status = out.ok() ? (*worker)->Backward(model->Loss(*out, y)) : out.status();
      }
      if (status.ok() && batch_norm) status = (*worker)->AverageBuffers();
      if (status.ok()) status = (*worker)->Finish();
      run.params[r] = Flatten(*model);
    });
  }
  for (std::thread& t : threads) t.join();
  for (auto& server : servers) CATCH_CHECK(server->Wait().ok());
  return run;
}

CATCH_TEST_CASE("training through the device path is bit-identical to the CPU path in every mode") {
  for (Mode mode : {Mode::kP3, Mode::kBaseline, Mode::kNoBackwardOverlap,
                    Mode::kNoForwardOverlap, Mode::kSlicingOnly}) {
    for (bool batch_norm : {false, true}) {
      CATCH_CAPTURE(ModeName(mode), batch_norm);
      const Run cpu = Train(mode, batch_norm, [](int) { return nullptr; });
      std::vector<std::shared_ptr<ThreadedCopyEngine>> engines;
      for (int r = 0; r < kWorkers; ++r) engines.push_back(std::make_shared<ThreadedCopyEngine>());
      const Run staged = Train(mode, batch_norm, [&](int r) { return engines[r]; });
      for (int r = 0; r < kWorkers; ++r) {
        CATCH_CAPTURE(r, cpu.status[r].ToString(), staged.status[r].ToString());
        CATCH_REQUIRE(cpu.status[r].ok());
        CATCH_REQUIRE(staged.status[r].ok());
        CATCH_CHECK(torch::equal(staged.params[r], cpu.params[r]));
        // Each gradient crossed once per step (3 blocks with a weight and a bias each, and
        // batch norm's two in block 0); values went up at least once per step.
        CATCH_CHECK(engines[r]->issued() == kSteps * (batch_norm ? 8 : 6));
        CATCH_CHECK(engines[r]->uploads() >= kSteps);
      }
      // Synchronous training, and the buffers' mean (with batch norm): every worker ends
      // with the same model.
      CATCH_CHECK(torch::equal(staged.params[0], staged.params[1]));
    }
  }
}

CATCH_TEST_CASE("a gradient's slices wait for its own copy, and backward does not") {
  // One worker, one server: its copies are held until the gate opens.
  auto engine = std::make_shared<ThreadedCopyEngine>(/*open=*/false);
  ShardOptions shard;
  shard.num_workers = 1;
  InMemoryServer server(shard);
  std::atomic<int> written{0};
  auto model = MakeTestMlp(1);
  WorkerOptions wo;
  wo.servers = {"memory:0"};
  wo.transport_factory = InMemoryTransportFactory({&server});
  wo.slice_params = 50;
  wo.copy_engine = engine;
  wo.before_gradient_write = [&](int, int, int64_t) { ++written; };
  absl::StatusOr<std::unique_ptr<Worker>> worker = Worker::Create(wo, model);
  CATCH_REQUIRE(worker.ok());
  absl::StatusOr<torch::Tensor> out = (*worker)->Forward(torch::randn({kBatch, 12}));
  CATCH_REQUIRE(out.ok());
  // Backward returns with every copy still held: it did not wait for them.
  CATCH_REQUIRE((*worker)->Backward(model->Loss(*out, torch::randint(0, 5, {kBatch}))).ok());
  CATCH_CHECK(engine->issued() == 6);
  CATCH_CHECK(written.load() == 0);
  engine->Open();
  CATCH_REQUIRE((*worker)->Finish().ok());
  CATCH_CHECK(written.load() > 0);
  CATCH_CHECK(server.Wait().ok());
}

CATCH_TEST_CASE("the staging puts the parameters on the device buffer and copies ranges up") {
  std::vector<torch::Tensor> params = {torch::arange(6, torch::kFloat32).reshape({2, 3}),
                                       torch::arange(6, 10, torch::kFloat32)};
  absl::StatusOr<SlicePlan> plan =
      SlicePlan::Create({{"a", 6}, {"b", 4}}, SlicePlanOptions{.slice_params = 3});
  CATCH_REQUIRE(plan.ok());
  FlatBuffers host = FlatBuffers::Allocate(10, /*shared=*/false, /*rank=*/0);
  host.AdoptParameters(params, *plan);
  auto engine = std::make_shared<ThreadedCopyEngine>();
  absl::StatusOr<std::unique_ptr<DeviceStaging>> staging =
      DeviceStaging::Create({.engine = engine}, &host, params, *plan);
  CATCH_REQUIRE(staging.ok());
  // The parameters are views into the device buffer now, not the host's.
  CATCH_CHECK(params[0].data_ptr<float>() == (*staging)->device_params().data_ptr<float>());
  CATCH_CHECK(params[1].data_ptr<float>() == (*staging)->device_params().data_ptr<float>() + 6);
  host.params()[7] = 70;
  host.params()[2] = 20;
  (*staging)->ParamsToDevice(6, 4);  // b only
  CATCH_CHECK(params[1][1].item<float>() == 70);
  CATCH_CHECK(params[0][0][2].item<float>() == 2);  // a untouched
  // A gradient reaches the host buffer, then its callback runs; Drain waits for both.
  std::atomic<bool> ready{false};
  (*staging)->GradientToHost(6, torch::full({4}, 3.0f), [&] { ready = true; });
  (*staging)->Drain();
  CATCH_CHECK(ready.load());
  CATCH_CHECK(host.grads()[9] == 3.0f);
  CATCH_CHECK(host.grads()[5] == 0.0f);
  (*staging)->Shutdown();
  (*staging)->Shutdown();  // twice is fine
}

CATCH_TEST_CASE("a device that is not there is refused by name") {
  absl::StatusOr<std::unique_ptr<CopyEngine>> engine = StreamCopyEngine(torch::Device("cuda:0"));
  if (torch::cuda::is_available()) return;  // (on a GPU machine it is there)
  CATCH_REQUIRE(!engine.ok());
  CATCH_CHECK(engine.status().code() == absl::StatusCode::kFailedPrecondition);
  CATCH_CHECK(engine.status().message().find("cuda:0") != std::string::npos);
}

}  // namespace
}  // namespace p3
