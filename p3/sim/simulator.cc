#include "p3/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <queue>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "p3/core/cluster_signature.h"
#include "p3/core/send_queue.h"
#include "p3/core/parameter_shard.h"
#include "p3/sim/fluid.h"
#include "p3/core/version_tracker.h"
#include "p3/core/worker_core.h"

namespace p3::sim {

absl::StatusOr<Profile> LoadProfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read the profile ", path));
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  }
  Profile p;
  p.model = j.value("model", "");
  p.batch = j.value("batch", int64_t{0});
  p.source = j.value("source", "");
  if (p.batch < 1) return absl::InvalidArgumentError(absl::StrCat(path, ": batch must be >= 1"));
  if (!j.contains("blocks") || !j["blocks"].is_array() || j["blocks"].empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": \"blocks\" must be a non-empty array"));
  }
  for (const nlohmann::json& b : j["blocks"]) {
    ProfileBlock block;
    if (!b.is_object() || !b.contains("forward_s") || !b.contains("backward_s") ||
        !b["forward_s"].is_number() || !b["backward_s"].is_number()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": block ", p.blocks.size(), " needs numbers forward_s, backward_s"));
    }
    block.name = b.value("name", absl::StrCat("block", p.blocks.size()));
    block.forward_s = b["forward_s"].get<double>();
    block.backward_s = b["backward_s"].get<double>();
    if (block.forward_s < 0 || block.backward_s < 0) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": block ", block.name,
                                                     " has a negative time"));
    }
    if (b.contains("params")) {
      if (!b["params"].is_array()) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": params of ", block.name,
                                                       " must be an array of sizes"));
      }
      for (const nlohmann::json& n : b["params"]) {
        if (!n.is_number_integer() || n.get<int64_t>() < 1) {
          return absl::InvalidArgumentError(
              absl::StrCat(path, ": params of ", block.name, " must be sizes >= 1"));
        }
        block.params.push_back(n.get<int64_t>());
      }
    }
    p.blocks.push_back(std::move(block));
  }
  return p;
}

std::vector<TensorEntry> ProfileTensors(const Profile& profile) {
  std::vector<TensorEntry> out;
  for (const ProfileBlock& b : profile.blocks) {
    for (size_t i = 0; i < b.params.size(); ++i) {
      out.push_back({absl::StrCat(b.name, "/", i), b.params[i]});
    }
  }
  return out;
}

namespace {

constexpr double kBytesPerGbit = 1e9 / 8;

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
  // The kernel's send buffer: messages written and not yet on the wire.
  std::deque<int> kernel;
  int64_t kernel_bytes = 0;
  bool draining = false;
  std::optional<int> blocked;  // a write waiting for room in the kernel buffer
  // The receiving side's reader thread.
  std::deque<int> inbox;
  bool reading = false;
  int send_track = 0;
  int recv_track = 0;
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
  std::vector<double> iteration_end;
  std::vector<double> compute_s;  // per iteration
  std::vector<double> wait_s;
  int compute_track = 0;
  int wait_track = 0;
};

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
           std::function<void()> done);
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
  void Arrive(int conn, int msg);
  void ReadNext(int conn);
  void Deliver(int conn, int msg, std::function<void()> reader_free);
  void Dispatch(int server, const std::vector<Outgoing>& out);
  void SendGradient(WorkerState& w, int slice);

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

int Simulation::MachineOfProc(int proc) const {
  if (proc < o_.workers) return proc % num_machines_;
  const int s = proc - o_.workers;
  return ((o_.colocated ? 0 : o_.workers) + s) % num_machines_;
}

void Simulation::Cpu(int machine, double work, double CpuBreakdown::*kind,
                     double core_s_per_work, std::function<void()> done) {
  if (cpu_.empty()) {
    cpu_work_.*kind += work;
    At(now() + work, std::move(done));
    return;
  }
  cpu_work_.*kind += work * core_s_per_work;
  const int host = HostOfMachine(machine);
  const bool wakes = kind == &CpuBreakdown::send_s || kind == &CpuBreakdown::recv_s;
  std::vector<int64_t>& computing = host_compute_[host];
  if (wakes && cal_.preempt_s > 0 && !computing.empty() &&
      static_cast<double>(computing.size()) >= o_.cpu_cores_per_host) {
    // Every core is computing: the woken thread preempts one of the running jobs, each
    // alike (more jobs than computations when other messages are being handled too).
    const double lost = cal_.preempt_s / host_jobs_[host];
    for (int64_t id : computing) {
      // A computation's unit of work costs 1 / shared_host_compute_speed core-seconds.
      fluid_.AddWork(id, lost * cal_.shared_host_compute_speed);
      cpu_work_.preempt_s += lost;
    }
  }
  ++host_jobs_[host];
  if (kind != &CpuBreakdown::compute_s) {
    fluid_.Start(work, {{cpu_[host], core_s_per_work}}, 1.0,
                 [this, host, done = std::move(done)] {
                   --host_jobs_[host];
                   done();
                 });
    return;
  }
  // A computation: kept in host_compute_ while it runs, to be charged for preemptions.
  auto id = std::make_shared<int64_t>(-1);
  *id = fluid_.Start(work, {{cpu_[host], core_s_per_work}}, 1.0,
                     [this, host, id, done = std::move(done)] {
                       --host_jobs_[host];
                       std::vector<int64_t>& c = host_compute_[host];
                       c.erase(std::find(c.begin(), c.end(), *id));
                       done();
                     });
  computing.push_back(*id);
}

