// One direction of a worker-server stream on the simulated clock: a message queued on
// its lane of the real SendQueue, the writer taking it when the queue hands it out
// (credit included), the kernel's send buffer, the wire (a fluid transfer over the two
// NICs or loopback, then the latency), and the receiving side's reader thread.
#include "p3/sim/simulation.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace p3::sim::internal {

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
  const double wakes = Wakeups(c, msgs_[msg], /*sending=*/true);
  const int machine = MachineOfProc(c.src);
  At(now() + cal_.write_gap_s, [this, conn, msg, machine, work, wakes] {
    Cpu(machine, work, &CpuBreakdown::send_s, 1.0, wakes,
        [this, conn, msg] { WriteDone(conn, msg); });
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
  // A write completes once its last byte is in the buffer: when the bytes not yet on the
  // wire, its own included, fit. A message larger than the buffer, or one behind a large
  // one, waits for the wire to drain the excess, not for whole messages to leave.
  if (c.kernel_bytes <= cal_.kernel_buffer_bytes) {
    Release(conn, msg);
  } else {
    c.blocked = msg;
  }
  if (!c.draining) Drain(conn);
}

int64_t Simulation::DrainPiece() const {
  return std::max<int64_t>(kMinDrainPiece, cal_.kernel_buffer_bytes / kDrainPiecesPerBuffer);
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
               // Values name their version, as the real server's do; m.iteration is it.
               absl::StrCat("\"slice\": ", m.slice,
                            m.kind == MsgKind::kParams ? ", \"version\": " : ", \"iteration\": ",
                            m.iteration, ", \"bytes\": ", m.bytes));
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
  // The wire takes the buffer's bytes a piece at a time, so that a blocked write sees
  // the room as it frees; the message arrives with its last piece.
  const int64_t total = m.bytes + cal_.header_bytes * m.parts;
  const int64_t piece = std::min(total - c.front_sent, DrainPiece());
  const double wire = static_cast<double>(piece);
  auto done = [this, conn, msg, piece, total] {
    Conn& cc = conns_[conn];
    cc.kernel_bytes -= piece;
    cc.front_sent += piece;
    if (cc.front_sent == total) {
      cc.kernel.pop_front();
      cc.front_sent = 0;
      At(now() + cal_.latency_s, [this, conn, msg] { Arrive(conn, msg); });
    }
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
  const double wakes = Wakeups(c, msgs_[msg], /*sending=*/false);
  Cpu(MachineOfProc(c.dst), work, &CpuBreakdown::recv_s, 1.0, wakes, [this, conn, msg, start] {
    Deliver(conn, msg, [this, conn, msg, start] {
      const Conn& cc = conns_[conn];
      const Msg& m = msgs_[msg];
      if (o_.trace && m.kind != MsgKind::kPull && m.kind != MsgKind::kAck) {
        // The names and categories of the real server's and worker's events.
        TraceEvent(cc.dst, cc.recv_track,
                   !cc.upstream  ? absl::StrCat("params ", m.slice)
                   : m.completed ? absl::StrCat("aggregate+update ", m.slice)
                                 : absl::StrCat("aggregate ", m.slice),
                   !cc.upstream ? "receive" : m.completed ? "update" : "aggregate", start, now(),
                   absl::StrCat("\"slice\": ", m.slice,
                                cc.upstream ? ", \"iteration\": " : ", \"version\": ",
                                m.iteration));
      }
      free_msgs_.push_back(msg);
      ReadNext(conn);
    });
  });
}

}  // namespace p3::sim::internal
