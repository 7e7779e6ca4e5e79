// grpc_api_probe: what gRPC's callback API would save P3's stream loops, measured before
// they are rewritten (docs/results/streaming/streaming.md, "gRPC's two APIs on P3's
// pattern").
//
// Both P3 processes run each stream on gRPC's synchronous API: a reader thread blocked in
// Read() and a writer thread blocked in Write() on one call, each of which waits in the
// call's own completion queue, so that every completion the other thread's operation
// needs is a wake-up between threads (streaming.md, "Who wakes whom on a 5 Gbit/s link").
// The callback API runs the reactions on gRPC's own polling threads instead. This probe
// moves P3's traffic pattern with each API, and nothing else, so the two can be compared
// without the worker and server libraries around them:
//   client (the worker's end): one bidirectional stream; messages of --message_bytes
//     written one at a time, write-through (as ServerConnection's values), zero-copy from
//     one buffer; a reader takes the messages that come back.
//   server (the parameter server's end): each message read is queued and written back as
//     it is (the same size: P3's values for its gradients), one write in flight; with the
//     synchronous API through a queue to a writer thread, as ParameterServer's stream
//     loops hand over.
// The window starts once one message has gone there and back, and ends when the last
// has come back. In it: wall time, both processes' CPU (utime + stime, every thread), the
// host's busy and softirq time (/proc/stat: the emulated link's forwarding), and both
// processes' context switches.
//
//   grpc_api_probe                                         # loopback, 5 rounds each API
//   grpc_api_probe --bandwidth_gbps=5 --csv=/tmp/probe.csv # a 5 Gbit/s link (root)
//
// The driver (the default role) builds the network as bench_streaming does
// (tools/launcher/netem.h), then for each round starts the server and the client, each
// this binary again (--role=server, --role=client) on its machine, the APIs alternating
// (the first one changes from round to round). Rows go to --csv (appended; the header when
// the file is new), the medians to stdout. Reads are sized to the message in both
// processes, as P3's are (p3/base/grpc_experiments.h), unless GRPC_EXPERIMENTS is set.
// Exit status 0, or 1 with the reason on stderr.
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/server_callback_handlers.h>
#include <grpcpp/support/client_callback.h>
#include <grpcpp/impl/rpc_method.h>
#include <grpcpp/impl/rpc_service_method.h>
#include <grpcpp/support/method_handler.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "p3/base/build_commit.h"
#include "p3/base/file_util.h"
#include "p3/base/status_macros.h"
#include "proto/program.h"
#include "proto/wire.h"
#include "tools/iperf3_run.h"
#include "tools/launcher/netem.h"
#include "tools/launcher/process_supervisor.h"
#include "tools/proc_stats.h"

ABSL_FLAG(std::string, role, "driver", "driver, server or client (the last two: the driver's)");
ABSL_FLAG(std::string, apis, "sync,callback",
          "driver: the APIs compared, in the first round's order; an API is sync, callback, or "
          "<client's>/<server's> (callback/sync: the client on the callback API)");
ABSL_FLAG(std::string, api, "", "server and client: sync or callback");
ABSL_FLAG(double, bandwidth_gbps, 0,
          "driver: emulated link per machine and direction (root); 0: loopback");
