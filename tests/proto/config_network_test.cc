// The emulated network section and where the processes run: machines, placement and
// shared memory.
#include "proto/config.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "tests/proto/config_test_util.h"

namespace p3::config {
namespace {

CATCH_TEST_CASE("the network section is filled only when the network is emulated") {
  absl::StatusOr<ExperimentConfig> plain = ParseConfig("", {});
  CATCH_REQUIRE(plain.ok());
  CATCH_CHECK(!plain->has_network());
  CATCH_CHECK(!NetworkEmulated(*plain));

  absl::StatusOr<ExperimentConfig> emulated =
      ParseConfig("cluster { workers: 3 servers: 2 } network { bandwidth_gbps: 1 }", {});
  CATCH_REQUIRE(emulated.ok());
  CATCH_CHECK(NetworkEmulated(*emulated));
  CATCH_CHECK(emulated->network().machines() == 3);
  CATCH_CHECK(emulated->network().placement() == "colocated");
  CATCH_CHECK(emulated->network().subnet() == "10.77.0.0/24");
  CATCH_CHECK(emulated->network().tbf_latency_ms() == 20);
  CATCH_CHECK(emulated->network().tbf_burst_bytes() == 0);
  CATCH_CHECK(emulated->network().check_seconds() == 2);
  CATCH_CHECK(!emulated->network().check_links());

  // Mode local starts no servers: nothing to emulate.
  absl::StatusOr<ExperimentConfig> local =
      ParseConfig("mode: \"local\" network { bandwidth_gbps: 1 }", {});
  CATCH_REQUIRE(local.ok());
  CATCH_CHECK(!NetworkEmulated(*local));
}

CATCH_TEST_CASE("colocated placement puts worker i and server i on machine i") {
  absl::StatusOr<ExperimentConfig> config =
      ParseConfig("cluster { workers: 4 servers: 2 } network { bandwidth_gbps: 10 }", {});
  CATCH_REQUIRE(config.ok());
  CATCH_CHECK(MachineCount(*config) == 4);
  for (int r = 0; r < 4; ++r) CATCH_CHECK(WorkerMachine(*config, r, 4) == r);
  CATCH_CHECK(ServerMachine(*config, 0, 4) == 0);
  CATCH_CHECK(ServerMachine(*config, 1, 4) == 1);
  // Fewer machines than processes: round robin.
  CATCH_CHECK(WorkerMachine(*config, 3, 2) == 1);
  CATCH_CHECK(ServerMachine(*config, 1, 1) == 0);
}

CATCH_TEST_CASE("a worker shares memory with the servers on its machine, unless switched off") {
  absl::StatusOr<ExperimentConfig> colocated =
      ParseConfig("cluster { workers: 3 servers: 2 }", {});  // no emulation: same layout
  CATCH_REQUIRE(colocated.ok());
  CATCH_CHECK(colocated->scheduling().shared_memory());
  CATCH_CHECK(SharedMemoryServers(*colocated, 0) == std::vector<int>{0});
  CATCH_CHECK(SharedMemoryServers(*colocated, 1) == std::vector<int>{1});
  CATCH_CHECK(SharedMemoryServers(*colocated, 2).empty());  // machine 2 has no server
  absl::StatusOr<ExperimentConfig> one_machine = ParseConfig(
      "cluster { workers: 2 servers: 2 } network { bandwidth_gbps: 1 machines: 1 }", {});
  CATCH_REQUIRE(one_machine.ok());
  CATCH_CHECK(SharedMemoryServers(*one_machine, 1) == std::vector<int>({0, 1}));
  absl::StatusOr<ExperimentConfig> separate = ParseConfig(
      "cluster { workers: 2 servers: 2 } network { bandwidth_gbps: 1 placement: \"separate\" }",
      {});
  CATCH_REQUIRE(separate.ok());
  CATCH_CHECK(SharedMemoryServers(*separate, 0).empty());
  absl::StatusOr<ExperimentConfig> off =
      ParseConfig("cluster { workers: 2 servers: 2 } scheduling { shared_memory: false }", {});
  CATCH_REQUIRE(off.ok());
  CATCH_CHECK(SharedMemoryServers(*off, 0).empty());
  absl::StatusOr<ExperimentConfig> local = ParseConfig("mode: \"local\"", {});
  CATCH_REQUIRE(local.ok());
  CATCH_CHECK(SharedMemoryServers(*local, 0).empty());
}

CATCH_TEST_CASE("separate placement puts servers after the workers") {
  absl::StatusOr<ExperimentConfig> config = ParseConfig(
      "cluster { workers: 2 servers: 3 } network { bandwidth_gbps: 1 placement: \"separate\" }",
      {});
  CATCH_REQUIRE(config.ok());
  CATCH_CHECK(config->network().machines() == 5);
  CATCH_CHECK(WorkerMachine(*config, 1, 5) == 1);
  CATCH_CHECK(ServerMachine(*config, 0, 5) == 2);
  CATCH_CHECK(ServerMachine(*config, 2, 5) == 4);
}

CATCH_TEST_CASE("bad network fields are named with what is allowed") {
  const std::string base = "cluster { workers: 2 servers: 2 } ";
  CATCH_CHECK(absl::StrContains(ErrorOf(base + "network { bandwidth_gbps: -1 }"),
                                "network.bandwidth_gbps: -1 is out of range; allowed 0..100"));
  CATCH_CHECK(absl::StrContains(ErrorOf(base + "network { bandwidth_gbps: 1 placement: \"x\" }"),
                                "network.placement: \"x\" is not allowed; allowed: \"colocated\", "
                                "\"separate\""));
  CATCH_CHECK(absl::StrContains(
      ErrorOf(base + "network { bandwidth_gbps: 1 subnet: \"10.77.0.0\" }"),
      "network.subnet: \"10.77.0.0\" is not allowed; allowed: an IPv4 subnet a.b.c.d/len"));
  CATCH_CHECK(absl::StrContains(
      ErrorOf(base + "network { bandwidth_gbps: 1 subnet: \"10.77.0.0/31\" }"), "network.subnet"));
  CATCH_CHECK(absl::StrContains(ErrorOf(base + "network { bandwidth_gbps: 1 machines: 500 }"),
                                "network.machines: 500 is out of range; allowed 1..128"));
  CATCH_CHECK(absl::StrContains(
      ErrorOf(base + "network { bandwidth_gbps: 1 placement: \"separate\" machines: 3 }"),
      "network.machines: 3 does not fit placement \"separate\"; allowed: 4"));
  CATCH_CHECK(absl::StrContains(ErrorOf(base + "network { bandwidth_gbps: 1 check_seconds: 100 }"),
                                "network.check_seconds: 100 is out of range; allowed (0, 60]"));
  CATCH_CHECK(ErrorOf(base, {"network.bandwidth_gbps=2.5", "network.check_links=true"}) ==
              "(no error)");
  CATCH_CHECK(absl::StrContains(
      ErrorOf(base, {"network.bandwidth_gbps=1", "network.congestion_control=cubic -w x=1"}),
      "network.congestion_control: \"cubic -w x=1\" is not allowed; allowed: a TCP congestion "
      "control name"));
  CATCH_CHECK(ErrorOf(base, {"network.bandwidth_gbps=1", "network.congestion_control=bbr"}) ==
              "(no error)");
}

}  // namespace
}  // namespace p3::config
