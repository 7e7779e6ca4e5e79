// The state of one parameter server, without any transport: its shard of the
// parameters, their optimizer state, and the aggregation of the workers' gradients.
//
// The transport (server/) feeds it the workers' messages and sends what each call
// returns. Every call validates its input and returns an error for a message that does
// not fit (unknown slice, wrong length, wrong or duplicate iteration, ...) without
// changing any state, so the server can refuse one worker and keep serving the others.
//
// Protocol, per slice s owned by this shard (see docs/protocol.md):
//   Init(rank 0, s, values)        -> version 0 of s to every joined worker
//   Gradient(r, s, t, g) for all r -> mean gradient applied, version t+1 of s to every
//                                     worker (values_on_push), or to those that Pull
//   Pull(r, s, v)                  -> version v of s to r, now or once it exists
//   Rejoin(r), Resume(r, m)        -> a restarted worker r takes its old place: its partial
//                                     gradients are dropped, it gets version m of every slice
//                                     (a slice already at m+1: its previous values) and its
//                                     gradient of m for such a slice is answered, not summed;
//                                     after a re-plan it takes the plan in force first
//                                     (plan_in_force(), sent in the Welcome)
//   ChangeMembership(0, T, P)      -> elastic runs: from iteration T on, the gradients of
//                                     the ranks in P are summed and divided by |P|, and
//                                     version T on goes to them (docs/reliability.md,
//                                     "Elastic membership")
//
// Example:
//   ParameterShard shard({.server_index = 0, .num_workers = 2});
//   absl::StatusOr<std::vector<ToWorker>> out = shard.Join(signature, /*rank=*/0);
//   out = shard.Gradient(/*rank=*/1, /*slice_id=*/3, /*iteration=*/0, values, n);
//   for (const ToWorker& m : *out) transport.Send(m);
//
// Thread-safe: calls for different workers may run concurrently.
//
// One class, its definitions in a file per concept:
//   parameter_shard.cc     membership (Join, Finish), the lookups every call starts with,
//                          accessors, the model buffers' exchange, the stall report's waits
//   shard_aggregation.cc   Init, Gradient (aggregation and update), Pull, the snapshots
//   shard_rejoin.cc        Rejoin and Resume of a restarted worker
//   shard_replan.cc        Replan and the switch to the new plan
//   shard_membership.cc    ChangeMembership (elastic runs) and the present sets
//   shard_checkpoint.cc    restoring a checkpoint, gathering one
// One class rather than an object per concept because every concept reads and writes
// the same per-slice state (SliceState) under the same two locks, the shard's and the
// slice's: a rejoin drops a rank's partial aggregation, a resume answers with the
// previous snapshot, a re-plan moves values, optimizer state and snapshots between
// slices; separate objects would share that state anyway.
#ifndef P3_P3_CORE_PARAMETER_SHARD_H_
#define P3_P3_CORE_PARAMETER_SHARD_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "p3/core/buffer_average.h"
#include "p3/core/checkpoint.h"
#include "p3/core/cluster_signature.h"
#include "p3/core/downstream.h"
#include "p3/core/membership.h"
#include "p3/core/optimizer.h"
#include "p3/core/slice_plan.h"
#include "p3/core/snapshot.h"
#include "p3/core/stall_report.h"
#include "p3/core/wire_dtype.h"

