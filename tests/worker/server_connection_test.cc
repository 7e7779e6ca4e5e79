// ServerConnection (worker/server_connection.h) over a real gRPC stream to a scripted
// server on an OS-chosen loopback port, with a fake core that records what the connection
// hands it: what arrives goes straight to the core, an Ack's Pull goes back on the same
// stream, a message's values are written from where it points in the encoding it names,
// and a malformed or refused message fails the link with a clear status. Waits are on
// conditions with a bound that only a broken connection reaches, never sleeps.
#include "worker/server_connection.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "p3/core/transport_core.h"
#include "p3/core/wire_dtype.h"
#include "proto/raw_train.h"
#include "proto/wire.h"
#include "proto/wire_codec.h"

namespace p3 {
namespace {

const absl::Duration kBound = absl::Seconds(20);  // only reached if something is broken

// Records every part and Ack the connection hands it; refuses the parts of one slice.
class FakeCore : public TransportCore {
 public:
  struct Part {
    int server = 0;
    int64_t slice_id = 0;
    uint64_t version = 0;
    uint64_t offset = 0;
    std::string bytes;  // the segments, joined
    std::optional<int> scale_exponent;
    int64_t in_place = 0;  // values the server wrote into shared memory itself
  };
  struct AckSeen {
    int server = 0;
    int64_t slice_id = 0;
    uint64_t iteration = 0;
  };

  explicit FakeCore(int64_t refused_slice = -1) : refused_slice_(refused_slice) {}

  absl::StatusOr<bool> Params(int server, int64_t slice_id, uint64_t version, uint64_t offset,
                              const ReceivedValues& values) override {
    Part part{server, slice_id, version, offset, "", values.scale_exponent, values.in_place_count};
    for (absl::string_view segment : values.segments)
      part.bytes.append(segment.data(), segment.size());
    absl::MutexLock lock(&mu_);
    parts_.push_back(std::move(part));
    if (slice_id == refused_slice_) {
      return absl::InternalError(absl::StrCat("the core refuses slice ", slice_id));
    }
    return false;
  }

  absl::StatusOr<ToServer> Ack(int server, int64_t slice_id, uint64_t iteration) override {
    absl::MutexLock lock(&mu_);
    acks_.push_back({server, slice_id, iteration});
    return ToServer{.server = server,
                    .message = Upstream{.kind = Upstream::Kind::kPull,
                                        .slice_id = static_cast<int>(slice_id),
                                        .version = iteration + 1}};
  }

  // The parts so far, once there are at least `n` (or kBound has passed).
  std::vector<Part> AwaitParts(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return parts_.size() >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&enough), kBound);
    return parts_;
  }
  std::vector<AckSeen> acks() {
    absl::MutexLock lock(&mu_);
    return acks_;
  }

 private:
  const int64_t refused_slice_;
  absl::Mutex mu_;
  std::vector<Part> parts_ ABSL_GUARDED_BY(mu_);
  std::vector<AckSeen> acks_ ABSL_GUARDED_BY(mu_);
};

// Records what the connection tells the worker.
class FakeListener : public TransportListener {
 public:
  void OnBuffers(int server, uint64_t round, absl::string_view values) override {
    absl::MutexLock lock(&mu_);
    buffers_.push_back(absl::StrCat(server, " ", round, " ", values.size()));
  }
  void OnReplan(int server, uint64_t from_iteration, int64_t slice_params) override {
    absl::MutexLock lock(&mu_);
    replans_.push_back(absl::StrCat(server, " ", from_iteration, " ", slice_params));
  }
  void OnFailure(int server, const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    failures_.push_back(status);
  }
  void OnAbort(int server, const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    aborts_.push_back(status);
  }

  // Once the link has ended badly (or kBound has passed): every failure and abort so far.
  std::vector<absl::Status> AwaitEnd() {
    absl::MutexLock lock(&mu_);
    auto ended = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !failures_.empty() || !aborts_.empty();
    };
    mu_.AwaitWithTimeout(absl::Condition(&ended), kBound);
    std::vector<absl::Status> all = failures_;
    all.insert(all.end(), aborts_.begin(), aborts_.end());
    return all;
  }
  size_t failures() {
    absl::MutexLock lock(&mu_);
    return failures_.size();
  }
  size_t aborts() {
    absl::MutexLock lock(&mu_);
    return aborts_.size();
  }
  std::vector<std::string> buffers() {
    absl::MutexLock lock(&mu_);
    return buffers_;
  }
  std::vector<std::string> replans() {
    absl::MutexLock lock(&mu_);
    return replans_;
  }

 private:
  absl::Mutex mu_;
  std::vector<absl::Status> failures_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Status> aborts_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> buffers_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> replans_ ABSL_GUARDED_BY(mu_);
};