double Simulation::ShapedExtra() const {
  if (o_.bandwidth_gbps <= 0) return 0;
  return cal_.shaped_s_per_byte_at_1g * std::pow(o_.bandwidth_gbps, -cal_.shaped_exponent);
}

double Simulation::ConversionCost(const Msg& m, bool encode) const {
  if (o_.wire_dtype == WireDType::kFloat32) return 0;
  const bool f16 = o_.wire_dtype == WireDType::kFloat16;
  const double per_value =
      encode ? (f16 ? cal_.f16_encode_s_per_value : cal_.bf16_encode_s_per_value)
             : (f16 ? cal_.f16_decode_s_per_value : cal_.bf16_decode_s_per_value);
  return per_value * static_cast<double>(m.values);
}

double Simulation::SendCost(const Conn& c, const Msg& m) const {
  const double per_message = cal_.per_message_s * m.parts;
  // 16-bit: a worker encodes its gradient (through shared memory the server rounds it
  // instead, RecvCost); a server encodes each version once for all its workers.
  const double encode = !c.upstream ? ConversionCost(m, true) / o_.workers
                        : c.kind == ConnKind::kShm ? 0
                                                   : ConversionCost(m, true);
  if (c.kind == ConnKind::kShm) return per_message + encode;
  const double extra = c.kind == ConnKind::kNetwork ? ShapedExtra() : 0;
  return per_message + encode + (cal_.send_s_per_byte + extra) * static_cast<double>(m.bytes);
}

double Simulation::RecvCost(const Conn& c, const Msg& m) const {
  const double per_message = cal_.per_message_s * m.parts;
  if (c.kind == ConnKind::kShm) {
    // The float32 side of the copy; on a 16-bit wire the gradient is rounded (encoded
    // and decoded) and the values decoded into the worker's memory.
    const double decode = ConversionCost(m, false);
    const double round = c.upstream ? ConversionCost(m, true) + decode : decode;
    return per_message + round +
           cal_.shm_s_per_byte * static_cast<double>(m.values) * sizeof(float);
  }
  const double extra = c.kind == ConnKind::kNetwork ? ShapedExtra() : 0;
  return per_message + ConversionCost(m, false) +
         (cal_.recv_s_per_byte + extra) * static_cast<double>(m.bytes);
}

void Simulation::TraceEvent(int proc, int track, const std::string& name, const char* cat,
                            double start, double end, const std::string& args) {
  if (!o_.trace) return;
  traces_[proc]->Complete(track, name, cat, absl::UnixEpoch() + absl::Seconds(start),
                          absl::UnixEpoch() + absl::Seconds(end), args);
}

void Simulation::Loop() {
  while (status_.ok()) {
    const double tf = fluid_.NextCompletion();
    const double tt = timers_.empty() ? kUnlimitedRate : timers_.top().t;
    if (std::isinf(tf) && std::isinf(tt)) break;
    ++events_;
    if (tt <= tf) {
      // priority_queue only exposes a const top; the entry is popped right after the
      // move, which leaves its time and sequence (the heap's keys) in place.
      Timer timer = std::move(const_cast<Timer&>(timers_.top()));
      timers_.pop();
      fluid_.AdvanceTo(timer.t);
      timer.fn();
    } else {
      fluid_.AdvanceTo(tf);
    }
  }
}

// ---- parameter servers -------------------------------------------------------------

