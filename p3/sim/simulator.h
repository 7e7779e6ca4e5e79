// A discrete-event simulator of one stream of training iterations on a cluster of
// parameter servers (every mode of p3/core/mode.h) or of ring all-reduce with DDP's bucketing.
//
// It runs the real scheduling core on a simulated clock: the real SlicePlan, one real
// SendQueue per process deciding which message each connection writes next (and the
// credit), a real WorkerCore per worker (parts, versions, Ack -> Pull) with its
// VersionTracker gating the forward pass block by block, and a real ParameterShard per
// server (which gradient completes a slice, values on push or Ack + Pull), the latter
// without values (ShardOptions::keep_values = false). What it models instead of running:
// the computation (per-block forward/backward seconds from a profile), the links
// (per-machine full-duplex NIC, fair-shared by every connection crossing it, plus
// latency), the kernel's send buffer per connection, and the CPU time that sending,
// receiving and the optimizer take on the machine's cores, shared with the computation
// (p3/sim/fluid.h). See docs/simulator.md.
//
// Example:
//   SimOptions options;
//   options.profile = *LoadProfile("configs/sim/profiles/resnet50_b8_cpu.json");
//   options.mode = Mode::kP3;
//   options.workers = options.servers = 2;
//   options.bandwidth_gbps = 1;
//   absl::StatusOr<SimResult> result = Simulate(options);
//   // result->samples_per_second, result->iteration_seconds, result->workers[r].compute_s
//
// Simulate() is a pure function of its options: the same options give the same result.
#ifndef P3_P3_SIM_SIMULATOR_H_
#define P3_P3_SIM_SIMULATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "p3/core/mode.h"
#include "p3/core/slice_plan.h"
#include "p3/base/trace.h"
#include "p3/core/wire_dtype.h"
#include "p3/sim/profile.h"

