// The parameter-server processes (every mode but local and all-reduce): the real
// ParameterShard per server and WorkerCore per worker, set up with the handshake, and
// what each does with a message that arrives: a gradient or Pull on a server, values
// or an Ack on a worker.
#include "p3/sim/simulation.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "p3/core/cluster_signature.h"
#include "p3/core/wire_dtype.h"

namespace p3::sim::internal {

absl::Status Simulation::Setup() {
  traits_ = TraitsOf(o_.mode);
  SlicePlanOptions plan_options;
  plan_options.granularity = traits_.sliced ? Granularity::kSliced : Granularity::kTensor;
  plan_options.slice_params = o_.slice_params;
  plan_options.pack_params = traits_.sliced ? o_.pack_params : 0;
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
  // The network streams that share each stream's link ends, in its direction: counted
  // per (machine, direction), then read back by every stream.
  // And each sending process's own (a process sends in one direction only).
  std::vector<int> leaving(2 * num_machines_, 0), entering(2 * num_machines_, 0);
  std::vector<int> sent_by(o_.workers + o_.servers, 0);
  auto end = [this](int proc, bool upstream) { return 2 * MachineOfProc(proc) + upstream; };
  for (const Conn& c : conns_) {
    if (c.kind != ConnKind::kNetwork) continue;
    ++leaving[end(c.src, c.upstream)];
    ++entering[end(c.dst, c.upstream)];
    ++sent_by[c.src];
  }
  for (Conn& c : conns_) {
    if (c.kind != ConnKind::kNetwork) continue;
    c.streams_out = leaving[end(c.src, c.upstream)];
    c.streams_in = entering[end(c.dst, c.upstream)];
    c.process_streams = sent_by[c.src];
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
      absl::StatusOr<std::vector<ToWorker>> joined = shards_[s]->Join(sig, w);
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
      absl::StatusOr<std::vector<ToWorker>> out =
          shards_[m.server]->Init(0, slice.id, nullptr, slice.length, 0);
      if (!out.ok()) return out.status();
      for (const ToWorker& o : *out) {
        absl::StatusOr<bool> got = workers_[o.rank].core->ParamsInPlace(
            m.server, o.message.slice_id, o.message.version, 0,
            plan_->slices()[o.message.slice_id].length);
        if (!got.ok()) return got.status();
      }
    }
  }
  return absl::OkStatus();
}

void Simulation::Dispatch(int server, const std::vector<ToWorker>& out) {
  for (const ToWorker& o : out) {
    const int conn = down_conn_[server][o.rank];
    const Slice& slice = plan_->slices()[o.message.slice_id];
    if (o.message.kind == Downstream::Kind::kParams) {
      Send(conn, MsgKind::kParams, o.message.slice_id, o.message.version, o.priority,
           o.message.slice_id, slice.length * static_cast<int64_t>(BytesPerValue(o_.wire_dtype)));
    } else if (o.message.kind == Downstream::Kind::kAck) {
      Send(conn, MsgKind::kAck, o.message.slice_id, o.message.iteration, o.priority,
           o.message.slice_id, 0);
    }
  }
}

void Simulation::Deliver(int conn, int msg, std::function<void()> reader_free) {
  const Conn& c = conns_[conn];
  const Msg m = msgs_[msg];
  const Slice& slice = plan_->slices()[m.slice];
  if (c.upstream) {
    ParameterShard& shard = *shards_[c.server];
    std::vector<ToWorker> out;
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
      absl::StatusOr<std::vector<ToWorker>> pulled =
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

void Simulation::SendGradient(WorkerState& w, int slice, int64_t iteration) {
  absl::StatusOr<ToServer> m = w.core->Gradient(slice, static_cast<uint64_t>(iteration));
  if (!m.ok()) return Fail(m.status());
  Send(up_conn_[w.rank][m->server], MsgKind::kGradient, slice, m->message.iteration, m->priority,
       m->tiebreak, m->bytes);
}

}  // namespace p3::sim::internal