absl::Status Simulation::Setup() {
  traits_ = TraitsOf(o_.mode);
  SlicePlanOptions plan_options;
  plan_options.granularity = traits_.sliced ? Granularity::kSliced : Granularity::kTensor;
  plan_options.slice_params = o_.slice_params;
  plan_options.split_threshold = o_.split_threshold;
  plan_options.num_servers = o_.servers;
  const std::vector<TensorEntry> tensors = ProfileTensors(o_.profile);
  absl::StatusOr<SlicePlan> plan = SlicePlan::Create(tensors, plan_options);
  if (!plan.ok()) return plan.status();
  plan_ = *std::move(plan);

  ClusterSignature sig;
  sig.num_workers = o_.workers;
  sig.num_servers = o_.servers;
  sig.plan = plan_options;
  sig.values_on_push = traits_.values_on_push;
  sig.priority = traits_.priority;
  for (const TensorEntry& t : tensors) sig.tensors.push_back({t.name, {t.numel}, "float32"});

  for (int s = 0; s < o_.servers; ++s) {
    ShardOptions so;
    so.server_index = s;
    so.num_workers = o_.workers;
    so.keep_values = false;
    shards_.push_back(std::make_unique<ParameterShard>(so));
  }
  const SendQueueOptions order{.priority = traits_.priority, .credit_bytes = o_.credit_bytes};
  auto new_queue = [&]() {
    queues_.push_back(std::make_unique<SendQueue<int>>(order));
    queue_lanes_.emplace_back();
    links_.emplace_back();
    return static_cast<int>(queues_.size()) - 1;
  };
  // One send queue per process for its network streams; a shared-memory stream has its
  // own (as in worker/ and server/).
  std::vector<int> link(o_.workers + o_.servers);
  for (int& l : link) l = new_queue();
  up_conn_.assign(o_.workers, std::vector<int>(o_.servers));
  down_conn_.assign(o_.servers, std::vector<int>(o_.workers));
  for (int dir = 0; dir < 2; ++dir) {
    for (int w = 0; w < o_.workers; ++w) {
      for (int s = 0; s < o_.servers; ++s) {
        Conn c;
        c.upstream = dir == 0;
        c.worker = w;
        c.server = s;
        c.src = c.upstream ? w : o_.workers + s;
        c.dst = c.upstream ? o_.workers + s : w;
        const bool same = MachineOfProc(c.src) == MachineOfProc(c.dst);
        c.kind = !same ? (o_.bandwidth_gbps > 0 ? ConnKind::kNetwork : ConnKind::kLoopback)
                       : (o_.shared_memory ? ConnKind::kShm : ConnKind::kLoopback);
        c.queue_index = c.kind == ConnKind::kShm ? new_queue() : link[c.src];
        c.queue = queues_[c.queue_index].get();
        c.lane = c.queue->AddLane();
        const int id = static_cast<int>(conns_.size());
        queue_lanes_[c.queue_index].push_back(id);
        if (o_.trace) {
          TraceRecorder& src = *traces_[c.src];
          TraceRecorder& dst = *traces_[c.dst];
          c.send_track = src.Track(c.upstream ? absl::StrCat("send to server ", s)
                                              : absl::StrCat("to worker ", w));
          c.recv_track = dst.Track(c.upstream ? absl::StrCat("from worker ", w)
                                              : absl::StrCat("receive from server ", s));
        }
        conns_.push_back(c);
        (c.upstream ? up_conn_[w][s] : down_conn_[s][w]) = id;
      }
    }
  }
  // Workers: the real protocol state and version tracker, no values.
  const int num_slices = static_cast<int>(plan_->slices().size());
  for (int w = 0; w < o_.workers; ++w) {
    WorkerState& ws = workers_[w];
    ws.tracker = std::make_unique<VersionTracker>(num_slices);
    ws.core = std::make_unique<WorkerCore>(
        WorkerCoreOptions{.rank = w, .num_servers = o_.servers,
                          .values_on_push = traits_.values_on_push,
                          .wire_dtype = o_.wire_dtype},
        *plan_, nullptr, nullptr, ws.tracker.get());
  }
  // The handshake, in no simulated time: every worker joins every shard, worker 0's
  // initial values go in, version 0 of every slice reaches every worker.
  for (int s = 0; s < o_.servers; ++s) {
    for (int w = 0; w < o_.workers; ++w) {
      absl::StatusOr<std::vector<Outgoing>> joined = shards_[s]->Join(sig, w);
      if (!joined.ok()) return joined.status();
    }
  }
  std::vector<std::vector<ToServer>> inits;
  for (int w = 0; w < o_.workers; ++w) {
    absl::StatusOr<std::vector<ToServer>> start =
        workers_[w].core->Start(std::vector<uint64_t>(o_.servers, 0));
    if (!start.ok()) return start.status();
    inits.push_back(*std::move(start));
  }
  for (const std::vector<ToServer>& list : inits) {
    for (const ToServer& m : list) {
      const Slice& slice = plan_->slices()[m.message.slice_id];
      absl::StatusOr<std::vector<Outgoing>> out =
          shards_[m.server]->Init(0, slice.id, nullptr, slice.length, 0);
      if (!out.ok()) return out.status();
      for (const Outgoing& o : *out) {
        absl::StatusOr<bool> got = workers_[o.rank].core->ParamsInPlace(
            m.server, o.slice_id, o.iteration, 0, plan_->slices()[o.slice_id].length);
        if (!got.ok()) return got.status();
      }
    }
  }
  return absl::OkStatus();
}

void Simulation::Send(int conn, MsgKind kind, int slice, uint64_t iteration, int64_t priority,
                      int64_t tiebreak, int64_t bytes) {
  int id;
  if (!free_msgs_.empty()) {
    id = free_msgs_.back();
    free_msgs_.pop_back();
  } else {
    id = static_cast<int>(msgs_.size());
    msgs_.emplace_back();
  }
  Msg& m = msgs_[id];
  m.kind = kind;
  m.slice = slice;
  m.iteration = iteration;
  m.bytes = bytes;
  m.values = bytes / static_cast<int64_t>(BytesPerValue(o_.wire_dtype));
  m.parts = m.values > 0 ? static_cast<int>((m.values + o_.max_message_params - 1) /
                                            std::max<int64_t>(1, o_.max_message_params))
                         : 1;
  m.conn = conn;
  m.completed = false;
  ++messages_;
  Conn& c = conns_[conn];
  const bool pushed = c.queue->Push(c.lane, id, priority, tiebreak, bytes);
  if (pushed && !o_.reference_paths) {
    const int64_t seq = links_[c.queue_index].next_seq++;
    const SendKey key = priority == SendQueue<int>::kUrgent ? SendKey{priority, 0, seq}
                        : traits_.priority                      ? SendKey{priority, tiebreak, seq}
                                                                : SendKey{0, 0, seq};
    UnmarkReady(conn);
    c.pending.push({key, id});
    MarkReady(conn);
  }
  Pump(c.queue_index);
}

