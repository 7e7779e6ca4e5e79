// What the Worker derives from its WorkerOptions: their checks, the options of the link to
// each server, of its elastic membership (private to //worker:worker).
#ifndef P3_WORKER_WORKER_OPTIONS_H_
#define P3_WORKER_WORKER_OPTIONS_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/elastic_membership.h"

#include "p3/core/cluster_signature.h"
#include "p3/core/send_queue.h"
#include "p3/core/shared_memory.h"
#include "p3/core/to_server.h"
#include "p3/core/transport_core.h"
#include "worker/transport.h"
#include "worker/worker.h"

namespace p3 {

// What the transport to server `s` needs. `shared`: the worker's shared memory (null:
// none), offered to the servers of options.shared_memory_servers.
TransportOptions LinkOptionsFor(const WorkerOptions& options, const ClusterSignature& sig, int s,
                                SendQueue<Upstream>* send_queue, const SharedRegion* shared,
                                TransportCore* core, TransportListener* listener);

// A transport to every server, each opened with `open` (LinkOptionsFor each) on a thread
// of its own, all at once: servers that do not answer cost the worker's start one
// peer_timeout together, not one each. Every server hears the Hello, also when another
// refuses it: a server this worker never reached would wait for it forever, while each
// one reached ends its run when the worker leaves (or refuses it too). Returns the
// transports in server order, or the first refusal in server order once every server
// has answered (the transports opened are closed again).
absl::StatusOr<std::vector<std::unique_ptr<Transport>>> OpenTransports(
    const WorkerOptions& options, const ClusterSignature& sig, const TransportFactory& open,
    SendQueue<Upstream>* send_queue, const SharedRegion* shared, TransportCore* core,
    TransportListener* listener);

// Worker 0 holds `version` of every slice: Reached{version} to each server whose Welcome
// asked for it (Transport::wants_reached: it owns no slice, and checkpoints by it).
void SendReached(const std::vector<std::unique_ptr<Transport>>& transports, uint64_t version);

// InvalidArgument naming the option that a Worker cannot run with (mode local, no
// servers, a rank out of range, elastic in a mode that pulls values).
absl::Status CheckWorkerOptions(const WorkerOptions& options);

// The worker's elastic membership: every rank present when it is not elastic.
ElasticMembershipOptions ElasticOptionsFor(const WorkerOptions& options);

}  // namespace p3

#endif  // P3_WORKER_WORKER_OPTIONS_H_
