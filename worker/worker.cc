#include "worker/worker.h"

#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "models/model.h"
#include "p3/base/status_macros.h"
#include "p3/base/tcp_nudge.h"
#include "p3/core/cluster_signature.h"
#include "p3/core/send_queue.h"
#include "p3/core/version_tracker.h"
#include "p3/core/worker_core.h"
#include "worker/backward_spans.h"
#include "worker/buffer_exchange.h"
#include "worker/copy_engine.h"
#include "worker/device_staging.h"
#include "worker/elastic_membership.h"
#include "worker/first_failure.h"
#include "worker/flat_buffers.h"
#include "worker/gradient_hooks.h"
#include "worker/worker_options.h"
#include "worker/model_signature.h"
#include "worker/parameter_waits.h"
#include "worker/replans.h"
#include "worker/server_connection.h"
#include "worker/transport.h"

namespace p3 {
namespace {

// The default transport: a gRPC stream per server.
absl::StatusOr<std::unique_ptr<Transport>> OpenServerConnection(const TransportOptions& link) {
  return ServerConnection::Open(link);
}

}  // namespace

// The Worker: the training thread's calls, and the TransportListener of every transport
// for what the core does not take (failures, aborts, the buffers' mean, re-plans).
class Worker::Impl : public TransportListener {
 public:
  // `plan` is used for the buffers before the core takes it: buffers_ and tracker_ are
  // declared before core_.
  Impl(const WorkerOptions& options, std::shared_ptr<models::BlockModel> model, SlicePlan plan,
       std::vector<torch::Tensor> params, std::vector<std::string> names)
      : options_(options),
        traits_(TraitsOf(options.mode)),
        model_(std::move(model)),
        params_(std::move(params)),
        buffers_(FlatBuffers::Allocate(plan.total_params(), !options.shared_memory_servers.empty(),
                                       options.rank, /*pinned=*/!options.device.is_cpu())),
        tracker_(static_cast<int>(plan.slices().size())),
        core_(WorkerCoreOptions{.rank = options.rank,
                                .num_servers = static_cast<int>(options.servers.size()),
                                .values_on_push = traits_.values_on_push,
                                .wire_dtype = options.wire_dtype},
              // No gradient buffer: SendGradient says where each gradient lies.
              std::move(plan), buffers_.params(), /*grads=*/nullptr, &tracker_),
        tensor_block_(TensorBlocks(*model_)),
        compute_track_(options.trace != nullptr && options.trace->enabled()
                           ? options.trace->Track("compute") : 0),
        waits_(ParameterWaitOptions{.rank = options.rank,
                                    .bound = wait_bound(),
                                    .stall_report = options.stall_report,
                                    .trace = options.trace,
                                    .hints = &stall_hints_,
                                    .server_ports = PortsOf(options.servers)},
               &tracker_, BlockTensors(*model_), BlockNames(*model_)),
        replans_(ReplansOptions{.rank = options.rank,
                                .num_servers = static_cast<int>(options.servers.size()),
                                .values_on_push = traits_.values_on_push,
                                .wire_dtype = options.wire_dtype,
                                .rejoin = options.rejoin},
                 &core_),
        buffer_exchange_(options.rank),
        // A leaver's waits for values that never come end in `release`.
        elastic_(ElasticOptionsFor(options),
                 [this](uint64_t v) { tracker_.Reset(core_.plan().slices().size(), v); }) {
    buffers_.AdoptParameters(params_, core_.plan());
    hooks_ = std::make_unique<GradientHooks>(
        params_, std::move(names),
        [this](int t, const torch::Tensor& grad) { OnGradient(t, grad); });
  }

  ~Impl() override { Shutdown(); }

