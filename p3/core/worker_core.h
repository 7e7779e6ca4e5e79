// The protocol state of one worker, without any transport: what it has sent and received
// of each slice, and what it must send next. The worker's counterpart of ParameterShard.
//
// The worker asks it for the messages to send (Start, Resume, Gradient); the transports
// (worker/transport.h) hand it what the servers send (TransportCore: Params, Ack) and
// send what it answers. Every call validates its input and returns an error for a message
// that does not fit (unknown slice, slice of another server, a part that does not continue
// the slice's previous parts, a stale or duplicate version, an unexpected Ack, ...) without
// changing any state; the run then ends with that error.
//
// Protocol, per slice s (see docs/protocol.md):
//   TakePlan(plans)        -> the slices the servers' Welcomes name (after a re-plan)
//   Start(start versions)  -> Init of every slice (rank 0 of a fresh run only)
//   Resume(current versions) -> Resume{m} to every server (a restarted worker instead of
//                             Start; m is the oldest version any server holds)
//   Gradient(s, t)         -> Gradient{s, t} to s's server
//   Params(s, v, part)     -> the part copied into the parameters; with the last part the
//                             slice holds version v (the VersionTracker is told)
//   Ack(s, t)              -> Pull{s, t+1} (modes without values on push; refused otherwise)
//
// The values stay in the caller's flat buffers: a message to send is a small descriptor
// that points at them and says how they are encoded (p3/core/to_server.h). The core owns
// the slice plan, and every plan a re-plan replaced; the VersionTracker is the one record
// of the version each slice holds.
//
// Example:
//   VersionTracker tracker(plan.slices().size());
//   WorkerCore core({.rank = 0, .num_servers = 2, .values_on_push = true}, plan,
//                   params.data(), grads.data(), &tracker);
//   absl::StatusOr<std::vector<ToServer>> out = core.Start({0, 0});   // after the Welcomes
//   for (const ToServer& m : *out) transports[m.server]->Send(m);
//   absl::StatusOr<ToServer> g = core.Gradient(/*slice_id=*/3, /*iteration=*/0);
//   absl::StatusOr<bool> complete =                                   // a reader thread
//       core.Params(/*server=*/1, /*slice_id=*/3, /*version=*/1, /*offset=*/0, bytes, size);
//
// Thread-safe: the transports' threads and the training thread may call it concurrently;
// calls for one slice are serialised by that slice's lock.
#ifndef P3_P3_CORE_WORKER_CORE_H_
#define P3_P3_CORE_WORKER_CORE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "p3/core/slice_plan.h"
#include "p3/core/to_server.h"
#include "p3/core/transport_core.h"
#include "p3/core/version_tracker.h"
#include "p3/core/wire_dtype.h"

namespace p3 {

struct WorkerCoreOptions {
  // This worker's rank; rank 0 provides the initial values. Default: 0.
  int rank = 0;
  // Number of servers; must match the plan's. Default: 1.
  int num_servers = 1;
  // The servers return updated values on the push (else Ack, then the worker Pulls).
  // Default: true.
  bool values_on_push = true;
  // How gradients go up and values come down (scheduling.wire_dtype); initial values are
  // float32 whatever it is. Default: float32.
  WireDType wire_dtype = WireDType::kFloat32;
};

class WorkerCore : public TransportCore {
 public:
  // The flat buffers `params` (written by Params, read by Init messages) and `grads` (read
  // by Gradient messages) of plan.total_params() floats each, and `tracker` (told of every
  // complete slice) must outlive the core. Both buffers null: a core without values (the
  // simulator), whose messages point at none. `grads` alone null: every Gradient() call
  // says where its gradient lies (the worker: worker/flat_buffers.h).
  WorkerCore(const WorkerCoreOptions& options, SlicePlan plan, float* params, const float* grads,
             VersionTracker* tracker);

  WorkerCore(const WorkerCore&) = delete;
  WorkerCore& operator=(const WorkerCore&) = delete;

