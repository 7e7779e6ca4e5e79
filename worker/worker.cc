#include "worker/worker.h"

#include <torch/torch.h>

#include <cstring>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "models/model.h"
#include "p3/cluster_signature.h"
#include "p3/status_macros.h"
#include "p3/version_tracker.h"
#include "proto/wire.h"
#include "worker/server_connection.h"

namespace p3 {

class Worker::Impl : public ConnectionListener {
 public:
  Impl(const WorkerOptions& options, std::shared_ptr<models::BlockModel> model, SlicePlan plan,
       std::vector<torch::Tensor> params)
      : options_(options),
        traits_(TraitsOf(options.mode)),
        model_(std::move(model)),
        plan_(std::move(plan)),
        params_(std::move(params)),
        tracker_(static_cast<int>(plan_.slices().size())),
        params_received_(plan_.slices().size(), 0) {}

  ~Impl() override { Shutdown(); }

  // Moves the parameters into one flat buffer, hooks the gradients, connects.
  absl::Status Setup(const ClusterSignature& sig) {
    flat_params_ = torch::empty({plan_.total_params()}, torch::kFloat32);
    flat_grads_ = torch::zeros({plan_.total_params()}, torch::kFloat32);
    {
      torch::NoGradGuard no_grad;
      for (size_t t = 0; t < params_.size(); ++t) {
        torch::Tensor view = flat_params_.narrow(0, plan_.tensor_offset(t), params_[t].numel())
                                 .view(params_[t].sizes());
        view.copy_(params_[t]);
        params_[t].set_data(view);
      }
    }
    for (size_t t = 0; t < params_.size(); ++t) {
      const int tensor = static_cast<int>(t);
      hooks_.push_back(params_[t].register_hook(
          [this, tensor](const torch::Tensor& grad) { OnGradient(tensor, grad); }));
    }
    // Slice range of each block, for the per-block wait of the forward pass.
    int t = 0;
    for (int64_t b = 0; b < model_->num_blocks(); ++b) {
      const int first_tensor = t;
      t += static_cast<int>(model_->BlockParameters(b).size());
      block_slices_.emplace_back(plan_.first_slice(first_tensor), plan_.first_slice(t));
      for (int i = first_tensor; i < t; ++i) tensor_block_.push_back(static_cast<int>(b));
    }
    if (tracing()) {
      compute_track_ = options_.trace->Track("compute");
      wait_track_ = options_.trace->Track("wait for parameters");
    }

    for (int s = 0; s < static_cast<int>(options_.servers.size()); ++s) {
      wire::Hello hello;
      SignatureToHello(sig, &hello);
      hello.set_rank(options_.rank);
      hello.set_server_index(s);
      hello.set_token(options_.token);
      ConnectionOptions copts;
      copts.server_index = s;
      copts.address = options_.servers[s];
      copts.priority = traits_.priority;
      copts.credit_bytes = options_.credit_bytes;
      copts.peer_timeout = options_.peer_timeout;
      copts.max_message_params = options_.max_message_params;
      copts.trace = options_.trace;
      copts.tls = options_.tls;
      copts.tls_ca_pem = options_.tls_ca_pem;
      copts.tls_server_name = options_.tls_server_name;
      if (options_.before_gradient_write) {
        copts.before_write = [hook = options_.before_gradient_write, s](const Upstream& up) {
          if (up.kind == Upstream::Kind::kGradient) {
            hook(s, up.slice_id, static_cast<int64_t>(up.iteration));
          }
        };
      }
      P3_ASSIGN_OR_RETURN(std::unique_ptr<ServerConnection> conn,
                          ServerConnection::Open(
                              copts, hello,
                              [this](const Upstream& up, int64_t offset, int64_t count,
                                     wire::WorkerMessage* msg) { Build(up, offset, count, msg); },
                              this));
      conns_.push_back(std::move(conn));
    }
    // Every server must start from the same version: 0 (fresh) or a checkpoint's.
    const uint64_t start = conns_[0]->welcome().start_version();
    for (size_t s = 1; s < conns_.size(); ++s) {
      if (conns_[s]->welcome().start_version() != start) {
        return absl::FailedPreconditionError(
            absl::StrCat("servers resumed from different checkpoints: server 0 at iteration ",
                         start, ", server ", s, " at ", conns_[s]->welcome().start_version(),
                         "; choose a common one with checkpoint.resume_iteration"));
      }
    }
    iteration_ = static_cast<int64_t>(start);
    if (options_.rank == 0 && start == 0) {
      for (const Slice& slice : plan_.slices()) {
        conns_[slice.server]->Send(Upstream{.kind = Upstream::Kind::kInit, .slice_id = slice.id},
                                   slice.priority, slice.id,
                                   slice.length * static_cast<int64_t>(sizeof(float)));
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<torch::Tensor> Forward(const torch::Tensor& input) {
    const uint64_t version = static_cast<uint64_t>(iteration_);
    torch::Tensor x = input;
    try {
      if (!traits_.overlap_forward) {
        P3_RETURN_IF_ERROR(WaitFor(0, plan_.slices().size(), version));
      }
      for (int64_t b = 0; b < model_->num_blocks(); ++b) {
        if (traits_.overlap_forward) {
          P3_RETURN_IF_ERROR(WaitFor(block_slices_[b].first, block_slices_[b].second, version));
        }
        const absl::Time start = tracing() ? absl::Now() : absl::Time();
        x = model_->ForwardBlock(b, x);
        if (tracing()) {
          options_.trace->Complete(compute_track_, "forward " + model_->BlockName(b), "forward",
                                   start, absl::Now(), absl::StrCat("\"iteration\": ", iteration_));
        }
      }
    } catch (const c10::Error& e) {
      return absl::InternalError(absl::StrCat("forward pass failed: ", e.what_without_backtrace()));
    }
    return x;
  }

  absl::Status Backward(const torch::Tensor& loss) {
    P3_RETURN_IF_ERROR(failure());
    try {
      collecting_ = true;
      last_gradient_time_ = absl::Now();
      last_traced_block_ = -1;
      loss.backward();
      collecting_ = false;
    } catch (const c10::Error& e) {
      collecting_ = false;
      return absl::InternalError(
          absl::StrCat("backward pass failed: ", e.what_without_backtrace()));
    }
    // The hooks have the gradients; autograd's own copies are not needed.
    for (torch::Tensor& p : params_) p.mutable_grad().reset();
    if (!traits_.overlap_backward) {
      for (const Slice& slice : plan_.slices()) SendGradient(slice);
    }
    ++iteration_;
    return failure();
  }

  absl::Status Sync() {
    return WaitFor(0, plan_.slices().size(), static_cast<uint64_t>(iteration_));
  }

  absl::Status Finish() {
    P3_RETURN_IF_ERROR(Sync());
    const absl::Time deadline = absl::Now() + options_.peer_timeout;
    absl::Status result;
    for (auto& conn : conns_) {
      absl::Status s = conn->Close(deadline);
      if (result.ok()) result = s;
    }
    return result;
  }

  void Shutdown() {
    for (auto& conn : conns_) conn->Shutdown();
    for (size_t t = 0; t < hooks_.size(); ++t) params_[t].remove_hook(hooks_[t]);
    hooks_.clear();
  }

  // ConnectionListener: called on the connections' reader threads.
  void OnParams(int server, const wire::SliceData& data) override {
    const int id = static_cast<int>(data.slice_id());
    if (id < 0 || id >= static_cast<int>(plan_.slices().size()) ||
        plan_.slices()[id].server != server) {
      Fail(absl::InternalError(absl::StrCat("server ", server, " sent slice ", data.slice_id(),
                                            ", which it does not own")));
      return;
    }
    const Slice& slice = plan_.slices()[id];
    // A slice may come in consecutive parts; each slice is written by its server's reader
    // thread only, so params_received_[id] needs no lock.
    int64_t& received = params_received_[id];
    const int64_t n = static_cast<int64_t>(data.values().size() / sizeof(float));
    if (data.values().size() % sizeof(float) != 0 || n < 1 || n > slice.length - received ||
        data.offset() != static_cast<uint64_t>(received)) {
      Fail(absl::InternalError(absl::StrCat("server ", server, " sent slice ", id, " (",
                                            slice.length, " values) with ", data.values().size(),
                                            " bytes at offset ", data.offset(),
                                            "; expected offset ", received)));
      return;
    }
    std::memcpy(flat_params_.data_ptr<float>() + slice.offset + received, data.values().data(),
                data.values().size());
    received += n;
    if (received < slice.length) return;  // more parts to come
    received = 0;
    tracker_.MarkArrived(id, data.iteration());
  }

  void OnAck(int server, int slice_id, uint64_t iteration) override {
    if (slice_id < 0 || slice_id >= static_cast<int>(plan_.slices().size())) return;
    const Slice& slice = plan_.slices()[slice_id];
    conns_[server]->Send(
        Upstream{.kind = Upstream::Kind::kPull, .slice_id = slice_id, .iteration = iteration + 1},
        slice.priority, slice.id, 0);
  }

  void OnFailure(int server, const absl::Status& status) override { Fail(status); }

  int64_t iteration() const { return iteration_; }
  const SlicePlan& plan() const { return plan_; }

  WorkerStats stats() const {
    WorkerStats s;
    for (const auto& conn : conns_) {
      s.bytes_sent += conn->bytes_sent();
      s.bytes_received += conn->bytes_received();
    }
    s.forward_wait = forward_wait_;
    return s;
  }

 private:
  absl::Status WaitFor(int first, int last, uint64_t version) {
    const absl::Time start = absl::Now();
    absl::Status s = tracker_.WaitFor(first, last, version, start + options_.peer_timeout);
    const absl::Time end = absl::Now();
    forward_wait_ += end - start;
    if (tracing() && end - start > absl::Microseconds(20)) {
      options_.trace->Complete(
          wait_track_, absl::StrCat("wait v", version), "wait", start, end,
          absl::StrCat("\"first_slice\": ", first, ", \"last_slice\": ", last));
    }
    if (absl::IsDeadlineExceeded(s)) {
      return absl::DeadlineExceededError(absl::StrCat("worker ", options_.rank, ": waited ",
                                                      absl::FormatDuration(options_.peer_timeout),
                                                      " for parameters: ", s.message()));
    }
    return s;
  }

  // Autograd hook: runs on the training thread as soon as tensor `t`'s gradient exists.
  void OnGradient(int t, const torch::Tensor& grad) {
    if (!collecting_) return;
    if (tracing()) {
      // Backward of a block: from the previous gradient to this block's first one.
      const int block = tensor_block_[t];
      if (block != last_traced_block_) {
        const absl::Time now = absl::Now();
        options_.trace->Complete(compute_track_, "backward " + model_->BlockName(block), "backward",
                                 last_gradient_time_, now,
                                 absl::StrCat("\"iteration\": ", iteration_));
        last_gradient_time_ = now;
        last_traced_block_ = block;
      }
    }
    torch::NoGradGuard no_grad;
    flat_grads_.narrow(0, plan_.tensor_offset(t), grad.numel()).view(grad.sizes()).copy_(grad);
    if (!traits_.overlap_backward) return;
    for (int id = plan_.first_slice(t); id < plan_.first_slice(t + 1); ++id) {
      SendGradient(plan_.slices()[id]);
    }
  }

  void SendGradient(const Slice& slice) {
    conns_[slice.server]->Send(Upstream{.kind = Upstream::Kind::kGradient,
                                        .slice_id = slice.id,
                                        .iteration = static_cast<uint64_t>(iteration_)},
                               slice.priority, slice.id,
                               slice.length * static_cast<int64_t>(sizeof(float)));
  }

  // Fills a message on a connection's writer thread, reading the values from the flat
  // buffers only now, when they are about to be written.
  void Build(const Upstream& up, int64_t offset, int64_t count, wire::WorkerMessage* msg) {
    const Slice& slice = plan_.slices()[up.slice_id];
    auto fill = [&](wire::SliceData* d, const torch::Tensor& flat) {
      d->set_slice_id(slice.id);
      d->set_iteration(up.iteration);
      d->set_offset(static_cast<uint64_t>(offset));
      d->set_values(reinterpret_cast<const char*>(flat.data_ptr<float>() + slice.offset + offset),
                    count * sizeof(float));
    };
    switch (up.kind) {
      case Upstream::Kind::kInit:
        fill(msg->mutable_init(), flat_params_);
        break;
      case Upstream::Kind::kGradient:
        fill(msg->mutable_gradient(), flat_grads_);
        break;
      case Upstream::Kind::kPull:
        msg->mutable_pull()->set_slice_id(up.slice_id);
        msg->mutable_pull()->set_version(up.iteration);
        break;
      case Upstream::Kind::kDone:
        msg->mutable_done();
        break;
    }
  }

  bool tracing() const { return options_.trace != nullptr && options_.trace->enabled(); }

  void Fail(const absl::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      if (failure_.ok()) failure_ = status;
    }
    tracker_.Abort(status);
  }

  absl::Status failure() const {
    absl::MutexLock lock(&mu_);
    return failure_;
  }

  const WorkerOptions options_;
  const ModeTraits traits_;
  std::shared_ptr<models::BlockModel> model_;
  const SlicePlan plan_;
  std::vector<torch::Tensor> params_;  // forward order
  VersionTracker tracker_;
  torch::Tensor flat_params_;
  // Per slice, values of a version arriving in parts received so far (reader threads).
  std::vector<int64_t> params_received_;
  torch::Tensor flat_grads_;
  std::vector<unsigned> hooks_;
  std::vector<std::pair<int, int>> block_slices_;  // [first, last) slice ids per block
  std::vector<int> tensor_block_;                  // block of each tensor
  int compute_track_ = 0;
  int wait_track_ = 0;
  absl::Time last_gradient_time_;
  int last_traced_block_ = -1;
  std::vector<std::unique_ptr<ServerConnection>> conns_;
  int64_t iteration_ = 0;
  bool collecting_ = false;
  absl::Duration forward_wait_;

  mutable absl::Mutex mu_;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::unique_ptr<Worker>> Worker::Create(const WorkerOptions& options,
                                                       std::shared_ptr<models::BlockModel> model) {
  if (options.mode == Mode::kLocal) {
    return absl::InvalidArgumentError("mode: local trains without a cluster; use a plain loop");
  }
  if (options.servers.empty()) return absl::InvalidArgumentError("servers: at least one is needed");
  if (options.num_workers < 1 || options.rank < 0 || options.rank >= options.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("rank: ", options.rank, " is out of range for ",
                                                   options.num_workers, " workers"));
  }
  const ModeTraits traits = TraitsOf(options.mode);
  ClusterSignature sig;
  sig.num_workers = options.num_workers;
  sig.num_servers = static_cast<int>(options.servers.size());
  sig.plan.granularity = traits.sliced ? Granularity::kSliced : Granularity::kTensor;
  sig.plan.slice_params = options.slice_params;
  sig.plan.split_threshold = options.split_threshold;
  sig.plan.num_servers = sig.num_servers;
  sig.values_on_push = traits.values_on_push;
  sig.priority = traits.priority;
  std::vector<TensorEntry> entries;
  std::vector<torch::Tensor> params;
  for (auto& [name, p] : model->OrderedParameters()) {
    if (p.scalar_type() != torch::kFloat32) {
      return absl::InvalidArgumentError(absl::StrCat("parameter ", name, " is not float32"));
    }
    sig.tensors.push_back({name, p.sizes().vec(), "float32"});
    entries.push_back({name, p.numel()});
    params.push_back(p);
  }
  P3_ASSIGN_OR_RETURN(SlicePlan plan, SlicePlan::Create(entries, sig.plan));
  auto impl = std::make_unique<Impl>(options, std::move(model), std::move(plan), std::move(params));
  P3_RETURN_IF_ERROR(impl->Setup(sig));
  return std::unique_ptr<Worker>(new Worker(std::move(impl)));
}

Worker::Worker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Worker::~Worker() = default;
absl::StatusOr<torch::Tensor> Worker::Forward(const torch::Tensor& input) {
  return impl_->Forward(input);
}
absl::Status Worker::Backward(const torch::Tensor& loss) { return impl_->Backward(loss); }
absl::Status Worker::Sync() { return impl_->Sync(); }
absl::Status Worker::Finish() { return impl_->Finish(); }
int64_t Worker::iteration() const { return impl_->iteration(); }
WorkerStats Worker::stats() const { return impl_->stats(); }
const SlicePlan& Worker::plan() const { return impl_->plan(); }

}  // namespace p3