ABSL_FLAG(int64_t, message_bytes, 160'000, "bytes a message (160,000: a 40,000-value slice)");
ABSL_FLAG(int64_t, megabytes, 2000, "MB each way in the window");
ABSL_FLAG(int64_t, iteration_megabytes, 100,
          "MB an iteration: the next iteration's messages go once the last one's are back "
          "(100: bench_streaming's 25 M parameters)");
ABSL_FLAG(int, runs, 5, "driver: rounds, each API once per round");
ABSL_FLAG(std::string, csv, "", "driver: append every run here");
ABSL_FLAG(std::string, out_dir, "", "driver: logs and results; default: a temporary folder");
ABSL_FLAG(std::string, port_file, "", "server: write the port here");
ABSL_FLAG(std::string, target, "", "client: host:port of the server");
ABSL_FLAG(int, server_pid, 0, "client: the server's process, for its CPU and switches");
ABSL_FLAG(std::string, result_json, "", "client: write the run's figures here");

namespace p3::tools {
namespace {

using launcher::ProcessSpec;
using launcher::ProcessSupervisor;
using Buffer = grpc::ByteBuffer;

constexpr char kMethod[] = "/p3.probe.Echo/Stream";
constexpr absl::Duration kPeerTimeout = absl::Seconds(30);

grpc::WriteOptions Through() { return grpc::WriteOptions().set_write_through(); }

// ---- server ----------------------------------------------------------------------------

// The synchronous API, as ParameterServer's stream: this (gRPC's handler) thread reads and
// queues, a writer thread writes back.
struct EchoQueue {
  std::deque<Buffer> messages;
  bool closed = false;
  bool Ready() const { return !messages.empty() || closed; }
};

grpc::Status ServeSync(grpc::ServerReaderWriter<Buffer, Buffer>* stream) {
  absl::Mutex mu;
  EchoQueue queue;  // guarded by mu
  std::thread writer([&] {
    while (true) {
      Buffer next;
      {
        absl::MutexLock lock(&mu);
        mu.Await(absl::Condition(&queue, &EchoQueue::Ready));
        if (queue.messages.empty()) return;
        next.Swap(&queue.messages.front());
        queue.messages.pop_front();
      }
      if (!stream->Write(next, Through())) return;
    }
  });
  Buffer in;
  while (stream->Read(&in)) {
    absl::MutexLock lock(&mu);
    queue.messages.emplace_back();
    queue.messages.back().Swap(&in);
  }
  {
    absl::MutexLock lock(&mu);
    queue.closed = true;
  }
  writer.join();
  return grpc::Status::OK;
}

// The callback API: reads and writes are reactions on gRPC's threads; the queue between
// them is the reactor's.
class EchoReactor : public grpc::ServerBidiReactor<Buffer, Buffer> {
 public:
  explicit EchoReactor(absl::Notification* done) : done_(done) { StartRead(&in_); }

  void OnReadDone(bool ok) override {
    const Buffer* write = nullptr;
    bool finish = false;
    {
      absl::MutexLock lock(&mu_);
      if (ok) {
        queue_.emplace_back();
        queue_.back().Swap(&in_);
        if (!writing_) write = &queue_.front();
        writing_ = true;
      } else {
        reads_done_ = true;
        finish = !writing_;
      }
    }
    if (write != nullptr) StartWrite(write, Through());
    if (ok) StartRead(&in_);
    if (finish) Finish(grpc::Status::OK);
  }

  void OnWriteDone(bool ok) override {
    const Buffer* write = nullptr;
    bool finish = false;
    {
      absl::MutexLock lock(&mu_);
      queue_.pop_front();
      if (!ok) {
        finish = true;
      } else if (!queue_.empty()) {
        write = &queue_.front();  // a deque's elements stay where they are on push_back
      } else {
        writing_ = false;
        finish = reads_done_;
      }
    }
    if (write != nullptr) StartWrite(write, Through());
    if (finish) Finish(grpc::Status::OK);
  }

  void OnDone() override {
    done_->Notify();
    delete this;
  }

 private:
  absl::Notification* done_;
  Buffer in_;
  absl::Mutex mu_;
  std::deque<Buffer> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
};

class EchoService : public grpc::Service {
 public:
  EchoService(bool callback, absl::Notification* done) : done_(done) {
    if (!callback) {
      AddMethod(new grpc::internal::RpcServiceMethod(
          kMethod, grpc::internal::RpcMethod::BIDI_STREAMING,
          new grpc::internal::BidiStreamingHandler<EchoService, Buffer, Buffer>(
              [](EchoService* service, grpc::ServerContext*,
                 grpc::ServerReaderWriter<Buffer, Buffer>* stream) {
                grpc::Status status = ServeSync(stream);
                service->done_->Notify();
                return status;
              },
              this)));
      return;
    }
    AddMethod(new grpc::internal::RpcServiceMethod(
        kMethod, grpc::internal::RpcMethod::BIDI_STREAMING, nullptr));
    MarkMethodCallback(0, new grpc::internal::CallbackBidiHandler<Buffer, Buffer>(
                              [this](grpc::CallbackServerContext*) {
                                return new EchoReactor(done_);
                              }));
  }

 private:
  absl::Notification* done_;
};

absl::Status RunServer(bool callback) {
  absl::Notification done;
  EchoService service(callback, &done);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("0.0.0.0:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  for (const auto& [name, value] : KeepaliveChannelArgs(kPeerTimeout)) {
    builder.AddChannelArgument(name, value);
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) return absl::InternalError("the server did not start");
  P3_RETURN_IF_ERROR(WriteFileAtomically(absl::GetFlag(FLAGS_port_file), absl::StrCat(port)));
  std::cerr << "listening on port " << port << std::endl;
  // One stream, then out: the driver starts a server per run.
  done.WaitForNotification();
  server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  return absl::OkStatus();
}

// ---- client ----------------------------------------------------------------------------

// What a client run measured between the first echo and the last.
struct Window {
  absl::Time start, end;
  int64_t bytes_back = 0;
};

// One message of the payload: gRPC's slice points at the buffer, no copy (as P3's values).
Buffer Message(const std::vector<char>& payload) {
  grpc::Slice slice(payload.data(), payload.size(), grpc::Slice::STATIC_SLICE);
  return Buffer(&slice, 1);
}

// The messages of a run, in iterations: as a P3 worker, which sends one iteration's
// gradients and needs their values back before it sends the next iteration's.
struct Plan {
  int64_t messages = 0;       // after the first, which opens the window
  int64_t per_iteration = 1;  // messages an iteration

  // Echoes needed back before message `i` (0-based, after the first) may go.
  int64_t BackBefore(int64_t i) const { return i / per_iteration * per_iteration; }
};

// Counts the echoes for the synchronous client's writer thread.
struct Echoes {
  int64_t back = 0;
  int64_t wanted = 0;
  bool ended = false;
  bool Ready() const { return back >= wanted || ended; }
};

// The synchronous API, as ServerConnection: a writer thread and a reader thread.
absl::StatusOr<Window> ClientSync(grpc::Channel* channel, const std::vector<char>& payload,
                                  const Plan& plan) {
  grpc::ClientContext context;
  const grpc::internal::RpcMethod method(kMethod, grpc::internal::RpcMethod::BIDI_STREAMING);
  std::unique_ptr<grpc::ClientReaderWriter<Buffer, Buffer>> stream(
      grpc::internal::ClientReaderWriterFactory<Buffer, Buffer>::Create(channel, method,
                                                                         &context));
  Buffer in;
  if (!stream->Write(Message(payload), Through()) || !stream->Read(&in)) {
    return absl::UnavailableError("the first message did not come back");
  }
  Window w;
  w.start = absl::Now();
  absl::Mutex mu;
  Echoes echoes;  // guarded by mu
  std::thread writer([&] {
    for (int64_t i = 0; i < plan.messages; ++i) {
      if (i % plan.per_iteration == 0) {
        absl::MutexLock lock(&mu);
        echoes.wanted = plan.BackBefore(i);
        mu.Await(absl::Condition(&echoes, &Echoes::Ready));
        if (echoes.ended) return;
      }
      if (!stream->Write(Message(payload), Through())) return;
    }
    stream->WritesDone();
  });
  int64_t back = 0;
  while (back < plan.messages && stream->Read(&in)) {
    w.bytes_back += static_cast<int64_t>(in.Length());
    ++back;
    absl::MutexLock lock(&mu);
    echoes.back = back;
  }
  w.end = absl::Now();
  {
    absl::MutexLock lock(&mu);
    echoes.ended = true;
  }
  writer.join();
  while (stream->Read(&in)) {
  }
  const grpc::Status status = stream->Finish();
  if (back < plan.messages || !status.ok()) {
    return absl::UnavailableError(absl::StrCat(back, " of ", plan.messages,
                                               " messages came back: ", status.error_message()));
  }
  return w;
}

// The callback API: the reactions write the next message and read the next echo.
class ClientReactor : public grpc::ClientBidiReactor<Buffer, Buffer> {
 public:
  ClientReactor(const std::vector<char>& payload, const Plan& plan)
      : payload_(payload), plan_(plan) {}

  // The first message; the window opens when it is back.
  void Begin() {
    out_ = Message(payload_);
    StartRead(&in_);
    StartWrite(&out_, Through());
    StartCall();
  }

  void OnWriteDone(bool ok) override {
    Next next = Next::kNothing;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (ok) next = TakeNextLocked();
    }
    Do(next);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    Next next = Next::kNothing;
    {
      absl::MutexLock lock(&mu_);
      if (!started_) {
        started_ = true;
        window_.start = absl::Now();
      } else {
        window_.bytes_back += static_cast<int64_t>(in_.Length());
        if (++back_ == plan_.messages) window_.end = absl::Now();
      }
      next = TakeNextLocked();
    }
    Do(next);
    StartRead(&in_);
  }

  void OnDone(const grpc::Status& status) override {
    absl::MutexLock lock(&mu_);
    status_ = status;
    done_ = true;
  }

  absl::StatusOr<Window> Await() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
    if (back_ < plan_.messages || !status_.ok()) {
      return absl::UnavailableError(absl::StrCat(back_, " of ", plan_.messages,
                                                 " messages came back: ", status_.error_message()));
    }
    return window_;
  }

 private:
  enum class Next { kNothing, kWrite, kWritesDone };

  // What the stream may do now: one write at a time, after the first message's echo, an
  // iteration's messages only once the one before has come back.
  Next TakeNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || !started_) return Next::kNothing;
    if (sent_ == plan_.messages) {
      if (writes_done_) return Next::kNothing;
      writes_done_ = true;
      return Next::kWritesDone;
    }
    if (back_ < plan_.BackBefore(sent_)) return Next::kNothing;
    writing_ = true;
    ++sent_;
    return Next::kWrite;
  }

  void Do(Next next) {
    if (next == Next::kWrite) {
      out_ = Message(payload_);  // the previous write is done: its buffer is free
      StartWrite(&out_, Through());
    } else if (next == Next::kWritesDone) {
      StartWritesDone();
    }
  }

  const std::vector<char>& payload_;
  const Plan plan_;
  Buffer in_, out_;
  absl::Mutex mu_;
  int64_t sent_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t back_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = true;  // the first message
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_done_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  Window window_ ABSL_GUARDED_BY(mu_);
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<Window> ClientCallback(grpc::Channel* channel, const std::vector<char>& payload,
                                      const Plan& plan) {
  grpc::ClientContext context;
  const grpc::internal::RpcMethod method(kMethod, grpc::internal::RpcMethod::BIDI_STREAMING);
  ClientReactor reactor(payload, plan);
  grpc::internal::ClientCallbackReaderWriterFactory<Buffer, Buffer>::Create(channel, method,
                                                                            &context, &reactor);
  reactor.Begin();
  return reactor.Await();
}