namespace p3 {

// A colocated worker's flat buffers in its shared memory (p3/core/shared_memory.h), as
// mapped by the server: a message naming `n` values at `offset` of a slice there instead
// of carrying them means the values at the slice's place in these buffers, which the
// shard locates with its current plan once it has checked the part against the slice.
struct SharedValues {
  const float* params = nullptr;  // the worker's flat parameters (Init reads them)
  const float* grads = nullptr;   // and gradients (Gradient reads them)
};

struct ShardOptions {
  // This server's index, 0 .. num_servers-1. Default: 0.
  int server_index = 0;
  // Number of workers expected (elastic: the ranks that may take part). Default: 1.
  int num_workers = 1;
  // > 0: elastic membership (cluster.elastic; docs/reliability.md): ranks
  // 0..initial_workers-1 are present from the start, the others may join, and
  // ChangeMembership() changes the present set at an iteration boundary. 0: every rank is
  // present in every iteration. Default: 0.
  int initial_workers = 0;
  // The optimizer applied to the mean gradient. Default: SGD, see OptimizerOptions.
  OptimizerOptions optimizer;
  // Every this many iterations (0: never), once all of this shard's slices reach the
  // version, `on_checkpoint` receives their values and optimizer state. It runs on the
  // thread that completed the last slice, with no lock held. Default: 0.
  uint64_t checkpoint_every = 0;
  std::function<void(ShardCheckpoint)> on_checkpoint;
  // Start from this checkpoint instead of rank 0's initial values; checked against the
  // plan at the first Join. A checkpoint taken under a re-plan (ShardCheckpoint::
  // slice_params) rebuilds that plan, and one that a re-plan took effect at
  // (replan_slice_params) switches to it at once: plan_in_force() says which, and
  // re-plans go on from there. Default: none.
  std::optional<ShardCheckpoint> restore;
  // Accept Rejoin() of a worker whose process died (docs/protocol.md, "Rejoining
  // worker"). Default: false.
  bool accept_rejoin = false;
  // How gradients arrive and values leave (scheduling.wire_dtype); a worker whose
  // signature says otherwise is refused at Join. On a 16-bit wire the master values and
  // optimizer state stay float32: gradients are decoded to float32 before they are summed,
  // and each new version is encoded once (float16: scaled per slice, Float16Scale) into
  // the Snapshot sent to every worker (Downstream::values). Default: float32.
  WireDType wire_dtype = WireDType::kFloat32;
  // Store values and run the optimizer. false: the protocol alone -- every check, the
  // count of gradients, versions, Acks, pending pulls and who is sent what, exactly as
  // with values -- but no values are stored or summed, `values` may be null, and
  // Downstream::values is null. For the discrete-event simulator (p3/sim/), which runs this
  // shard on models whose values would not fit in memory (64 workers' gradients of
  // VGG-19). Checkpoints, restore and Resume() need values. Default: true.
  bool keep_values = true;
  // fp16 training with dynamic loss scaling (training.precision "fp16"): a slice whose
  // gradients of an iteration hold an infinity or a NaN, from any worker, is not updated in
  // that iteration: its values and optimizer state stay, and its version advances as usual
  // (the workers' loss scale went too high; they lower it). Per slice, where PyTorch's
  // GradScaler skips the whole step: no server knows the others' slices. Default: false.
  bool skip_nonfinite = false;
};

class ParameterShard {
 public:
  explicit ParameterShard(const ShardOptions& options);

  ParameterShard(const ParameterShard&) = delete;
  ParameterShard& operator=(const ParameterShard&) = delete;

  // Admits worker `rank`. The first worker's signature fixes the model and plan; a worker
  // whose rank, cluster size or signature does not fit is refused (FailedPrecondition or
  // InvalidArgument) and nothing changes. Returns version 0 of every slice when the
  // initial values are already in. `takes_plan`: the worker takes plan_in_force() when it
  // is not its signature's (Hello.takes_plan); a worker that does not is refused when a
  // restored checkpoint has replaced the plan.
  absl::StatusOr<std::vector<ToWorker>> Join(const ClusterSignature& signature, int rank,
                                             bool takes_plan = false);

  // Initial values of one slice, from rank 0 only, once per slice. `values` (n float32)
  // is read with memcpy and need not be aligned, e.g. bytes of a received message.
  //
  // A slice's values may come in consecutive parts (large tensors travel in messages of
  // bounded size): `values` then holds the n values from `offset` on. Parts must arrive
  // in order, without gaps or overlap; the slice counts as received with its last part.
  absl::StatusOr<std::vector<ToWorker>> Init(int rank, int slice_id, const float* values, int64_t n,
                                             int64_t offset = 0);
  // The same with the values as float32 bytes in `segments` (a received message's
  // buffers, cut at any byte): their count is the bytes / 4, a byte count that is not a
  // whole number of float32 is refused naming the slice.
  absl::StatusOr<std::vector<ToWorker>> Init(int rank, int slice_id,
                                             const std::vector<absl::string_view>& segments,
                                             int64_t offset);
  // The same with the n values at the slice's place in a colocated worker's shared
  // parameters, read only once the part is checked against the slice.
  absl::StatusOr<std::vector<ToWorker>> Init(int rank, int slice_id, const SharedValues& shared,
                                             int64_t n, int64_t offset);

