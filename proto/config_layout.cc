// Cluster layout of an experiment config (proto/config.h): batch, process counts and
// the placement of processes on machines.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/config.h"

namespace p3::config {

int64_t GlobalBatchSize(const ExperimentConfig& config) {
  return static_cast<int64_t>(config.training().batch_size()) * config.cluster().workers();
}

int MaxWorkers(const ExperimentConfig& config) {
  const ClusterConfig& cluster = config.cluster();
  if (!cluster.has_elastic() || cluster.elastic().max_workers() == 0) return cluster.workers();
  return cluster.elastic().max_workers();
}

absl::StatusOr<MembershipSchedule> ElasticSchedule(const ExperimentConfig& config) {
  MembershipSchedule schedule(MaxWorkers(config), config.cluster().workers());
  const ElasticConfig& elastic = config.cluster().elastic();
  for (int i = 0; i < elastic.change_size(); ++i) {
    const MembershipChangeConfig& change = elastic.change(i);
    absl::Status added = schedule.Add(
        change.from_iteration(), std::vector<int>(change.present().begin(), change.present().end()));
    if (!added.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("cluster.elastic.change[", i, "]: ", added.message()));
    }
  }
  return schedule;
}

int DefaultMachineCount(const ExperimentConfig& config) {
  const int workers = config.cluster().workers();
  const int servers = config.cluster().servers();
  return config.network().placement() == "separate" ? workers + servers
                                                    : std::max(workers, servers);
}

int MachineCount(const ExperimentConfig& config) {
  return config.network().machines() > 0 ? config.network().machines()
                                         : DefaultMachineCount(config);
}

int WorkerMachine(const ExperimentConfig& config, int rank, int machines) {
  return machines > 0 ? rank % machines : 0;
}

int ServerMachine(const ExperimentConfig& config, int index, int machines) {
  if (machines <= 0) return 0;
  const int first = config.network().placement() == "separate" ? config.cluster().workers() : 0;
  return (first + index) % machines;
}

bool NetworkEmulated(const ExperimentConfig& config) {
  return config.network().bandwidth_gbps() > 0 && ServerProcessCount(config) > 0;
}

std::vector<int> SharedMemoryServers(const ExperimentConfig& config, int rank) {
  std::vector<int> servers;
  if (!config.scheduling().shared_memory()) return servers;
  const int machines = MachineCount(config);
  const int mine = WorkerMachine(config, rank, machines);
  for (int i = 0; i < ServerProcessCount(config); ++i) {
    if (ServerMachine(config, i, machines) == mine) servers.push_back(i);
  }
  return servers;
}

int ServerProcessCount(const ExperimentConfig& config) {
  return config.mode() == "local" ? 0 : config.cluster().servers();
}

int WorkerProcessCount(const ExperimentConfig& config) {
  return config.mode() == "local" ? 1 : config.cluster().workers();
}

}  // namespace p3::config
