// Reads sized to the message: gRPC 1.51's experiments that let a receiving thread sleep
// until most of a message has arrived, instead of waking for every few kilobytes.
//
// A gRPC stream's reader waits in epoll until its socket is readable, reads what is
// there, and waits again. A parameter slice is 160 kB - 2.5 MB, and a reader that
// outpaces the wire wakes many times per message (docs/results/streaming/streaming.md,
// "Wake-ups and system calls per slice": 17 sleeps per MB on a 5 Gbit/s link). Two of
// gRPC 1.51's experiments change that, both turned on by the process's environment
// (GRPC_EXPERIMENTS, read once, at gRPC's first use):
//   tcp_frame_size_tuning  the HTTP/2 layer tells TCP how many bytes it needs next (its
//                          frame and message headers say), and TCP completes a read only
//                          once they are in, in buffers of that size;
//   tcp_rcv_lowat          TCP sets SO_RCVLOWAT to about those bytes, so that the kernel
//                          wakes the reader once they are in (checked with strace: set
//                          per message only with both experiments on).
// They change when bytes are read, not which: results are bit for bit the same.
// Measured (docs/results/streaming/streaming.md, "gRPC's experiments"): see
// scheduling.sized_reads in proto/config.proto for the figures behind the default.
//
// Example (first thing in a main() that uses gRPC, before any thread starts):
//   if (config.scheduling().sized_reads()) {
//     absl::StatusOr<bool> set = p3::RequestGrpcExperiments(p3::kSizedReadExperiments);
//   }
#ifndef P3_P3_BASE_GRPC_EXPERIMENTS_H_
#define P3_P3_BASE_GRPC_EXPERIMENTS_H_

#include "absl/status/statusor.h"

namespace p3 {

// The experiments above, as GRPC_EXPERIMENTS lists them. Names of gRPC 1.51 (Debian 12's);
// a gRPC that does not know one logs it and goes on without it.
inline constexpr char kSizedReadExperiments[] = "tcp_frame_size_tuning,tcp_rcv_lowat";

// Sets GRPC_EXPERIMENTS to `experiments` unless the environment already has the variable,
// even empty (the user's choice wins: GRPC_EXPERIMENTS= runs without any). Processes this
// one starts afterwards inherit it. Call before gRPC's first use and before any thread
// starts (setenv is not thread-safe). Returns true if it set the variable, false if it
// left it; Internal if setenv fails.
absl::StatusOr<bool> RequestGrpcExperiments(const char* experiments);

}  // namespace p3

#endif  // P3_P3_BASE_GRPC_EXPERIMENTS_H_
