#include "p3/sim/fluid.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace p3::sim {

int FluidScheduler::AddResource(double capacity) {
  capacity_.push_back(capacity);
  users_.emplace_back();
  allocated_users_.push_back(0);
  share_.push_back(kUnlimitedRate);
  return static_cast<int>(capacity_.size()) - 1;
}

int64_t FluidScheduler::Start(double work, std::vector<Usage> uses, double max_rate,
                              std::function<void()> done) {
  const int64_t id = next_id_++;
  Job& job = jobs_[id];
  job.id = id;
  job.remaining = std::max(0.0, work);
  job.uses = std::move(uses);
  job.max_rate = max_rate;
  job.done = std::move(done);
  dirty_ = true;
  if (sharing_ == Sharing::kEqualSplit) {
    job.rate = -1;  // not computed yet
    job.updated_at = now_;
    fresh_.push_back(&job);
    job.user_pos.resize(job.uses.size());
    const bool simple =
        job.uses.size() <= 2 &&
        std::all_of(job.uses.begin(), job.uses.end(), [](const Usage& u) { return u.coef == 1.0; });
    for (size_t k = 0; k < job.uses.size(); ++k) {
      std::vector<User>& users = users_[job.uses[k].resource];
      job.user_pos[k] = static_cast<int>(users.size());
      const int other = !simple ? kComplex : job.uses.size() == 1 ? -1 : job.uses[1 - k].resource;
      users.push_back({&job, static_cast<int>(k), other, job.max_rate});
      touched_.push_back(job.uses[k].resource);
    }
  }
  return id;
}

void FluidScheduler::HeapUp(int pos) {
  const Finish entry = finishes_[pos];
  while (pos > 0) {
    const int parent = (pos - 1) / 2;
    if (!(entry < finishes_[parent])) break;
    finishes_[pos] = finishes_[parent];
    finishes_[pos].job->heap_pos = pos;
    pos = parent;
  }
  finishes_[pos] = entry;
  entry.job->heap_pos = pos;
}

void FluidScheduler::HeapDown(int pos) {
  const Finish entry = finishes_[pos];
  const int n = static_cast<int>(finishes_.size());
  while (true) {
    int child = 2 * pos + 1;
    if (child >= n) break;
    if (child + 1 < n && finishes_[child + 1] < finishes_[child]) ++child;
    if (!(finishes_[child] < entry)) break;
    finishes_[pos] = finishes_[child];
    finishes_[pos].job->heap_pos = pos;
    pos = child;
  }
  finishes_[pos] = entry;
  entry.job->heap_pos = pos;
}

void FluidScheduler::HeapRemove(Job& job) {
  const int pos = job.heap_pos;
  if (pos < 0) return;
  job.heap_pos = -1;
  const Finish last = finishes_.back();
  finishes_.pop_back();
  if (last.job == &job) return;
  finishes_[pos] = last;
  last.job->heap_pos = pos;
  HeapUp(pos);
  HeapDown(last.job->heap_pos);
}

void FluidScheduler::SetRate(Job& job, double rate) {
  if (job.rate >= 0) {
    if (rate == job.rate) return;
    if (!std::isinf(job.rate)) job.remaining -= job.rate * (now_ - job.updated_at);
  }
  job.updated_at = now_;
  job.rate = rate;
  job.finish = std::isinf(rate) || job.remaining <= 0 ? now_
               : rate > 0                             ? now_ + job.remaining / rate
                                                      : kUnlimitedRate;
  if (job.heap_pos < 0) {
    finishes_.push_back({job.finish, job.id, &job});
    HeapUp(static_cast<int>(finishes_.size()) - 1);
  } else {
    finishes_[job.heap_pos].t = job.finish;
    HeapUp(job.heap_pos);
    HeapDown(job.heap_pos);
  }
}