absl::StatusOr<nlohmann::json> RunClient(bool callback) {
  const int64_t message_bytes = absl::GetFlag(FLAGS_message_bytes);
  Plan plan;
  plan.messages = absl::GetFlag(FLAGS_megabytes) * 1'000'000 / message_bytes;
  plan.per_iteration =
      std::max<int64_t>(1, absl::GetFlag(FLAGS_iteration_megabytes) * 1'000'000 / message_bytes);
  const int64_t messages = plan.messages;
  const pid_t server = absl::GetFlag(FLAGS_server_pid);
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(
      absl::GetFlag(FLAGS_target), grpc::InsecureChannelCredentials(), ChannelArgs(kPeerTimeout));
  if (!channel->WaitForConnected(absl::ToChronoTime(absl::Now() + kPeerTimeout))) {
    return absl::UnavailableError(absl::StrCat("no server at ", absl::GetFlag(FLAGS_target)));
  }
  const std::vector<char> payload(static_cast<size_t>(message_bytes), 'p');
  // Readings before the stream: the first echo is a message's round trip, small beside the
  // window; the CPU of setting up the stream is counted, and is as small.
  const double cpu0 = SelfCpuSeconds();
  P3_ASSIGN_OR_RETURN(const double server0, ProcessCpuSeconds(server));
  P3_ASSIGN_OR_RETURN(const ContextSwitches client_sw0, ThreadContextSwitches(getpid()));
  P3_ASSIGN_OR_RETURN(const ContextSwitches server_sw0, ThreadContextSwitches(server));
  P3_ASSIGN_OR_RETURN(const HostCpu host0, ReadHostCpu());
  absl::StatusOr<Window> window = callback ? ClientCallback(channel.get(), payload, plan)
                                           : ClientSync(channel.get(), payload, plan);
  const double cpu1 = SelfCpuSeconds();
  P3_ASSIGN_OR_RETURN(const HostCpu host1, ReadHostCpu());
  P3_ASSIGN_OR_RETURN(const ContextSwitches client_sw1, ThreadContextSwitches(getpid()));
  // The server may have ended already: its figures are read before it can (it waits for
  // the stream's end, which the client's return gives).
  P3_ASSIGN_OR_RETURN(const double server1, ProcessCpuSeconds(server));
  P3_ASSIGN_OR_RETURN(const ContextSwitches server_sw1, ThreadContextSwitches(server));
  if (!window.ok()) return window.status();
  const double seconds = absl::ToDoubleSeconds(window->end - window->start);
  const double gb = 2.0 * static_cast<double>(window->bytes_back) / 1e9;  // both directions
  const ContextSwitches client_sw = client_sw1 - client_sw0, server_sw = server_sw1 - server_sw0;
  const double host_busy = TicksToSeconds(host1.busy_ticks - host0.busy_ticks);
  nlohmann::json r;
  r["api"] = callback ? "callback" : "sync";
  r["message_bytes"] = message_bytes;
  r["messages"] = messages;
  r["iteration_messages"] = plan.per_iteration;
  r["seconds"] = seconds;
  r["goodput_gbps"] = window->bytes_back * 8 / seconds / 1e9;
  r["client_cpu_s"] = cpu1 - cpu0;
  r["server_cpu_s"] = server1 - server0;
  r["cpu_s_per_gb"] = (cpu1 - cpu0 + server1 - server0) / gb;
  r["host_busy_s"] = host_busy;
  r["host_softirq_s"] = TicksToSeconds(host1.softirq_ticks - host0.softirq_ticks);
  r["host_cpu_s_per_gb"] = host_busy / gb;
  r["client_voluntary_switches"] = client_sw.voluntary;
  r["server_voluntary_switches"] = server_sw.voluntary;
  r["voluntary_switches_per_message"] =
      static_cast<double>(client_sw.voluntary + server_sw.voluntary) / static_cast<double>(messages);
  return r;
}