  // Worker `rank`'s gradient of `slice_id` at `iteration`, which must be the slice's
  // current version. When all workers' gradients are in, their mean is applied. Parts as
  // for Init.
  //
  // `values` are float32 as the worker holds them (on a float32 wire read with memcpy at
  // any alignment). On a 16-bit wire they must be aligned and are rounded as the wire
  // would round them (RoundToWire), so that values that did not cross a stream (shared
  // memory) train exactly what values over a stream do; float16 with the sender's
  // `scale_exponent`, which a float16 wire requires and the others refuse.
  absl::StatusOr<std::vector<ToWorker>> Gradient(int rank, int slice_id, uint64_t iteration,
                                                 const float* values, int64_t n,
                                                 int64_t offset = 0,
                                                 std::optional<int> scale_exponent = {});
  // The same, appending to `out` (which the caller reuses from message to message, so
  // that the hot path allocates nothing once the slice's buffers exist). On an error
  // nothing is appended.
  absl::Status Gradient(int rank, int slice_id, uint64_t iteration, const float* values, int64_t n,
                        int64_t offset, std::vector<ToWorker>* out,
                        std::optional<int> scale_exponent = {});

  // The same with the values as the bytes of a message in the wire's dtype: `segments`
  // (a received message's buffers, cut at any byte), decoded once, straight into the
  // worker's float32 slot. Their count is the bytes / BytesPerValue(wire_dtype); a byte
  // count that is not a whole number of values, or a scale_exponent missing on a float16
  // wire or present on another, is refused naming the slice.
  absl::Status Gradient(int rank, int slice_id, uint64_t iteration,
                        const std::vector<absl::string_view>& segments, int64_t offset,
                        std::vector<ToWorker>* out, std::optional<int> scale_exponent = {});
  // The same with the n values at the slice's place in a colocated worker's shared
  // gradients (float32, rounded as `values` above), read only once the part is checked
  // against the slice.
  absl::Status Gradient(int rank, int slice_id, uint64_t iteration, const SharedValues& shared,
                        int64_t n, int64_t offset, std::vector<ToWorker>* out,
                        std::optional<int> scale_exponent = {});
  // Worker `rank` asks for `version` of `slice_id` (modes without values on push).
  absl::StatusOr<std::vector<ToWorker>> Pull(int rank, int slice_id, uint64_t version);

  // Re-plan (docs/protocol.md, "Re-plan"): from iteration `from_iteration` on, this
  // shard's slices are cut `slice_params` long within the same ownership stripes
  // (SlicePlan::WithSliceParams), each parameter keeping its values and optimizer state.
  // The switch happens inside the Gradient() call that brings the last of this shard's
  // slices to version `from_iteration`, after that call has appended the version's values
  // (which keep their old slice ids and offsets); from then on slice ids are the new
  // plan's, and a message for a slice of the old plan is refused. A worker that rejoins
  // (Rejoin with takes_plan) takes plan_in_force() first; a checkpoint records the plan
  // its slices are cut in, and one of from_iteration the re-plan as well.
  //
  // Refused, changing nothing, unless: it comes from rank 0; the plan is sliced with
  // ownership stripes (owner_params); the servers return values on the push; the wire is
  // not float16 (its scale is chosen per slice, so another cut rounds differently); no
  // re-plan is pending; every slice has its initial values and is below version
  // from_iteration; and the new plan can be made.
  absl::Status Replan(int rank, uint64_t from_iteration, int64_t slice_params);

