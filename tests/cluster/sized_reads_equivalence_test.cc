// Reads sized to the message (scheduling.sized_reads, p3/base/grpc_experiments.h) change
// when gRPC reads bytes, never which: a cluster whose gRPC runs them trains the same
// parameters as local training. Its own binary, since gRPC reads GRPC_EXPERIMENTS once,
// at its first use: the variable is set before main() and before any gRPC call.
//
// The experiments act only on a message still arriving when its reader runs out of bytes
// (gRPC 1.51 sets SO_RCVLOWAT only where at least 32 KiB are still to come):
// cluster_equivalence_test's slices of 50 values arrive whole. So the model here has a
// 1,048,576-value layer sent in slices of that size, 4 MB a message (over two servers,
// halves of 2 MB), larger than a loopback socket's first receive buffer (128 KiB here), and
// the test counts the SO_RCVLOWAT settings gRPC makes, through a setsockopt() that this
// executable interposes before libc's: without them the experiments did not act, and the
// run would prove nothing. (With slices of 40,000, 160 kB, loopback delivered most
// messages whole: 0 – 3 settings a run, too few to assert on.)
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <torch/torch.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdint>
#include <iostream>

#include "p3/base/grpc_experiments.h"
#include "p3/core/mode.h"
#include "p3/core/slice_plan.h"
#include "tests/cluster/cluster_fixture.h"

namespace {

std::atomic<int64_t> rcvlowat_settings{0};

// Overwrites a user's GRPC_EXPERIMENTS: this binary tests the experiments themselves.
const bool kExperimentsSet = setenv("GRPC_EXPERIMENTS", p3::kSizedReadExperiments, 1) == 0;

}  // namespace

// Counts gRPC's SO_RCVLOWAT settings above 1 byte (its reset to 1 is not counted), then
// does what libc's would. libgrpc's calls reach it: the executable's definition comes
// first in the dynamic linker's search (exported with -rdynamic, BUILD).
extern "C" int setsockopt(int fd, int level, int name, const void* value, socklen_t length) {
  using Setsockopt = int (*)(int, int, int, const void*, socklen_t);
  static const Setsockopt libc_setsockopt =
      reinterpret_cast<Setsockopt>(dlsym(RTLD_NEXT, "setsockopt"));
  if (level == SOL_SOCKET && name == SO_RCVLOWAT && value != nullptr &&
      length == sizeof(int) && *static_cast<const int*>(value) > 1) {
    rcvlowat_settings.fetch_add(1, std::memory_order_relaxed);
  }
  return libc_setsockopt(fd, level, name, value, length);
}

namespace p3::cluster_test {
namespace {

CATCH_TEST_CASE("reads sized to the message train the same parameters as local, with messages of 4 MB") {
  CATCH_REQUIRE(kExperimentsSet);
  torch::set_num_threads(1);
  const torch::Tensor want = TrainLocal(2, Sgd(), ModelKind::kWide);
  for (Mode mode : {Mode::kP3, Mode::kBaseline}) {
    for (int servers : {1, 2}) {
      CATCH_CAPTURE(ModeName(mode), servers);
      const int64_t before = rcvlowat_settings.load();
      // Every value over the streams (no shared memory), so every slice crosses a socket.
      ClusterResult got = TrainCluster(RunSpec{.mode = mode,
                                               .workers = 2,
                                               .servers = servers,
                                               .shared_memory = false,
                                               .model = ModelKind::kWide,
                                               .slice_params = kDefaultMaxMessageParams});
      const int64_t settings = rcvlowat_settings.load() - before;
      std::cout << ModeName(mode) << ", " << servers << " server(s): " << settings
                << " SO_RCVLOWAT settings\n";
      // The experiments acted: gRPC asked the kernel to wake its readers per message.
      CATCH_CHECK(settings > 0);
      for (int r = 0; r < 2; ++r) {
        CATCH_CAPTURE(r, got.status[r].ToString());
        CATCH_REQUIRE(got.status[r].ok());
        CATCH_CHECK(got.stats[r].bytes_shared == 0);
        CATCH_CHECK(RelativeError(got.params[r], want) <= 1e-5);
      }
      CATCH_CHECK(torch::equal(got.params[0], got.params[1]));
    }
  }
}

}  // namespace
}  // namespace p3::cluster_test
