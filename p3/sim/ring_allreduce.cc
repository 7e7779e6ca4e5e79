// Ring all-reduce with DDP's buckets (the peer of the parameter servers): a bucket is
// reduced once every worker has its gradients, one bucket after the other, in
// 2 (N - 1) ring steps of 1/N of its bytes each over the NICs and the CPUs.
#include "p3/sim/simulation.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

namespace p3::sim {

double RingLinkShare(const Calibration& c, double gbps, bool beside_compute) {
  const auto& s = beside_compute && !c.ring_link_share_beside_compute.empty()
                      ? c.ring_link_share_beside_compute
                      : c.ring_link_share;
  if (s.empty()) return c.goodput_factor;
  if (gbps <= s.front().first) return s.front().second;
  if (gbps >= s.back().first) return s.back().second;
  size_t i = 1;
  while (s[i].first < gbps) ++i;
  const double f = std::log(gbps / s[i - 1].first) / std::log(s[i].first / s[i - 1].first);
  return s[i - 1].second + f * (s[i].second - s[i - 1].second);
}

namespace internal {

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
      // The links hold goodput_factor of the rate; the ring's flows use more of it per
      // byte where gloo reaches a smaller share (ring_link_share), the smaller still
      // while a computation runs at either end (taken at the step's start).
      const bool beside =
          !host_compute_.empty() && (!host_compute_[HostOfMachine(host_from)].empty() ||
                                     !host_compute_[HostOfMachine(host_to)].empty());
      const double weight =
          cal_.goodput_factor / RingLinkShare(cal_, o_.bandwidth_gbps, beside);
      uses.push_back({up_[host_from], weight});
      uses.push_back({down_[host_to], weight});
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

}  // namespace internal
}  // namespace p3::sim