  // Worker 0 holds version `version` of every slice (docs/checkpoints.md, "A server that
  // owns no slice"): sent only to a shard that wants_reached(), which sees no gradient and
  // writes its checkpoints by it. A checkpoint version (checkpoint_every) past the start
  // version and past every one reached before goes to `on_checkpoint`, on this thread: no
  // slices, the plan and membership of that version, as the other servers' checkpoints of
  // it have. An older version is ignored (a rejoined worker 0 says it again). Refused,
  // changing nothing, from a rank other than 0, one that has not joined, or by a shard
  // that owns slices.
  absl::Status Reached(int rank, uint64_t version);
  // This shard owns no slice of the plan (a model of fewer slices than servers) and writes
  // checkpoints: the Welcome asks worker 0 for Reached(). False before the first Join.
  bool wants_reached() const;

  // Elastic membership (ShardOptions::initial_workers > 0): from iteration `from_iteration`
  // on, the ranks of `present` (increasing) take part: their gradients of an iteration are
  // summed in rank order and divided by their count, versions from `from_iteration` on
  // go to them alone (a joining rank's first values are version `from_iteration`), and a
  // gradient or buffers from a rank not present is refused. Takes effect per slice, as
  // each slice reaches version `from_iteration`; the protocol (rank 0 sends it ahead of
  // its gradients of from_iteration - 1) makes it reach every server first.
  //
  // Refused, changing nothing, unless: the run is elastic; it comes from rank 0; every
  // initial value is in and no re-plan is pending; the change fits the ones so far
  // (MembershipSchedule::Check: rank 0 present, no rank that left, in iteration order);
  // every rank that is new in `present` has joined this shard; and every slice of the
  // shard is below version from_iteration.
  absl::Status ChangeMembership(int rank, uint64_t from_iteration, std::vector<int> present);
  // The present sets so far, the first from the start (not elastic: every rank).
  std::vector<MembershipChange> Membership() const;
  // The ranks whose Hello this shard accepted (joined, or rejoined), in order; empty
  // before the first.
  std::vector<int> joined_ranks() const;

  // Re-plans that have taken effect so far.
  int replans() const;
  // Floats held by the slice states, current and retired: values, optimizer state,
  // gradients and this shard's references to snapshots (their bytes / 4, so a 16-bit
  // snapshot counts half its values). A re-plan leaves it unchanged
  // (retired states give theirs up), where it used to add a whole plan's worth.
  int64_t StateFloats() const;
  // Snapshot buffers allocated so far (float32 and 16-bit). A re-plan allocates its new
  // slices' at the switch; the updates after it reuse them.
  int64_t SnapshotAllocations() const { return snapshot_allocations_.load(); }
  // Slice updates skipped so far for gradients that were not finite (skip_nonfinite).
  int64_t SkippedUpdates() const { return skipped_updates_.load(); }
  // The re-plan accepted and not yet in effect here: (from_iteration, slice_params).
  std::optional<std::pair<uint64_t, int64_t>> ReplanPending() const;
  // The plan this shard's slices are cut in now (the Welcome's plan_slice_params and
  // plan_from_iteration): {0, 0} while it is the first worker's signature's; after a
  // re-plan its slice size and the iteration it took effect at; restored from a checkpoint
  // taken under a re-plan, that plan since the checkpoint's iteration (it may have taken
  // effect earlier: the checkpoint does not say).
  PlanInForce plan_in_force() const;

  // Offset in the flat buffer and length of slice `slice_id` of the current plan, owned by
  // this shard (for tests and tools).
  absl::StatusOr<std::pair<int64_t, int64_t>> SliceSpan(int slice_id) const;

  // Worker `rank` has finished. Returns true when every worker has.
  bool Finish(int rank);