  // On a device (or with a copy engine given): the parameters move to the device, the
  // buffers follow, and values cross through DeviceStaging from now on.
  absl::Status Stage() {
    if (options_.device.is_cpu() && options_.copy_engine == nullptr) return absl::OkStatus();
    P3_ASSIGN_OR_RETURN(staging_, DeviceStaging::Create({.device = options_.device,
                                                         .engine = options_.copy_engine},
                                                        &buffers_, params_, core_.plan()));
    try {
      model_->to(options_.device);  // the buffers (the parameters are there already)
    } catch (const c10::Error& e) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot move the model's buffers to ", options_.device.str(), ": ",
          e.what_without_backtrace()));
    }
    block_spans_ = BlockSpans(BlockTensors(*model_), core_.plan());
    return absl::OkStatus();
  }

  // Opens a transport to every server and takes part in the init handshake.
  absl::Status Connect(const ClusterSignature& sig) {
    // The streams to remote servers share this machine's link: one send order for all.
    send_queue_ = std::make_unique<SendQueue<Upstream>>(
        SendQueueOptions{.priority = traits_.priority,
                         .credit_bytes = options_.credit_bytes,
                         .stalled_after = options_.stalled_write});
    const TransportFactory open =
        options_.transport_factory ? options_.transport_factory : OpenServerConnection;
    P3_ASSIGN_OR_RETURN(transports_, OpenTransports(options_, sig, open, send_queue_.get(),
                                                    buffers_.shared(), &core_, this));
    // Every server has answered: no one else needs the name.
    if (buffers_.shared() != nullptr) buffers_.shared()->Unlink();
    std::vector<uint64_t> starts;
    std::vector<bool> rejoined;
    std::string new_servers;
    for (int s = 0; s < static_cast<int>(transports_.size()); ++s) {
      const bool r = options_.rejoin && transports_[s]->rejoined();
      rejoined.push_back(r);
      starts.push_back(r ? transports_[s]->current_version() : transports_[s]->start_version());
      if (options_.rejoin && !r) {
        absl::StrAppend(&new_servers, new_servers.empty() ? "" : ", ", s, " (at iteration ",
                        transports_[s]->start_version(), ")");
      }
    }
    if (!new_servers.empty()) {
      // The servers were restarted too (Kubernetes restarts every process): nothing to
      // rejoin there, the run goes on from their checkpoint.
      std::cerr << "worker " << options_.rank << ": server(s) " << new_servers
                << " are new processes; "
                << (std::find(rejoined.begin(), rejoined.end(), true) == rejoined.end()
                        ? "starting as at a first start"
                        : "resuming at the oldest version")
                << std::endl;
    }
    // After a re-plan (or servers restored from a checkpoint taken under one) the slices
    // are the servers' plan's, not the config's.
    std::vector<PlanInForce> plans;
    for (const auto& transport : transports_) plans.push_back(transport->plan_in_force());
    P3_RETURN_IF_ERROR(core_.TakePlan(starts, plans));
    P3_ASSIGN_OR_RETURN(std::vector<ToServer> inits,
                        options_.rejoin ? core_.Resume(starts, rejoined) : core_.Start(starts));
    iteration_ = static_cast<int64_t>(core_.start_version());
    for (const ToServer& m : inits) transports_[m.server]->Send(m);
    return absl::OkStatus();
  }

  absl::StatusOr<torch::Tensor> Forward(const torch::Tensor& input) {
    torch::Tensor x = input;
    try {
      for (int64_t b = 0; b < model_->num_blocks(); ++b) {
        P3_RETURN_IF_ERROR(WaitForBlock(b));
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

  // Without forward overlap, the first wait of an iteration is for every block.
  absl::Status WaitForBlock(int64_t b) {
    if (b < 0 || b >= model_->num_blocks()) {
      return absl::OutOfRangeError(absl::StrCat("block ", b, " of ", model_->num_blocks()));
    }
    const uint64_t version = static_cast<uint64_t>(iteration_);
    const SlicePlan& plan = core_.plan();
    if (!traits_.overlap_forward) {
      if (all_ready_ == iteration_) return absl::OkStatus();
      if (absl::Status s = waits_.WaitForAll(version, plan); !s.ok()) return Fail(s);
      if (staging_ != nullptr) staging_->ParamsToDevice(0, plan.total_params());
      all_ready_ = iteration_;
      return absl::OkStatus();
    }
    if (absl::Status s = waits_.WaitForBlock(static_cast<int>(b), version, plan); !s.ok()) {
      return Fail(s);
    }
    // The block's values up to the device; only the device waits for the copy.
    if (staging_ != nullptr) {
      staging_->ParamsToDevice(block_spans_[b].first, block_spans_[b].second);
    }
    return absl::OkStatus();
  }

  absl::Status Backward(const torch::Tensor& loss, double loss_scale) {
    P3_RETURN_IF_ERROR(Arm(loss_scale, loss.device()));
    armed_ = false;  // hooks_->Backward begins and ends its own collection
    P3_RETURN_IF_ERROR(hooks_->Backward(loss_scale_ == 1 ? loss : loss * loss_scale_));
    return EndBackward();
  }

  absl::Status ArmGradients() {
    if (armed_) return failure();
    return Arm(1.0, options_.device);
  }

  absl::Status EndIteration() {
    P3_RETURN_IF_ERROR(failure());
    if (!armed_ || !hooks_->any_gradient()) {
      return absl::FailedPreconditionError(absl::StrCat("worker ", options_.rank, ": iteration ",
                                                        iteration_, " has no gradient yet"));
    }
    hooks_->End();
    armed_ = false;
    if (!hooks_->repeated().empty()) {
      const absl::Status twice = absl::FailedPreconditionError(absl::StrCat(
          "worker ", options_.rank, ": parameter ", hooks_->repeated(), " received a second",
          " gradient in iteration ", iteration_, " (two backward passes before the step)"));
      return Fail(twice);
    }
    return EndBackward();
  }

  absl::Status Sync() {
    if (absl::Status s = waits_.WaitForAll(static_cast<uint64_t>(iteration_), core_.plan());
        !s.ok()) {
      return Fail(s);
    }
    NoteReached();
    if (staging_ != nullptr) {
      // Whatever reads the parameters next (evaluation, an export's copy to the host) runs
      // on the device after this copy.
      staging_->ParamsToDevice(0, core_.plan().total_params());
    }
    return absl::OkStatus();
  }

  bool gradients_finite() const {
    return loss_scale_ == 1 || !finite_.defined() || finite_.item<bool>();
  }

  absl::Status Finish() {
    P3_RETURN_IF_ERROR(Sync());
    const absl::Time deadline = absl::Now() + wait_bound();
    // A stream that failed while another was closing may have failed first: the first
    // failure of all is reported.
    for (auto& transport : transports_) Fail(transport->Close(deadline));
    return failure();
  }

  absl::Status AverageBuffers() {
    P3_RETURN_IF_ERROR(failure());
    auto [tensors, mine] = PackFloatBuffers(model_->buffers());
    if (tensors.empty()) return absl::OkStatus();
    const int64_t n = static_cast<int64_t>(mine->size());
    // The round is the iteration: the same on every worker at the same point of the run.
    const uint64_t round = static_cast<uint64_t>(iteration_);
    buffer_exchange_.Expect(round);
    // After this iteration's gradients, which the other workers need first.
    transports_[0]->Send(ToServer{
        .server = 0,
        .message = Upstream{.kind = Upstream::Kind::kBuffers, .round = round, .buffers = mine},
        .priority = std::numeric_limits<int64_t>::max() - 1,
        .bytes = n * static_cast<int64_t>(sizeof(float))});
    P3_ASSIGN_OR_RETURN(const std::vector<float> mean, buffer_exchange_.Await(wait_bound()));
    if (static_cast<int64_t>(mean.size()) != n) {
      const absl::Status wrong = absl::InternalError(
          absl::StrCat("server 0 sent ", mean.size(), " buffer values; this worker has ", n));
      return Fail(wrong);
    }
    UnpackFloatBuffers(mean, tensors);
    return absl::OkStatus();
  }

  absl::StatusOr<uint64_t> RequestReplan(int64_t slice_params) {
    P3_RETURN_IF_ERROR(failure());
    P3_ASSIGN_OR_RETURN(const std::vector<ToServer> replan,
                        replans_.Request(slice_params, static_cast<uint64_t>(iteration_)));
    for (const ToServer& m : replan) transports_[m.server]->Send(m);
    return replan.front().message.from_iteration;
  }

  absl::StatusOr<uint64_t> RequestMembership(const std::vector<int>& present) {
    P3_RETURN_IF_ERROR(failure());
    if (options_.initial_workers < 1) {
      return absl::FailedPreconditionError("membership change in a run that is not elastic");
    }
    P3_ASSIGN_OR_RETURN(const std::vector<ToServer> out,
                        elastic_.Request(static_cast<uint64_t>(iteration_), present));
    for (const ToServer& m : out) transports_[m.server]->Send(m);
    return out.front().message.from_iteration;
  }

  absl::StatusOr<std::vector<int>> Present() {
    if (options_.elastic_join && !joined_) {
      P3_ASSIGN_OR_RETURN(const uint64_t first, elastic_.AwaitJoin(absl::Now() + wait_bound()));
      iteration_ = static_cast<int64_t>(first);
      joined_ = true;
    }
    if (options_.initial_workers > 0) P3_RETURN_IF_ERROR(Sync());
    return elastic_.PresentAt(static_cast<uint64_t>(iteration_));
  }

  std::vector<MembershipChange> changes() const { return elastic_.changes(); }

  void Shutdown() {
    // The staging thread hands gradients to the transports: it stops first.
    if (staging_ != nullptr) staging_->Shutdown();
    for (auto& transport : transports_) transport->Shutdown();
    hooks_.reset();
  }

  // TransportListener: called on the transports' threads.
  void OnBuffers(int server, uint64_t round, absl::string_view values) override {
    if (absl::Status s = buffer_exchange_.Arrived(server, round, values); !s.ok()) Fail(s);
  }

  // A server forwards rank 0's re-plan, ahead of its values of the iteration it starts
  // at. Every server forwards the same one.
  void OnReplan(int server, uint64_t from_iteration, int64_t slice_params) override {
    if (absl::Status s = replans_.Forwarded(server, from_iteration, slice_params); !s.ok()) {
      Fail(s);
    }
  }

  void OnMembership(int server, uint64_t from, const std::vector<int>& present) override {
    if (absl::Status s = elastic_.Forwarded(server, from, present); !s.ok()) Fail(s);
  }

  void OnFailure(int server, const absl::Status& status) override { Fail(status); }

  void OnStall(int server, uint64_t iteration, const std::vector<int>& missing_ranks) override {
    stall_hints_.Note(server, iteration, missing_ranks);
  }

  // On `server`'s reader thread, its link over: waits up to abort_grace for a failure
  // of this worker's own, which would be the cause (WorkerOptions::abort_grace).
  void OnAbort(int server, const absl::Status& status) override {
    if (failure_.Abort(status, options_.abort_grace)) AbortWaits(status);
  }

  int64_t iteration() const { return iteration_; }
  const SlicePlan& plan() const { return core_.plan(); }
  int replans() const { return replans_.count(); }

  WorkerStats stats() const {
    WorkerStats s;
    for (const auto& transport : transports_) {
      s.bytes_sent += transport->bytes_sent();
      s.bytes_received += transport->bytes_received();
      s.bytes_shared += transport->bytes_shared();
    }
    s.forward_wait = waits_.total();
    return s;
  }

 private:
  // The start of a backward pass, between the forward pass and the first gradient.
  absl::Status Arm(double loss_scale, const torch::Device& device) {
    P3_RETURN_IF_ERROR(failure());
    if (!(loss_scale > 0) || !std::isfinite(loss_scale)) {
      return absl::InvalidArgumentError(absl::StrCat("loss_scale: ", loss_scale,
                                                     "; allowed: finite and > 0"));
    }
    // Every gradient of the last iteration is on its way (the forward pass needed them).
    if (staging_ != nullptr) staging_->Drain();
    NoteReached();
    // A re-plan takes effect here: the forward pass has every value of this iteration (the
    // old plan's last), and no gradient of it has been sent.
    if (absl::Status s = replans_.SwitchIfDue(static_cast<uint64_t>(iteration_)).status();
        !s.ok()) {
      return Fail(s);
    }
    ResetPacks();
    backward_spans_.Begin(absl::Now());
    loss_scale_ = loss_scale;
    if (loss_scale_ != 1) {
      finite_ = torch::ones({}, torch::TensorOptions().dtype(torch::kBool).device(device));
    }
    armed_ = true;
    hooks_->Begin();
    return absl::OkStatus();
  }

  // The end of a backward pass whose gradients the hooks have.
  absl::Status EndBackward() {
    if (tracing()) TraceBackward(backward_spans_.End(absl::Now()));
    // Synchronous training needs every parameter's gradient from every worker.
    if (absl::Status missing = hooks_->CheckEveryGradient(options_.rank, iteration_);
        !missing.ok()) {
      return Fail(missing);
    }
    if (!traits_.overlap_backward) {
      if (staging_ != nullptr) staging_->Drain();  // every gradient in the host buffer
      for (const Slice& slice : core_.plan().slices()) SendGradient(slice.id, iteration_);
    }
    ++iteration_;
    elastic_.Reached(static_cast<uint64_t>(iteration_));
    return failure();
  }

  void TraceBackward(std::optional<BackwardSpans::Span> span) {
    if (!span) return;
    options_.trace->Complete(compute_track_, "backward " + model_->BlockName(span->block),
                             "backward", span->start, span->end,
                             absl::StrCat("\"iteration\": ", iteration_));
  }

  // Autograd hook: runs on the training thread as soon as tensor `t`'s gradient exists.
  void OnGradient(int t, const torch::Tensor& scaled) {
    torch::Tensor grad = scaled;
    if (loss_scale_ != 1) {
      // Back to the true gradient (exact for a power-of-two scale), and on the device a
      // running "all finite" without a host wait.
      torch::NoGradGuard no_grad;
      grad = scaled * (1.0 / loss_scale_);
      finite_.logical_and_(torch::isfinite(grad).all());
    }
    if (tracing()) TraceBackward(backward_spans_.OnGradient(tensor_block_[t], absl::Now()));
    const SlicePlan& plan = core_.plan();
    const auto [first, last] = plan.tensor_slices(t);
    const bool packed = plan.is_pack(first);
    if (staging_ != nullptr) {
      // The slices go once their own copy is done, from the staging thread; the plan cannot
      // change before Drain() (Backward's start), and the iteration is this one.
      const int64_t iteration = iteration_;
      staging_->GradientToHost(plan.tensor_offset(t), grad, [=, first = first, last = last] {
        if (traits_.overlap_backward) SendReady(first, last, packed, iteration);
      });
      return;
    }
    // Our own Backward (not armed_): End() drops autograd's tensor before anyone sees it. A
    // pack is sent from the gradient buffer, where its tensors lie side by side.
    buffers_.SetGradient(t, plan.tensor_offset(t), grad, /*alias=*/!armed_ && !packed);
    if (!traits_.overlap_backward) return;
    SendReady(first, last, packed, iteration_);
  }

  // Tensor gradient in: sends its slices [first, last), or its pack `first` once the pack's
  // last gradient is in.
  void SendReady(int first, int last, bool packed, int64_t iteration) {
    if (!packed) {
      for (int id = first; id < last; ++id) SendGradient(id, iteration);
    } else if (pack_pending_[first].fetch_sub(1, std::memory_order_acq_rel) == 1) {
      SendGradient(first, iteration);
    }
  }

  // Before a backward pass (and after a re-plan): every pack waits for all its tensors.
  void ResetPacks() {
    const SlicePlan& plan = core_.plan();
    if (plan.options().pack_params < 1) return;
    if (pack_pending_.size() != plan.slices().size()) {
      pack_pending_ = std::vector<std::atomic<int>>(plan.slices().size());
    }
    for (const Slice& s : plan.slices()) pack_pending_[s.id] = s.last_tensor - s.tensor + 1;
  }

  void SendGradient(int slice_id, int64_t iteration) {
    const SlicePlan& plan = core_.plan();
    const int t = plan.slices()[slice_id].tensor;
    absl::StatusOr<ToServer> m = core_.Gradient(slice_id, static_cast<uint64_t>(iteration),
                                                buffers_.gradient(t, plan.tensor_offset(t)));
    if (!m.ok()) {
      Fail(m.status());
      return;
    }
    transports_[m->server]->Send(*m);
  }

  // Rank 0 holds every value of this iteration: the servers that own no slice hear it.
  void NoteReached() {
    if (options_.rank != 0 || reached_ >= iteration_) return;
    SendReached(transports_, static_cast<uint64_t>(reached_ = iteration_));
  }

  bool tracing() const { return options_.trace != nullptr && options_.trace->enabled(); }

  // How long a wait for the servers may last: a peer that died may be awaited for
  // rejoin_timeout on top of the usual bound.
  absl::Duration wait_bound() const { return options_.peer_timeout + options_.rejoin_timeout; }

  // Records `status` as the worker's failure unless there is one already; returns the
  // failure in force (the first), which every later call reports.
  absl::Status Fail(const absl::Status& status) {
    if (failure_.Record(status)) AbortWaits(failure_.Get());
    return failure_.Get();
  }

  // Wakes every wait of the training thread with the run's failure.
  void AbortWaits(const absl::Status& status) {
    tracker_.Abort(status);
    buffer_exchange_.Abort(status);
    elastic_.Abort(status);
  }

  absl::Status failure() const { return failure_.Get(); }

  const WorkerOptions options_;
  const ModeTraits traits_;
  std::shared_ptr<models::BlockModel> model_;
  std::vector<torch::Tensor> params_;  // forward order; views into buffers_
  FlatBuffers buffers_;
  // The one record of each slice's version; the core marks it, the waits read it.
  VersionTracker tracker_;
  // The protocol state and the current plan; reads and writes the flat buffers.
  WorkerCore core_;
  // On a device: the parameters there, and the copies to and from buffers_ (null on the
  // CPU); [offset, count) of each block's values in the flat buffers.
  std::unique_ptr<DeviceStaging> staging_;
  std::vector<std::pair<int64_t, int64_t>> block_spans_;
  // The last Backward's loss scale, and whether its gradients were all finite (a scalar on
  // the device; defined once a Backward had a loss scale).
  double loss_scale_ = 1;
  torch::Tensor finite_;
  const std::vector<int> tensor_block_;  // block of each tensor
  const int compute_track_;              // registered before the waits' track
  // What the servers said they wait for (Stall messages), for waits_' errors.
  StallHints stall_hints_;
  ParameterWaits waits_;
  Replans replans_;
  BufferExchange buffer_exchange_;
  ElasticMembership elastic_;
  bool joined_ = false;  // a joining worker has taken its first iteration (Present())
  std::unique_ptr<GradientHooks> hooks_;
  BackwardSpans backward_spans_;  // the training thread's
  int64_t iteration_ = 0;
  int64_t reached_ = 0;  // the last iteration NoteReached() told
  int64_t all_ready_ = -1;  // the iteration whose blocks are all ready (no forward overlap)
  bool armed_ = false;      // from Arm() to the end of that backward pass
  // Per slice of the plan in force: a pack's tensors whose gradient is still to come in
  // this backward pass (ResetPacks). The staging thread counts down too.
  std::vector<std::atomic<int>> pack_pending_;

  // The first failure; every call after it reports that one.
  FirstFailure failure_;

  // The send order of the streams that cross the network, and one transport per server
  // (declared last: they use everything above until they are shut down).
  std::unique_ptr<SendQueue<Upstream>> send_queue_;
  std::vector<std::unique_ptr<Transport>> transports_;
};

absl::StatusOr<std::unique_ptr<Worker>> Worker::Create(const WorkerOptions& options,
                                                       std::shared_ptr<models::BlockModel> model) {
  P3_RETURN_IF_ERROR(CheckWorkerOptions(options));
  // A parameter outside the blocks would train unsynchronised: refuse it, naming it.
  P3_RETURN_IF_ERROR(models::CheckBlocksCoverParameters(*model));
  P3_ASSIGN_OR_RETURN(ModelSignature m, DescribeModel(options, *model));
  P3_ASSIGN_OR_RETURN(SlicePlan plan, SlicePlan::Create(m.entries, m.signature.plan));
  auto impl = std::make_unique<Impl>(options, std::move(model), std::move(plan),
                                     std::move(m.params), std::move(m.names));
  P3_RETURN_IF_ERROR(impl->Stage());
  P3_RETURN_IF_ERROR(impl->Connect(m.signature));
  return std::unique_ptr<Worker>(new Worker(std::move(impl)));
}

Worker::Worker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Worker::~Worker() = default;
absl::StatusOr<torch::Tensor> Worker::Forward(const torch::Tensor& input) {
  return impl_->Forward(input);
}
absl::Status Worker::Backward(const torch::Tensor& loss, double loss_scale) {
  return impl_->Backward(loss, loss_scale);
}
bool Worker::gradients_finite() const { return impl_->gradients_finite(); }
absl::Status Worker::Sync() { return impl_->Sync(); }
absl::Status Worker::WaitForBlock(int64_t block) { return impl_->WaitForBlock(block); }
absl::Status Worker::ArmGradients() { return impl_->ArmGradients(); }
absl::Status Worker::EndIteration() { return impl_->EndIteration(); }
absl::Status Worker::Finish() { return impl_->Finish(); }
absl::Status Worker::AverageBuffers() { return impl_->AverageBuffers(); }
int64_t Worker::iteration() const { return impl_->iteration(); }
WorkerStats Worker::stats() const { return impl_->stats(); }
const SlicePlan& Worker::plan() const { return impl_->plan(); }
absl::StatusOr<uint64_t> Worker::RequestReplan(int64_t slice_params) {
  return impl_->RequestReplan(slice_params);
}
int Worker::replans() const { return impl_->replans(); }
absl::StatusOr<uint64_t> Worker::RequestMembership(const std::vector<int>& present) {
  return impl_->RequestMembership(present);
}
absl::StatusOr<std::vector<int>> Worker::Present() { return impl_->Present(); }
std::vector<MembershipChange> Worker::MembershipChanges() const { return impl_->changes(); }

}  // namespace p3