void Simulation::MarkReady(int conn) {
  const Conn& c = conns_[conn];
  if (!c.writing && !c.pending.empty()) {
    links_[c.queue_index].ready.insert({c.pending.top().first, conn});
  }
}

void Simulation::UnmarkReady(int conn) {
  const Conn& c = conns_[conn];
  if (!c.writing && !c.pending.empty()) {
    links_[c.queue_index].ready.erase({c.pending.top().first, conn});
  }
}

void Simulation::Pump(int queue) {
  if (o_.reference_paths) return PumpReference(queue);
  LinkState& link = links_[queue];
  while (!link.ready.empty() && status_.ok()) {
    const int conn = link.ready.begin()->second;
    Conn& c = conns_[conn];
    const int expected = c.pending.top().second;
    const int64_t bytes = msgs_[expected].bytes;
    // SendQueue's credit rule; when it holds this lane back, it holds back every lane.
    if (link.in_flight_items > 0 && link.in_flight_bytes + bytes > o_.credit_bytes) return;
    std::optional<SendQueue<int>::Item> item = queues_[queue]->TryPop(c.lane);
    if (!item || item->value != expected) {
      return Fail(absl::InternalError(absl::StrCat(
          "the send queue handed out ", item ? absl::StrCat("message ", item->value) : "nothing",
          " on connection ", conn, "; the simulator expected message ", expected)));
    }
    link.ready.erase(link.ready.begin());
    ++link.in_flight_items;
    link.in_flight_bytes += bytes;
    c.pending.pop();
    c.writing = true;
    StartWrite(conn, item->value);
  }
}

void Simulation::PumpReference(int queue) {
  bool progress = true;
  while (progress) {
    progress = false;
    for (int conn : queue_lanes_[queue]) {
      Conn& c = conns_[conn];
      if (c.writing) continue;
      std::optional<SendQueue<int>::Item> item = queues_[queue]->TryPop(c.lane);
      if (!item) continue;
      c.writing = true;
      progress = true;
      StartWrite(conn, item->value);
    }
  }
}

void Simulation::StartWrite(int conn, int msg) {
  msgs_[msg].popped = now();
  const Conn& c = conns_[conn];
  const double work = SendCost(c, msgs_[msg]);
  const int machine = MachineOfProc(c.src);
  At(now() + cal_.write_gap_s, [this, conn, msg, machine, work] {
    Cpu(machine, work, &CpuBreakdown::send_s, [this, conn, msg] { WriteDone(conn, msg); });
  });
}

void Simulation::WriteDone(int conn, int msg) {
  Conn& c = conns_[conn];
  if (c.kind == ConnKind::kShm) {
    Release(conn, msg);
    Arrive(conn, msg);
    return;
  }
  const Msg& m = msgs_[msg];
  c.kernel.push_back(msg);
  c.kernel_bytes += m.bytes + cal_.header_bytes * m.parts;
  if (c.kernel.size() == 1 || c.kernel_bytes <= cal_.kernel_buffer_bytes) {
    Release(conn, msg);
  } else {
    c.blocked = msg;
  }
  if (!c.draining) Drain(conn);
}

void Simulation::Release(int conn, int msg) {
  Conn& c = conns_[conn];
  const Msg& m = msgs_[msg];
  if (o_.trace) {
    const char* what = m.kind == MsgKind::kGradient ? "gradient "
                       : m.kind == MsgKind::kPull   ? "pull "
                       : m.kind == MsgKind::kAck    ? "ack "
                                                    : "params ";
    TraceEvent(c.src, c.send_track, absl::StrCat(what, m.slice), c.upstream ? "send" : "send",
               m.popped, now(),
               absl::StrCat("\"slice\": ", m.slice, ", \"iteration\": ", m.iteration,
                            ", \"bytes\": ", m.bytes));
  }
  c.writing = false;
  c.queue->Release(c.lane, m.bytes);
  if (!o_.reference_paths) {
    LinkState& link = links_[c.queue_index];
    --link.in_flight_items;
    link.in_flight_bytes -= m.bytes;
    MarkReady(conn);
  }
  Pump(c.queue_index);
}

void Simulation::Drain(int conn) {
  Conn& c = conns_[conn];
  if (c.kernel.empty()) {
    c.draining = false;
    return;
  }
  c.draining = true;
  const int msg = c.kernel.front();
  const Msg& m = msgs_[msg];
  const double wire = static_cast<double>(m.bytes + cal_.header_bytes * m.parts);
  auto done = [this, conn, msg] {
    Conn& cc = conns_[conn];
    const Msg& mm = msgs_[msg];
    cc.kernel.pop_front();
    cc.kernel_bytes -= mm.bytes + cal_.header_bytes * mm.parts;
    At(now() + cal_.latency_s, [this, conn, msg] { Arrive(conn, msg); });
    if (cc.blocked && cc.kernel_bytes <= cal_.kernel_buffer_bytes) {
      const int blocked = *cc.blocked;
      cc.blocked.reset();
      Release(conn, blocked);
    }
    Drain(conn);
  };
  if (c.kind == ConnKind::kLoopback) {
    fluid_.Start(wire, {}, cal_.loopback_gbps * kBytesPerGbit, done);
  } else {
    fluid_.Start(wire, {{up_[MachineOfProc(c.src)], 1.0}, {down_[MachineOfProc(c.dst)], 1.0}},
                 kUnlimitedRate, done);
  }
}