// ---- driver ----------------------------------------------------------------------------

const std::vector<std::string> kColumns = {
    "date",          "commit",         "rate_gbps",   "run",
    "api",           "message_bytes",  "messages", "iteration_messages",    "seconds",
    "goodput_gbps",  "client_cpu_s",   "server_cpu_s", "cpu_s_per_gb",
    "host_busy_s",   "host_softirq_s", "host_cpu_s_per_gb",
    "client_voluntary_switches", "server_voluntary_switches", "voluntary_switches_per_message",
    "grpc_experiments"};

std::string Cell(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return absl::StrCat(v.get<double>());
  return v.dump();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// "sync", "callback", or "<client's>/<server's>" (e.g. "callback/sync"): the two ends' APIs.
absl::StatusOr<std::pair<std::string, std::string>> ApiPair(const std::string& api) {
  const std::vector<std::string> ends = absl::StrSplit(api, '/');
  if (ends.size() > 2) return absl::InvalidArgumentError(api);
  for (const std::string& end : ends) {
    if (end != "sync" && end != "callback") return absl::InvalidArgumentError(api);
  }
  return std::make_pair(ends.front(), ends.back());
}

absl::Status RunDriver(const char* self) {
  const double gbps = absl::GetFlag(FLAGS_bandwidth_gbps);
  const std::vector<std::string> apis = absl::StrSplit(absl::GetFlag(FLAGS_apis), ',');
  for (const std::string& api : apis) {
    if (!ApiPair(api).ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--apis: unknown API \"", api, "\""));
    }
  }
  std::string dir = absl::GetFlag(FLAGS_out_dir);
  if (dir.empty()) {
    char tmpl[] = "/tmp/grpc_api_probe.XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return absl::InternalError("mkdtemp failed");
    dir = tmpl;
  }
  std::filesystem::create_directories(dir);
  P3_ASSIGN_OR_RETURN(std::unique_ptr<ProcessSupervisor> sup,
                      ProcessSupervisor::Create(ProcessSupervisor::Options{}));
  std::unique_ptr<EmulatedNetwork> net;
  std::string host = "127.0.0.1", server_ns, client_ns;
  if (gbps > 0) {
    NetworkSpec spec;
    spec.run_id = RunIdForPid(getpid());  // `launch_cluster --cleanup_network` finds leftovers
    spec.rate_bits_per_second = gbps * 1e9;
    P3_ASSIGN_OR_RETURN(net, EmulatedNetwork::Create(spec));
    host = net->address(1);
    server_ns = net->namespace_path(1);
    client_ns = net->namespace_path(0);
  }
  const std::string csv = absl::GetFlag(FLAGS_csv);
  const bool header = !csv.empty() && !std::filesystem::exists(csv);
  std::ofstream out;
  if (!csv.empty()) out.open(csv, std::ios::app);
  if (header) out << absl::StrJoin(kColumns, ",") << "\n";
  const char* experiments = std::getenv("GRPC_EXPERIMENTS");
  const std::string date = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone());
  std::map<std::string, std::vector<double>> goodput, cpu, host_cpu, switches;
  const std::string size_flag = absl::StrCat("--message_bytes=", absl::GetFlag(FLAGS_message_bytes));
  const std::string mb_flag = absl::StrCat("--megabytes=", absl::GetFlag(FLAGS_megabytes));
  const std::string iteration_flag =
      absl::StrCat("--iteration_megabytes=", absl::GetFlag(FLAGS_iteration_megabytes));
  for (int run = 0; run < absl::GetFlag(FLAGS_runs); ++run) {
    for (size_t k = 0; k < apis.size(); ++k) {
      const std::string& api = apis[(k + run) % apis.size()];  // the first one alternates
      const std::string tag = absl::StrCat(absl::StrReplaceAll(api, {{"/", "-"}}), "_", run);
      const auto [client_api, server_api] = *ApiPair(api);
      const std::string port_file = absl::StrCat(dir, "/port_", tag);
      const std::string server_log = absl::StrCat(dir, "/server_", tag, ".log");
      const std::string client_log = absl::StrCat(dir, "/client_", tag, ".log");
      const std::string result = absl::StrCat(dir, "/result_", tag, ".json");
      P3_ASSIGN_OR_RETURN(const int server_id,
                          sup->Start(ProcessSpec{.argv = {self, "--role=server", "--api=" + server_api,
                                                          "--port_file=" + port_file},
                                                 .log_path = server_log,
                                                 .ns_path = server_ns,
                                                 .label = "server"}));
      P3_RETURN_IF_ERROR(
          WaitForText(sup.get(), server_id, server_log, "listening on port", absl::Seconds(30)));
      P3_ASSIGN_OR_RETURN(const std::string port, ReadFile(port_file));
      const pid_t server_pid = sup->process(server_id).pid;
      P3_ASSIGN_OR_RETURN(
          const int client_id,
          sup->Start(ProcessSpec{
              .argv = {self, "--role=client", "--api=" + client_api,
                       absl::StrCat("--target=", host, ":", absl::StripAsciiWhitespace(port)),
                       absl::StrCat("--server_pid=", server_pid), "--result_json=" + result,
                       size_flag, mb_flag, iteration_flag},
              .log_path = client_log,
              .ns_path = client_ns,
              .label = "client"}));
      P3_RETURN_IF_ERROR(WaitForExit(sup.get(), client_id, "client", client_log, absl::Minutes(5)));
      P3_RETURN_IF_ERROR(WaitForExit(sup.get(), server_id, "server", server_log, absl::Seconds(30)));
      P3_ASSIGN_OR_RETURN(const std::string text, ReadFile(result));
      nlohmann::json r = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (r.is_discarded()) return absl::InternalError(absl::StrCat(result, " is not JSON"));
      r["date"] = date;
      r["commit"] = BuildCommit();
      r["rate_gbps"] = gbps;
      r["run"] = run;
      r["api"] = api;
      r["grpc_experiments"] = experiments != nullptr ? experiments : "";
      std::vector<std::string> cells;
      for (const std::string& c : kColumns) cells.push_back(r.contains(c) ? Cell(r[c]) : "");
      if (out.is_open()) out << absl::StrJoin(cells, ",") << "\n" << std::flush;
      std::cerr << "run " << run << " " << api << ": " << r["goodput_gbps"].get<double>()
                << " Gbit/s, " << r["host_cpu_s_per_gb"].get<double>() << " host CPU s/GB"
                << std::endl;
      goodput[api].push_back(r["goodput_gbps"].get<double>());
      cpu[api].push_back(r["cpu_s_per_gb"].get<double>());
      host_cpu[api].push_back(r["host_cpu_s_per_gb"].get<double>());
      switches[api].push_back(r["voluntary_switches_per_message"].get<double>());
    }
  }
  if (net != nullptr) P3_RETURN_IF_ERROR(net->Destroy());
  std::cout << "| API | goodput Gbit/s | CPU s/GB (both processes) | host CPU s/GB | "
               "voluntary switches a message |\n|---|---:|---:|---:|---:|\n";
  for (const std::string& api : apis) {
    std::cout << "| " << api << " | " << Median(goodput[api]) << " | " << Median(cpu[api])
              << " | " << Median(host_cpu[api]) << " | " << Median(switches[api]) << " |\n";
  }
  std::cout << "medians of " << absl::GetFlag(FLAGS_runs) << " runs each, "
            << (gbps > 0 ? absl::StrCat(gbps, " Gbit/s") : std::string("loopback")) << std::endl;
  return absl::OkStatus();
}

}  // namespace
}  // namespace p3::tools