namespace p3::sim {

// The CPU costs of communication, in seconds of one core. Calibrated from the streaming
// micro-benchmark (docs/results/streaming/streaming.md; tools/experiments/simulator.py says how).
struct Calibration {
  // Per byte sent, and per byte received, through a TCP connection (gRPC, the copies,
  // the kernel). Default: 0.66 ns and 0.69 ns (streaming, loopback, commit 3bcf7a9).
  double send_s_per_byte = 0.66e-9;
  double recv_s_per_byte = 0.69e-9;
  // Extra per byte and side on a shaped emulated link (veth, bridge, tbf; more and
  // smaller socket reads), at 1 Gbit/s; it scales as rate^-shaped_exponent.
  // Default: 0.75 ns, exponent 0.4.
  double shaped_s_per_byte_at_1g = 0.75e-9;
  double shaped_exponent = 0.4;
  // Per message and side (gRPC framing, a thread hand-off). Default: 20 µs.
  double per_message_s = 20e-6;
  // Wall-clock delay between two writes of one connection's writer (waking the writer
  // thread), not CPU. Default: 60 µs.
  double write_gap_s = 60e-6;
  // Per byte copied through shared memory (a colocated worker and server), charged to
  // the reader on top of per_message_s on each side. Default: 0.3 ns. The CPU
  // calibrations: from the streaming benchmark's shared-memory runs, less the
  // per-message costs (tools/experiments/simulator_calibration.py).
  double shm_s_per_byte = 0.3e-9;
  // Optimizer (aggregation of W gradients and the update) per byte of parameters and
  // worker. Default: 0.5 ns.
  double update_s_per_byte = 0.5e-9;
  // The optimizer step on the worker itself (DDP and local), per byte of parameters;
  // negative: update_s_per_byte (a CPU worker). On a GPU it is far cheaper. Default: -1.
  double worker_update_s_per_byte = -1;
  // Bytes on the wire per message beyond the values (header, gRPC, HTTP/2). Default: 100.
  int64_t header_bytes = 100;
  // Fraction of the link rate left for payload (TCP/IP headers). Default: 0.957.
  double goodput_factor = 0.957;
  // Bytes not yet on the wire that a connection's kernel buffer holds: a write is done
  // (and releases its credit) once its last byte is in it, i.e. once the bytes ahead of
  // it and its own fit; the wire frees the buffer a piece at a time (a sixteenth of it,
  // at least 64 KiB). Default: 1 MiB. The CPU calibrations: the payload a full send
  // buffer of p3's connections held in cluster runs here (4 MiB, Linux's autotuned
  // maximum; tools/experiments/socket_buffers.py).
  int64_t kernel_buffer_bytes = 1 << 20;
  // Rate of the loopback interface (bandwidth 0, or two processes of one machine
  // without shared memory), Gbit/s. Default: 17 (iperf3 on loopback here).
  double loopback_gbps = 17.0;
  // One-way latency of a link. Default: 50 µs.
  double latency_s = 50e-6;
  // Multiplies every profile time (e.g. to move CPU profiles to a faster or slower
  // day, or GPU-class compute). Default: 1.
  double compute_scale = 1.0;
  // Speed of the computation, relative to the profile, while it shares a host's cores
  // with other work (cpu_cores_per_host > 0): processes on the other cores take caches
  // and memory bandwidth, so a block computes slower than alone (the profile, and the
  // `local` point compute_scale is fitted on, ran one process on an otherwise idle host).
  // A block uses 1 / this core-seconds per profile second and runs at most at the
  // profile's speed: alone it gets its core at full speed; with every core busy it gets
  // its fair share at this speed. Default: 1. The CPU calibrations: 0.937, two
  // single-thread ResNet-50 runs side by side against one alone
  // (tools/experiments/simulator.py calibrate).
  double shared_host_compute_speed = 1.0;
  // CPU seconds of one core that a computation loses each time a communication thread
  // wakes on its host (to write or read one message) while every core there is
  // computing (as many computations running as cores): the woken thread preempts one of
  // the running jobs, each alike, and a preempted computation has to fill its caches
  // again. Each computation running there is charged preempt_s / (jobs running on the
  // host). With a core free of computation the woken thread is taken to run there.
  // Counted in CpuBreakdown::preempt_s. Not charged to gloo's ring (DDP). Default: 0
  // (none). Measured without a cluster by tools/experiments/simulator_preemption_cost.py: 17 – 39 µs
  // (docs/results/simulator/simulator.md, "What a preemption costs the computation").
  double preempt_s = 0;
  // Bytes a communication thread on a shaped link (ConnKind::kNetwork: bandwidth_gbps > 0,
  // two machines) handles per wake-up: writing or reading a message of B bytes there wakes
  // it max(1, B / this) times, each charged like one wake-up above (a reader outpacing
  // the link drains what it let through and sleeps again; a writer on a full send
  // buffer is woken as the wire frees it). Loopback and shared memory: one wake-up a
  // message. Default: 0 (one wake-up a message everywhere), as in the CPU calibrations:
  // the measured 249,000 bytes (the sleeps per round trip of both processes' threads on
  // a 5 Gbit/s link, 10.3 times as many at messages of 2.56 MB as at 160 kB,
  // docs/results/streaming/wakeups_shaped_2026-12-05.csv) lost validation hits
  // (docs/results/simulator/simulator.md, "Preemptions per bytes on a shaped link").
  double shaped_bytes_per_wake = 0;
  // Streams that share a shaped link: a byte of a stream whose link end (the sender's
  // machine's way out, the receiver's way in) carries k network streams in the same
  // direction (gradients or values) costs each side (1 - 1/k) x (shaped_stream_s_per_byte
  // + T x shaped_stream_turns_s_per_byte) more CPU, and wakes its thread (1 - 1/k) x
  // (shaped_stream_wakes_per_byte + T x shaped_stream_turns_wakes_per_byte) more times
  // (each charged as a wake-up above). The first term is the cost with the streams'
  // messages written side by side; the second is what the writers of one process add
  // when they take turns on its link: T = (k_p - n) / (k_p - 1) for a sending process
  // with k_p > 1 network streams in that direction, n = min(k_p, max(1, floor(credit_bytes
  // / the message's bytes))) of its messages in flight at once (the send queue's credit,
  // one message always allowed), and T = 0 for a process with one stream. At credit 0
  // (the default) T = 1; at a credit that holds a message of every stream, 0. k is
  // counted from the cluster's layout: 1 for each stream of 2 workers + 2 servers
  // colocated, 2 for 3 + 3 colocated and for 2 + 2 in separate placement (k_p the same
  // there). Defaults: 0 (none). The CPU calibrations: measured with no computation by
  // tools/experiments/streaming_streams.py (bench_streaming with 1, 2 and 3 servers on
  // one emulated link; its worker sends every stream, each server one): the medians over
  // rounds, links and k of (extra per GB) / (1 - 1/k), halved per side, at credit 0, as
  // shaped_stream_{s,wakes}_per_byte, and the turns terms 0: one charge at every credit.
  // In the benchmark a 1 MiB credit cut the extra to a third, but in training it gained
  // nothing (ResNet-50, 3 + 3 and separate placement, 1 and 2.5 Gbit/s, 4 rounds: 0.996 -
  // 1.018 of credit 0), where the turns terms predicted +11 - 14 % at 2.5 Gbit/s. The
  // what-if (simulator.py calibrate --stream_turns): the 1 MiB runs as the side-by-side
  // terms and twice what credit 0 adds to them as the turns terms (only the gradients'
  // direction takes turns in the benchmark) (docs/results/simulator/simulator.md,
  // "Streams that share a link", "The credit where a process has several remote peers").
  double shaped_stream_s_per_byte = 0;
  double shaped_stream_wakes_per_byte = 0;
  double shaped_stream_turns_s_per_byte = 0;
  double shaped_stream_turns_wakes_per_byte = 0;
  // Core-seconds of CPU a computation loses per core-second of communication work
  // (sending, receiving, the server's update) on its host while it computes: the
  // copies' memory traffic slows the computation on the other cores, with no
  // preemption (issue 36: compute slowed by communication on shared cores). Charged
  // when a communication job starts, for the computations running on that host then
  // that can run beside it: comm_interference x its core-seconds x min(computations,
  // cores - 1) in all, shared alike by the computations running (the measurement had
  // one computation beside one copier; on 2 cores two computations take turns beside
  // one communication thread, they do not both run beside it). Counted in
  // CpuBreakdown::interference_s. Not charged to gloo's ring
  // (DDP). Default: 0 (none). The CPU calibrations: from
  // docs/results/simulator/preemption_cost.csv (a single-thread ResNet-50 beside a core
  // that copies 8 MB buffers without pause used 1.135x its CPU alone), less what
  // shared_host_compute_speed already charges for sharing busy cores
  // (tools/experiments/simulator_calibration.py).
  double comm_interference = 0;
  // Converting float32 values to a 16-bit wire and back (scheduling.wire_dtype), per
  // value and one core, charged in full on top of the per-byte costs of the 2-byte
  // message (the conversion replaces a copy of the float32 values that those costs
  // contain; charging it in full overstates by at most that copy, about 0.2 ns a
  // value). float16's encoding includes its scale scan. Who pays (docs/protocol.md,
  // "16-bit wire"): a worker encodes its gradient and decodes the values it receives; a
  // server decodes each gradient and encodes each new version once for all workers;
  // through shared memory the server rounds the gradient (encode and decode) and decodes
  // the values into the worker's memory. Defaults: bench_wire_dtype's medians
  // (docs/results/wire_dtype/wire_dtype_bench.txt): bfloat16 0.41 / 0.33 ns, float16 1.38 / 0.62 ns.
  double bf16_encode_s_per_value = 0.41e-9;
  double bf16_decode_s_per_value = 0.33e-9;
  double f16_encode_s_per_value = 1.38e-9;
  double f16_decode_s_per_value = 0.62e-9;
  // gloo's ring all-reduce (the DDP peer): CPU per byte sent and received per step,
  // and per byte reduced. Default: 0.4 ns, 0.4 ns, 0.3 ns.
  double ring_send_s_per_byte = 0.4e-9;
  double ring_recv_s_per_byte = 0.4e-9;
  double ring_reduce_s_per_byte = 0.3e-9;
  // The share of a shaped link's rate that gloo's ring moves its payload at, by link
  // rate: (Gbit/s, share) pairs sorted by rate, used in place of goodput_factor for the
  // ring's flows (RingLinkShare below). Measured by tools/experiments/ring_streaming.py:
  // two gloo ranks all-reducing fixed tensors alone on the emulated links (issue 36).
  // In a calibration file: "ring_link_share": {"1": 0.93, "2.5": 0.9, ...}.
  // Default: empty (goodput_factor, as every other flow).
  std::vector<std::pair<double, double>> ring_link_share;
  // The same while a computation runs on the host of either end of a ring step (as
  // DDP's backward beside its buckets' all-reduces), taken at the step's start: gloo's
  // threads then wait for a core. Measured by ring_streaming.py --beside_compute (a
  // single-thread computation in each rank). "ring_link_share_beside_compute" in a file.
  // Default: empty (ring_link_share).
  std::vector<std::pair<double, double>> ring_link_share_beside_compute;
  // A worker whose model runs on a GPU: its pinned host buffers and the device are
  // linked at this rate, bytes per second each way (PCIe). 0: no device copies (the
  // model computes in host memory, or copies are free). As the real worker's copy engine
  // (worker/copy_engine.h): after a block's backward its gradients go down to the host
  // one copy after another on one stream, each slice sent once its copy is done, while
  // backward goes on; before a block's forward, once its values are all there, the
  // block's values go up and the forward waits for that copy (counted as waiting for
  // parameters). Parameter-server modes only: `local` keeps its model on the device and
  // all-reduce's buckets are not copied. Default: 0.
  double pcie_bytes_per_s = 0;
};

// The share of a link of `gbps` Gbit/s that the ring's flows get: goodput_factor when
// calibration.ring_link_share is empty; else its shares, linear in log(rate) between
// the measured rates and the nearest measured share outside them. With
// `beside_compute`, ring_link_share_beside_compute's where it is set.
double RingLinkShare(const Calibration& calibration, double gbps, bool beside_compute = false);

// What to simulate. Only `profile` has no default.
struct SimOptions {
  Profile profile;
  // Default: p3. kLocal: one process, compute and the optimizer only.
  Mode mode = Mode::kP3;
  // Ring all-reduce with DDP's buckets instead of parameter servers. Default: false.
  bool allreduce = false;
  // DDP's bucket cap and its first bucket's. Default: 25 MB, 1 MB.
  int64_t bucket_bytes = 25 * 1024 * 1024;
  int64_t first_bucket_bytes = 1024 * 1024;
  int workers = 2;  // Default: 2.
  int servers = 2;  // Default: 2.
  // Worker r and server r on machine r (else workers on machines 0..W-1, servers on
  // W..W+S-1). Default: true.
  bool colocated = true;
  // Emulated machines; worker r on machine r mod machines, server i on (i + W) mod
  // machines when separate, i mod machines when colocated (network.machines and
  // proto/config.h's layout). 0: max(W, S) colocated, W + S separate. Default: 0.
  int machines = 0;
  // A colocated worker and server exchange values through shared memory (else loopback
  // TCP). Default: true.
  bool shared_memory = true;
  // Link rate per machine and direction, Gbit/s; 0: loopback (no emulation). Default: 1.
  double bandwidth_gbps = 1.0;
  // Slicing (p3/core/slice_plan.h), message parts and credit (p3/core/send_queue.h), as in the
  // config's `scheduling`. Defaults: the config's.
  int64_t slice_params = kDefaultSliceParams;
  int64_t pack_params = 0;
  int64_t split_threshold = kDefaultSplitThreshold;
  int64_t max_message_params = kDefaultMaxMessageParams;
  int64_t credit_bytes = 0;
  // Gradients up and values down at 4 or 2 bytes a value (scheduling.wire_dtype),
  // with the conversion's CPU (Calibration::*_encode_s_per_value). Not for all-reduce
  // (the DDP peer sends float32). Default: float32.
  WireDType wire_dtype = WireDType::kFloat32;
  // Cores per host and machines per host: the emulated machines of a host share its
  // cores for computing and communicating. 0 cores: the CPU is never a limit and the
  // computation runs on an accelerator (GPU-class). Default: 0, 1.
  double cpu_cores_per_host = 0;
  int machines_per_host = 1;
  // Iterations simulated, and how many of the first are left out of the figures.
  // Default: 8, 3.
  int iterations = 8;
  int warmup_iterations = 3;
  Calibration calibration;
  // Worker r starts its first iteration r x this later (seconds). Real workers never start
  // in the same instant; simulated ones do, and identical ones then stay in step.
  // Default: 0.
  double worker_start_stagger_s = 0;
  // Relative standard deviation of a worker's computation per iteration: each worker's
  // iteration i computes every block x (1 + compute_jitter x z), z a standard normal
  // drawn for (worker, i) from a generator seeded by jitter_seed and the rank (at least
  // x 0.2). Real workers never compute alike (a `local` run's iterations: 2.1 - 2.2 %, one
  // process alone); simulated ones do. Default: 0.
  double compute_jitter = 0;
  // The same per block, for the variance that sharing the cores with the other processes
  // brings (a `local` run, one process alone, has none: it is left out): each block's
  // forward or backward x exp(block_jitter x z - block_jitter^2 / 2), a log-normal factor
  // of mean 1, z drawn per (worker, iteration, block) from the same generator. Measured
  // in 2 + 2 and 3 + 3 processes on 2 cores: 0.26 - 0.55, median 0.37, which the
  // validation uses (docs/results/simulator/simulator.md, "Blocks that vary"). Default: 0.
  double block_jitter = 0;
  uint64_t jitter_seed = 1;
  // Record a timeline in the real trace's format (docs/tracing.md). Default: false.
  bool trace = false;
  // Split each link and CPU equally among its jobs without handing on unused shares
  // (Sharing::kEqualSplit, p3/sim/fluid.h): orders of magnitude faster on large
  // clusters, exact for symmetric all-to-all traffic. Default: false (water-filling).
  bool equal_split = false;
  // For tests: the straightforward bookkeeping instead of the incremental one (every
  // idle connection of a link offered its next message in turn; a block's slices
  // counted from the first on every arrival). The results are identical, only slower
  // on large clusters. Default: false.
  bool reference_paths = false;
};

struct WorkerBreakdown {
  // Mean per measured iteration, seconds.
  double iteration_s = 0;
  double compute_s = 0;         // forward and backward (stretched by CPU contention)
  double exposed_comm_s = 0;    // waiting for parameters (or all-reduce) to arrive
  double idle_s = 0;            // the rest (the optimizer in DDP and local)
};

// Where the cores go: core-seconds of work per iteration, all processes of all hosts
// together (the whole run's work divided by the iterations), by kind. The work, not the
// wall time: with cpu_cores_per_host > 0, the hosts were busy for
// (sum of these) / (cores of all hosts * iteration time) of the time.
struct CpuBreakdown {
  double compute_s = 0;  // forward and backward (profile x compute_scale, on shared cores
                         // / shared_host_compute_speed)
  double send_s = 0;     // writing messages: per message and per byte
  double recv_s = 0;     // reading messages: per message and per byte (shared memory too)
  double update_s = 0;   // the optimizer: the servers', or the workers' (DDP, local)
  double ring_s = 0;     // gloo's ring all-reduce (DDP)
  double preempt_s = 0;  // the computation's extra for preemptions (Calibration::preempt_s)
  // The computation's extra for the communication's memory traffic beside it
  // (Calibration::comm_interference).
  double interference_s = 0;
  double total_s() const {
    return compute_s + send_s + recv_s + update_s + ring_s + preempt_s + interference_s;
  }
};

struct SimResult {
  double samples_per_second = 0;  // global batch / mean iteration time
  double iteration_seconds = 0;   // mean over workers and measured iterations
  std::vector<WorkerBreakdown> workers;
  CpuBreakdown cpu;
  int num_slices = 0;             // slices of the plan used (0 for all-reduce and local)
  int64_t num_messages = 0;       // messages simulated
  int64_t events = 0;
  double simulated_seconds = 0;
  // One recorder per process (workers pid 100 + r, servers 200 + i) when options.trace.
  std::vector<std::unique_ptr<TraceRecorder>> traces;
};

// Fails on a bad profile or options (InvalidArgument), or when the real core refuses a
// message (Internal: a bug in the simulator's use of it).
absl::StatusOr<SimResult> Simulate(const SimOptions& options);

}  // namespace p3::sim

#endif  // P3_P3_SIM_SIMULATOR_H_