void Simulation::Arrive(int conn, int msg) {
  Conn& c = conns_[conn];
  c.inbox.push_back(msg);
  if (!c.reading) ReadNext(conn);
}

void Simulation::ReadNext(int conn) {
  Conn& c = conns_[conn];
  if (c.inbox.empty()) {
    c.reading = false;
    return;
  }
  c.reading = true;
  const int msg = c.inbox.front();
  c.inbox.pop_front();
  const double start = now();
  const double work = RecvCost(c, msgs_[msg]);
  Cpu(MachineOfProc(c.dst), work, &CpuBreakdown::recv_s, [this, conn, msg, start] {
    Deliver(conn, msg, [this, conn, msg, start] {
      const Conn& cc = conns_[conn];
      const Msg& m = msgs_[msg];
      if (o_.trace && m.kind != MsgKind::kPull && m.kind != MsgKind::kAck) {
        // The names and categories of the real server's and worker's events.
        TraceEvent(cc.dst, cc.recv_track,
                   !cc.upstream  ? absl::StrCat("params ", m.slice)
                   : m.completed ? std::string("aggregate+update")
                                 : std::string("aggregate"),
                   !cc.upstream ? "receive" : m.completed ? "update" : "aggregate", start, now(),
                   absl::StrCat("\"slice\": ", m.slice, ", \"iteration\": ", m.iteration));
      }
      free_msgs_.push_back(msg);
      ReadNext(conn);
    });
  });
}

void Simulation::Dispatch(int server, const std::vector<Outgoing>& out) {
  for (const Outgoing& o : out) {
    const int conn = down_conn_[server][o.rank];
    const Slice& slice = plan_->slices()[o.slice_id];
    if (o.kind == Outgoing::Kind::kParams) {
      Send(conn, MsgKind::kParams, o.slice_id, o.iteration, o.priority, o.slice_id,
           slice.length * static_cast<int64_t>(BytesPerValue(o_.wire_dtype)));
    } else if (o.kind == Outgoing::Kind::kAck) {
      Send(conn, MsgKind::kAck, o.slice_id, o.iteration, o.priority, o.slice_id, 0);
    }
  }
}

void Simulation::Deliver(int conn, int msg, std::function<void()> reader_free) {
  const Conn& c = conns_[conn];
  const Msg m = msgs_[msg];
  const Slice& slice = plan_->slices()[m.slice];
  if (c.upstream) {
    ParameterShard& shard = *shards_[c.server];
    std::vector<Outgoing> out;
    if (m.kind == MsgKind::kGradient) {
      const uint64_t before = shard.SliceValues(m.slice)->second;
      absl::Status s = shard.Gradient(c.worker, m.slice, m.iteration, nullptr, slice.length, 0, &out);
      if (!s.ok()) return Fail(s);
      if (shard.SliceValues(m.slice)->second != before) {
        msgs_[msg].completed = true;
        // The last gradient: the handler thread sums the W gradients and updates.
        const double work = cal_.update_s_per_byte * static_cast<double>(m.values) *
                           sizeof(float) * o_.workers;
        const int machine = MachineOfProc(c.dst);
        Cpu(machine, work, &CpuBreakdown::update_s, [this, server = c.server, out, reader_free] {
          Dispatch(server, out);
          reader_free();
        });
        return;
      }
    } else {
      absl::StatusOr<std::vector<Outgoing>> pulled =
          shard.Pull(c.worker, m.slice, m.iteration);
      if (!pulled.ok()) return Fail(pulled.status());
      out = *std::move(pulled);
    }
    Dispatch(c.server, out);
    reader_free();
    return;
  }
  WorkerState& w = workers_[c.worker];
  if (m.kind == MsgKind::kParams) {
    absl::StatusOr<bool> got =
        w.core->ParamsInPlace(c.server, m.slice, m.iteration, 0, slice.length);
    if (!got.ok()) return Fail(got.status());
    reader_free();
    TryForward(w);
    return;
  }
  absl::StatusOr<ToServer> pull = w.core->Ack(c.server, m.slice, m.iteration);
  if (!pull.ok()) return Fail(pull.status());
  Send(up_conn_[c.worker][pull->server], MsgKind::kPull, pull->message.slice_id,
       pull->message.version, pull->priority, pull->tiebreak, pull->bytes);
  reader_free();
}

void Simulation::SendGradient(WorkerState& w, int slice) {
  absl::StatusOr<ToServer> m = w.core->Gradient(slice, static_cast<uint64_t>(w.iteration));
  if (!m.ok()) return Fail(m.status());
  Send(up_conn_[w.rank][m->server], MsgKind::kGradient, slice, m->message.iteration, m->priority,
       m->tiebreak, m->bytes);
}

// ---- the worker's iteration (every engine) ----------------------------------------

void Simulation::Compute(WorkerState& w, double seconds, const std::string& name,
                         const char* category, std::function<void()> done) {
  const double start = now();
  const int machine = MachineOfProc(w.proc);
  // A block needs 1 / shared_host_compute_speed core-seconds per profile second, at most
  // one profile second per second: alone it runs at the profile's speed, and where it has
  // to share the cores (every core busy) it gets its share at the slower speed.
  const double work = seconds * cal_.compute_scale;
  const double core_s = 1.0 / cal_.shared_host_compute_speed;
  Cpu(machine, work, &CpuBreakdown::compute_s, core_s, [this, &w, start, name, category, done] {
    w.compute_s[w.iteration] += now() - start;
    TraceEvent(w.proc, w.compute_track, name, category, start, now(),
               absl::StrCat("\"iteration\": ", w.iteration));
    done();
  });
}

