// The worker library: data-parallel training of a libtorch model on a P3 parameter-server
// cluster. Link //worker:worker into your own trainer.
//
// The Worker owns the model's parameters as one flat buffer (each parameter is a view
// into it), cuts gradients into slices as autograd produces them during Backward(),
// and queues them to the servers, highest priority (earliest layer) first. Updated
// slices are written straight into the parameters as they arrive, and Forward() runs
// the model block by block, each block waiting only for its own slices.
//
// Example:
//   p3::WorkerOptions options;
//   options.servers = {"10.0.0.1:7070", "10.0.0.2:7070"};
//   options.rank = rank;
//   options.num_workers = 4;                       // mode: p3 by default
//   P3_ASSIGN_OR_RETURN(auto model, p3::models::CreateModel({.name = "resnet50"}));
//   P3_ASSIGN_OR_RETURN(auto worker, p3::Worker::Create(options, model));
//   for (int64_t it = 0; it < iterations; ++it) {     // (macros: p3/base/status_macros.h)
//     Batch batch = data->Get(sampler.Indices(it));
//     P3_ASSIGN_OR_RETURN(torch::Tensor out, worker->Forward(batch.input));
//     P3_RETURN_IF_ERROR(worker->Backward(model->Loss(out, batch.target)));
//   }
//   return worker->Finish();                        // final parameters are in the model
//
// How the worker reaches the servers is WorkerOptions::transport_factory (worker/transport.h):
// gRPC by default, or e.g. worker/in_memory_transport.h for servers in the same process.
//
// Not thread-safe: one training thread calls Forward/Backward/Finish; the transports' own
// threads talk to the servers.
#ifndef P3_WORKER_WORKER_H_
#define P3_WORKER_WORKER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "p3/core/membership.h"
#include "p3/core/mode.h"
#include "p3/core/slice_plan.h"
#include "p3/base/trace.h"
#include "p3/core/wire_dtype.h"
#include "worker/transport.h"