// What a ScriptedServer's Welcome says beyond its index and start version 3.
struct WelcomeSays {
  bool shared_memory = false;
  bool takes_shared_batches = false;
};

// A server whose one stream, after the handshake (Hello read, Welcome written), follows
// `script`: the test's side of the stream.
class ScriptedServer {
 public:
  using Script = std::function<grpc::Status(RawTrainServerStream*)>;

  explicit ScriptedServer(Script script, WelcomeSays says = {})
      : service_([this, script, says](grpc::ServerContext*, RawTrainServerStream* stream) {
          grpc::ByteBuffer hello;
          if (!stream->Read(&hello)) return grpc::Status::CANCELLED;
          DecodedWorkerMessage decoded;
          if (Decode(&hello, &decoded).ok()) {
            hello_takes_batches_ = decoded.control.hello().takes_shared_batches();
          }
          wire::ServerMessage welcome;
          welcome.mutable_welcome()->set_server_index(0);
          welcome.mutable_welcome()->set_start_version(3);
          welcome.mutable_welcome()->set_shared_memory(says.shared_memory);
          welcome.mutable_welcome()->set_takes_shared_batches(says.takes_shared_batches);
          stream->Write(EncodeMessage(welcome));
          return script(stream);
        }) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
  }
  ~ScriptedServer() {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  // The worker's Hello said takes_shared_batches.
  bool hello_takes_batches() const { return hello_takes_batches_; }

 private:
  std::atomic<bool> hello_takes_batches_{false};
  RawTrainService service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

// Reads the worker's messages until its Done (true) or the end of the stream (false),
// handing each other one to `seen`.
bool ReadUntilDone(RawTrainServerStream* stream,
                   const std::function<void(const DecodedWorkerMessage&)>& seen = {}) {
  grpc::ByteBuffer buffer;
  DecodedWorkerMessage msg;
  while (stream->Read(&buffer)) {
    if (!Decode(&buffer, &msg).ok()) return false;
    if (msg.field == wire::WorkerMessage::kDoneFieldNumber) return true;
    if (seen) seen(msg);
  }
  return false;
}

// `n` float32 values v0, v0+1, ...
std::vector<float> Values(int n, float v0) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = v0 + static_cast<float>(i);
  return v;
}

std::string Bytes(const float* values, int64_t n) {
  return std::string(reinterpret_cast<const char*>(values), n * sizeof(float));
}

// Writes `values` as version `version` of `slice` in parts of at most `part` values.
void WriteParams(RawTrainServerStream* stream, uint32_t slice, uint64_t version,
                 const std::vector<float>& values, int64_t part) {
  SliceHeader h;
  h.slice_id = slice;
  h.set_version(version);
  WriteInParts(static_cast<int64_t>(values.size()), part, [&](int64_t offset, int64_t count) {
    h.offset = static_cast<uint64_t>(offset);
    return stream->Write(EncodeSlice(wire::ServerMessage::kParamsFieldNumber, h,
                                     values.data() + offset, count * sizeof(float), nullptr));
  });
}

TransportOptions Link(const std::string& address, TransportCore* core,
                      TransportListener* listener) {
  TransportOptions options;
  options.address = address;
  options.peer_timeout = kBound;
  options.core = core;
  options.listener = listener;
  return options;
}

// Link() offering shared memory: the Hello names a region, which nothing here opens.
TransportOptions SharedLink(const std::string& address, TransportCore* core,
                            TransportListener* listener) {
  TransportOptions options = Link(address, core, listener);
  options.shared_memory_name = "/p3-test-never-opened";
  options.shared_memory_nonce = 1;
  return options;
}

