// A preloaded library that records glibc's heap figures of a running p3_server or
// p3_worker from the inside, without changing the program: what RSS alone cannot say is
// whether a process's growth is memory in use (something kept) or free memory the
// allocator holds (fragmentation, per-arena peaks).
//
//   LD_PRELOAD=bazel-bin/tools/libmalloc_sampler.so P3_MALLOC_SAMPLER_DIR=/tmp/x \
//       bazel-bin/tools/launch_cluster ...
//
// In each process whose name starts with "p3_" (the launcher passes its environment on
// to the processes it starts), a thread appends one line every P3_MALLOC_SAMPLER_S
// seconds (default 15) to $P3_MALLOC_SAMPLER_DIR/mallinfo_<pid>.csv:
//   unix_s,arena,ordblks,hblkhd,uordblks,fordblks,keepcost,threads,rss_kb
// (mallinfo2's fields in bytes: `arena` pages taken from the system by the heaps,
// `uordblks` in use, `fordblks` free in them, `keepcost` the releasable top; `threads`
// and `rss_kb` (VmRSS) from /proc/self/status). Without P3_MALLOC_SAMPLER_DIR it does
// nothing.
//
// An experiment's tool, not part of any program: it reads its settings from the
// environment because it has no main() of its own. The thread allocates nothing itself
// (a stack buffer and write(2)), so it does not move the figures it records.
// tools/experiments/soak_creep.py uses it (docs/results/reliability/soak.md).
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace {

// The number after `field` (e.g. "\nThreads:") in /proc/self/status; -1 if none.
long StatusField(const char* field) {
  const int fd = open("/proc/self/status", O_RDONLY);
  if (fd < 0) return -1;
  char buf[4096];
  const ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  const char* p = strstr(buf, field);
  return p == nullptr ? -1 : strtol(p + strlen(field), nullptr, 10);
}

struct Settings {
  char path[512];
  unsigned period_s;
};

void* Sample(void* arg) {
  const Settings* s = static_cast<const Settings*>(arg);
  const int fd = open(s->path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) return nullptr;
  const char header[] = "unix_s,arena,ordblks,hblkhd,uordblks,fordblks,keepcost,threads,rss_kb\n";
  if (write(fd, header, sizeof(header) - 1) < 0) return nullptr;
  for (;;) {
    const struct mallinfo2 m = mallinfo2();
    char line[256];
    const int n =
        snprintf(line, sizeof(line), "%ld,%zu,%zu,%zu,%zu,%zu,%zu,%ld,%ld\n",
                 static_cast<long>(time(nullptr)), m.arena, m.ordblks, m.hblkhd, m.uordblks,
                 m.fordblks, m.keepcost, StatusField("\nThreads:"), StatusField("\nVmRSS:"));
    if (n > 0 && write(fd, line, static_cast<size_t>(n)) < 0) break;
    sleep(s->period_s);
  }
  close(fd);
  return nullptr;
}

__attribute__((constructor)) void StartSampler() {
  const char* dir = getenv("P3_MALLOC_SAMPLER_DIR");
  if (dir == nullptr || *dir == '\0') return;
  char name[64] = {0};
  const int fd = open("/proc/self/comm", O_RDONLY);
  if (fd < 0) return;
  const ssize_t n = read(fd, name, sizeof(name) - 1);
  close(fd);
  if (n < 3 || strncmp(name, "p3_", 3) != 0 || strncmp(name, "p3_launch", 9) == 0) return;
  static Settings settings;
  const char* period = getenv("P3_MALLOC_SAMPLER_S");
  settings.period_s = period != nullptr && atoi(period) > 0 ? atoi(period) : 15;
  snprintf(settings.path, sizeof(settings.path), "%s/mallinfo_%d.csv", dir,
           static_cast<int>(getpid()));
  pthread_t thread;
  if (pthread_create(&thread, nullptr, Sample, &settings) == 0) pthread_detach(thread);
}

}  // namespace
