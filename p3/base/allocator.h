// Process-wide tuning of glibc's allocator for training processes.
//
// A training iteration allocates and frees the same large buffers again and again:
// gradients (VGG-19's first fully connected layer alone is 411 MB), activations, and
// the messages that carry parameter slices (160 KB each by default; whole tensors in
// the baseline). With glibc's defaults every buffer above 128 KB (at most 32 MiB after
// glibc's own adjustment) is a fresh mmap, and freeing the top of a heap gives its pages
// back to the kernel; every iteration then pays a page fault per 4 KiB touched. On the
// virtual machines this project is developed on, that costs more than the computation
// itself (measured, 2 cores, docs/results/throughput/throughput.md: VGG-19 batch 4 in `local` mode
// 4.7 s -> 0.54 s per iteration; ResNet-50 1 worker + 1 server over loopback 6.8 -> 30
// samples/s).
//
// The p3_server and p3_worker binaries call this first thing in main() (through
// ProgramOptions::allocator, proto/program.h). A trainer that
// links the worker library calls it itself if it wants the same behaviour: it changes
// the allocator for the whole process, which a library should not do behind its back.
// The price: memory freed by the process stays mapped in it (resident size stays at its
// peak, as with a caching allocator).
#ifndef P3_ALLOCATOR_H_
#define P3_ALLOCATOR_H_

#include <string>

#include "absl/status/status.h"

namespace p3 {

struct AllocatorOptions {
  // All threads allocate from one arena (M_ARENA_MAX 1) instead of one per thread (up to
  // 8 per core). For the parameter server: a re-plan frees a whole plan's buffers on
  // one thread and the next plan's are allocated on others (the switch on the thread
  // that completed the last slice, gradients on each stream's). With per-thread arenas
  // a buffer freed in one arena is no use to an allocation in another, so every re-plan
  // faulted in fresh memory: VGG-19, 2 servers on 2 cores, 2 - 15 s per switch
  // (docs/simulator.md, "The cost of a switch"). The price is one lock for all large
  // allocations; the server's threads are few and mostly wait on the network.
  // p3_worker passes it too: with per-thread arenas each arena keeps its own peak, and a
  // long-lived process's RSS crept as new threads landed on other arenas (a server by
  // 5.7 MB per 100 rejoins in tools/rejoin_memory, a worker by 1.2-1.9 MB across 90 of its
  // peers' rejoins; docs/results/reliability/soak.md). And per-thread arenas give a
  // thread's heap back to the kernel once it empties, whatever M_TRIM_THRESHOLD says, so
  // the next message faults it in again: the streaming benchmark's worker faulted 67 -
  // 13,671 times in 8 s of steady state with them, 0 - 49 with one arena (and no
  // lock-order checks), and moved 1.21x as much on loopback
  // (docs/results/streaming/streaming.md, "The benchmark's worker as p3_worker").
  bool one_arena = false;
};

// Serves large allocations from the heap instead of fresh mappings (M_MMAP_MAX 0) and
// keeps freed memory instead of returning it (M_TRIM_THRESHOLD 1 GiB). Same effect as
// GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=1073741824 (and
// glibc.malloc.arena_max=1 with `one_arena`). Call before any thread starts. Returns
// Unimplemented where the C library is not glibc (nothing is changed), Internal if glibc
// refuses a setting.
absl::Status TuneAllocatorForLargeMessages(const AllocatorOptions& options = {});

// Transparent huge pages for the heap. With the tuning above every large buffer comes from
// the heap, and each iteration's gradients and activations do not always fit where the
// previous iteration's were freed: the heap grows, and every 4 KiB of it faults once.
// glibc (2.35 and later) advises huge pages for the memory its heap takes when the tunable
// glibc.malloc.hugetlb=1 is set, a fault per 2 MiB; glibc reads the tunable only when a
// process starts, so mallopt() cannot set it. Measured (docs/results/streaming/streaming.md,
// "Huge pages for the heap"), on a 2-vCPU guest where page faults are dear: VGG-19 on an
// unlimited link 16 % faster (4 rounds), ResNet-50 0 - 5 %, the streaming benchmark on
// loopback 1.3 - 1.4 times the goodput at 0.76 of the CPU per GB.
//
// The GLIBC_TUNABLES value `current` (null or empty: none) with glibc.malloc.hugetlb=1
// added. A `current` that already sets glibc.malloc.hugetlb is returned unchanged: the
// user's choice wins (GLIBC_TUNABLES=glibc.malloc.hugetlb=0 turns it off).
std::string TunablesWithHugePageHeap(const char* current);

// Sets GLIBC_TUNABLES in this process's environment to TunablesWithHugePageHeap() of its
// value, so that the processes it starts from then on (a launcher's workers and servers)
// grow their heaps in huge pages. This process's own heap is not changed. Call before any
// thread starts (setenv is not thread-safe). Returns Internal if setenv fails.
absl::Status RequestHugePageHeapForChildren();

}  // namespace p3

#endif  // P3_ALLOCATOR_H_