  // A restarted process takes worker `rank`'s place (ShardOptions::accept_rejoin), once
  // every initial value is in; the rank may have joined before (its process died) or not
  // (it died before its Hello reached this server). Checks the signature as Join does,
  // drops the rank's gradients of the unfinished iteration (other workers' stay) and any
  // pull it had pending, and returns the oldest version of this shard's slices: each is at
  // that version or the next (synchronous SGD keeps them within one), or UINT64_MAX when
  // the shard owns no slice. The rank must then Resume() before anything else. Refused
  // (FailedPrecondition) when rejoins are off, before the initial values, and after the
  // rank's Done. The caller makes sure the old process's messages are no longer handled.
  //
  // After a re-plan (done, or pending: accepted and not in force yet), only a worker that
  // `takes_plan` may rejoin (Hello.takes_plan): it resumes in plan_in_force(), which the
  // server sends in the Welcome, and hears of a pending re-plan as any worker does
  // (docs/protocol.md, "Rejoining after a re-plan"); one that does not is refused, naming
  // the re-plan.
  absl::StatusOr<uint64_t> Rejoin(const ClusterSignature& signature, int rank,
                                  bool takes_plan = false);
  // The checks of Rejoin() alone, changing nothing (the server runs them before it ends a
  // stale stream of that rank, so that a Hello it would refuse cannot end a live one).
  absl::Status CheckRejoin(const ClusterSignature& signature, int rank,
                           bool takes_plan = false) const;

  // The rejoined worker `rank` resumes at iteration `version` (the oldest version over
  // every server): version `version` of each slice to it, the current one or, for a
  // slice one version further, its previous values. Its gradient of iteration `version`
  // of such a slice is then accepted once and answered (values_on_push: the current
  // version; otherwise an Ack) without being summed again: it is the one the dead process
  // sent already. Refused without a Rejoin, twice, when a slice is neither at `version`
  // nor at `version`+1, or when this shard's plan took effect after `version` (a re-plan
  // that switched here while another server's slices were still before it: the worker
  // would need the old plan's values of `version`, which the switch gave up); nothing
  // changes then.
  absl::StatusOr<std::vector<ToWorker>> Resume(int rank, uint64_t version);

  // Every slice has its initial values (or the restored checkpoint's).
  bool initialized() const;

  // Why a Join refused the restored checkpoint (ShardOptions::restore) for the model of
  // the Hello that was to fix it, e.g. other slice counts; OK while none has. Such a shard
  // cannot start: every Hello of that model is refused the same way, so the server fails
  // its run instead of waiting for workers it would refuse.
  absl::Status restore_refusal() const;

  // Every worker has joined this shard at least once: the run has started here. Until
  // then this shard belongs to a new process — a first start or a restart from a
  // checkpoint — and no slice has moved past start_version().
  bool everyone_joined() const;

  // A Hello with `rejoin` is taken as an ordinary Join: rejoins are on and not every
  // worker has joined yet, so there is no run here to rejoin. That is what a worker
  // restarted by its scheduler finds after every server was restarted too (Kubernetes:
  // docs/multihost.md); it then starts at start_version() like any worker.
  bool TakesRejoinAsJoin() const;

  // The version every slice starts at: the restored checkpoint's iteration, else 0.
  uint64_t start_version() const { return options_.restore ? options_.restore->iteration : 0; }

  // The encoding of the wire (ShardOptions::wire_dtype).
  WireDType wire_dtype() const { return options_.wire_dtype; }

  // The plan, once the first worker has joined.
  std::optional<SlicePlan> plan() const;

  // Current values and version of a slice this shard owns (for tests and checkpoints).
  absl::StatusOr<std::pair<std::vector<float>, uint64_t>> SliceValues(int slice_id) const;

  // Worker `rank`'s model buffers (p3/core/buffer_average.h) for exchange `round`; server 0
  // only. Once every worker's are in, their mean goes to every worker (kBuffers); a
  // round sent again after it completed gets the mean back to that worker alone.
  absl::StatusOr<std::vector<ToWorker>> Buffers(int rank, uint64_t round, const float* values,
                                                int64_t n);

  // The slices whose gradients of their current iteration are not all in, with the
  // ranks missing (those that have finished are not); for stall reports.
  std::vector<SliceWait> Waits() const;