namespace p3 {
class CopyEngine;
namespace models {
class BlockModel;
}  // namespace models

struct WorkerOptions {
  // The address of each server (for gRPC host:port); server i owns slice i mod S. Must
  // not be empty.
  std::vector<std::string> servers;
  // This worker's rank, 0 .. num_workers-1. Rank 0 provides the initial parameters.
  int rank = 0;
  // Default: 1.
  int num_workers = 1;
  // Default: p3. kLocal is refused (it needs no cluster).
  Mode mode = Mode::kP3;
  // Slice size in parameters, for modes that slice. Default: 40,000.
  int64_t slice_params = kDefaultSliceParams;
  // Ownership stripes (SlicePlanOptions::owner_params), for modes that slice: > 0 lets
  // rank 0 change the slice size during the run (RequestReplan) without moving optimizer
  // state between servers (checkpoints record the plan they were taken under).
  // 0: none. Default: 0.
  int64_t owner_params = 0;
  // Packs (SlicePlanOptions::pack_params), for modes that slice: consecutive tensors of
  // fewer than this many parameters each share one slice. 0: none. Default: 0.
  int64_t pack_params = 0;
  // Tensors above this are split over the servers, for modes that do not. Default: 1,000,000.
  int64_t split_threshold = kDefaultSplitThreshold;
  // The most values one message carries; a larger slice or tensor travels as consecutive
  // parts (docs/protocol.md). Default: 1,048,576.
  int64_t max_message_params = kDefaultMaxMessageParams;
  // Bytes of messages that may be handed to the streams and not yet written, over all
  // streams that cross the network (p3/core/send_queue.h: they share one priority order and
  // this credit); one message is always allowed, however large. 0: one message at a time
  // on the link. Default: 0.
  int64_t credit_bytes = 0;
  // A message a stream has not written within this time (its peer stopped reading) no
  // longer holds the link's credit: the other streams go on (SendQueueOptions::
  // stalled_after; scheduling.stalled_write_s). absl::InfiniteDuration(): never.
  // Default: 1 s.
  absl::Duration stalled_write = absl::Seconds(1);
  // The links' writer and reader threads run in SCHED_BATCH: woken, they wait for a free
  // core or the end of the running thread's time slice instead of preempting the
  // computation (p3/base/thread_policy.h; scheduling.batch_io_threads). The threads
  // that call Worker's methods keep their policy. Default: true.
  bool batch_io_threads = true;
  // How gradients go up and values come down (scheduling.wire_dtype): float32, or 16 bits
  // (bfloat16; float16 scaled per slice by a power of two). The parameters stay float32:
  // they are the servers' float32 master values rounded to this dtype. The servers must
  // be configured the same (the handshake refuses a mismatch). Default: float32.
  WireDType wire_dtype = WireDType::kFloat32;
  // Servers on this worker's machine (indices into `servers`): the worker's parameters
  // and gradients live in shared memory (p3/core/shared_memory.h) that these servers map, so
  // that slice values between them never cross a socket; only descriptors go over the
  // stream. A server that cannot map it (another machine after all, a full /dev/shm)
  // gets the values over the stream, with a warning on stderr. Empty: none. Default: none.
  std::vector<int> shared_memory_servers;
  // A server silent for this long (or a wait for parameters longer than this) ends the
  // run with an error. Default: 60 s.
  absl::Duration peer_timeout = absl::Seconds(60);
  // A wait for parameters longer than this is logged on stderr with the server and slices
  // it waits for, and again every stall_report while it lasts (p3/core/stall_report.h); zero:
  // no reports. Default: 10 s.
  absl::Duration stall_report = absl::Seconds(10);
  // This process replaces a worker of the same rank that died (launch_cluster
  // --max_restarts): it rejoins the servers instead of joining, and resumes at the
  // cluster's iteration with the servers' current values (docs/protocol.md, "Rejoining
  // worker"); iteration() then starts there. Default: false.
  bool rejoin = false;
  // Elastic membership (cluster.elastic; docs/reliability.md, "Elastic membership"): > 0:
  // ranks 0..initial_workers-1 take part from the start, num_workers is the most ranks,
  // and the present set changes through RequestMembership (rank 0). Modes with values on
  // the push only. 0: not elastic. Default: 0.
  int initial_workers = 0;
  // This process joins a running elastic run: its first iteration is the one a membership
  // change makes it present at (Present() waits for it). Default: false.
  bool elastic_join = false;
  // The cluster's cluster.rejoin_timeout_s: while a dead peer is awaited, waits for
  // parameters may last this much longer than peer_timeout (the servers end the run
  // first if it does not come back). Default: 0.
  absl::Duration rejoin_timeout = absl::ZeroDuration();
  // A server's Abort (the run failed elsewhere) is reported only if no failure of this
  // worker's own — a broken stream to another server — comes within this time; if one
  // does, that is reported as the cause and the Abort as what followed. A dead server
  // breaks its streams to every worker at once, while the other servers' Aborts name only
  // the worker they lost in consequence ("server 0 aborted the run: worker 1
  // disconnected"). Default: 500 ms.
  absl::Duration abort_grace = absl::Milliseconds(500);
  // TLS to the servers (they must serve TLS too), verified against tls_ca_pem (empty:
  // the system's roots), checking the name tls_server_name when set. Default: plaintext.
  bool tls = false;
  std::string tls_ca_pem;
  std::string tls_server_name;
  // The cluster's shared token, sent in the handshake. Default: "".
  std::string token;
  // Records forward/backward per block, waits, and every slice sent and received; not
  // owned, may be null. Default: none.
  TraceRecorder* trace = nullptr;
  // Fault injection for tests: called on the writer thread of the transport to server
  // `server` just before a gradient slice of `iteration` is written. It may block: that
  // transport then has no write in flight, and the gradients queued meanwhile are
  // written afterwards in the send queue's order (tests/cluster/scheduling_test.cc).
  // Default: none.
  std::function<void(int server, int slice, int64_t iteration)> before_gradient_write;
  // Opens the link to one server (worker/transport.h), given everything it needs
  // (address, signature, the shared send queue, the core, the listener, ...): a
  // transport goes here without touching the worker. Null: a gRPC stream per server
  // (ServerConnection, worker/server_connection.h). Default: gRPC.
  TransportFactory transport_factory;
  // Where the model computes (training.device): the CPU, or a GPU such as cuda:0. On a
  // device the model's parameters and buffers move there (the parameters as views into one
  // flat device buffer), the caller gives inputs on it, and values cross to and from the
  // host buffers the transports use block by block, without stalling backward
  // (worker/device_staging.h). Default: the CPU.
  torch::Device device = torch::kCPU;
  // How values cross between the device and the host (worker/copy_engine.h). Null: the
  // device's streams; on the CPU, no crossing at all. A test gives a CPU engine here to run
  // the device path without a GPU. Default: null.
  std::shared_ptr<CopyEngine> copy_engine;
};

// Counters since Create().
struct WorkerStats {
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  // Bytes of values exchanged with colocated servers through shared memory (both
  // directions); not part of bytes_sent / bytes_received, which count the streams.
  int64_t bytes_shared = 0;
  // Time Forward() spent waiting for parameters.
  absl::Duration forward_wait;
};

class Worker {
 public:
  // Opens a transport to every server and takes part in the handshake; rank 0 sends the
  // initial parameters. The model must outlive the Worker; its parameters become views into
  // the Worker's flat buffer.
  static absl::StatusOr<std::unique_ptr<Worker>> Create(const WorkerOptions& options,
                                                        std::shared_ptr<models::BlockModel> model);
  ~Worker();

  // The forward pass of the current iteration; block i starts once its parameters of
  // the current version have arrived.
  absl::StatusOr<torch::Tensor> Forward(const torch::Tensor& input);

  // The backward pass from `loss`: each gradient is sliced and queued to the servers as
  // soon as autograd produces it. Ends the iteration.
  //
  // With `loss_scale` != 1 (training.precision "fp16", dynamic loss scaling), the backward
  // pass runs from loss * loss_scale, which keeps small gradients from vanishing in half
  // precision; each gradient is divided by loss_scale again before it leaves (exactly, for a
  // power of two), so the servers get the true gradient, and whether every one was finite is
  // recorded (gradients_finite()). The servers skip the update of a slice whose gradients
  // are not (ShardOptions::skip_nonfinite). Default: 1, no scaling, no check.
  absl::Status Backward(const torch::Tensor& loss, double loss_scale = 1.0);