  // Before Start or Resume: takes the plan the servers' slices are cut in (their Welcomes:
  // Transport::plan_in_force), when a re-plan, or a restored checkpoint taken under one,
  // has replaced the plan this core was made with (docs/protocol.md, "Rejoining after a
  // re-plan"). `versions` are those Start or Resume is then given: the worker starts or
  // resumes at m, their smallest; a server at UINT64_MAX owns no slice and its plan is
  // not looked at. Every other server must name the same plan, in force since m at the
  // latest; the core is then cut as it says (slice_params 0: the plan the core was made
  // with) and the tracker reset to its slices. Refused (FailedPrecondition, changing
  // nothing) when a server's plan took effect after m — a re-plan that had switched on
  // some servers and not yet on others when the dead process stopped: the switched ones
  // no longer hold the old plan's values of m — or when the servers name different
  // plans; InvalidArgument for a plan the core's cannot become (no ownership stripes).
  absl::Status TakePlan(const std::vector<uint64_t>& versions,
                        const std::vector<PlanInForce>& plans);

  // The init handshake, once every server has welcomed this worker with the version it
  // starts from (0, or a checkpoint's iteration). The servers must agree; returns the
  // Init of every slice for rank 0 of a fresh run, else nothing. Once only.
  absl::StatusOr<std::vector<ToServer>> Start(const std::vector<uint64_t>& start_versions);

  // Instead of Start, for a process that replaces a dead worker of the same rank: every
  // server welcomed it as rejoined with its oldest slice version (UINT64_MAX: it owns no
  // slice). The worker resumes at the smallest, m: returns Resume{m} for every server,
  // which answers with version m of each of its slices. start_version() is then m, and
  // nothing else differs from a worker that started at m. Once only.
  absl::StatusOr<std::vector<ToServer>> Resume(const std::vector<uint64_t>& current_versions);

  // Resume() when some servers did not welcome the process as rejoined (`rejoined[s]`
  // false: server s is a new process, restarted from a checkpoint or from nothing, whose
  // `versions[s]` is its start_version; for the others it is the current_version). The
  // worker resumes at the smallest version m, which every new server must start at
  // (else FailedPrecondition, naming them); Resume{m} goes to the rejoined servers, and
  // for rank 0 at m = 0 the Init of the new servers' slices. An old server that cannot
  // go back to m refuses the Resume and fails the run: it must restart as well. With
  // every server rejoined this is Resume(); with none, Start(). Once only.
  absl::StatusOr<std::vector<ToServer>> Resume(const std::vector<uint64_t>& versions,
                                               const std::vector<bool>& rejoined);

  // The gradient of `slice_id` at `iteration` is complete in the gradient buffer: the
  // message to send, pointing at it, with its encoding (float16: the slice's scale, read
  // from the gradient now). Refused before Start() or for a slice outside the plan.
  // `tensor_gradient`, when not null, is where the gradient of the slice's whole tensor
  // lies instead (autograd's own tensor, not copied into the buffer: worker/flat_buffers.h);
  // it must stay unchanged as the buffer would (to_server.h, Upstream::values).
  absl::StatusOr<ToServer> Gradient(int slice_id, uint64_t iteration,
                                    const float* tensor_gradient = nullptr);

  // TransportCore: a part of `version` of `slice_id` from `server`: `values.bytes` bytes
  // in the wire's dtype for the slice's values from `offset` on, decoded (float32: copied)
  // once, straight into the parameters (the segments may be cut at any byte); float16 with
  // the message's scale exponent, which must be there exactly on a float16 wire. Or
  // `values.in_place_count` values the server has written into the parameters itself
  // (shared memory, p3/core/shared_memory.h): the same checks and bookkeeping, no copy.
  // Parts must arrive in order, without gaps or overlap, all of one version, and each
  // version newer than the one the slice holds. Returns true when this part completed the
  // slice, which the tracker then holds at `version`.
  absl::StatusOr<bool> Params(int server, int64_t slice_id, uint64_t version, uint64_t offset,
                              const ReceivedValues& values) override;

