// Where the simulated work runs and what it costs: each process's machine, the hosts'
// cores shared by the computation and the message threads (with the preemptions
// these cost the computation), and the CPU seconds of sending and receiving a message
// (per message, per byte, shaped links and the streams sharing them, 16-bit conversion,
// shared memory).
#include "p3/sim/simulation.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

namespace p3::sim::internal {

int Simulation::MachineOfProc(int proc) const {
  if (proc < o_.workers) return proc % num_machines_;
  const int s = proc - o_.workers;
  return ((o_.colocated ? 0 : o_.workers) + s) % num_machines_;
}

void Simulation::Cpu(int machine, double work, double CpuBreakdown::*kind,
                     double core_s_per_work, double wakes, std::function<void()> done) {
  if (cpu_.empty()) {
    cpu_work_.*kind += work;
    At(now() + work, std::move(done));
    return;
  }
  cpu_work_.*kind += work * core_s_per_work;
  const int host = HostOfMachine(machine);
  const bool woken = kind == &CpuBreakdown::send_s || kind == &CpuBreakdown::recv_s;
  std::vector<int64_t>& computing = host_compute_[host];
  if (woken && cal_.preempt_s > 0 && !computing.empty() &&
      static_cast<double>(computing.size()) >= o_.cpu_cores_per_host) {
    // Every core is computing: the woken thread preempts one of the running jobs, each
    // alike (more jobs than computations when other messages are being handled too);
    // `wakes` times for a message that wakes its thread several times.
    const double lost = wakes * cal_.preempt_s / host_jobs_[host];
    for (int64_t id : computing) {
      // A computation's unit of work costs 1 / shared_host_compute_speed core-seconds.
      fluid_.AddWork(id, lost * cal_.shared_host_compute_speed);
      cpu_work_.preempt_s += lost;
    }
  }
  if (kind != &CpuBreakdown::compute_s && cal_.comm_interference > 0 && !computing.empty()) {
    // The communication's copies slow the computation that runs beside them on the
    // host's other cores (caches, memory bandwidth). comm_interference is measured per
    // core-second of copying with one computation beside it; while the communication
    // thread holds one core, at most cores - 1 computations run beside it, so the charge
    // is comm_interference x work x min(computations, cores - 1), shared alike by the
    // computations running there (they take turns on the cores the thread leaves).
    const double n = static_cast<double>(computing.size());
    const double beside = std::min(n, std::max(0.0, o_.cpu_cores_per_host - 1));
    const double lost = cal_.comm_interference * work * core_s_per_work * beside / n;
    for (int64_t id : computing) {
      fluid_.AddWork(id, lost * cal_.shared_host_compute_speed);
      cpu_work_.interference_s += lost;
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

double Simulation::OtherStreams(const Conn& c, bool sending) const {
  const int k = sending ? c.streams_out : c.streams_in;
  return c.kind == ConnKind::kNetwork && k > 0 ? 1.0 - 1.0 / k : 0.0;
}

double Simulation::Turns(const Conn& c, const Msg& m) const {
  const int k = c.process_streams;
  if (c.kind != ConnKind::kNetwork || k <= 1) return 0.0;
  // The send queue's credit rule (Pump): one message always, more while they fit.
  const int64_t fit = m.bytes > 0 ? o_.credit_bytes / m.bytes : k;
  const int64_t in_flight = std::min<int64_t>(k, std::max<int64_t>(1, fit));
  return static_cast<double>(k - in_flight) / (k - 1);
}

double Simulation::Wakeups(const Conn& c, const Msg& m, bool sending) const {
  if (c.kind != ConnKind::kNetwork) return 1.0;
  const double bytes = static_cast<double>(m.bytes);
  const double per_byte =
      cal_.shaped_stream_wakes_per_byte + Turns(c, m) * cal_.shaped_stream_turns_wakes_per_byte;
  const double shared = per_byte * OtherStreams(c, sending) * bytes;
  if (cal_.shaped_bytes_per_wake <= 0) return 1.0 + shared;
  return std::max(1.0, bytes / cal_.shaped_bytes_per_wake) + shared;
}

double Simulation::StreamsExtra(const Conn& c, const Msg& m, bool sending) const {
  return OtherStreams(c, sending) *
         (cal_.shaped_stream_s_per_byte + Turns(c, m) * cal_.shaped_stream_turns_s_per_byte);
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
  const double extra = c.kind == ConnKind::kNetwork
                          ? ShapedExtra() + StreamsExtra(c, m, /*sending=*/true)
                          : 0;
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
  const double extra = c.kind == ConnKind::kNetwork
                          ? ShapedExtra() + StreamsExtra(c, m, /*sending=*/false)
                          : 0;
  return per_message + ConversionCost(m, false) +
         (cal_.recv_s_per_byte + extra) * static_cast<double>(m.bytes);
}

}  // namespace p3::sim::internal
