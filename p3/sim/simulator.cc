// Simulate(): a run of the Simulation (p3/sim/simulation.h) from its options to its
// results: the event loop, the machines, links and cores a run is set up with, and the
// figures measured after the warm-up iterations.
#include "p3/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "p3/sim/simulation.h"

namespace p3::sim {
namespace internal {

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
  for (const auto& [name, value] :
       {std::pair<const char*, double>{"shaped_bytes_per_wake", cal.shaped_bytes_per_wake},
        {"shaped_stream_s_per_byte", cal.shaped_stream_s_per_byte},
        {"shaped_stream_wakes_per_byte", cal.shaped_stream_wakes_per_byte},
        {"shaped_stream_turns_s_per_byte", cal.shaped_stream_turns_s_per_byte},
        {"shaped_stream_turns_wakes_per_byte", cal.shaped_stream_turns_wakes_per_byte}}) {
    if (!(value >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat("calibration.", name, " must be >= 0"));
    }
  }
  if (!(o_.calibration.comm_interference >= 0)) {
    return absl::InvalidArgumentError("calibration.comm_interference must be >= 0");
  }
  for (double cost : {cal.bf16_encode_s_per_value, cal.bf16_decode_s_per_value,
                      cal.f16_encode_s_per_value, cal.f16_decode_s_per_value}) {
    if (!(cost >= 0)) {
      return absl::InvalidArgumentError(
          "calibration: the 16-bit conversion costs (*_encode_s_per_value, "
          "*_decode_s_per_value) must be >= 0");
    }
  }
  if (!(o_.calibration.pcie_bytes_per_s >= 0)) {
    return absl::InvalidArgumentError("calibration.pcie_bytes_per_s must be >= 0 (0: no copies)");
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
    block_bytes_.push_back(0);
    for (int64_t n : b.params) {
      tensor_bytes_.push_back(n * static_cast<int64_t>(sizeof(float)));
      block_bytes_.back() += tensor_bytes_.back();
    }
    model_bytes_ += block_bytes_.back();
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
    ws.rng.seed(o_.jitter_seed * 1000003 + static_cast<uint64_t>(w));
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
      block_slices_.push_back(
          plan_->tensors_slices(block_tensors_[b].first, block_tensors_[b].second));
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
  for (WorkerState& w : workers_) {
    if (o_.worker_start_stagger_s > 0 && w.rank > 0) {
      At(w.rank * o_.worker_start_stagger_s, [this, &w] { StartIteration(w); });
    } else {
      StartIteration(w);
    }
  }
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
                                     &CpuBreakdown::ring_s, &CpuBreakdown::preempt_s,
                                     &CpuBreakdown::interference_s}) {
    result.cpu.*kind /= o_.iterations;
  }
  result.events = events_;
  result.simulated_seconds = now();
  result.traces = std::move(traces_);
  return result;
}

}  // namespace internal

absl::StatusOr<SimResult> Simulate(const SimOptions& options) {
  internal::Simulation sim(options);
  return sim.Run();
}

}  // namespace p3::sim
