// Names the calling thread as `top`, `ps -L`, `perf` and /proc/<pid>/task/<tid>/comm show
// it, so that a profile or a count of wake-ups can tell a connection's writer from its
// reader (unnamed, every thread a process starts carries the process's own name, and
// gRPC's handler threads pass theirs on to the threads they start).
//
// Example:
//   writer_ = std::thread([this] {
//     NameThisThread(absl::StrCat("p3-send-s", server_index));
//     WriteLoop();
//   });
//
// Thread-safe (each thread names only itself).
#ifndef P3_P3_BASE_THREAD_NAME_H_
#define P3_P3_BASE_THREAD_NAME_H_

#include <string>

#include "absl/strings/string_view.h"

namespace p3 {

// The kernel keeps at most 15 bytes of a thread's name: a longer `name` is cut there.
inline constexpr size_t kMaxThreadNameBytes = 15;

// Names the calling thread; returns false when the kernel refused (the name stays).
bool NameThisThread(absl::string_view name);

// The calling thread's name as the kernel holds it.
std::string ThisThreadName();

}  // namespace p3

#endif  // P3_P3_BASE_THREAD_NAME_H_