 private:
  struct SliceState {
    mutable absl::Mutex mu;
    int64_t offset = 0;  // in the flat buffer of all parameters
    int64_t length = 0;
    int priority = 0;
    // Replaced by a re-plan: kept (a call may still hold it) but refuses every message;
    // its buffers (values, optimizer state, gradients, snapshots) are freed.
    bool retired ABSL_GUARDED_BY(mu) = false;
    bool initialized ABSL_GUARDED_BY(mu) = false;
    int64_t init_received ABSL_GUARDED_BY(mu) = 0;  // values of the initial ones so far
    uint64_t version ABSL_GUARDED_BY(mu) = 0;
    std::vector<float> params ABSL_GUARDED_BY(mu);
    SliceOptimizerState opt ABSL_GUARDED_BY(mu);
    // The current iteration's gradients, summed in rank order as they arrive (a float sum
    // depends on its order; this is the order SliceOptimizer::ApplyMean sums in):
    //   sum = g_0 + g_1 + ... + g_{folded-1}, and the first in_sum[folded] values of g_folded.
    // A part from rank `folded` is added to `sum` as it arrives, straight from the message;
    // a part from a later rank waits in early[r] (allocated when first needed) until every
    // rank before it is in. Ranks mostly arrive in order, so most values are read once,
    // from the message, into a sum that stays in cache.
    std::vector<float> sum ABSL_GUARDED_BY(mu);
    int folded ABSL_GUARDED_BY(mu) = 0;
    std::vector<std::vector<float>> early ABSL_GUARDED_BY(mu);
    // in_sum[r]: values of rank r's gradient in `sum` (length for r < folded). A rejoin
    // leaves them there: the new process resends the same gradient (docs/protocol.md,
    // "Why bit-identical"), whose first in_sum[r] values are checked and counted, not added.
    std::vector<int64_t> in_sum ABSL_GUARDED_BY(mu);
    std::vector<bool> has ABSL_GUARDED_BY(mu);  // rank r's whole gradient is in
    // received[r]: values of rank r's gradient in so far (< length while parts arrive).
    std::vector<int64_t> received ABSL_GUARDED_BY(mu);
    int count ABSL_GUARDED_BY(mu) = 0;
    // The ranks whose gradients make this version's update (every rank unless elastic), in
    // rank order; place[r]: r's index in `present`, -1 when absent. `folded` counts places
    // of `present`: sum = the gradients of present[0 .. folded-1], and so on. `upcoming`:
    // membership changes from a later version, oldest first.
    std::vector<int> present ABSL_GUARDED_BY(mu);
    std::vector<int> place ABSL_GUARDED_BY(mu);
    std::deque<MembershipChange> upcoming ABSL_GUARDED_BY(mu);
    std::vector<int> pending_pulls ABSL_GUARDED_BY(mu);  // ranks waiting for version+1
    // catch_up[r]: rank r resumed at version-1 and its gradient of that iteration, already
    // summed before its process died, is still to be answered (Resume()).
    std::vector<bool> catch_up ABSL_GUARDED_BY(mu);
    // The current version's values as sent to the workers (in the wire's dtype): never
    // written while anyone else holds a reference. `previous` is the version before
    // (null at the start version): what a rejoined worker resuming one version back
    // reads (Resume()); its storage is reused for the next version when no outgoing
    // message holds it any more.
    std::shared_ptr<Snapshot> snapshot ABSL_GUARDED_BY(mu);
    std::shared_ptr<Snapshot> previous ABSL_GUARDED_BY(mu);
    // Storage for the next snapshot when there is no previous one to reuse: allocated
    // by a re-plan's switch, so that the first updates on the new plan allocate nothing.
    std::shared_ptr<Snapshot> spare ABSL_GUARDED_BY(mu);
  };