void Simulation::StartIteration(WorkerState& w) {
  if (o_.allreduce) {
    for (size_t b = 0; b < buckets_.size(); ++b) {
      bucket_pending_[w.rank][b] = static_cast<int>(buckets_[b].size());
    }
  }
  w.block = 0;
  w.waiting = true;
  w.wait_start = now();
  TryForward(w);
}

void Simulation::TryForward(WorkerState& w) {
  if (!w.waiting || !status_.ok()) return;
  const bool ps = !o_.allreduce && o_.mode != Mode::kLocal;
  if (ps) {
    const uint64_t version = static_cast<uint64_t>(w.iteration);
    int first = 0, last = 0;
    if (traits_.overlap_forward) {
      std::tie(first, last) = block_slices_[w.block];
    } else if (w.block == 0) {
      last = static_cast<int>(plan_->slices().size());
    }
    if (o_.reference_paths) {
      if (last > first && w.tracker->Missing(first, last, version) > 0) return;
    } else if (last > first) {
      if (w.ready_iteration != w.iteration || w.ready_block != w.block) {
        w.ready_iteration = w.iteration;
        w.ready_block = w.block;
        w.ready_upto = first;
      }
      while (w.ready_upto < last &&
             w.tracker->Missing(w.ready_upto, w.ready_upto + 1, version) == 0) {
        ++w.ready_upto;
      }
      if (w.ready_upto < last) return;
    }
  }
  w.waiting = false;
  if (now() > w.wait_start) {
    w.wait_s[w.iteration] += now() - w.wait_start;
    TraceEvent(w.proc, w.wait_track, absl::StrCat("wait v", w.iteration), "wait", w.wait_start,
               now());
  }
  const ProfileBlock& b = o_.profile.blocks[w.block];
  Compute(w, b.forward_s, "forward " + b.name, "forward", [this, &w] {
    if (++w.block < static_cast<int>(o_.profile.blocks.size())) {
      w.waiting = true;
      w.wait_start = now();
      TryForward(w);
    } else {
      w.block = static_cast<int>(o_.profile.blocks.size()) - 1;
      BackwardBlock(w);
    }
  });
}

void Simulation::BackwardBlock(WorkerState& w) {
  const ProfileBlock& b = o_.profile.blocks[w.block];
  Compute(w, b.backward_s, "backward " + b.name, "backward", [this, &w] {
    const auto [first_tensor, last_tensor] = block_tensors_[w.block];
    if (o_.allreduce) {
      for (int t = last_tensor - 1; t >= first_tensor; --t) {
        const int bucket = tensor_bucket_[t];
        if (--bucket_pending_[w.rank][bucket] == 0) BucketReady(bucket);
      }
    } else if (o_.mode != Mode::kLocal && traits_.overlap_backward) {
      // Autograd produces a block's gradients last parameter first.
      for (int t = last_tensor - 1; t >= first_tensor; --t) {
        for (int id = plan_->first_slice(t); id < plan_->first_slice(t + 1); ++id) {
          SendGradient(w, id);
        }
      }
    }
    if (--w.block >= 0) {
      BackwardBlock(w);
    } else {
      if (!o_.allreduce && o_.mode != Mode::kLocal && !traits_.overlap_backward) {
        for (const Slice& s : plan_->slices()) SendGradient(w, s.id);
      }
      EndIteration(w);
    }
  });
}

void Simulation::EndIteration(WorkerState& w) {
  auto next = [this, &w] {
    w.iteration_end.push_back(now());
    if (++w.iteration < o_.iterations) StartIteration(w);
  };
  if (o_.mode == Mode::kLocal || o_.allreduce) {
    // The optimizer runs on the worker, after (DDP) every bucket's all-reduce.
    auto step = [this, &w, next] {
      double bytes = 0;
      for (int64_t b : tensor_bytes_) bytes += static_cast<double>(b);
      const double start = now();
      const double per_byte = cal_.worker_update_s_per_byte >= 0 ? cal_.worker_update_s_per_byte
                                                                  : cal_.update_s_per_byte;
      const double work = per_byte * bytes;
      Cpu(MachineOfProc(w.proc), work, &CpuBreakdown::update_s, [this, &w, start, next] {
        TraceEvent(w.proc, w.compute_track, "optimizer", "update", start, now());
        next();
      });
    };
    if (o_.allreduce && o_.workers > 1) {
      const int64_t it = w.iteration;
      reduced_upto_.resize(std::max<size_t>(reduced_upto_.size(), it + 1), 0);
      if (reduced_upto_[it] == static_cast<int>(buckets_.size())) {
        step();
        return;
      }
      // Resumed by RingStep once the iteration's last bucket is reduced.
      w.waiting = true;
      w.wait_start = now();
      waiting_for_reduce_.push_back([this, &w, it, step] {
        w.waiting = false;
        w.wait_s[it] += now() - w.wait_start;
        TraceEvent(w.proc, w.wait_track, "wait all-reduce", "wait", w.wait_start, now());
        step();
      });
      return;
    }
    step();
    return;
  }
  next();
}

