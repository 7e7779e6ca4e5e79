// The `p3._p3` extension: the C++ Worker (worker/worker.h) for the Python front end
// (worker/python/p3_src/__init__.py, docs/python.md). Thin on purpose: it reads the config,
// describes the Python module's blocks to the Worker as an ExternalBlockModel (the very
// tensors, shared), and forwards the step-wise calls; slicing, priorities, credit, modes
// and the protocol are the Worker's. A C++ error Status is raised as p3.Error (a
// RuntimeError) carrying the Status's code and message. Calls that wait release the GIL.
#include <torch/extension.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/config/from_config.h"
#include "models/data.h"
#include "models/external_block_model.h"
#include "models/sampler.h"
#include "p3/base/grpc_experiments.h"
#include "p3/base/trace.h"
#include "p3/core/mode.h"
#include "proto/config.h"
#include "worker/trainer.h"
#include "worker/worker.h"

namespace p3 {
namespace {

namespace py = pybind11;

// Raised in Python as p3.Error.
class StatusError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

void Check(const absl::Status& status) {
  if (!status.ok()) throw StatusError(status.ToString());
}

template <typename T>
T Take(absl::StatusOr<T> value) {
  Check(value.status());
  return *std::move(value);
}

// (name, parameter names, parameters) of one block, in forward order.
using BlockTuple = std::tuple<std::string, std::vector<std::string>, std::vector<torch::Tensor>>;

struct CreateArgs {
  std::string config_path;
  std::vector<std::string> overrides;
  int rank = 0;
  int world_size = -1;  // -1: the config's
  std::vector<std::string> servers;
  bool rejoin = false;
  std::string trace_file;
  std::vector<BlockTuple> blocks;
  std::vector<torch::Tensor> buffers;
  std::vector<std::string> buffer_names;
};

class PyWorker {
 public:
  explicit PyWorker(const CreateArgs& args)
      : trace_({.enabled = !args.trace_file.empty(),
                .process_name = absl::StrCat("worker ", args.rank, " (python)"),
                .pid = 100 + args.rank}),
        trace_file_(args.trace_file) {
    const config::ExperimentConfig config =
        Take(config::LoadConfig(args.config_path, args.overrides));
    const Mode mode = Take(ParseMode(config.mode()));
    if (args.world_size >= 0 && args.world_size != config.cluster().workers()) {
      Check(absl::InvalidArgumentError(absl::StrCat("world size ", args.world_size,
                                                    "; the config's cluster.workers is ",
                                                    config.cluster().workers())));
    }
    if (static_cast<int>(args.servers.size()) != config.cluster().servers()) {
      Check(absl::InvalidArgumentError(absl::StrCat(
          "servers: ", args.servers.size(), " given (", absl::StrJoin(args.servers, ","),
          "); the config's cluster.servers is ", config.cluster().servers())));
    }
    mode_ = config.mode();
    // As p3_worker does, before the worker's first gRPC use (scheduling.sized_reads;
    // p3/base/grpc_experiments.h): without effect where gRPC has already started here.
    if (config.scheduling().sized_reads()) Take(RequestGrpcExperiments(kSizedReadExperiments));
    TrainerOptions trainer;
    trainer.rank = args.rank;
    trainer.servers = args.servers;
    trainer.rejoin = args.rejoin;
    trainer.trace = &trace_;
    WorkerOptions options = Take(WorkerOptionsFromConfig(config, mode, trainer));
    std::vector<models::ExternalBlockModel::Block> blocks;
    for (const auto& [name, param_names, params] : args.blocks) {
      blocks.push_back({name, param_names, params});
    }
    // The module's device, not training.device: the user placed the module. A CUDA
    // module takes the C++ GPU worker's staging path (WorkerOptions::device).
    if (!blocks.empty() && !blocks.front().params.empty()) {
      options.device = blocks.front().params.front().device();
    }
    model_ = Take(
        models::ExternalBlockModel::Create(std::move(blocks), args.buffers, args.buffer_names));
    worker_ = Take(Worker::Create(options, model_));
  }

  void WaitForBlock(int64_t block) { Check(worker_->WaitForBlock(block)); }
  void ArmGradients() { Check(worker_->ArmGradients()); }
  void EndIteration() { Check(worker_->EndIteration()); }
  void Sync() { Check(worker_->Sync()); }
  void AverageBuffers() { Check(worker_->AverageBuffers()); }

  void Finish() {
    const absl::Status finished = worker_->Finish();
    if (trace_.enabled()) Check(trace_.WriteJson(trace_file_));
    Check(finished);
  }