  // Where the n values of an Init or Gradient part are: float32 at `floats` (any
  // alignment, or 16-bit wire: aligned), the bytes of `segments`, or at the slice's place
  // in a colocated worker's flat buffer `flat` (shared memory).
  struct Part {
    int64_t n = 0;
    const float* floats = nullptr;
    const std::vector<absl::string_view>* segments = nullptr;
    const float* flat = nullptr;
  };
  // Writes `part` (the values from `offset` on of slice `s`, which the caller has checked
  // against the slice) into `dest` as the wire of `dtype` delivers them: rounded, float16
  // scaled by 2^scale_exponent (float32: copied).
  static void ReadPart(const Part& part, const SliceState& s, int64_t offset, WireDType dtype,
                       int scale_exponent, float* dest);
  // The number of `dtype` values in `segments`; `what` of `slice_id` is refused when the
  // bytes are not a whole number of them.
  static absl::StatusOr<int64_t> CountValues(const char* what, int slice_id,
                                             const std::vector<absl::string_view>& segments,
                                             WireDType dtype);
  // Adds (rank 0: writes) the values of rank `rank`'s part at `offset`, but its first
  // `skip`, into s->sum, or keeps them in s->early[rank] while ranks before it are missing.
  void TakeGradientValues(const Part& part, SliceState* s, int rank, int64_t offset,
                          int64_t skip, int scale_exponent) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu);
  // Where the float32 values of `part` (at `offset` of slice `s`) are when they are not
  // in segments: `floats`, or the colocated worker's buffer at the part's place.
  static const float* PartFloats(const Part& part, const SliceState& s, int64_t offset) {
    return part.flat != nullptr ? part.flat + s.offset + offset : part.floats;
  }
  // PartFloats when the values need no decoding (float32, aligned, not in segments): the
  // sum and the update read them where they are; null otherwise, and they are decoded a
  // block at a time as the pass reaches them (PartValues in shard_aggregation.cc).
  const float* DirectValues(const Part& part, const SliceState& s, int64_t offset) const;
  // Moves the waiting values of the ranks after s->folded into s->sum while the ranks
  // before them are complete.
  static void FoldEarly(SliceState* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu);
  // Every Init() and Gradient(), whatever holds the part's values.
  absl::StatusOr<std::vector<ToWorker>> InitFrom(int rank, int slice_id, const Part& part,
                                                 int64_t offset);
  absl::Status GradientFrom(int rank, int slice_id, uint64_t iteration, const Part& part,
                            int64_t offset, std::optional<int> scale_exponent,
                            std::vector<ToWorker>* out);
  // A gradient's scale_exponent must be there (and in range) exactly on a float16 wire.
  absl::Status CheckScale(int slice_id, std::optional<int> scale_exponent) const;
  // A fresh state of `slice` for options_.num_workers workers: nothing received yet,
  // the present set of the start version.
  std::unique_ptr<SliceState> NewSliceState(const Slice& slice) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // s->present := `present`, and s->place to match.
  void SetPresent(SliceState* s, const std::vector<int>& present) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu);
  // The slice has just reached a new version: a change from that version takes effect.
  void AdvancePresent(SliceState* s) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu);
  bool elastic() const { return options_.initial_workers > 0; }
  // The refusal of a message for a slice of the plan a re-plan replaced.
  static absl::Status RetiredSlice(const char* what, int slice_id);
  // Validates rank and slice ownership; returns the slice's state.
  absl::StatusOr<SliceState*> Lookup(int rank, int slice_id, const char* what) const;
  // Appends the slice's current version for worker `rank` to `out`.
  void AppendParams(int slice_id, const SliceState& s, int rank, std::vector<ToWorker>* out) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // The slice has the values of the version before its current one (Resume()).
  static bool HasPrevious(const SliceState& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    return s.previous != nullptr;
  }
  // Appends an Ack of worker `rank`'s gradient of `iteration` to `out`.
  static void AppendAck(int slice_id, const SliceState& s, int rank, uint64_t iteration,
                        std::vector<ToWorker>* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // s.snapshot := s.params as they go on the wire, in the previous version's storage
  // when nobody else holds it, else in s.spare if a switch left one.
  void TakeSnapshot(SliceState* s) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu);
  // TakeSnapshot's two halves, for a caller that writes the values itself: the storage
  // for the next snapshot (as above: the previous version's, the spare, or new), and
  // making it the current one.
  std::shared_ptr<Snapshot> SnapshotStorage(SliceState* s) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu);
  static void PublishSnapshot(SliceState* s, std::shared_ptr<Snapshot> next)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu);
  std::vector<int> JoinedRanksLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool signature_values_on_push() const;

  const ShardOptions options_;
  const SliceOptimizer optimizer_;
  BufferAverage buffers_{options_.num_workers};
  mutable std::atomic<int64_t> snapshot_allocations_{0};
  std::atomic<int64_t> skipped_updates_{0};

  mutable absl::Mutex mu_;
  std::optional<ClusterSignature> signature_ ABSL_GUARDED_BY(mu_);
  std::optional<SlicePlan> plan_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> joined_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> finished_ ABSL_GUARDED_BY(mu_);
  MembershipSchedule membership_ ABSL_GUARDED_BY(mu_){
      options_.num_workers,
      options_.initial_workers > 0 ? options_.initial_workers : options_.num_workers};
  // resuming_[r]: rank r rejoined and has not sent its Resume yet.
  std::vector<bool> resuming_ ABSL_GUARDED_BY(mu_);
  int uninitialized_ ABSL_GUARDED_BY(mu_) = 0;
  // Indexed by global slice id; null for slices of other servers. Set under mu_ by the
  // first Join and replaced by a re-plan; read without mu_ only by calls that hold it
  // (Lookup) or where no re-plan can happen (Join, Init, Restore, Rejoin, Resume).
  std::vector<std::unique_ptr<SliceState>> slices_;
  // Slices of plans before a re-plan: never freed while the shard lives, so that a call
  // that looked a slice up just before the switch finds it retired instead of freed.
  std::vector<std::unique_ptr<SliceState>> retired_ ABSL_GUARDED_BY(mu_);
  struct PendingReplan {
    uint64_t from_iteration = 0;
    SlicePlan plan;
    size_t remaining = 0;  // owned slices still below from_iteration
  };
  std::optional<PendingReplan> pending_replan_ ABSL_GUARDED_BY(mu_);
  // pending_replan_ has a value, or Replan() is deciding: read without mu_ by every slice
  // completion (SliceAdvanced), which takes mu_ only when it is set.
  std::atomic<bool> replan_pending_{false};
  int replans_ ABSL_GUARDED_BY(mu_) = 0;
  // The plans re-plans switched to: from_iteration -> slice_params (a checkpoint of a
  // shard without slices names the plan of its version from them), and the newest version
  // Reached() so far.
  std::map<uint64_t, int64_t> switches_ ABSL_GUARDED_BY(mu_);
  uint64_t reached_ ABSL_GUARDED_BY(mu_) = 0;
  bool WantsReachedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // plan_in_force().from_iteration: 0 while plan_ is the first signature's.
  uint64_t plan_from_ ABSL_GUARDED_BY(mu_) = 0;
  // A slice reached `version` (Gradient, after the slice's lock is released): counts it
  // towards a pending re-plan and switches once the last one is there.
  void SliceAdvanced(uint64_t version);
  // Builds the slices of pending_replan_'s plan from the current ones and retires them.
  void SwitchPlanLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool configured_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status restore_refusal_ ABSL_GUARDED_BY(mu_);
  bool everyone_joined_ ABSL_GUARDED_BY(mu_) = false;

  // Checkpoint in the making, per iteration: slices captured so far.
  absl::Mutex checkpoint_mu_;
  std::map<uint64_t, ShardCheckpoint> pending_checkpoints_ ABSL_GUARDED_BY(checkpoint_mu_);
  size_t owned_slices_ = 0;  // set with slices_
  // Applies options_.restore to the freshly made slices; refuses a checkpoint that does
  // not fit the plan.
  absl::Status Restore() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckRejoinLocked(const ClusterSignature& signature, int rank,
                                 bool takes_plan) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddToCheckpoint(uint64_t version, SliceCheckpoint slice);
};

}  // namespace p3

#endif  // P3_P3_CORE_PARAMETER_SHARD_H_
