// A worker's iteration on the simulated clock, for every engine: the forward pass block
// by block (waiting for the versions it needs), the backward pass handing each
// block's gradients to the servers or to DDP's buckets, and the optimizer where the
// worker runs it (DDP, local).
#include "p3/sim/simulation.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace p3::sim::internal {

void Simulation::Compute(WorkerState& w, double seconds, const std::string& name,
                         const char* category, std::function<void()> done) {
  const double start = now();
  const int machine = MachineOfProc(w.proc);
  // A block needs 1 / shared_host_compute_speed core-seconds per profile second, at most
  // one profile second per second: alone it runs at the profile's speed, and where it has
  // to share the cores (every core busy) it gets its share at the slower speed.
  double factor = w.jitter;
  if (o_.block_jitter > 0 && o_.mode != Mode::kLocal) {
    std::normal_distribution<double> z(0.0, 1.0);
    factor *= std::exp(o_.block_jitter * z(w.rng) - o_.block_jitter * o_.block_jitter / 2);
  }
  const double work = seconds * cal_.compute_scale * factor;
  const double core_s = 1.0 / cal_.shared_host_compute_speed;
  Cpu(machine, work, &CpuBreakdown::compute_s, core_s, [this, &w, start, name, category, done] {
    w.compute_s[w.iteration] += now() - start;
    TraceEvent(w.proc, w.compute_track, name, category, start, now(),
               absl::StrCat("\"iteration\": ", w.iteration));
    done();
  });
}

void Simulation::StartIteration(WorkerState& w) {
  if (o_.compute_jitter > 0) {
    std::normal_distribution<double> z(0.0, 1.0);
    w.jitter = std::max(0.2, 1.0 + o_.compute_jitter * z(w.rng));
  }
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
  int first = 0, last = 0;  // the slices this block waits for
  if (ps) {
    const uint64_t version = static_cast<uint64_t>(w.iteration);
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
    // The block's values up to the device (all of them before block 0 without forward
    // overlap); the forward waits for the copy.
    const int64_t bytes = traits_.overlap_forward ? block_bytes_[w.block]
                          : w.block == 0          ? model_bytes_
                                                  : 0;
    if (cal_.pcie_bytes_per_s > 0 && bytes > 0) {
      const std::pair<int64_t, int> key{w.iteration, w.block};
      if (w.uploaded != key) {
        if (w.uploading != key) {
          w.uploading = key;
          At(now() + static_cast<double>(bytes) / cal_.pcie_bytes_per_s, [this, &w, key] {
            w.uploaded = key;
            TryForward(w);
          });
        }
        return;
      }
    }
  }
  w.waiting = false;
  if (now() > w.wait_start) {
    w.wait_s[w.iteration] += now() - w.wait_start;
    // As the real worker's (worker/parameter_waits.cc): the version and its slices.
    TraceEvent(w.proc, w.wait_track, absl::StrCat("wait v", w.iteration), "wait", w.wait_start,
               now(), absl::StrCat("\"first_slice\": ", first, ", \"last_slice\": ", last));
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
      // Autograd produces a block's gradients last parameter first; a pack goes with its
      // first tensor's, the last of its gradients.
      for (int t = last_tensor - 1; t >= first_tensor; --t) {
        const auto [first, last] = plan_->tensor_slices(t);
        if (plan_->slices()[first].tensor != t) continue;
        for (int id = first; id < last; ++id) GradientToHost(w, id);
      }
    }
    if (--w.block >= 0) {
      BackwardBlock(w);
    } else {
      if (!o_.allreduce && o_.mode != Mode::kLocal && !traits_.overlap_backward) {
        for (const Slice& s : plan_->slices()) GradientToHost(w, s.id);
      }
      EndIteration(w);
    }
  });
}

void Simulation::GradientToHost(WorkerState& w, int slice) {
  const int64_t iteration = w.iteration;
  if (cal_.pcie_bytes_per_s <= 0) return SendGradient(w, slice, iteration);
  // One copy stream: each copy starts when the one before it is done.
  const double bytes = static_cast<double>(plan_->slices()[slice].length) * sizeof(float);
  w.to_host_free = std::max(w.to_host_free, now()) + bytes / cal_.pcie_bytes_per_s;
  At(w.to_host_free, [this, &w, slice, iteration] { SendGradient(w, slice, iteration); });
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

}  // namespace p3::sim::internal
