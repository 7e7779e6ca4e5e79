#include "worker/worker_options.h"

#include <algorithm>
#include <iostream>
#include <limits>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "p3/core/mode.h"

namespace p3 {

TransportOptions LinkOptionsFor(const WorkerOptions& options, const ClusterSignature& sig, int s,
                                SendQueue<Upstream>* send_queue, const SharedRegion* shared,
                                TransportCore* core, TransportListener* listener) {
  TransportOptions link;
  link.server_index = s;
  link.address = options.servers[s];
  link.rank = options.rank;
  link.token = options.token;
  link.signature = sig;
  link.send_queue = send_queue;
  link.credit_bytes = options.credit_bytes;
  link.stalled_write = options.stalled_write;
  link.batch_io_threads = options.batch_io_threads;
  link.peer_timeout = options.peer_timeout;
  link.max_message_params = options.max_message_params;
  link.tls = options.tls;
  link.tls_ca_pem = options.tls_ca_pem;
  link.tls_server_name = options.tls_server_name;
  if (shared != nullptr &&
      std::find(options.shared_memory_servers.begin(), options.shared_memory_servers.end(), s) !=
          options.shared_memory_servers.end()) {
    link.shared_memory_name = shared->name();
    link.shared_memory_nonce = shared->nonce();
  }
  link.rejoin = options.rejoin;
  link.trace = options.trace;
  if (options.before_gradient_write) {
    link.before_write = [hook = options.before_gradient_write, s](const Upstream& up) {
      if (up.kind == Upstream::Kind::kGradient) {
        hook(s, up.slice_id, static_cast<int64_t>(up.iteration));
      }
    };
  }
  link.core = core;
  link.listener = listener;
  return link;
}

absl::StatusOr<std::vector<std::unique_ptr<Transport>>> OpenTransports(
    const WorkerOptions& options, const ClusterSignature& sig, const TransportFactory& open,
    SendQueue<Upstream>* send_queue, const SharedRegion* shared, TransportCore* core,
    TransportListener* listener) {
  const int num_servers = static_cast<int>(options.servers.size());
  std::vector<TransportOptions> links;
  for (int s = 0; s < num_servers; ++s) {
    links.push_back(LinkOptionsFor(options, sig, s, send_queue, shared, core, listener));
  }
  // All at once: servers that do not answer cost one peer_timeout together, not one each.
  std::vector<absl::StatusOr<std::unique_ptr<Transport>>> opened;
  for (int s = 0; s < num_servers; ++s) opened.emplace_back(absl::UnknownError("not opened"));
  {
    std::vector<std::thread> openers;
    for (int s = 1; s < num_servers; ++s) {
      openers.emplace_back([&, s] { opened[s] = open(links[s]); });
    }
    if (num_servers > 0) opened[0] = open(links[0]);
    for (std::thread& t : openers) t.join();
  }
  std::vector<std::unique_ptr<Transport>> transports;
  for (int s = 0; s < num_servers; ++s) {
    if (!opened[s].ok()) return opened[s].status();  // the first in server order
    if (!links[s].shared_memory_name.empty() && !(*opened[s])->shared_memory()) {
      std::cerr << "worker " << options.rank << ": server " << s
                << " did not map the shared memory (see its log); values go over the stream"
                << std::endl;
    }
    transports.push_back(*std::move(opened[s]));
  }
  return transports;
}

void SendReached(const std::vector<std::unique_ptr<Transport>>& transports, uint64_t version) {
  for (int s = 0; s < static_cast<int>(transports.size()); ++s) {
    if (!transports[s]->wants_reached()) continue;
    // After everything queued before it: a re-plan or membership change of this version.
    transports[s]->Send(ToServer{
        .server = s,
        .message = Upstream{.kind = Upstream::Kind::kReached, .version = version},
        .priority = std::numeric_limits<int64_t>::max()});
  }
}

absl::Status CheckWorkerOptions(const WorkerOptions& options) {
  if (options.mode == Mode::kLocal) {
    return absl::InvalidArgumentError("mode: local trains without a cluster; use a plain loop");
  }
  if (options.servers.empty()) return absl::InvalidArgumentError("servers: at least one is needed");
  if (options.num_workers < 1 || options.rank < 0 || options.rank >= options.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("rank: ", options.rank, " is out of range for ",
                                                   options.num_workers, " workers"));
  }
  if (options.initial_workers > options.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("initial_workers: ", options.initial_workers,
                                                   " is above num_workers ", options.num_workers));
  }
  if (options.initial_workers > 0 && !TraitsOf(options.mode).values_on_push) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mode: ", ModeName(options.mode), " pulls values; elastic runs need values on the push"));
  }
  return absl::OkStatus();
}

ElasticMembershipOptions ElasticOptionsFor(const WorkerOptions& options) {
  return {.rank = options.rank,
          .num_servers = static_cast<int>(options.servers.size()),
          .max_ranks = options.num_workers,
          .initial = options.initial_workers > 0 ? options.initial_workers : options.num_workers};
}

}  // namespace p3