  // The same for a part of `size` bytes at `bytes` (need not be aligned).
  absl::StatusOr<bool> Params(int server, int64_t slice_id, uint64_t version, uint64_t offset,
                              const char* bytes, size_t size,
                              std::optional<int> scale_exponent = {});

  // The same for `count` values in place.
  absl::StatusOr<bool> ParamsInPlace(int server, int64_t slice_id, uint64_t version,
                                     uint64_t offset, int64_t count);

  // TransportCore: `server` acknowledges the gradient of `slice_id` at `iteration`.
  // Without values on push: the Pull of version iteration+1 to send. An Ack for a gradient
  // not sent, or acknowledged already, or in a mode with values on push, is refused.
  absl::StatusOr<ToServer> Ack(int server, int64_t slice_id, uint64_t iteration) override;

  // The version the servers started from (Resume: where this worker resumed); 0 before.
  uint64_t start_version() const;

  // Re-plan (docs/protocol.md, "Re-plan"): from now on slices are those of `plan` (same
  // tensors, same ownership stripes), every one holding `version`, and the tracker is
  // reset to the new slices at `version`. Call it between the forward pass of iteration
  // `version`, which needs every slice at `version`, and the first gradient of that
  // iteration. Refused, changing nothing, unless every slice of the current plan holds
  // exactly `version` with no part of a later one arriving and no Ack awaited, and `plan`
  // has the current plan's tensors, servers and stripes. The replaced plan stays alive
  // (references from plan() remain valid).
  absl::Status Replan(SlicePlan plan, uint64_t version);

  // The current plan; valid until the core is destroyed.
  const SlicePlan& plan() const;

 private:
  struct SliceState {
    absl::Mutex mu;
    // Values of the version arriving in parts received so far, and that version.
    int64_t received ABSL_GUARDED_BY(mu) = 0;
    uint64_t receiving_version ABSL_GUARDED_BY(mu) = 0;
    // The iteration of the gradient sent and not yet acknowledged (Ack modes).
    std::optional<uint64_t> awaiting_ack ABSL_GUARDED_BY(mu);
  };

  // Params() of `size` bytes given as `segments` (null: the values are in place already).
  absl::StatusOr<bool> Receive(int server, int64_t slice_id, uint64_t version, uint64_t offset,
                               const std::vector<absl::string_view>* segments, size_t size,
                               std::optional<int> scale_exponent);
  // Validates slice id (and ownership by `server` when >= 0).
  absl::Status CheckSlice(int server, int64_t slice_id, const char* what) const
      ABSL_SHARED_LOCKS_REQUIRED(plan_mu_);
  // The descriptor of a message about `slice_id`; `values`: with the slice's values from
  // the buffer of `kind` (kInit: parameters, kGradient: gradient).
  // `tensor_gradient`: kGradient only, as Gradient() takes it.
  ToServer Message(Upstream::Kind kind, int slice_id, bool values,
                   const float* tensor_gradient = nullptr) const
      ABSL_SHARED_LOCKS_REQUIRED(plan_mu_);
  bool started() const;
  const SlicePlan& current_plan() const ABSL_SHARED_LOCKS_REQUIRED(plan_mu_) {
    return *plans_.back();
  }

  const WorkerCoreOptions options_;
  float* const params_;
  const float* const grads_;
  VersionTracker* const tracker_;
  // The plans, the current one last, and the current plan's slice states: replaced by
  // Replan() (writer), read by every call about a slice (reader). Old plans are kept so
  // that references handed out by plan() stay valid.
  mutable absl::Mutex plan_mu_;
  std::vector<std::unique_ptr<const SlicePlan>> plans_ ABSL_GUARDED_BY(plan_mu_);
  std::vector<std::unique_ptr<SliceState>> slices_ ABSL_GUARDED_BY(plan_mu_);

  mutable absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t start_version_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace p3

#endif  // P3_P3_CORE_WORKER_CORE_H_
