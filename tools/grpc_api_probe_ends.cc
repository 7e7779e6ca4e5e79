#include "tools/grpc_api_probe_ends.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/server_callback_handlers.h>
#include <grpcpp/impl/rpc_method.h>
#include <grpcpp/impl/rpc_service_method.h>
#include <grpcpp/support/client_callback.h>
#include <grpcpp/support/method_handler.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "p3/base/file_util.h"
#include "p3/base/status_macros.h"
#include "proto/wire.h"
#include "tools/iperf3_run.h"
#include "tools/proc_stats.h"

namespace p3::tools {
namespace {

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
    bool finish = false, read = false;
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;  // a write failed: the stream is over
      if (ok) {
        queue_.emplace_back();
        queue_.back().Swap(&in_);
        if (!writing_) write = &queue_.front();
        writing_ = true;
        read = true;
      } else {
        reads_done_ = true;
        finish = finished_ = !writing_;
      }
    }
    if (write != nullptr) StartWrite(write, Through());
    if (read) StartRead(&in_);
    if (finish) Finish(grpc::Status::OK);
  }

  void OnWriteDone(bool ok) override {
    const Buffer* write = nullptr;
    bool finish = false;
    {
      absl::MutexLock lock(&mu_);
      queue_.pop_front();
      if (!ok) {
        finish = finished_ = true;
      } else if (!queue_.empty()) {
        write = &queue_.front();  // a deque's elements stay where they are on push_back
      } else {
        writing_ = false;
        finish = finished_ = reads_done_;
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
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish() called: nothing more starts
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

}  // namespace

absl::Status RunEchoServer(bool callback, const std::string& port_file) {
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
  P3_RETURN_IF_ERROR(WriteFileAtomically(port_file, absl::StrCat(port)));
  std::cerr << "listening on port " << port << std::endl;
  // One stream, then out: the driver starts a server per run.
  done.WaitForNotification();
  server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  return absl::OkStatus();
}

namespace {

// ---- client ----------------------------------------------------------------------------

// Both processes' counters and the host's, read at either end of the window.
struct Readings {
  double client_cpu = 0;
  double server_cpu = 0;
  ContextSwitches client_switches;
  ContextSwitches server_switches;
  HostCpu host;
};

absl::StatusOr<Readings> ReadCounters(pid_t server) {
  Readings r;
  r.client_cpu = SelfCpuSeconds();
  P3_ASSIGN_OR_RETURN(r.server_cpu, ProcessCpuSeconds(server));
  P3_ASSIGN_OR_RETURN(r.client_switches, ThreadContextSwitches(getpid()));
  P3_ASSIGN_OR_RETURN(r.server_switches, ThreadContextSwitches(server));
  P3_ASSIGN_OR_RETURN(r.host, ReadHostCpu());
  return r;
}

// What a client run measured between the first echo and the last. The end's readings are
// taken as the last echo arrives, while the server still serves the stream (it ends,
// threads and all, once the stream is over).
struct Window {
  absl::Time start, end;
  int64_t bytes_back = 0;
  absl::StatusOr<Readings> at_end = absl::UnknownError("the window did not end");
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
                                  const Plan& plan, pid_t server) {
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
  });
  int64_t back = 0;
  while (back < plan.messages && stream->Read(&in)) {
    w.bytes_back += static_cast<int64_t>(in.Length());
    ++back;
    absl::MutexLock lock(&mu);
    echoes.back = back;
  }
  w.end = absl::Now();
  w.at_end = ReadCounters(server);
  {
    absl::MutexLock lock(&mu);
    echoes.ended = true;
  }
  writer.join();
  // Only now: the server ends, threads and all, once the client's writes are done, and its
  // counters have been read.
  stream->WritesDone();
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
  ClientReactor(const std::vector<char>& payload, const Plan& plan, pid_t server)
      : payload_(payload), plan_(plan), server_(server) {}

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
        if (++back_ == plan_.messages) {
          window_.end = absl::Now();
          window_.at_end = ReadCounters(server_);
        }
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
      // The writes end once every echo is back and the window's end was read: the server
      // ends, threads and all, with the stream.
      if (writes_done_ || back_ < plan_.messages) return Next::kNothing;
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
  const pid_t server_;
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
                                      const Plan& plan, pid_t server) {
  grpc::ClientContext context;
  const grpc::internal::RpcMethod method(kMethod, grpc::internal::RpcMethod::BIDI_STREAMING);
  ClientReactor reactor(payload, plan, server);
  grpc::internal::ClientCallbackReaderWriterFactory<Buffer, Buffer>::Create(channel, method,
                                                                            &context, &reactor);
  reactor.Begin();
  return reactor.Await();
}

}  // namespace

absl::StatusOr<nlohmann::json> RunEchoClient(const EchoClientOptions& options) {
  const bool callback = options.callback;
  const int64_t message_bytes = options.message_bytes;
  Plan plan;
  plan.messages = options.megabytes * 1'000'000 / message_bytes;
  plan.per_iteration =
      std::max<int64_t>(1, options.iteration_megabytes * 1'000'000 / message_bytes);
  const int64_t messages = plan.messages;
  const pid_t server = options.server_pid;
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(
      options.target, grpc::InsecureChannelCredentials(), ChannelArgs(kPeerTimeout));
  if (!channel->WaitForConnected(absl::ToChronoTime(absl::Now() + kPeerTimeout))) {
    return absl::UnavailableError(absl::StrCat("no server at ", options.target));
  }
  const std::vector<char> payload(static_cast<size_t>(message_bytes), 'p');
  // Readings before the stream: the first echo is a message's round trip, small beside the
  // window; the CPU of setting up the stream is counted, and is as small.
  P3_ASSIGN_OR_RETURN(const Readings start, ReadCounters(server));
  absl::StatusOr<Window> window = callback ? ClientCallback(channel.get(), payload, plan, server)
                                           : ClientSync(channel.get(), payload, plan, server);
  if (!window.ok()) return window.status();
  P3_RETURN_IF_ERROR(window->at_end.status());
  const Readings& end = *window->at_end;
  const double cpu0 = start.client_cpu, cpu1 = end.client_cpu;
  const double server0 = start.server_cpu, server1 = end.server_cpu;
  const HostCpu host0 = start.host, host1 = end.host;
  const ContextSwitches client_sw0 = start.client_switches, client_sw1 = end.client_switches;
  const ContextSwitches server_sw0 = start.server_switches, server_sw1 = end.server_switches;
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

}  // namespace p3::tools
