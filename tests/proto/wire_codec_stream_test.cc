// Raw streams (proto/raw_train.h) with the wire codec over localhost: a raw client and a
// raw server, and each against protobuf's generated stub and service.
#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "proto/p3.grpc.pb.h"
#include "proto/p3.pb.h"
#include "proto/raw_train.h"
#include "proto/wire_codec.h"
#include "tests/proto/wire_codec_test_util.h"

namespace p3 {
namespace {

// A localhost server on an OS-chosen port.
struct TestServer {
  explicit TestServer(grpc::Service* service) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service);
    server = builder.BuildAndStart();
  }
  ~TestServer() { server->Shutdown(); }
  std::shared_ptr<grpc::Channel> Channel() const {
    return grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                               grpc::InsecureChannelCredentials());
  }
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

// The raw server's behaviour in the stream tests: answers a Hello with a Welcome and every
// gradient with params of the same slice whose values are the gradient's, reversed.
grpc::Status EchoReversed(grpc::ServerContext*, RawTrainServerStream* stream) {
  grpc::ByteBuffer in;
  DecodedWorkerMessage msg;
  while (stream->Read(&in)) {
    const absl::Status s = Decode(&in, &msg);
    if (!s.ok()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(s.message()));
    if (msg.field == kHello) {
      wire::ServerMessage welcome;
      welcome.mutable_welcome()->set_server_index(msg.control.hello().server_index());
      stream->Write(EncodeMessage(welcome));
    } else if (msg.field == kGradient) {
      auto out = std::make_shared<std::string>();
      out->reserve(msg.value_bytes);
      for (absl::string_view part : msg.values) out->append(part.data(), part.size());
      std::reverse(out->begin(), out->end());
      stream->Write(EncodeSlice(kParams, msg.header, out->data(), out->size(), out));
    } else if (msg.field == kDone) {
      return grpc::Status::OK;
    }
  }
  return grpc::Status::OK;
}

std::string Reversed(std::string s) {
  std::reverse(s.begin(), s.end());
  return s;
}

CATCH_TEST_CASE("a raw client and a RawTrainService exchange slices over localhost") {
  RawTrainService service(EchoReversed);
  TestServer server(&service);
  auto channel = server.Channel();
  grpc::ClientContext context;
  std::unique_ptr<RawTrainClientStream> stream = OpenRawTrain(channel.get(), &context);
  wire::WorkerMessage hello;
  hello.mutable_hello()->set_server_index(4);
  CATCH_REQUIRE(stream->Write(EncodeMessage(hello)));
  grpc::ByteBuffer in;
  DecodedServerMessage msg;
  CATCH_REQUIRE(stream->Read(&in));
  CATCH_REQUIRE(Decode(&in, &msg).ok());
  CATCH_CHECK(msg.field == kWelcome);
  CATCH_CHECK(msg.control.welcome().server_index() == 4);

  std::vector<std::weak_ptr<std::string>> sent;
  int released_when_write_returned = 0;
  for (int i = 0; i < 4; ++i) {
    auto values = std::make_shared<std::string>(RandomBytes(300000 * 4 + i, 20 + i));
    const std::string expected = Reversed(*values);
    sent.push_back(values);
    SliceHeader h;
    h.slice_id = i;
    h.set_iteration(100 + i);
    h.offset = i * 7;
    {
      grpc::ByteBuffer out =
          EncodeSlice(kGradient, h, values->data(), values->size(), values);
      values.reset();
      CATCH_REQUIRE(stream->Write(out));
    }
    // Not asserted: whether gRPC still holds the slice after a synchronous Write returns.
    if (sent.back().expired()) ++released_when_write_returned;
    CATCH_REQUIRE(stream->Read(&in));
    CATCH_REQUIRE(Decode(&in, &msg).ok());
    CATCH_CHECK(msg.field == kParams);
    CATCH_CHECK(msg.header.slice_id == h.slice_id);
    CATCH_CHECK(msg.header.version() == h.iteration());
    CATCH_CHECK(msg.header.offset == h.offset);
    CATCH_CHECK(Concat(msg.values) == expected);
  }
  std::printf("raw stream: %d of 4 keepalives released by the time Write returned\n",
              released_when_write_returned);
  wire::WorkerMessage done;
  done.mutable_done();
  CATCH_REQUIRE(stream->Write(EncodeMessage(done)));
  stream->WritesDone();
  CATCH_CHECK(!stream->Read(&in));
  CATCH_CHECK(stream->Finish().ok());
  stream.reset();
  for (const auto& w : sent) CATCH_CHECK(w.expired());
}