// A SharedSlices message of version `version` of each (slice, values) in `slices`.
wire::ServerMessage SharedParams(uint64_t version,
                                 const std::vector<std::pair<uint32_t, uint64_t>>& slices) {
  wire::ServerMessage m;
  for (const auto& [slice, count] : slices) {
    SliceHeader h;
    h.slice_id = slice;
    h.set_version(version);
    h.shared_count = count;
    SetHeader(h, m.mutable_shared_params()->add_slices());
  }
  return m;
}

CATCH_TEST_CASE("a server's values reach the core in order, part by part, as they arrive") {
  const std::vector<float> first = Values(10, 1.0f);
  const std::vector<float> second = Values(3, 100.0f);
  ScriptedServer server([&](RawTrainServerStream* stream) {
    WriteParams(stream, /*slice=*/2, /*version=*/4, first, /*part=*/4);  // 4, 4, 2 values
    WriteParams(stream, /*slice=*/5, /*version=*/4, second, /*part=*/4);
    return ReadUntilDone(stream) ? grpc::Status::OK : grpc::Status::CANCELLED;
  });
  FakeCore core;
  FakeListener listener;
  absl::StatusOr<std::unique_ptr<ServerConnection>> conn =
      ServerConnection::Open(Link(server.address(), &core, &listener));
  CATCH_REQUIRE(conn.ok());
  CATCH_CHECK((*conn)->start_version() == 3);
  const std::vector<FakeCore::Part> parts = core.AwaitParts(4);
  CATCH_REQUIRE(parts.size() == 4);
  const uint64_t offsets[] = {0, 4, 8, 0};
  const int64_t slices[] = {2, 2, 2, 5};
  std::string joined;
  for (size_t i = 0; i < parts.size(); ++i) {
    CATCH_CAPTURE(i);
    CATCH_CHECK(parts[i].server == 0);
    CATCH_CHECK(parts[i].slice_id == slices[i]);
    CATCH_CHECK(parts[i].version == 4);
    CATCH_CHECK(parts[i].offset == offsets[i]);
    CATCH_CHECK_FALSE(parts[i].scale_exponent.has_value());
    if (i < 3) joined += parts[i].bytes;
  }
  CATCH_CHECK(joined == Bytes(first.data(), 10));
  CATCH_CHECK(parts[3].bytes == Bytes(second.data(), 3));
  CATCH_CHECK((*conn)->bytes_received() == 13 * 4);
  CATCH_CHECK((*conn)->Close(absl::Now() + kBound).ok());
  CATCH_CHECK(listener.failures() == 0);
}

CATCH_TEST_CASE("an Ack goes to the core, and its Pull is written back on the same stream") {
  absl::Mutex mu;
  std::vector<std::pair<uint32_t, uint64_t>> pulls;  // (slice, version) the server read
  ScriptedServer server([&](RawTrainServerStream* stream) {
    wire::ServerMessage ack;
    ack.mutable_ack()->set_slice_id(3);
    ack.mutable_ack()->set_iteration(5);
    stream->Write(EncodeMessage(ack));
    const bool done = ReadUntilDone(stream, [&](const DecodedWorkerMessage& m) {
      if (m.field != wire::WorkerMessage::kPullFieldNumber) return;
      absl::MutexLock lock(&mu);
      pulls.emplace_back(m.control.pull().slice_id(), m.control.pull().version());
    });
    return done ? grpc::Status::OK : grpc::Status::CANCELLED;
  });
  FakeCore core;
  FakeListener listener;
  absl::StatusOr<std::unique_ptr<ServerConnection>> conn =
      ServerConnection::Open(Link(server.address(), &core, &listener));
  CATCH_REQUIRE(conn.ok());
  {
    absl::MutexLock lock(&mu);
    auto pulled = [&] {
      mu.AssertHeld();
      return !pulls.empty();
    };
    CATCH_REQUIRE(mu.AwaitWithTimeout(absl::Condition(&pulled), kBound));
    CATCH_CHECK(pulls == std::vector<std::pair<uint32_t, uint64_t>>{{3, 6}});
  }
  // The Done queued after the Pull: the server read the Pull, then the Done.
  CATCH_CHECK((*conn)->Close(absl::Now() + kBound).ok());
  const std::vector<FakeCore::AckSeen> acks = core.acks();
  CATCH_REQUIRE(acks.size() == 1);
  CATCH_CHECK(acks[0].server == 0);
  CATCH_CHECK(acks[0].slice_id == 3);
  CATCH_CHECK(acks[0].iteration == 5);
  CATCH_CHECK(listener.failures() == 0);
}

