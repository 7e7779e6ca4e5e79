#include "worker/worker.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "models/model.h"
#include "p3/core/cluster_signature.h"
#include "p3/core/send_queue.h"
#include "p3/core/shared_memory.h"
#include "p3/core/stall_report.h"
#include "p3/base/status_macros.h"
#include "p3/core/version_tracker.h"
#include "p3/core/worker_core.h"
#include "worker/server_connection.h"
#include "worker/transport.h"

namespace p3 {

class Worker::Impl : public TransportListener {
 public:
  Impl(const WorkerOptions& options, std::shared_ptr<models::BlockModel> model, SlicePlan plan,
       std::vector<torch::Tensor> params, std::vector<std::string> names)
      : options_(options),
        traits_(TraitsOf(options.mode)),
        model_(std::move(model)),
        plan_(std::make_unique<SlicePlan>(std::move(plan))),
        params_(std::move(params)),
        names_(std::move(names)),
        got_gradient_(params_.size(), false),
        tracker_(static_cast<int>(plan_->slices().size())) {}

  ~Impl() override { Shutdown(); }

  // Moves the parameters into one flat buffer, hooks the gradients, connects, and takes
  // part in the init handshake.
  absl::Status Setup(const ClusterSignature& sig) {
    AllocateFlatBuffers();
    {
      torch::NoGradGuard no_grad;
      for (size_t t = 0; t < params_.size(); ++t) {
        torch::Tensor view = flat_params_.narrow(0, plan_->tensor_offset(t), params_[t].numel())
                                 .view(params_[t].sizes());
        view.copy_(params_[t]);
        params_[t].set_data(view);
      }
    }
    core_ = std::make_unique<WorkerCore>(
        WorkerCoreOptions{.rank = options_.rank,
                          .num_servers = static_cast<int>(options_.servers.size()),
                          .values_on_push = traits_.values_on_push,
                          .wire_dtype = options_.wire_dtype},
        plan_.get(), flat_params_.data_ptr<float>(), flat_grads_.data_ptr<float>(), &tracker_);
    for (size_t t = 0; t < params_.size(); ++t) {
      const int tensor = static_cast<int>(t);
      hooks_.push_back(params_[t].register_hook(
          [this, tensor](const torch::Tensor& grad) { OnGradient(tensor, grad); }));
    }
    SetBlockSlices();
    int t = 0;
    for (int64_t b = 0; b < model_->num_blocks(); ++b) {
      const int first_tensor = t;
      t += static_cast<int>(model_->BlockParameters(b).size());
      for (int i = first_tensor; i < t; ++i) tensor_block_.push_back(static_cast<int>(b));
    }
    if (tracing()) {
      compute_track_ = options_.trace->Track("compute");
      wait_track_ = options_.trace->Track("wait for parameters");
    }

    // The streams to remote servers share this machine's link: one send order for all.
    link_ = std::make_unique<SendQueue<Upstream>>(
        SendQueueOptions{.priority = traits_.priority, .credit_bytes = options_.credit_bytes});
    for (int s = 0; s < static_cast<int>(options_.servers.size()); ++s) {
      ConnectionOptions copts;
      copts.server_index = s;
      copts.address = options_.servers[s];
      copts.rank = options_.rank;
      copts.token = options_.token;
      copts.priority = traits_.priority;
      copts.link = link_.get();
      copts.credit_bytes = options_.credit_bytes;
      copts.peer_timeout = options_.peer_timeout;
      copts.max_message_params = options_.max_message_params;
      copts.trace = options_.trace;
      copts.tls = options_.tls;
      copts.tls_ca_pem = options_.tls_ca_pem;
      copts.tls_server_name = options_.tls_server_name;
      copts.rejoin = options_.rejoin;
      if (shared_ != nullptr && std::find(options_.shared_memory_servers.begin(),
                                          options_.shared_memory_servers.end(),
                                          s) != options_.shared_memory_servers.end()) {
        copts.shared_memory_name = shared_->name();
        copts.shared_memory_nonce = shared_->nonce();
      }
      if (options_.before_gradient_write) {
        copts.before_write = [hook = options_.before_gradient_write, s](const Upstream& up) {
          if (up.kind == Upstream::Kind::kGradient) {
            hook(s, up.slice_id, static_cast<int64_t>(up.iteration));
          }
        };
      }
      P3_ASSIGN_OR_RETURN(std::unique_ptr<ServerConnection> conn,
                          ServerConnection::Open(copts, sig, core_.get(), this));
      if (!copts.shared_memory_name.empty() && !conn->shared_memory()) {
        std::cerr << "worker " << options_.rank << ": server " << s
                  << " did not map the shared memory (see its log); values go over the stream"
                  << std::endl;
      }
      links_.push_back(std::move(conn));
    }
    // Every server has answered: no one else needs the name.
    if (shared_ != nullptr) shared_->Unlink();
    std::vector<uint64_t> starts;
    std::vector<bool> rejoined;
    std::string new_servers;
    for (int s = 0; s < static_cast<int>(links_.size()); ++s) {
      const bool r = options_.rejoin && links_[s]->rejoined();
      rejoined.push_back(r);
      starts.push_back(r ? links_[s]->current_version() : links_[s]->start_version());
      if (options_.rejoin && !r) {
        absl::StrAppend(&new_servers, new_servers.empty() ? "" : ", ", s, " (at iteration ",
                        links_[s]->start_version(), ")");
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
    P3_ASSIGN_OR_RETURN(std::vector<ToServer> inits,
                        options_.rejoin ? core_->Resume(starts, rejoined) : core_->Start(starts));
    iteration_ = static_cast<int64_t>(core_->start_version());
    for (const ToServer& m : inits) links_[m.server]->Send(m);
    return absl::OkStatus();
  }

  absl::StatusOr<torch::Tensor> Forward(const torch::Tensor& input) {
    const uint64_t version = static_cast<uint64_t>(iteration_);
    torch::Tensor x = input;
    try {
      if (!traits_.overlap_forward) {
        P3_RETURN_IF_ERROR(WaitFor(0, plan_->slices().size(), version));
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
    // A re-plan takes effect here: the forward pass has every value of this iteration (the
    // old plan's last), and no gradient of it has been sent.
    P3_RETURN_IF_ERROR(MaybeSwitchPlan());
    try {
      collecting_ = true;
      got_gradient_.assign(params_.size(), false);
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
    // Synchronous training needs every parameter's gradient from every worker: one the
    // loss does not reach would leave the servers waiting for it until peer_timeout.
    for (size_t t = 0; t < params_.size(); ++t) {
      if (!got_gradient_[t]) {
        const absl::Status unused = absl::FailedPreconditionError(absl::StrCat(
            "worker ", options_.rank, ": parameter ", names_[t], " received no gradient in ",
            "iteration ", iteration_, " (the loss does not depend on it); every parameter of ",
            "the blocks is synchronised each iteration: leave it out of the blocks"));
        Fail(unused);
        return unused;
      }
    }
    if (!traits_.overlap_backward) {
      for (const Slice& slice : plan_->slices()) SendGradient(slice);
    }
    ++iteration_;
    return failure();
  }

  absl::Status Sync() {
    return WaitFor(0, plan_->slices().size(), static_cast<uint64_t>(iteration_));
  }

  absl::Status Finish() {
    P3_RETURN_IF_ERROR(Sync());
    const absl::Time deadline = absl::Now() + wait_bound();
    absl::Status result;
    for (auto& link : links_) {
      absl::Status s = link->Close(deadline);
      if (result.ok()) result = s;
    }
    return result;
  }

  absl::Status AverageBuffers() {
    P3_RETURN_IF_ERROR(failure());
    std::vector<torch::Tensor> buffers;
    int64_t n = 0;
    for (const torch::Tensor& b : model_->buffers()) {
      if (b.scalar_type() != torch::kFloat32) continue;
      buffers.push_back(b);
      n += b.numel();
    }
    if (buffers.empty()) return absl::OkStatus();
    auto mine = std::make_shared<std::vector<float>>();
    mine->reserve(static_cast<size_t>(n));
    for (const torch::Tensor& b : buffers) {
      const torch::Tensor c = b.detach().contiguous();
      mine->insert(mine->end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
    }
    // The round is the iteration: the same on every worker at the same point of the run.
    const uint64_t round = static_cast<uint64_t>(iteration_);
    {
      absl::MutexLock lock(&mu_);
      buffer_round_ = round;
      buffer_mean_.reset();
    }
    // After this iteration's gradients, which the other workers need first.
    links_[0]->Send(ToServer{.server = 0,
                             .message = Upstream{.kind = Upstream::Kind::kBuffers,
                                                 .iteration = round,
                                                 .buffers = mine},
                             .priority = std::numeric_limits<int64_t>::max() - 1,
                             .bytes = n * static_cast<int64_t>(sizeof(float))});
    std::vector<float> mean;
    {
      absl::MutexLock lock(&mu_);
      auto arrived = [this] {
        mu_.AssertHeld();
        return buffer_mean_.has_value() || !failure_.ok();
      };
      if (!mu_.AwaitWithTimeout(absl::Condition(&arrived), wait_bound())) {
        return absl::DeadlineExceededError(absl::StrCat(
            "worker ", options_.rank, ": waited ", absl::FormatDuration(wait_bound()),
            " for the mean of the workers' buffers (round ", round, ") from server 0"));
      }
      P3_RETURN_IF_ERROR(failure_);
      mean = *std::move(buffer_mean_);
      buffer_mean_.reset();
    }
    if (static_cast<int64_t>(mean.size()) != n) {
      const absl::Status wrong = absl::InternalError(
          absl::StrCat("server 0 sent ", mean.size(), " buffer values; this worker has ", n));
      Fail(wrong);
      return wrong;
    }
    torch::NoGradGuard no_grad;
    int64_t at = 0;
    for (torch::Tensor& b : buffers) {
      b.copy_(torch::from_blob(mean.data() + at, b.sizes(), torch::kFloat32));
      at += b.numel();
    }
    return absl::OkStatus();
  }

  void Shutdown() {
    for (auto& link : links_) link->Shutdown();
    for (size_t t = 0; t < hooks_.size(); ++t) params_[t].remove_hook(hooks_[t]);
    hooks_.clear();
  }

  // TransportListener: called on the transports' reader threads.
  void OnParams(int server, int64_t slice_id, uint64_t version, uint64_t offset,
                const ReceivedValues& values) override {
    absl::StatusOr<bool> complete =
        values.in_place_count != 0
            ? core_->ParamsInPlace(server, slice_id, version, offset, values.in_place_count)
            : core_->Params(server, slice_id, version, offset, values.segments, values.bytes,
                            values.scale_exponent);
    if (!complete.ok()) Fail(complete.status());
  }

  void OnAck(int server, int64_t slice_id, uint64_t iteration) override {
    absl::StatusOr<ToServer> pull = core_->Ack(server, slice_id, iteration);
    if (!pull.ok()) {
      Fail(pull.status());
      return;
    }
    links_[server]->Send(*pull);
  }

  void OnBuffers(int server, uint64_t round, absl::string_view values) override {
    absl::Status wrong;
    {
      absl::MutexLock lock(&mu_);
      if (server != 0 || round != buffer_round_ || buffer_mean_.has_value() ||
          values.size() % sizeof(float) != 0) {
        wrong = absl::InternalError(absl::StrCat("server ", server, " sent buffers of round ",
                                                 round, " (", values.size(),
                                                 " bytes); this worker awaits round ",
                                                 buffer_round_, " from server 0"));
      } else {
        std::vector<float> mean(values.size() / sizeof(float));
        std::memcpy(mean.data(), values.data(), values.size());
        buffer_mean_ = std::move(mean);
      }
    }
    if (!wrong.ok()) Fail(wrong);
  }

  void OnFailure(int server, const absl::Status& status) override { Fail(status); }

  // On `server`'s reader thread, its stream over: waits up to abort_grace for a failure
  // of this worker's own, which would be the cause (WorkerOptions::abort_grace).
  void OnAbort(int server, const absl::Status& status) override {
    {
      absl::MutexLock lock(&mu_);
      if (!failure_.ok()) return;
      if (pending_abort_.empty()) pending_abort_ = std::string(status.message());
      mu_.AwaitWithTimeout(
          absl::Condition(
              +[](absl::Status* failure) { return !failure->ok(); }, &failure_),
          options_.abort_grace);
      if (!failure_.ok()) return;  // this worker's own failure came first: reported
      failure_ = status;
    }
    tracker_.Abort(status);
  }

  int64_t iteration() const { return iteration_; }
  const SlicePlan& plan() const { return *plan_; }

  absl::StatusOr<uint64_t> RequestReplan(int64_t slice_params) {
    P3_RETURN_IF_ERROR(failure());
    if (options_.rank != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("worker ", options_.rank, ": only worker 0 re-plans"));
    }
    if (plan_->options().granularity != Granularity::kSliced || plan_->options().owner_params < 1) {
      return absl::FailedPreconditionError(
          "a re-plan needs a sliced plan with ownership stripes (WorkerOptions::owner_params)");
    }
    if (!traits_.values_on_push || options_.wire_dtype == WireDType::kFloat16 || options_.rejoin) {
      return absl::FailedPreconditionError(
          "a re-plan needs values on the push, a wire other than float16, and a worker that "
          "has not rejoined");
    }
    P3_RETURN_IF_ERROR(plan_->WithSliceParams(slice_params).status());
    {
      absl::MutexLock lock(&mu_);
      if (requested_from_ > static_cast<uint64_t>(iteration_)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "a re-plan from iteration ", requested_from_, " is pending; this is iteration ",
            iteration_));
      }
    }
    // The next iteration: the servers' slices are below it (its versions need this
    // worker's gradients of the current one, which follow the Replan on every stream).
    const uint64_t from = static_cast<uint64_t>(iteration_) + 1;
    for (int s = 0; s < static_cast<int>(links_.size()); ++s) {
      links_[s]->Send(ToServer{
          .server = s,
          .message = Upstream{.kind = Upstream::Kind::kReplan, .iteration = from,
                              .length = slice_params},
          .priority = std::numeric_limits<int64_t>::min(),
          .tiebreak = 0,
          .bytes = 0});
    }
    {
      absl::MutexLock lock(&mu_);
      requested_from_ = from;
    }
    return from;
  }

  int replans() const { return replans_; }

  // TransportListener: a server forwards rank 0's re-plan, ahead of its values of the
  // iteration it starts at. Every server forwards the same one.
  void OnReplan(int server, uint64_t from_iteration, int64_t slice_params) override {
    // A slow worker may not have reached the first before rank 0 asks for the next: they
    // queue in the order of their iterations (each server forwards them in that order).
    absl::Status wrong;
    {
      absl::MutexLock lock(&mu_);
      auto same = std::find_if(replans_pending_.begin(), replans_pending_.end(),
                               [&](const PendingReplan& p) {
                                 return p.from_iteration == from_iteration;
                               });
      if (same == replans_pending_.end()) {
        if (!replans_pending_.empty() && replans_pending_.back().from_iteration > from_iteration) {
          wrong = absl::InternalError(absl::StrCat(
              "server ", server, " forwarded a re-plan from iteration ", from_iteration,
              " after one from iteration ", replans_pending_.back().from_iteration));
        } else {
          replans_pending_.push_back(PendingReplan{from_iteration, slice_params, {server}});
        }
      } else if (same->slice_params != slice_params) {
        wrong = absl::InternalError(absl::StrCat(
            "server ", server, " forwarded a re-plan to slices of ", slice_params,
            " from iteration ", from_iteration, "; another server forwarded one to ",
            same->slice_params));
      } else if (std::find(same->servers.begin(), same->servers.end(), server) ==
                 same->servers.end()) {
        same->servers.push_back(server);  // (a server may tell a joining worker twice)
      }
    }
    if (!wrong.ok()) Fail(wrong);
  }

  WorkerStats stats() const {
    WorkerStats s;
    for (const auto& link : links_) {
      s.bytes_sent += link->bytes_sent();
      s.bytes_received += link->bytes_received();
      s.bytes_shared += link->bytes_shared();
    }
    s.forward_wait = forward_wait_;
    return s;
  }

 private:
  struct PendingReplan {
    uint64_t from_iteration = 0;
    int64_t slice_params = 0;
    std::vector<int> servers;  // that have forwarded it
  };

  // Slice range of each block of the current plan, for the per-block wait of the forward.
  void SetBlockSlices() {
    block_slices_.clear();
    int t = 0;
    for (int64_t b = 0; b < model_->num_blocks(); ++b) {
      const int first_tensor = t;
      t += static_cast<int>(model_->BlockParameters(b).size());
      block_slices_.emplace_back(plan_->first_slice(first_tensor), plan_->first_slice(t));
    }
  }

  // Switches to the pending re-plan when it starts at the current iteration.
  absl::Status MaybeSwitchPlan() {
    PendingReplan replan;
    {
      absl::MutexLock lock(&mu_);
      if (replans_pending_.empty() ||
          replans_pending_.front().from_iteration > static_cast<uint64_t>(iteration_)) {
        return absl::OkStatus();
      }
      replan = replans_pending_.front();
      replans_pending_.pop_front();
    }
    const int servers = static_cast<int>(links_.size());
    absl::Status wrong;
    if (replan.from_iteration < static_cast<uint64_t>(iteration_)) {
      wrong = absl::InternalError(absl::StrCat("a re-plan from iteration ", replan.from_iteration,
                                               " arrived after that iteration's values"));
    } else if (static_cast<int>(replan.servers.size()) != servers) {
      wrong = absl::InternalError(absl::StrCat("a re-plan from iteration ", replan.from_iteration,
                                               " came from ", replan.servers.size(), " of ", servers,
                                               " servers before their values"));
    } else {
      absl::StatusOr<SlicePlan> next = plan_->WithSliceParams(replan.slice_params);
      if (next.ok()) {
        auto owned = std::make_unique<SlicePlan>(*std::move(next));
        wrong = core_->Replan(owned.get(), replan.from_iteration);
        if (wrong.ok()) {
          // The old plan stays alive: descriptors written before the switch name it.
          old_plans_.push_back(std::move(plan_));
          plan_ = std::move(owned);
          SetBlockSlices();
          ++replans_;
        }
      } else {
        wrong = next.status();
      }
    }
    if (!wrong.ok()) {
      wrong = absl::Status(wrong.code(), absl::StrCat("worker ", options_.rank, ": ", wrong.message()));
      Fail(wrong);
    }
    return wrong;
  }

  // The flat parameter and gradient buffers: in shared memory when a server shares this
  // machine (the tensors keep the mapping alive), else ordinary memory.
  void AllocateFlatBuffers() {
    const int64_t n = plan_->total_params();
    if (!options_.shared_memory_servers.empty()) {
      absl::StatusOr<std::unique_ptr<SharedRegion>> region = SharedRegion::Create(n);
      if (region.ok()) {
        shared_ = std::shared_ptr<SharedRegion>(std::move(*region));
        auto keep = [region = shared_](void*) {};
        const auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
        flat_params_ = torch::from_blob(shared_->params(), {n}, keep, f32);
        flat_grads_ = torch::from_blob(shared_->grads(), {n}, keep, f32);  // zero-filled
        return;
      }
      std::cerr << "worker " << options_.rank << ": " << region.status().message()
                << "; values go over the streams" << std::endl;
    }
    flat_params_ = torch::empty({n}, torch::kFloat32);
    flat_grads_ = torch::zeros({n}, torch::kFloat32);
  }

  absl::Status WaitFor(int first, int last, uint64_t version) {
    const absl::Time start = absl::Now();
    const absl::Time deadline = start + wait_bound();
    absl::Status s;
    // In steps of stall_report, each one over logged with what is still missing.
    for (absl::Time step = start;;) {
      const bool report = options_.stall_report > absl::ZeroDuration();
      if (report) step = std::min(deadline, step + options_.stall_report);
      s = tracker_.WaitFor(first, last, version, report ? step : deadline);
      if (!absl::IsDeadlineExceeded(s) || !report || step >= deadline) break;
      std::cerr << DescribeValueWait(options_.rank, absl::Now() - start, version,
                                     WaitName(first, last),
                                     tracker_.MissingSlices(first, last, version), *plan_)
                << std::endl;
    }
    const absl::Time end = absl::Now();
    forward_wait_ += end - start;
    if (tracing() && end - start > absl::Microseconds(20)) {
      options_.trace->Complete(
          wait_track_, absl::StrCat("wait v", version), "wait", start, end,
          absl::StrCat("\"first_slice\": ", first, ", \"last_slice\": ", last));
    }
    if (absl::IsDeadlineExceeded(s)) {
      return absl::DeadlineExceededError(absl::StrCat("worker ", options_.rank, ": waited ",
                                                      absl::FormatDuration(wait_bound()),
                                                      " for parameters: ", s.message()));
    }
    return s;
  }

  // What [first, last) is, for stall reports: "block 3 (conv2)" or "every block".
  std::string WaitName(int first, int last) const {
    for (int64_t b = 0; b < model_->num_blocks(); ++b) {
      if (block_slices_[b] == std::make_pair(first, last)) {
        return absl::StrCat("block ", b, " (", model_->BlockName(b), ")");
      }
    }
    return "every block";
  }

  // Autograd hook: runs on the training thread as soon as tensor `t`'s gradient exists.
  void OnGradient(int t, const torch::Tensor& grad) {
    if (!collecting_) return;
    got_gradient_[t] = true;
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
    flat_grads_.narrow(0, plan_->tensor_offset(t), grad.numel()).view(grad.sizes()).copy_(grad);
    if (!traits_.overlap_backward) return;
    for (int id = plan_->first_slice(t); id < plan_->first_slice(t + 1); ++id) {
      SendGradient(plan_->slices()[id]);
    }
  }

  void SendGradient(const Slice& slice) {
    absl::StatusOr<ToServer> m = core_->Gradient(slice.id, static_cast<uint64_t>(iteration_));
    if (!m.ok()) {
      Fail(m.status());
      return;
    }
    links_[m->server]->Send(*m);
  }

  bool tracing() const { return options_.trace != nullptr && options_.trace->enabled(); }

  // How long a wait for the servers may last: a peer that died may be awaited for
  // rejoin_timeout on top of the usual bound.
  absl::Duration wait_bound() const { return options_.peer_timeout + options_.rejoin_timeout; }

  void Fail(const absl::Status& status) {
    absl::Status cause = status;
    {
      absl::MutexLock lock(&mu_);
      if (!failure_.ok()) return;
      if (!pending_abort_.empty()) {
        // A server aborted the run a moment ago; this worker's own lost server is the
        // cause, the Abort what followed from it.
        cause = absl::Status(status.code(),
                             absl::StrCat(status.message(), " (then ", pending_abort_,
                                          ", which follows from it)"));
      }
      failure_ = cause;
    }
    tracker_.Abort(cause);
  }

  absl::Status failure() const {
    absl::MutexLock lock(&mu_);
    return failure_;
  }

  const WorkerOptions options_;
  const ModeTraits traits_;
  std::shared_ptr<models::BlockModel> model_;
  // The current plan (replaced by a re-plan, on the training thread) and the ones before.
  std::unique_ptr<SlicePlan> plan_;
  std::vector<std::unique_ptr<SlicePlan>> old_plans_;
  int replans_ = 0;
  std::vector<torch::Tensor> params_;  // forward order
  std::vector<std::string> names_;     // of params_
  std::vector<bool> got_gradient_;     // per tensor, in the current Backward()
  VersionTracker tracker_;
  // Shared memory behind the flat buffers; null when they are private.
  std::shared_ptr<SharedRegion> shared_;
  torch::Tensor flat_params_;
  torch::Tensor flat_grads_;
  // The protocol state; reads and writes the flat buffers, tells the tracker.
  std::unique_ptr<WorkerCore> core_;
  std::vector<unsigned> hooks_;
  std::vector<std::pair<int, int>> block_slices_;  // [first, last) slice ids per block
  std::vector<int> tensor_block_;                  // block of each tensor
  int compute_track_ = 0;
  int wait_track_ = 0;
  absl::Time last_gradient_time_;
  int last_traced_block_ = -1;
  // The send order of the streams that cross the network (declared before links_, which
  // use it until they are destroyed).
  std::unique_ptr<SendQueue<Upstream>> link_;
  std::vector<std::unique_ptr<Transport>> links_;  // one per server
  int64_t iteration_ = 0;
  bool collecting_ = false;
  absl::Duration forward_wait_;

  mutable absl::Mutex mu_;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  // The message of a server's Abort awaiting abort_grace (OnAbort); empty when none.
  std::string pending_abort_ ABSL_GUARDED_BY(mu_);
  // AverageBuffers(): the round awaited (the iteration), and its mean once server 0 has
  // sent it.
  uint64_t buffer_round_ ABSL_GUARDED_BY(mu_) = UINT64_MAX;
  std::optional<std::vector<float>> buffer_mean_ ABSL_GUARDED_BY(mu_);
  // The re-plans the servers forwarded, until they take effect, by iteration; the first
  // iteration of the last one this worker (rank 0) requested.
  std::deque<PendingReplan> replans_pending_ ABSL_GUARDED_BY(mu_);
  uint64_t requested_from_ ABSL_GUARDED_BY(mu_) = 0;
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
  // A parameter outside the blocks would train unsynchronised: refuse it, naming it.
  P3_RETURN_IF_ERROR(models::CheckBlocksCoverParameters(*model));
  const ModeTraits traits = TraitsOf(options.mode);
  ClusterSignature sig;
  sig.num_workers = options.num_workers;
  sig.num_servers = static_cast<int>(options.servers.size());
  sig.plan.granularity = traits.sliced ? Granularity::kSliced : Granularity::kTensor;
  sig.plan.slice_params = options.slice_params;
  sig.plan.owner_params = traits.sliced ? options.owner_params : 0;
  sig.plan.split_threshold = options.split_threshold;
  sig.plan.num_servers = sig.num_servers;
  sig.values_on_push = traits.values_on_push;
  sig.priority = traits.priority;
  sig.wire_dtype = options.wire_dtype;
  std::vector<TensorEntry> entries;
  std::vector<torch::Tensor> params;
  std::vector<std::string> names;
  std::map<const void*, std::string> module_names;
  for (const auto& named : model->named_parameters()) {
    module_names[named.value().unsafeGetTensorImpl()] = named.key();
  }
  for (auto& [name, p] : model->OrderedParameters()) {
    if (p.scalar_type() != torch::kFloat32) {
      return absl::InvalidArgumentError(absl::StrCat("parameter ", name, " is not float32"));
    }
    sig.tensors.push_back({name, p.sizes().vec(), "float32"});
    entries.push_back({name, p.numel()});
    params.push_back(p);
    // For messages: the module's own name of the parameter, with its block slot.
    auto named = module_names.find(p.unsafeGetTensorImpl());
    names.push_back(named == module_names.end() ? name
                                                : absl::StrCat(named->second, " (", name, ")"));
  }
  P3_ASSIGN_OR_RETURN(SlicePlan plan, SlicePlan::Create(entries, sig.plan));
  auto impl = std::make_unique<Impl>(options, std::move(model), std::move(plan), std::move(params),
                                     std::move(names));
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
absl::Status Worker::AverageBuffers() { return impl_->AverageBuffers(); }
int64_t Worker::iteration() const { return impl_->iteration(); }
WorkerStats Worker::stats() const { return impl_->stats(); }
const SlicePlan& Worker::plan() const { return impl_->plan(); }
absl::StatusOr<uint64_t> Worker::RequestReplan(int64_t slice_params) {
  return impl_->RequestReplan(slice_params);
}
int Worker::replans() const { return impl_->replans(); }

}  // namespace p3

