// The simulator's engine behind Simulate() (p3/sim/simulator.h), private to
// //p3/sim:simulator: the state of one simulated run and the event handlers that move
// it on. One class, its methods in one file per concept:
//   simulator.cc         the event loop, setting up a run, the results, Simulate()
//   cpu_model.cc         where work runs: hosts' cores shared with the computation, the
//                        CPU cost of sending and receiving a message
//   connections.cc       a connection's send queue lane, writer, kernel buffer, wire and
//                        reader
//   ps_cluster.cc        the parameter-server processes: the handshake, the real
//                        ParameterShard and WorkerCore handling what arrives
//   worker_iteration.cc  a worker's forward and backward passes, block by block (every
//                        engine)
//   ring_allreduce.cc    ring all-reduce with DDP's buckets
//
// Not thread-safe: one event loop drives a Simulation, once.
#ifndef P3_P3_SIM_SIMULATION_H_
#define P3_P3_SIM_SIMULATION_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <queue>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "p3/base/trace.h"
#include "p3/core/mode.h"
#include "p3/core/parameter_shard.h"
#include "p3/core/send_queue.h"
#include "p3/core/slice_plan.h"
#include "p3/core/version_tracker.h"
#include "p3/core/worker_core.h"
#include "p3/sim/fluid.h"
#include "p3/sim/simulator.h"