CATCH_TEST_CASE("a gradient is written from where the message points, in its encoding, in parts") {
  const std::vector<float> grad = {0.5f, -1.25f, 3e-3f, 7.0f, -0.01f,
                                   2.5f, 1e-4f,  -6.0f, 0.3f, 9.0f};
  const int scale = Float16ScaleExponent(grad.data(), 10);
  absl::Mutex mu;
  std::vector<SliceHeader> headers;
  std::string bytes;
  ScriptedServer server([&](RawTrainServerStream* stream) {
    const bool done = ReadUntilDone(stream, [&](const DecodedWorkerMessage& m) {
      if (m.field != wire::WorkerMessage::kGradientFieldNumber) return;
      absl::MutexLock lock(&mu);
      headers.push_back(m.header);
      for (absl::string_view part : m.values) bytes.append(part.data(), part.size());
    });
    return done ? grpc::Status::OK : grpc::Status::CANCELLED;
  });
  FakeCore core;
  FakeListener listener;
  TransportOptions options = Link(server.address(), &core, &listener);
  options.max_message_params = 4;
  absl::StatusOr<std::unique_ptr<ServerConnection>> conn = ServerConnection::Open(options);
  CATCH_REQUIRE(conn.ok());
  (*conn)->Send(ToServer{
      .server = 0,
      .message = Upstream{.kind = Upstream::Kind::kGradient,
                          .slice_id = 2,
                          .iteration = 7,
                          .values = grad.data(),
                          .length = 10,
                          .encoding = {.dtype = WireDType::kFloat16, .scale_exponent = scale}},
      .bytes = 20});
  CATCH_REQUIRE((*conn)->Close(absl::Now() + kBound).ok());
  absl::MutexLock lock(&mu);
  CATCH_REQUIRE(headers.size() == 3);  // 4 + 4 + 2 values
  for (size_t i = 0; i < headers.size(); ++i) {
    CATCH_CAPTURE(i);
    CATCH_CHECK(headers[i].slice_id == 2);
    CATCH_CHECK(headers[i].iteration() == 7);
    CATCH_CHECK(headers[i].offset == 4 * i);
    CATCH_CHECK(headers[i].has_scale_exponent);
    CATCH_CHECK(headers[i].scale_exponent == scale);
  }
  std::string want(20, '\0');
  EncodeValues(WireDType::kFloat16, grad.data(), 10, scale, want.data());
  CATCH_CHECK(bytes == want);
  CATCH_CHECK((*conn)->bytes_sent() == 20);
  CATCH_CHECK(core.AwaitParts(0).empty());  // the writer asked the core nothing
}

CATCH_TEST_CASE("a malformed message fails the link with a status that says so") {
  absl::Notification ended;
  ScriptedServer server([&](RawTrainServerStream* stream) {
    // Top-level field 3 claiming 1000 bytes that never come.
    const std::string garbage = std::string("\x1a\xe8\x07", 3) + "abc";
    grpc::Slice slice(garbage.data(), garbage.size());
    grpc::ByteBuffer buffer(&slice, 1);
    stream->Write(buffer);
    ReadUntilDone(stream);  // until the worker cancels
    ended.Notify();
    return grpc::Status::OK;
  });
  FakeCore core;
  FakeListener listener;
  absl::StatusOr<std::unique_ptr<ServerConnection>> conn =
      ServerConnection::Open(Link(server.address(), &core, &listener));
  CATCH_REQUIRE(conn.ok());
  const std::vector<absl::Status> end = listener.AwaitEnd();
  CATCH_REQUIRE(end.size() == 1);
  CATCH_CHECK(absl::IsInternal(end[0]));
  CATCH_CAPTURE(end[0].ToString());
  CATCH_CHECK(absl::StrContains(end[0].message(), "server 0 sent a malformed message"));
  CATCH_CHECK(listener.failures() == 1);  // its own failure, not a server's Abort
  CATCH_CHECK(ended.WaitForNotificationWithTimeout(kBound));  // the stream was ended
  CATCH_CHECK((*conn)->Close(absl::Now() + kBound) == end[0]);
  CATCH_CHECK(core.AwaitParts(0).empty());
}