CATCH_TEST_CASE("the generated typed stub talks to a RawTrainService") {
  RawTrainService service(EchoReversed);
  TestServer server(&service);
  auto stub = wire::ParameterServer::NewStub(server.Channel());
  grpc::ClientContext context;
  auto stream = stub->Train(&context);
  wire::WorkerMessage hello;
  hello.mutable_hello()->set_server_index(2);
  CATCH_REQUIRE(stream->Write(hello));
  wire::ServerMessage reply;
  CATCH_REQUIRE(stream->Read(&reply));
  CATCH_CHECK(reply.welcome().server_index() == 2);
  wire::WorkerMessage grad;
  grad.mutable_gradient()->set_slice_id(11);
  grad.mutable_gradient()->set_iteration(12);
  grad.mutable_gradient()->set_offset(13);
  grad.mutable_gradient()->set_values(RandomBytes(100003, 30));
  CATCH_REQUIRE(stream->Write(grad));
  CATCH_REQUIRE(stream->Read(&reply));
  CATCH_REQUIRE(reply.has_params());
  CATCH_CHECK(reply.params().slice_id() == 11);
  CATCH_CHECK(reply.params().iteration() == 12);
  CATCH_CHECK(reply.params().offset() == 13);
  CATCH_CHECK(reply.params().values() == Reversed(grad.gradient().values()));
  stream->WritesDone();
  CATCH_CHECK(!stream->Read(&reply));
  CATCH_CHECK(stream->Finish().ok());
}

// The generated service, answering like EchoReversed.
class TypedEchoService : public wire::ParameterServer::Service {
  grpc::Status Train(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<wire::ServerMessage, wire::WorkerMessage>* stream) override {
    wire::WorkerMessage in;
    while (stream->Read(&in)) {
      if (!in.has_gradient()) continue;
      wire::ServerMessage out;
      out.mutable_params()->set_slice_id(in.gradient().slice_id());
      out.mutable_params()->set_iteration(in.gradient().iteration());
      out.mutable_params()->set_offset(in.gradient().offset());
      out.mutable_params()->set_shared_count(in.gradient().shared_count());
      out.mutable_params()->set_values(Reversed(in.gradient().values()));
      stream->Write(out);
    }
    return grpc::Status::OK;
  }
};

CATCH_TEST_CASE("a raw client talks to the generated service") {
  TypedEchoService service;
  TestServer server(&service);
  auto channel = server.Channel();
  grpc::ClientContext context;
  // Sent without a keepalive: it must outlive the stream.
  const std::string values = RandomBytes(250001, 40);
  auto stream = OpenRawTrain(channel.get(), &context);
  SliceHeader h;
  h.slice_id = 21;
  h.set_iteration(22);
  h.offset = 23;
  CATCH_REQUIRE(stream->Write(EncodeSlice(kGradient, h, values.data(), values.size(),
                                          nullptr)));
  SliceHeader shared;
  shared.slice_id = 1;
  shared.shared_count = 40000;
  CATCH_REQUIRE(stream->Write(EncodeSlice(kGradient, shared, nullptr, 0, nullptr)));
  grpc::ByteBuffer in;
  DecodedServerMessage msg;
  CATCH_REQUIRE(stream->Read(&in));
  CATCH_REQUIRE(Decode(&in, &msg).ok());
  CATCH_CHECK(msg.field == kParams);
  CATCH_CHECK(msg.header.slice_id == 21);
  CATCH_CHECK(msg.header.version() == 22);
  CATCH_CHECK(msg.header.offset == 23);
  CATCH_CHECK(Concat(msg.values) == Reversed(values));
  CATCH_REQUIRE(stream->Read(&in));
  CATCH_REQUIRE(Decode(&in, &msg).ok());
  CATCH_CHECK(msg.header.slice_id == 1);
  CATCH_CHECK(msg.header.shared_count == 40000);
  CATCH_CHECK(msg.value_bytes == 0);
  CATCH_CHECK(msg.values.empty());
  stream->WritesDone();
  CATCH_CHECK(!stream->Read(&in));
  CATCH_CHECK(stream->Finish().ok());
}

}  // namespace
}  // namespace p3
