#include "p3/sim/fluid.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace p3::sim {

int FluidScheduler::AddResource(double capacity) {
  capacity_.push_back(capacity);
  users_.emplace_back();
  return static_cast<int>(capacity_.size()) - 1;
}

int64_t FluidScheduler::Start(double work, std::vector<Usage> uses, double max_rate,
                              std::function<void()> done) {
  const int64_t id = next_id_++;
  Job& job = jobs_[id];
  job.remaining = std::max(0.0, work);
  job.uses = std::move(uses);
  job.max_rate = max_rate;
  job.done = std::move(done);
  dirty_ = true;
  if (sharing_ == Sharing::kEqualSplit) {
    job.rate = -1;  // not computed yet
    job.updated_at = now_;
    if (job.uses.empty()) unused_.push_back(id);
    for (const Usage& u : job.uses) {
      users_[u.resource].push_back(id);
      touched_.push_back(u.resource);
    }
  }
  return id;
}

void FluidScheduler::SetRate(int64_t id, Job& job, double rate) {
  if (job.rate >= 0) {
    if (rate == job.rate) return;
    if (!std::isinf(job.rate)) job.remaining -= job.rate * (now_ - job.updated_at);
  }
  job.updated_at = now_;
  job.rate = rate;
  const double finish = std::isinf(rate) || job.remaining <= 0 ? now_
                        : rate > 0                               ? now_ + job.remaining / rate
                                                                 : kUnlimitedRate;
  finishes_.push({finish, id, ++job.version});
}

double FluidScheduler::EqualSplitRate(const Job& job) const {
  double rate = job.max_rate;
  for (const Usage& u : job.uses) {
    const double n = static_cast<double>(users_[u.resource].size());
    rate = std::min(rate, capacity_[u.resource] / (n * u.coef));
  }
  return rate;
}

void FluidScheduler::Reallocate() {
  dirty_ = false;
  if (jobs_.empty()) return;
  if (sharing_ == Sharing::kEqualSplit) {
    std::sort(touched_.begin(), touched_.end());
    touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
    for (int r : touched_) {
      for (int64_t id : users_[r]) {
        Job& job = jobs_.at(id);
        SetRate(id, job, EqualSplitRate(job));
      }
    }
    touched_.clear();
    for (int64_t id : unused_) {
      auto it = jobs_.find(id);
      if (it != jobs_.end() && it->second.rate < 0) SetRate(id, it->second, it->second.max_rate);
    }
    unused_.clear();
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
    while (!finishes_.empty()) {
      const Finish& f = finishes_.top();
      auto it = jobs_.find(f.id);
      if (it != jobs_.end() && it->second.version == f.version) return std::max(now_, f.t);
      finishes_.pop();  // stale: the job finished or its rate changed
    }
    return kUnlimitedRate;
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
    while (!finishes_.empty() && finishes_.top().t <= now_) {
      const Finish f = finishes_.top();
      finishes_.pop();
      auto it = jobs_.find(f.id);
      if (it == jobs_.end() || it->second.version != f.version) continue;
      finished.push_back(std::move(it->second.done));
      for (const Usage& u : it->second.uses) {
        std::vector<int64_t>& users = users_[u.resource];
        users.erase(std::find(users.begin(), users.end(), f.id));
        touched_.push_back(u.resource);
      }
      jobs_.erase(it);
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