int main(int argc, char** argv) {
  p3::Program program("grpc_api_probe", argc, argv,
                      {.allocator = p3::AllocatorOptions{.one_arena = true},
                       .skip_lock_order_checks = true});
  program.RequestSizedReads(true);
  const std::string role = absl::GetFlag(FLAGS_role);
  const std::string api = absl::GetFlag(FLAGS_api);
  if (role != "driver" && api != "sync" && api != "callback") {
    return program.Fail(2, "--api must be sync or callback");
  }
  if (role == "server") {
    absl::Status s = p3::tools::RunServer(api == "callback");
    return s.ok() ? 0 : program.Fail(1, s.ToString());
  }
  if (role == "client") {
    absl::StatusOr<nlohmann::json> r = p3::tools::RunClient(api == "callback");
    if (!r.ok()) return program.Fail(1, r.status().ToString());
    absl::Status s = p3::WriteFileAtomically(absl::GetFlag(FLAGS_result_json), r->dump() + "\n");
    return s.ok() ? 0 : program.Fail(1, s.ToString());
  }
  if (role != "driver") return program.Fail(2, "--role must be driver, server or client");
  char self[4096];
  const ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (length <= 0) return program.Fail(1, "cannot read /proc/self/exe");
  self[length] = '\0';
  absl::Status s = p3::tools::RunDriver(self);
  return s.ok() ? 0 : program.Fail(1, s.ToString());
}