double FluidScheduler::EqualSplitRate(const Job& job) const {
  double rate = job.max_rate;
  for (const Usage& u : job.uses) {
    // capacity / (n * 1.0) is capacity / n, to the bit.
    const double share =
        u.coef == 1.0
            ? share_[u.resource]
            : capacity_[u.resource] / (static_cast<double>(users_[u.resource].size()) * u.coef);
    rate = std::min(rate, share);
  }
  return rate;
}

void FluidScheduler::Reallocate() {
  dirty_ = false;
  if (jobs_.empty()) return;
  if (sharing_ == Sharing::kEqualSplit) {
    std::sort(touched_.begin(), touched_.end());
    touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
    // As many jobs on a resource as at the last allocation (one ended, another
    // started): the same share for each, so no rate changes because of it.
    changed_.clear();
    for (int r : touched_) {
      if (users_[r].size() == allocated_users_[r]) continue;
      allocated_users_[r] = users_[r].size();
      share_[r] = capacity_[r] / static_cast<double>(users_[r].size());
      changed_.push_back(r);
    }
    for (int r : changed_) {
      for (const User& u : users_[r]) {
        // EqualSplitRate(), without reading the job: min() is exact in any order.
        double rate =
            u.other == kComplex ? EqualSplitRate(*u.job) : std::min(u.max_rate, share_[r]);
        if (u.other >= 0) rate = std::min(rate, share_[u.other]);
        SetRate(*u.job, rate);
      }
    }
    touched_.clear();
    for (Job* job : fresh_) {
      if (job->rate < 0) SetRate(*job, EqualSplitRate(*job));
    }
    fresh_.clear();
    return;
  }
  // Per job, its allocation (resource units per second) at each of its uses.
  std::vector<Job*> jobs;
  jobs.reserve(jobs_.size());
  for (auto& [id, job] : jobs_) jobs.push_back(&job);
  std::vector<std::vector<double>> alloc(jobs.size());
  for (size_t j = 0; j < jobs.size(); ++j) alloc[j].assign(jobs[j]->uses.size(), kUnlimitedRate);
  // The jobs' uses per resource.
  std::vector<std::vector<std::pair<int, int>>> users(capacity_.size());
  for (size_t j = 0; j < jobs.size(); ++j) {
    for (size_t k = 0; k < jobs[j]->uses.size(); ++k) {
      users[jobs[j]->uses[k].resource].emplace_back(static_cast<int>(j), static_cast<int>(k));
    }
  }
  // The rate job j could reach if use `skip` were unlimited.
  auto limit_without = [&](size_t j, size_t skip) {
    double limit = jobs[j]->max_rate;
    for (size_t k = 0; k < jobs[j]->uses.size(); ++k) {
      if (k != skip) limit = std::min(limit, alloc[j][k] / jobs[j]->uses[k].coef);
    }
    return limit;
  };
  std::vector<double> rate(jobs.size(), 0.0);
  std::vector<std::pair<double, std::pair<int, int>>> demands;
  // Water-filling per resource, repeated until the shares settle (each round can only
  // free capacity that a job limited elsewhere leaves unused).
  for (int round = 0; round < 30; ++round) {
    for (size_t r = 0; r < capacity_.size(); ++r) {
      if (users[r].empty() || std::isinf(capacity_[r])) continue;
      demands.clear();
      for (const auto& [j, k] : users[r]) {
        demands.push_back({jobs[j]->uses[k].coef * limit_without(j, k), {j, k}});
      }
      std::sort(demands.begin(), demands.end());
      double left = capacity_[r];
      size_t n = demands.size();
      for (const auto& [demand, use] : demands) {
        const double share = left / static_cast<double>(n);
        const double given = std::min(demand, share);
        alloc[use.first][use.second] = given;
        left = std::max(0.0, left - given);
        --n;
      }
    }
    double change = 0;
    for (size_t j = 0; j < jobs.size(); ++j) {
      const double r = limit_without(j, jobs[j]->uses.size());
      if (std::isinf(r) && std::isinf(rate[j])) continue;
      change = std::max(change, std::fabs(r - rate[j]) / std::max(1e-30, std::fabs(r)));
      rate[j] = r;
    }
    if (change < 1e-12) break;
  }
  for (size_t j = 0; j < jobs.size(); ++j) jobs[j]->rate = rate[j];
}

