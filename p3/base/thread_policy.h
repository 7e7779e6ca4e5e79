// The CPU scheduling policy of the calling thread: whether a thread that wakes up may take
// a core from a thread that is computing.
//
// With Linux's default policy (SCHED_OTHER) a woken thread usually preempts the thread
// running on its core at once. A training host whose cores the computation fills (more
// runnable threads than cores) then pays for every slice's hand-offs between the
// communication threads with a preempted computation: its caches cooled, its time slice cut.
// In SCHED_BATCH a woken thread does not preempt: it runs when a core is free, or when the
// running thread's time slice ends or it blocks. Nothing else about scheduling changes,
// and where a core is idle (a GPU host's CPU cores) the woken thread takes it at once.
//
// Measured (docs/results/throughput/throughput.md, "The communication threads alone in
// SCHED_BATCH"), ResNet-50, 2 workers + 2 servers on 2 cores: the servers and the
// workers' writer and reader threads in SCHED_BATCH, the training threads not, 1.036 -
// 1.080 times as fast on an unlimited link (3 sets, 15 of 19 rounds faster), 1.050 at 5
// Gbit/s, 0.988 - 1.001 at 1 Gbit/s (within the rounds' noise). Every thread in
// SCHED_BATCH, training too ("Wake-up preemption"), lost 1 - 2 % at 1 Gbit/s, where a
// computation that waits for a communication thread's time slice is on the critical path.
//
// Example (a connection's writer thread):
//   writer_ = std::thread([this] {
//     if (options_.batch_io_threads) (void)ScheduleThisThreadAsBatch();
//     WriteLoop();
//   });
//
// Thread-safe: each call changes only the calling thread. Threads it starts afterwards
// inherit the policy (pthread's default); threads started before keep theirs.
#ifndef P3_P3_BASE_THREAD_POLICY_H_
#define P3_P3_BASE_THREAD_POLICY_H_

#include "absl/status/status.h"

namespace p3 {

// Puts the calling thread in SCHED_BATCH (nice value unchanged). Returns Internal with the
// system's reason if the kernel refuses (not expected: any thread may lower itself to it),
// Unimplemented where the system has no SCHED_BATCH (not Linux).
absl::Status ScheduleThisThreadAsBatch();

// Whether the calling thread is in SCHED_BATCH.
bool ThisThreadIsBatch();

}  // namespace p3

#endif  // P3_P3_BASE_THREAD_POLICY_H_