// ---- ring all-reduce with DDP's buckets --------------------------------------------

void Simulation::BucketReady(int bucket) {
  if (++bucket_ready_workers_[bucket] < o_.workers) return;
  if (o_.workers == 1) {
    bucket_ready_workers_[bucket] = 0;
    return;
  }
  if (!reducing_) StartAllReduce();
}

void Simulation::StartAllReduce() {
  if (next_reduce_ >= static_cast<int>(buckets_.size())) return;
  if (bucket_ready_workers_[next_reduce_] < o_.workers) return;
  reducing_ = true;
  bucket_ready_workers_[next_reduce_] = 0;
  RingStep(next_reduce_, 0);
}

void Simulation::RingStep(int bucket, int step) {
  const int n = o_.workers;
  if (step == 2 * (n - 1)) {
    reducing_ = false;
    reduced_upto_.resize(std::max<size_t>(reduced_upto_.size(), reduce_iteration_ + 1), 0);
    ++reduced_upto_[reduce_iteration_];
    ++next_reduce_;
    if (next_reduce_ == static_cast<int>(buckets_.size())) {
      next_reduce_ = 0;
      ++reduce_iteration_;
      std::vector<std::function<void()>> waiting;
      waiting.swap(waiting_for_reduce_);
      for (auto& fn : waiting) fn();
    }
    StartAllReduce();
    return;
  }
  const double chunk = static_cast<double>(bucket_bytes_[bucket]) / n;
  const bool reduce = step < n - 1;  // reduce-scatter, then all-gather
  auto left = std::make_shared<int>(n);
  for (int i = 0; i < n; ++i) {
    const int next = (i + 1) % n;
    const int host_from = MachineOfProc(i);
    const int host_to = MachineOfProc(next);
    auto done = [this, left, bucket, step] {
      if (--*left == 0) At(now() + cal_.latency_s, [this, bucket, step] { RingStep(bucket, step + 1); });
    };
    std::vector<Usage> uses;
    double max_rate = kUnlimitedRate;
    if (o_.bandwidth_gbps > 0) {
      uses.push_back({up_[host_from], 1.0});
      uses.push_back({down_[host_to], 1.0});
    } else {
      max_rate = cal_.loopback_gbps * kBytesPerGbit;
    }
    const double send = cal_.ring_send_s_per_byte + ShapedExtra();
    const double recv =
        cal_.ring_recv_s_per_byte + ShapedExtra() + (reduce ? cal_.ring_reduce_s_per_byte : 0);
    cpu_work_.ring_s += chunk * (send + recv);
    if (!cpu_.empty()) {
      uses.push_back({cpu_[HostOfMachine(host_from)], send});
      uses.push_back({cpu_[HostOfMachine(host_to)], recv});
    } else {
      // Without a CPU model the per-byte costs bound the rate of each side's thread.
      max_rate = std::min(max_rate, 1.0 / std::max(1e-30, std::max(send, recv)));
    }
    fluid_.Start(chunk, std::move(uses), max_rate, done);
  }
}