double FluidScheduler::NextCompletion() {
  if (dirty_) Reallocate();
  if (sharing_ == Sharing::kEqualSplit) {
    return finishes_.empty() ? kUnlimitedRate : std::max(now_, finishes_.front().t);
  }
  double next = kUnlimitedRate;
  for (const auto& [id, job] : jobs_) {
    if (job.remaining <= 0 || std::isinf(job.rate)) return now_;
    if (job.rate > 0) next = std::min(next, now_ + job.remaining / job.rate);
  }
  return next;
}

void FluidScheduler::AdvanceTo(double t) {
  if (dirty_) Reallocate();
  if (sharing_ == Sharing::kEqualSplit) {
    now_ = std::max(now_, t);
    std::vector<std::function<void()>> finished;
    while (!finishes_.empty() && finishes_.front().t <= now_) {
      Job& job = *finishes_.front().job;
      HeapRemove(job);
      finished.push_back(std::move(job.done));
      for (size_t k = 0; k < job.uses.size(); ++k) {
        // Swapped with the resource's last user: the order of users does not matter.
        const int r = job.uses[k].resource;
        std::vector<User>& users = users_[r];
        const int pos = job.user_pos[k];
        users[pos] = users.back();
        users[pos].job->user_pos[users[pos].use] = pos;
        users.pop_back();
        touched_.push_back(r);
      }
      jobs_.erase(job.id);
      dirty_ = true;
    }
    for (auto& done : finished) {
      if (done) done();
    }
    return;
  }
  const double dt = std::max(0.0, t - now_);
  now_ = std::max(now_, t);
  std::vector<std::function<void()>> finished;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    Job& job = it->second;
    if (std::isinf(job.rate)) {
      job.remaining = 0;
    } else {
      job.remaining -= job.rate * dt;
    }
    // Within rounding of the finish (the clock was moved to a computed finish time): what
    // is left would take under a picosecond, or would not move the clock at all.
    if (job.remaining <= 0 || job.remaining <= job.rate * 1e-12 ||
        now_ + job.remaining / job.rate <= now_) {
      finished.push_back(std::move(job.done));
      it = jobs_.erase(it);
      dirty_ = true;
    } else {
      ++it;
    }
  }
  for (auto& done : finished) {
    if (done) done();
  }
}

void FluidScheduler::AddWork(int64_t id, double work) {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || !(work > 0)) return;
  Job& job = it->second;
  if (sharing_ == Sharing::kWaterFilling) {
    // AdvanceTo() keeps every job's remaining work current; NextCompletion() reads it.
    job.remaining += work;
    return;
  }
  if (job.rate < 0) {  // started since the last Reallocate(): no rate yet
    job.remaining += work;
    return;
  }
  // Bring the remaining work up to now at the current rate, then move the finish.
  if (!std::isinf(job.rate)) job.remaining -= job.rate * (now_ - job.updated_at);
  job.updated_at = now_;
  job.remaining += work;
  job.finish = std::isinf(job.rate) || job.remaining <= 0 ? now_
               : job.rate > 0                             ? now_ + job.remaining / job.rate
                                                          : kUnlimitedRate;
  if (job.heap_pos >= 0) {
    finishes_[job.heap_pos].t = job.finish;
    HeapUp(job.heap_pos);
    HeapDown(job.heap_pos);
  }
}

double FluidScheduler::Rate(int64_t id) {
  if (dirty_) Reallocate();
  auto it = jobs_.find(id);
  return it == jobs_.end() ? 0.0 : it->second.rate;
}

double FluidScheduler::Load(int r) {
  if (dirty_) Reallocate();
  double load = 0;
  for (const auto& [id, job] : jobs_) {
    for (const Usage& u : job.uses) {
      if (u.resource == r && !std::isinf(job.rate)) load += u.coef * job.rate;
    }
  }
  return load;
}

}  // namespace p3::sim