  int64_t iteration() const { return worker_->iteration(); }
  const std::string& mode() const { return mode_; }

  py::dict Stats() const {
    const WorkerStats s = worker_->stats();
    py::dict d;
    d["bytes_sent"] = s.bytes_sent;
    d["bytes_received"] = s.bytes_received;
    d["bytes_shared"] = s.bytes_shared;
    d["forward_wait_seconds"] = absl::ToDoubleSeconds(s.forward_wait);
    return d;
  }

 private:
  TraceRecorder trace_;  // before worker_, which records on it
  const std::string trace_file_;
  std::string mode_;
  std::shared_ptr<models::ExternalBlockModel> model_;
  std::unique_ptr<Worker> worker_;
};

// The batches the C++ trainer (worker/trainer.cc) trains worker `rank` on under a config:
// its data set and sharded sampler, so that a Python worker can take a C++ worker's place
// in a job and see the same data (tests/python/mixed_job_test.py).
class TrainingData {
 public:
  TrainingData(const std::string& config_path, const std::vector<std::string>& overrides,
               int rank) {
    const config::ExperimentConfig config = Take(config::LoadConfig(config_path, overrides));
    const bool local = config.mode() == "local";
    const int workers = config.cluster().workers();
    train_ = Take(models::CreateDataset(models::DatasetOptionsFromConfig(config, true)));
    models::ShardedSamplerOptions so;
    so.dataset_size = train_->size();
    so.batch_size = config.training().batch_size() * (local ? workers : 1);
    so.num_workers = local ? 1 : workers;
    so.rank = local ? 0 : rank;
    so.seed = config.training().seed();
    sampler_.emplace(Take(models::ShardedSampler::Create(so)));
  }

  std::pair<torch::Tensor, torch::Tensor> Batch(int64_t iteration) {
    const models::Batch b = train_->Get(sampler_->Indices(iteration));
    return {b.input, b.target};
  }
  int64_t iterations_per_epoch() const { return sampler_->iterations_per_epoch(); }

 private:
  std::shared_ptr<models::Dataset> train_;
  std::optional<models::ShardedSampler> sampler_;
};

}  // namespace
}  // namespace p3

PYBIND11_MODULE(_p3, m) {
  namespace py = pybind11;
  using p3::PyWorker;
  m.doc() = "The C++ P3 worker for the p3 package (docs/python.md).";
  py::register_exception<p3::StatusError>(m, "Error", PyExc_RuntimeError);
  using Release = py::call_guard<py::gil_scoped_release>;
  py::class_<PyWorker>(m, "Worker")
      .def(py::init([](std::string config, std::vector<std::string> overrides, int rank,
                       int world_size, std::vector<std::string> servers, bool rejoin,
                       std::string trace_file, std::vector<p3::BlockTuple> blocks,
                       std::vector<torch::Tensor> buffers, std::vector<std::string> buffer_names) {
             p3::CreateArgs args{std::move(config),
                                 std::move(overrides),
                                 rank,
                                 world_size,
                                 std::move(servers),
                                 rejoin,
                                 std::move(trace_file),
                                 std::move(blocks),
                                 std::move(buffers),
                                 std::move(buffer_names)};
             py::gil_scoped_release release;  // the handshake waits for every server
             return std::make_unique<PyWorker>(args);
           }),
           py::arg("config"), py::arg("overrides"), py::arg("rank"), py::arg("world_size"),
           py::arg("servers"), py::arg("rejoin"), py::arg("trace_file"), py::arg("blocks"),
           py::arg("buffers"), py::arg("buffer_names"))
      .def("wait_for_block", &PyWorker::WaitForBlock, Release())
      .def("arm_gradients", &PyWorker::ArmGradients, Release())
      .def("end_iteration", &PyWorker::EndIteration, Release())
      .def("sync", &PyWorker::Sync, Release())
      .def("average_buffers", &PyWorker::AverageBuffers, Release())
      .def("finish", &PyWorker::Finish, Release())
      .def_property_readonly("iteration", &PyWorker::iteration)
      .def_property_readonly("mode", &PyWorker::mode)
      .def("stats", &PyWorker::Stats);
  py::class_<p3::TrainingData>(m, "TrainingData")
      .def(py::init<std::string, std::vector<std::string>, int>(), py::arg("config"),
           py::arg("overrides"), py::arg("rank"))
      .def("batch", &p3::TrainingData::Batch, py::arg("iteration"))
      .def_property_readonly("iterations_per_epoch", &p3::TrainingData::iterations_per_epoch);
}