CATCH_TEST_CASE("a part the core refuses fails the link with the core's status, and ends it") {
  ScriptedServer server([&](RawTrainServerStream* stream) {
    WriteParams(stream, /*slice=*/9, /*version=*/1, Values(4, 0.0f), 4);
    WriteParams(stream, /*slice=*/2, /*version=*/1, Values(4, 0.0f), 4);
    ReadUntilDone(stream);
    return grpc::Status::OK;
  });
  FakeCore core(/*refused_slice=*/9);
  FakeListener listener;
  absl::StatusOr<std::unique_ptr<ServerConnection>> conn =
      ServerConnection::Open(Link(server.address(), &core, &listener));
  CATCH_REQUIRE(conn.ok());
  const std::vector<absl::Status> end = listener.AwaitEnd();
  CATCH_REQUIRE(end.size() == 1);
  CATCH_CHECK(end[0] == absl::InternalError("the core refuses slice 9"));
  (*conn)->Shutdown();
  // Nothing after the refused part reached the core.
  const std::vector<FakeCore::Part> parts = core.AwaitParts(0);
  CATCH_REQUIRE(parts.size() == 1);
  CATCH_CHECK(parts[0].slice_id == 9);
  CATCH_CHECK(listener.failures() == 1);
}

CATCH_TEST_CASE("buffers, a re-plan and an Abort go to the listener, not the core") {
  const std::vector<float> mean = Values(6, 0.5f);
  ScriptedServer server([&](RawTrainServerStream* stream) {
    wire::ServerMessage m;
    m.mutable_buffers()->set_round(8);
    m.mutable_buffers()->set_values(Bytes(mean.data(), 6));
    stream->Write(EncodeMessage(m));
    m.Clear();
    m.mutable_replan()->set_from_iteration(9);
    m.mutable_replan()->set_slice_params(20);
    stream->Write(EncodeMessage(m));
    m.Clear();
    m.mutable_abort()->set_code(static_cast<int>(absl::StatusCode::kUnavailable));
    m.mutable_abort()->set_message("worker 1: worker 1 disconnected before it was done");
    stream->Write(EncodeMessage(m));
    return grpc::Status::OK;
  });
  FakeCore core;
  FakeListener listener;
  absl::StatusOr<std::unique_ptr<ServerConnection>> conn =
      ServerConnection::Open(Link(server.address(), &core, &listener));
  CATCH_REQUIRE(conn.ok());
  const std::vector<absl::Status> end = listener.AwaitEnd();
  CATCH_REQUIRE(end.size() == 1);
  CATCH_CHECK(listener.aborts() == 1);
  CATCH_CHECK(absl::IsUnavailable(end[0]));
  CATCH_CHECK(end[0].message() ==
              "server 0 aborted the run: worker 1: worker 1 disconnected before it was done");
  CATCH_CHECK(listener.buffers() == std::vector<std::string>{"0 8 24"});
  CATCH_CHECK(listener.replans() == std::vector<std::string>{"0 9 20"});
  CATCH_CHECK(core.AwaitParts(0).empty());
  CATCH_CHECK(core.acks().empty());
}

CATCH_TEST_CASE("a colocated server's batch of versions reaches the core slice by slice") {
  ScriptedServer server(
      [&](RawTrainServerStream* stream) {
        stream->Write(EncodeMessage(SharedParams(4, {{7, 10}, {2, 3}, {5, 6}})));
        return ReadUntilDone(stream) ? grpc::Status::OK : grpc::Status::CANCELLED;
      },
      {.shared_memory = true, .takes_shared_batches = true});
  FakeCore core;
  FakeListener listener;
  absl::StatusOr<std::unique_ptr<ServerConnection>> conn =
      ServerConnection::Open(SharedLink(server.address(), &core, &listener));
  CATCH_REQUIRE(conn.ok());
  CATCH_CHECK((*conn)->shared_memory());
  CATCH_CHECK(server.hello_takes_batches());
  const std::vector<FakeCore::Part> parts = core.AwaitParts(3);
  CATCH_REQUIRE(parts.size() == 3);
  const int64_t slices[] = {7, 2, 5};
  const int64_t counts[] = {10, 3, 6};
  for (size_t i = 0; i < parts.size(); ++i) {
    CATCH_CAPTURE(i);
    CATCH_CHECK(parts[i].slice_id == slices[i]);
    CATCH_CHECK(parts[i].in_place == counts[i]);
    CATCH_CHECK(parts[i].version == 4);
    CATCH_CHECK(parts[i].bytes.empty());
  }
  CATCH_CHECK((*conn)->bytes_shared() == 19 * 4);
  CATCH_CHECK((*conn)->Close(absl::Now() + kBound).ok());
  CATCH_CHECK(listener.failures() == 0);
}

