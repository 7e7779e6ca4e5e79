// Shared resources on a simulated clock: links, NICs and CPUs as fluid capacities that
// the jobs using them share fairly (processor sharing). The building block of the
// discrete-event simulator (p3/sim/simulator.h).
//
// A resource has a capacity in units per second (bytes/s for a link, cores for a CPU). A
// job has an amount of work and uses one or more resources, each at `coef` resource
// units per unit of work (a transfer of bytes: 1 on each link it crosses and the CPU
// seconds per byte on each host's CPU), and at most `max_rate` units of work per second
// (a compute job: one core). Each resource is split by water-filling among its jobs: an
// equal share of the capacity each, a job that cannot use its share (limited by another
// resource or by max_rate) leaving the rest to the others. A job then progresses at the
// smallest rate any of its resources allows. The allocation is recomputed whenever a job
// starts or ends, and is constant in between, so completion times are exact.
//
// Example:
//   FluidScheduler fluid;
//   const int link = fluid.AddResource(125e6);            // 1 Gbit/s in bytes/s
//   fluid.Start(1e6, {{link, 1.0}}, kUnlimitedRate, [] { /* 8 ms later */ });
//   while (fluid.active() > 0) fluid.AdvanceTo(fluid.NextCompletion());
//
// Not thread-safe: one event loop drives it.
#ifndef P3_P3_SIM_FLUID_H_
#define P3_P3_SIM_FLUID_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <vector>

namespace p3::sim {

inline constexpr double kUnlimitedRate = std::numeric_limits<double>::infinity();

struct Usage {
  int resource = 0;
  double coef = 1.0;  // resource units per unit of work; > 0
};

// How a resource is split among its jobs.
enum class Sharing {
  // Water-filling (above): exact, but each change recomputes every job's rate.
  kWaterFilling,
  // Each job gets capacity / (jobs on the resource) at each of its resources, unused
  // shares are not handed on; a change recomputes only the jobs on the resources it
  // touches. Exact when the jobs sharing a resource are limited by it alike (the
  // all-to-all traffic of a symmetric cluster); for simulating large clusters.
  kEqualSplit,
};

class FluidScheduler {
 public:
  explicit FluidScheduler(Sharing sharing = Sharing::kWaterFilling) : sharing_(sharing) {}

  // A resource of `capacity` units per second (> 0; infinity: never a limit). Returns its id.
  int AddResource(double capacity);

  // Starts a job of `work` units (>= 0) using `uses`, at most `max_rate` units per second;
  // `done` runs from AdvanceTo() when the work is finished. Returns the job's id.
  // A job with no resources and an infinite max_rate finishes at the next AdvanceTo().
  int64_t Start(double work, std::vector<Usage> uses, double max_rate, std::function<void()> done);

  // The simulated time now, in seconds.
  double now() const { return now_; }
  // The time the next job finishes (infinity when none is active).
  double NextCompletion();
  // Moves the clock to `t` (>= now()), progressing every job at its rate, and runs the
  // `done` of every job finished by then, in the order they were started.
  void AdvanceTo(double t);

  // Adds `work` units (>= 0) to active job `id` from now on, at its current rate (a
  // computation that loses time to a preemption). No-op when the job is not active.
  void AddWork(int64_t id, double work);

  int active() const { return static_cast<int>(jobs_.size()); }
  // The rate of job `id` under the current allocation (0 when it is not active).
  double Rate(int64_t id);
  // Units of resource `r` used per second now.
  double Load(int r);

 private:
  struct Job {
    int64_t id = 0;
    double remaining = 0;
    std::vector<Usage> uses;
    double max_rate = kUnlimitedRate;
    std::function<void()> done;
    double rate = 0;
    // kEqualSplit: `remaining` is as of `updated_at`; `finish` is when the job ends at
    // its current rate, its key in the heap `finishes_` at `heap_pos`; `user_pos[k]` is
    // its place in users_[uses[k].resource].
    double updated_at = 0;
    double finish = 0;
    int heap_pos = -1;
    std::vector<int> user_pos;
  };
  // kEqualSplit: a job on a resource, through its use `use`. A job with at most two
  // uses, each at coef 1 (a transfer, a compute job), has its rate from this entry
  // alone: min(max_rate, the resource's share, the share of `other`, its other
  // resource, if any: -1 none); other = kComplex: from the job's uses.
  static constexpr int kComplex = -2;
  struct User {
    Job* job;
    int use;
    int other;
    double max_rate;
  };
  void Reallocate();
  double EqualSplitRate(const Job& job) const;
  void SetRate(Job& job, double rate);
  // The heap of active jobs by (finish, id), earliest first: an indexed binary heap, so
  // that a new rate moves the job's one entry instead of adding another. The keys are
  // copied into the entries, so that sifting reads no job.
  struct Finish {
    double t;
    int64_t id;
    Job* job;
    bool operator<(const Finish& o) const { return t != o.t ? t < o.t : id < o.id; }
  };
  void HeapUp(int pos);
  void HeapDown(int pos);
  void HeapRemove(Job& job);

  const Sharing sharing_;
  // kEqualSplit: the jobs on each resource (in no particular order: a job's rate
  // depends only on how many there are), how many there were at the last Reallocate(),
  // and the resources whose jobs started or ended since. A job's rate changes only when
  // the number of jobs on one of its resources does, so only those resources' jobs, and
  // the new ones, are recomputed. Jobs are nodes of jobs_, which do not move while they
  // are active.
  std::vector<std::vector<User>> users_;
  std::vector<size_t> allocated_users_;
  std::vector<int> touched_;
  std::vector<int> changed_;  // Reallocate()'s scratch: touched, and the count changed
  std::vector<Job*> fresh_;   // started since the last Reallocate()
  std::vector<Finish> finishes_;
  // kEqualSplit: capacity / jobs of each resource as of the last Reallocate(), the share
  // of a job that uses it at coef 1.
  std::vector<double> share_;
  double now_ = 0;
  int64_t next_id_ = 0;
  bool dirty_ = false;
  std::vector<double> capacity_;
  std::map<int64_t, Job> jobs_;  // by id: start order
};

}  // namespace p3::sim

#endif  // P3_P3_SIM_FLUID_H_