namespace p3::sim::internal {

inline constexpr double kBytesPerGbit = 1e9 / 8;

enum class MsgKind { kGradient, kPull, kParams, kAck };

struct Msg {
  MsgKind kind = MsgKind::kGradient;
  int slice = 0;
  uint64_t iteration = 0;
  int64_t bytes = 0;   // on the wire: values * BytesPerValue(wire_dtype)
  int64_t values = 0;  // float32 values carried (0: Pull, Ack)
  int parts = 1;
  int conn = 0;
  double popped = 0;  // when its writer took it
  bool completed = false;  // a gradient that completed its slice (the server updated it)
};

enum class ConnKind { kShm, kLoopback, kNetwork };

// A message's place in its link's send order, as SendQueue keys it: (priority,
// tiebreak, push sequence) in priority order, (0, 0, push sequence) in FIFO order.
using SendKey = std::tuple<int64_t, int64_t, int64_t>;

// One direction of a worker-server stream.
struct Conn {
  int src = 0;  // process
  int dst = 0;
  bool upstream = true;  // worker -> server
  int worker = 0;
  int server = 0;
  ConnKind kind = ConnKind::kNetwork;
  SendQueue<int>* queue = nullptr;
  int queue_index = 0;
  int lane = 0;
  bool writing = false;
  // The messages queued on the lane and not yet handed to the writer, by send key (the
  // lane's heap in the queue, mirrored): see LinkState.
  std::priority_queue<std::pair<SendKey, int>, std::vector<std::pair<SendKey, int>>,
                      std::greater<std::pair<SendKey, int>>>
      pending;
  // The kernel's send buffer: messages written and not yet wholly on the wire, and
  // their bytes not yet on it (front_sent of the front message's are).
  std::deque<int> kernel;
  int64_t kernel_bytes = 0;
  int64_t front_sent = 0;
  bool draining = false;
  std::optional<int> blocked;  // a write waiting for room in the kernel buffer
  // The receiving side's reader thread.
  std::deque<int> inbox;
  bool reading = false;
  int send_track = 0;
  int recv_track = 0;
  // Network streams in this one's direction (gradients or values) leaving its sender's
  // machine, and entering its receiver's, this one included (Calibration::
  // shaped_stream_s_per_byte): 0 for a stream that is not on the network.
  int streams_out = 0;
  int streams_in = 0;
  // Network streams in this one's direction sent by its sending process, this one
  // included (Calibration::shaped_stream_turns_s_per_byte): 0 off the network.
  int process_streams = 0;
};

struct Timer {
  double t;
  int64_t seq;
  std::function<void()> fn;
  bool operator>(const Timer& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

// The simulator's view of one SendQueue, to find the one lane that may write next
// without offering every idle lane its turn (each offer scans every lane): the queue
// hands out only the most urgent head among its idle lanes, so of the idle lanes with
// something queued only the one with the smallest key can pop, and only if the credit
// admits it. The queue still decides: the simulator offers that lane its turn when it
// expects it to pop, and fails unless it pops the expected message.
struct LinkState {
  int64_t next_seq = 0;  // the queue's push counter
  // (the key of its most urgent message, conn) for each idle lane with messages.
  std::set<std::pair<SendKey, int>> ready;
  // Handed out and not released.
  int64_t in_flight_items = 0;
  int64_t in_flight_bytes = 0;
};

struct WorkerState {
  int rank = 0;
  int proc = 0;
  std::unique_ptr<VersionTracker> tracker;
  std::unique_ptr<WorkerCore> core;
  int64_t iteration = 0;
  int block = 0;
  bool waiting = false;
  // The slices of (ready_iteration, ready_block)'s range before ready_upto hold the
  // version it needs (versions only grow): TryForward goes on from there.
  int64_t ready_iteration = -1;
  int ready_block = -1;
  int ready_upto = 0;
  double wait_start = 0;
  std::mt19937_64 rng;   // SimOptions::compute_jitter's draws
  double jitter = 1.0;   // this iteration's factor on its computation
  std::vector<double> iteration_end;
  std::vector<double> compute_s;  // per iteration
  std::vector<double> wait_s;
  int compute_track = 0;
  int wait_track = 0;
  // Device copies (Calibration::pcie_bytes_per_s): when the gradients' stream is free,
  // and the (iteration, block) whose values' upload is under way / done.
  double to_host_free = 0;
  std::pair<int64_t, int> uploading{-1, -1};
  std::pair<int64_t, int> uploaded{-1, -1};
};

// One simulated run of `o`, which must outlive it: construct, then Run() once.
class Simulation {
 public:
  explicit Simulation(const SimOptions& o)
      : o_(o),
        cal_(o.calibration),
        fluid_(o.equal_split ? Sharing::kEqualSplit : Sharing::kWaterFilling) {}

  absl::StatusOr<SimResult> Run();

 private:
  double now() const { return fluid_.now(); }
  void At(double t, std::function<void()> fn) { timers_.push({t, seq_++, std::move(fn)}); }
  void Fail(absl::Status s) {
    if (status_.ok()) status_ = std::move(s);
  }
  void Loop();

  int MachineOfProc(int proc) const;
  int HostOfMachine(int m) const { return m / std::max(1, o_.machines_per_host); }
  // Runs `work` seconds of one core on machine `m`'s host (shared with everything else
  // there), or as a plain delay without a CPU model; `kind` is where it is counted. A job
  // progresses at most one unit of work per second and uses `core_s_per_work` of the
  // host's core-seconds per unit of work.
  void Cpu(int machine, double work, double CpuBreakdown::*kind, std::function<void()> done) {
    Cpu(machine, work, kind, 1.0, std::move(done));
  }
  void Cpu(int machine, double work, double CpuBreakdown::*kind, double core_s_per_work,
           std::function<void()> done) {
    Cpu(machine, work, kind, core_s_per_work, 1.0, std::move(done));
  }
  // The same, for a writer or reader (kind send_s or recv_s) that wakes `wakes` times
  // for its message: each wake-up is charged as a preemption (Calibration::preempt_s).
  void Cpu(int machine, double work, double CpuBreakdown::*kind, double core_s_per_work,
           double wakes, std::function<void()> done);
  // How many times the writer (`sending`) or reader of m on c wakes: max(1, bytes /
  // Calibration::shaped_bytes_per_wake) on a shaped link, 1 elsewhere or when that is 0;
  // on a shaped link shared with other streams, shaped_stream_wakes_per_byte more a byte.
  double Wakeups(const Conn& c, const Msg& m, bool sending) const;
  // The share of other streams' bytes at c's sending (or receiving) end of a shaped link,
  // 1 - 1/k (Conn::streams_out, streams_in); 0 elsewhere.
  double OtherStreams(const Conn& c, bool sending) const;
  // T of Calibration::shaped_stream_turns_s_per_byte for m on c: how far its sending
  // process's writers take turns on the link (1 at credit 0 with several streams, 0 with
  // one stream or a credit that holds a message of each).
  double Turns(const Conn& c, const Msg& m) const;
  // The CPU a byte of m costs one side more for the streams sharing c's link end:
  // OtherStreams x (shaped_stream_s_per_byte + Turns x shaped_stream_turns_s_per_byte).
  double StreamsExtra(const Conn& c, const Msg& m, bool sending) const;
  // Encoding (or decoding) m's values for a 16-bit wire: CPU seconds, 0 for float32.
  double ConversionCost(const Msg& m, bool encode) const;
  double SendCost(const Conn& c, const Msg& m) const;
  double RecvCost(const Conn& c, const Msg& m) const;
  double ShapedExtra() const;

  // Parameter-server cluster.
  absl::Status Setup();
  void Send(int conn, MsgKind kind, int slice, uint64_t iteration, int64_t priority,
            int64_t tiebreak, int64_t bytes);
  void Pump(int queue);
  void PumpReference(int queue);
  // The mirror of the queue (LinkState): `conn`'s lane is idle with messages, or not.
  void MarkReady(int conn);
  void UnmarkReady(int conn);
  void StartWrite(int conn, int msg);
  void WriteDone(int conn, int msg);
  void Release(int conn, int msg);
  void Drain(int conn);
  // The wire drains a kernel buffer in pieces of buffer / kDrainPiecesPerBuffer bytes,
  // at least kMinDrainPiece (the kernel's largest segment, 64 KiB): a blocked write is
  // released within one piece of when its bytes fit.
  static constexpr int64_t kDrainPiecesPerBuffer = 16;
  static constexpr int64_t kMinDrainPiece = 64 * 1024;
  int64_t DrainPiece() const;
  void Arrive(int conn, int msg);
  void ReadNext(int conn);
  void Deliver(int conn, int msg, std::function<void()> reader_free);
  void Dispatch(int server, const std::vector<ToWorker>& out);
  void SendGradient(WorkerState& w, int slice, int64_t iteration);
  // SendGradient once the slice's gradient is on the host (device copies), else now.
  void GradientToHost(WorkerState& w, int slice);

  // Every engine.
  void StartIteration(WorkerState& w);
  void TryForward(WorkerState& w);
  void Compute(WorkerState& w, double seconds, const std::string& name, const char* category,
               std::function<void()> done);
  void BackwardBlock(WorkerState& w);
  void EndIteration(WorkerState& w);

  // All-reduce.
  void BucketReady(int bucket);
  void StartAllReduce();
  void RingStep(int bucket, int step);

  void TraceEvent(int proc, int track, const std::string& name, const char* cat, double start,
                  double end, const std::string& args = "");

  const SimOptions& o_;
  const Calibration& cal_;
  absl::Status status_;
  FluidScheduler fluid_;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> timers_;
  int64_t seq_ = 0;
  int64_t events_ = 0;
  int64_t messages_ = 0;
  CpuBreakdown cpu_work_;  // the whole run's

  int num_machines_ = 0;
  std::vector<int> cpu_;   // per host; empty without a CPU model
  std::vector<int> host_jobs_;                    // per host: CPU jobs running
  std::vector<std::vector<int64_t>> host_compute_;  // per host: computations running
  std::vector<int> up_;    // per machine
  std::vector<int> down_;  // per machine
  ModeTraits traits_;
  std::optional<SlicePlan> plan_;
  std::vector<std::pair<int, int>> block_slices_;  // per block: slice range
  std::vector<std::pair<int, int>> block_tensors_;  // per block: tensor range
  std::vector<int64_t> tensor_bytes_;
  std::vector<int64_t> block_bytes_;  // per block: its parameters' float32 bytes
  int64_t model_bytes_ = 0;
  std::vector<WorkerState> workers_;
  std::vector<std::unique_ptr<ParameterShard>> shards_;
  std::vector<std::unique_ptr<SendQueue<int>>> queues_;
  std::vector<std::vector<int>> queue_lanes_;  // per queue: conn of each lane
  std::vector<LinkState> links_;               // per queue
  std::vector<Conn> conns_;
  std::vector<std::vector<int>> up_conn_;    // [worker][server]
  std::vector<std::vector<int>> down_conn_;  // [server][worker]
  std::vector<Msg> msgs_;
  std::vector<int> free_msgs_;
  std::vector<std::unique_ptr<TraceRecorder>> traces_;
  std::vector<std::vector<int>> server_from_track_, server_to_track_;

  // All-reduce state: buckets of tensor ids, the workers that finished each.
  std::vector<std::vector<int>> buckets_;
  std::vector<int64_t> bucket_bytes_;
  std::vector<int> tensor_bucket_;
  std::vector<std::vector<int>> bucket_pending_;  // [worker][bucket] tensors not yet ready
  std::vector<int> bucket_ready_workers_;
  int next_reduce_ = 0;   // next bucket to reduce
  bool reducing_ = false;
  std::vector<int> reduced_upto_;  // per iteration: buckets reduced
  int64_t reduce_iteration_ = 0;
  std::vector<std::function<void()>> waiting_for_reduce_;  // workers done with backward
};

}  // namespace p3::sim::internal

#endif  // P3_P3_SIM_SIMULATION_H_