CATCH_TEST_CASE("a batch of versions naming a slice twice fails the link and hands the core none") {
  ScriptedServer server(
      [&](RawTrainServerStream* stream) {
        stream->Write(EncodeMessage(SharedParams(1, {{3, 4}, {1, 4}, {3, 4}})));
        ReadUntilDone(stream);
        return grpc::Status::OK;
      },
      {.shared_memory = true, .takes_shared_batches = true});
  FakeCore core;
  FakeListener listener;
  absl::StatusOr<std::unique_ptr<ServerConnection>> conn =
      ServerConnection::Open(SharedLink(server.address(), &core, &listener));
  CATCH_REQUIRE(conn.ok());
  const std::vector<absl::Status> end = listener.AwaitEnd();
  CATCH_REQUIRE(end.size() == 1);
  CATCH_CHECK(absl::IsInternal(end[0]));
  CATCH_CHECK(end[0].message() == "server 0 sent a SharedSlices message naming slice 3 twice");
  (*conn)->Shutdown();
  CATCH_CHECK(core.AwaitParts(0).empty());
}

CATCH_TEST_CASE("colocated gradients go in queue order, batched only where the server takes it") {
  for (const bool takes : {false, true}) {
    CATCH_CAPTURE(takes);
    absl::Mutex mu;
    std::vector<uint32_t> order;  // the slices, as the server read them
    bool all_descriptors = true;  // each names 100 values of iteration 7 in shared memory
    int messages = 0;
    int largest = 0;  // slices in a SharedSlices message
    ScriptedServer server(
        [&](RawTrainServerStream* stream) {
          const bool done = ReadUntilDone(stream, [&](const DecodedWorkerMessage& m) {
            absl::MutexLock lock(&mu);
            ++messages;
            if (m.field == wire::WorkerMessage::kGradientFieldNumber) {
              order.push_back(m.header.slice_id);
              all_descriptors &=
                  m.header.shared_count == 100 && m.header.iteration() == 7 && m.value_bytes == 0;
            } else if (m.field == wire::WorkerMessage::kSharedGradientsFieldNumber) {
              const wire::SharedSlices& batch = m.control.shared_gradients();
              largest = std::max(largest, batch.slices_size());
              for (const wire::SliceData& d : batch.slices()) {
                order.push_back(d.slice_id());
                all_descriptors &= d.shared_count() == 100 && d.iteration() == 7;
              }
            } else {
              all_descriptors = false;
            }
          });
          return done ? grpc::Status::OK : grpc::Status::CANCELLED;
        },
        {.shared_memory = true, .takes_shared_batches = takes});
    FakeCore core;
    FakeListener listener;
    absl::StatusOr<std::unique_ptr<ServerConnection>> conn =
        ServerConnection::Open(SharedLink(server.address(), &core, &listener));
    CATCH_REQUIRE(conn.ok());
    // Pushed most urgent first, as fast as possible: the writer finds several ready.
    for (int i = 0; i < 64; ++i) {
      (*conn)->Send(ToServer{
          .server = 0,
          .message =
              Upstream{
                  .kind = Upstream::Kind::kGradient, .slice_id = i, .iteration = 7, .length = 100},
          .priority = i,
          .bytes = 400});
    }
    CATCH_REQUIRE((*conn)->Close(absl::Now() + kBound).ok());
    absl::MutexLock lock(&mu);
    std::vector<uint32_t> want(64);
    for (uint32_t i = 0; i < 64; ++i) want[i] = i;
    CATCH_CHECK(order == want);  // each once, in the queue's order
    CATCH_CHECK(all_descriptors);
    CATCH_CHECK((*conn)->bytes_shared() == 64 * 400);
    CATCH_CHECK(largest <= kSharedBatchSend);
    if (!takes) CATCH_CHECK(messages == 64);  // an older server: one slice per message
  }
}

}  // namespace
}  // namespace p3