  // Whether every gradient of the last Backward was finite: always true without a loss
  // scale. Waits for the device to finish that backward pass (one scalar read).
  bool gradients_finite() const;

  // Waits until every parameter holds the current version (e.g. before evaluating).
  absl::Status Sync();

  // The same iteration in steps, for a caller that runs the model's forward and backward
  // passes itself (the Python front end, worker/python/; docs/python.md) instead of
  // Forward() and Backward(); slicing, priorities, credit and the mode are the same:
  //   WaitForBlock(b) before running block b, for each block;
  //   ArmGradients(); the caller's own loss.backward(); EndIteration().
  // A model driven this way may leave ForwardBlock unimplemented.
  //
  // Waits until block `block`'s parameters (in modes without forward overlap: every
  // block's) hold the current iteration's values, and puts them on the device.
  // OutOfRange for a block that does not exist.
  absl::Status WaitForBlock(int64_t block);
  // From now until EndIteration(), each gradient autograd produces for a parameter is
  // sliced and queued as in Backward(). Calling it again before EndIteration() does
  // nothing.
  absl::Status ArmGradients();
  // Ends the iteration as Backward() does after its backward pass. FailedPrecondition,
  // with the run going on and the gradients still armed, when no parameter has received
  // a gradient since ArmGradients() (nothing was sent); FailedPrecondition, ending the
  // run, when some parameter has none or one received two (a second backward pass).
  absl::Status EndIteration();

  // Replaces the model's float32 buffers (BatchNorm's running mean and variance) by
  // their mean over all workers, summed in rank order, so that every worker evaluates
  // and exports the same model (docs/protocol.md, "Buffers"). Collective: every worker
  // must call it at the same point of the run, between iterations, at most once per
  // iteration (the iteration names the exchange). A worker that restarted (rejoin) may
  // call it again at the iteration it resumes at, to get the mean of an exchange it
  // missed. Returns at once for a model without float32 buffers. Bounded by peer_timeout.
  // Parameters are not touched; other buffers (num_batches_tracked) are left as they are.
  absl::Status AverageBuffers();

  // Waits for the final parameters, tells the servers this worker is done, closes.
  absl::Status Finish();

  // The current iteration: completed Backward calls, plus the iteration the servers
  // resumed from (a checkpoint's; 0 for a fresh run), or for a rejoined worker the
  // cluster's iteration when it rejoined.
  int64_t iteration() const;
  WorkerStats stats() const;
  // The current plan (a re-plan replaces it).
  const SlicePlan& plan() const;

  // Rank 0 only, between iterations (after a Backward, before the next Forward): every
  // worker and server cuts slices `slice_params` long from the next iteration on, within
  // the same ownership stripes (WorkerOptions::owner_params), agreed through the protocol
  // (docs/protocol.md, "Re-plan"). Training is unchanged bit for bit: each parameter
  // keeps its server, values and optimizer state. Returns the first iteration of the new
  // plan. Refused (FailedPrecondition) on another rank, without stripes, in modes without
  // values on the push, on a float16 wire, in a rejoined process, or while a re-plan is
  // pending; a server that refuses it fails the run. After a re-plan a dead worker
  // rejoins in the plan in force, which the servers' Welcomes name (docs/protocol.md,
  // "Rejoining after a re-plan"); checkpoints record it.
  absl::StatusOr<uint64_t> RequestReplan(int64_t slice_params);
  // Re-plans that have taken effect on this worker.
  int replans() const;

  // Elastic runs (WorkerOptions::initial_workers > 0; docs/reliability.md, "Elastic
  // membership"). Rank 0 only, between iterations: the workers of `present` (increasing
  // ranks, rank 0 among them) take part from the next iteration on, which it returns.
  // Refused on another rank, in a run that is not elastic, or for a set that does not fit
  // (a rank that has left, one out of range); a worker joining must have said Hello to
  // every server first, else a server refuses the change and the run fails.
  absl::StatusOr<uint64_t> RequestMembership(const std::vector<int>& present);
  // The workers taking part in the current iteration, in rank order. Call it before
  // drawing an iteration's batch: this worker reads the batch of its place in the set.
  // Elastic: it waits until every value of the iteration is in (so every change up to it
  // is known; forward overlap is lost for that wait); a worker not in the set has left
  // and calls Finish() (which then waits for nothing) and stops; a joining worker
  // (elastic_join) first waits, at most peer_timeout, for the change that makes it present
  // and iteration() jumps there. Not elastic: every rank, at once.
  absl::StatusOr<std::vector<int>> Present();
  // Every membership change known to this worker, the first from iteration 0 (elastic).
  std::vector<MembershipChange> MembershipChanges() const;

  class Impl;

 private:
  explicit Worker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace p3

#endif  // P3_WORKER_WORKER_H_