absl::StatusOr<SimResult> Simulation::Run() {
  if (o_.profile.blocks.empty()) return absl::InvalidArgumentError("the profile has no blocks");
  if (o_.workers < 1 || o_.servers < 1) {
    return absl::InvalidArgumentError("workers and servers must be >= 1");
  }
  if (o_.iterations < 2 || o_.warmup_iterations < 1 || o_.warmup_iterations >= o_.iterations) {
    return absl::InvalidArgumentError(
        "iterations must be >= 2 and warmup_iterations in 1..iterations-1");
  }
  if (!(o_.calibration.preempt_s >= 0)) {
    return absl::InvalidArgumentError("calibration.preempt_s must be >= 0");
  }
  const Calibration& cal = o_.calibration;
  for (double cost : {cal.bf16_encode_s_per_value, cal.bf16_decode_s_per_value,
                      cal.f16_encode_s_per_value, cal.f16_decode_s_per_value}) {
    if (!(cost >= 0)) {
      return absl::InvalidArgumentError(
          "calibration: the 16-bit conversion costs (*_encode_s_per_value, "
          "*_decode_s_per_value) must be >= 0");
    }
  }
  if (!(o_.calibration.shared_host_compute_speed > 0)) {
    return absl::InvalidArgumentError("calibration.shared_host_compute_speed must be > 0");
  }
  const bool local = o_.mode == Mode::kLocal;
  const int workers = local ? 1 : o_.workers;
  const bool ps = !local && !o_.allreduce;
  num_machines_ = !ps ? workers
                  : o_.machines > 0 ? o_.machines
                  : o_.colocated    ? std::max(o_.workers, o_.servers)
                                    : o_.workers + o_.servers;
  if (o_.cpu_cores_per_host > 0) {
    const int hosts = (num_machines_ + std::max(1, o_.machines_per_host) - 1) /
                      std::max(1, o_.machines_per_host);
    for (int h = 0; h < hosts; ++h) cpu_.push_back(fluid_.AddResource(o_.cpu_cores_per_host));
    host_jobs_.assign(hosts, 0);
    host_compute_.assign(hosts, {});
  }
  const double link = o_.bandwidth_gbps > 0
                          ? o_.bandwidth_gbps * kBytesPerGbit * cal_.goodput_factor
                          : kUnlimitedRate;
  for (int m = 0; m < num_machines_; ++m) {
    up_.push_back(fluid_.AddResource(link));
    down_.push_back(fluid_.AddResource(link));
  }
  // Tensor and block layout.
  int t = 0;
  for (const ProfileBlock& b : o_.profile.blocks) {
    block_tensors_.emplace_back(t, t + static_cast<int>(b.params.size()));
    t += static_cast<int>(b.params.size());
    for (int64_t n : b.params) tensor_bytes_.push_back(n * static_cast<int64_t>(sizeof(float)));
  }
  const int procs = ps ? o_.workers + o_.servers : workers;
  if (o_.trace) {
    for (int p = 0; p < procs; ++p) {
      const bool is_worker = p < workers;
      traces_.push_back(std::make_unique<TraceRecorder>(TraceOptions{
          .enabled = true,
          .process_name = is_worker ? absl::StrCat("worker ", p)
                                    : absl::StrCat("server ", p - o_.workers),
          .pid = is_worker ? 100 + p : 200 + (p - o_.workers),
          .max_events = 20000000}));
    }
  }
  workers_.resize(workers);
  for (int w = 0; w < workers; ++w) {
    WorkerState& ws = workers_[w];
    ws.rank = w;
    ws.proc = w;
    ws.compute_s.assign(o_.iterations, 0);
    ws.wait_s.assign(o_.iterations, 0);
    if (o_.trace) {
      ws.compute_track = traces_[w]->Track("compute");
      ws.wait_track = traces_[w]->Track("wait for parameters");
    }
  }
  if (ps) {
    if (absl::Status s = Setup(); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("cannot set up the cluster: ", s.message()));
    }
    for (int b = 0; b < static_cast<int>(o_.profile.blocks.size()); ++b) {
      block_slices_.emplace_back(plan_->first_slice(block_tensors_[b].first),
                                 plan_->first_slice(block_tensors_[b].second));
    }
  }
  if (o_.allreduce) {
    // DDP's buckets: parameters in reverse order, the first bucket capped smaller.
    int64_t filled = 0;
    tensor_bucket_.assign(tensor_bytes_.size(), 0);
    for (int i = static_cast<int>(tensor_bytes_.size()) - 1; i >= 0; --i) {
      const int64_t cap = buckets_.size() <= 1 ? o_.first_bucket_bytes : o_.bucket_bytes;
      if (buckets_.empty() || filled >= cap) {
        buckets_.emplace_back();
        bucket_bytes_.push_back(0);
        filled = 0;
      }
      buckets_.back().push_back(i);
      bucket_bytes_.back() += tensor_bytes_[i];
      filled += tensor_bytes_[i];
      tensor_bucket_[i] = static_cast<int>(buckets_.size()) - 1;
    }
    bucket_ready_workers_.assign(buckets_.size(), 0);
    bucket_pending_.assign(workers, std::vector<int>(buckets_.size(), 0));
    for (int w = 0; w < workers; ++w) {
      for (size_t b = 0; b < buckets_.size(); ++b) {
        bucket_pending_[w][b] = static_cast<int>(buckets_[b].size());
      }
    }
  }
  for (WorkerState& w : workers_) StartIteration(w);
  Loop();
  if (!status_.ok()) {
    return absl::InternalError(absl::StrCat("the core refused a message: ", status_.message()));
  }
  SimResult result;
  double sum = 0;
  for (const WorkerState& w : workers_) {
    if (static_cast<int>(w.iteration_end.size()) != o_.iterations) {
      return absl::InternalError(absl::StrCat("worker ", w.rank, " finished ",
                                              w.iteration_end.size(), " of ", o_.iterations,
                                              " iterations: the simulation stalled"));
    }
    WorkerBreakdown b;
    const int measured = o_.iterations - o_.warmup_iterations;
    for (int i = o_.warmup_iterations; i < o_.iterations; ++i) {
      b.iteration_s += w.iteration_end[i] - w.iteration_end[i - 1];
      b.compute_s += w.compute_s[i];
      b.exposed_comm_s += w.wait_s[i];
    }
    b.iteration_s /= measured;
    b.compute_s /= measured;
    b.exposed_comm_s /= measured;
    b.idle_s = std::max(0.0, b.iteration_s - b.compute_s - b.exposed_comm_s);
    sum += b.iteration_s;
    result.workers.push_back(b);
  }
  result.iteration_seconds = sum / workers;
  result.samples_per_second =
      static_cast<double>(o_.profile.batch) * workers / result.iteration_seconds;
  result.num_slices = plan_ ? static_cast<int>(plan_->slices().size()) : 0;
  result.num_messages = messages_;
  result.cpu = cpu_work_;
  for (double CpuBreakdown::*kind : {&CpuBreakdown::compute_s, &CpuBreakdown::send_s,
                                     &CpuBreakdown::recv_s, &CpuBreakdown::update_s,
                                     &CpuBreakdown::ring_s, &CpuBreakdown::preempt_s}) {
    result.cpu.*kind /= o_.iterations;
  }
  result.events = events_;
  result.simulated_seconds = now();
  result.traces = std::move(traces_);
  return result;
}

}  // namespace

absl::StatusOr<SimResult> Simulate(const SimOptions& options) {
  Simulation sim(options);
  return sim.Run();
}

}  // namespace p3::sim
