// The Train stream of p3.wire.ParameterServer (proto/p3.proto) with grpc::ByteBuffer
// messages instead of WorkerMessage / ServerMessage, on gRPC's synchronous API: the same
// method path and streaming type as the generated code, so a raw client talks to a
// generated service and a generated stub to a RawTrainService. Pair it with
// proto/wire_codec.h to send and receive slice values without copying them.
//
// Example (server and client):
//
//   p3::RawTrainService service(
//       [](grpc::ServerContext* ctx,
//          grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream) {
//         grpc::ByteBuffer in;
//         p3::DecodedWorkerMessage msg;
//         while (stream->Read(&in)) {
//           if (!p3::Decode(&in, &msg).ok()) return grpc::Status(...);
//           ...
//         }
//         return grpc::Status::OK;
//       });
//   builder.RegisterService(&service);
//
//   grpc::ClientContext context;
//   auto stream = p3::OpenRawTrain(channel.get(), &context);
//   stream->Write(p3::EncodeMessage(hello_message));
#ifndef P3_PROTO_RAW_TRAIN_H_
#define P3_PROTO_RAW_TRAIN_H_

#include <grpcpp/client_context.h>
#include <grpcpp/impl/service_type.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/status.h>
#include <grpcpp/support/sync_stream.h>

#include <functional>
#include <memory>

namespace grpc {
class ChannelInterface;
}  // namespace grpc

namespace p3 {

// The method's full path, as in the generated code.
inline constexpr char kTrainMethodPath[] = "/p3.wire.ParameterServer/Train";

using RawTrainClientStream = grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>;
using RawTrainServerStream = grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>;

// Starts a Train call on `channel` (a grpc::Channel, as from grpc::CreateChannel) with
// `context`, which must outlive the stream. Thread-safety is that of
// grpc::ClientReaderWriter: one reader and one writer thread at a time, WritesDone and
// Finish as gRPC documents.
std::unique_ptr<RawTrainClientStream> OpenRawTrain(grpc::ChannelInterface* channel,
                                                   grpc::ClientContext* context);

// A service that serves Train with ByteBuffer messages by calling `handler` once per
// stream, on gRPC's synchronous server threads (so possibly on several at once).
class RawTrainService : public grpc::Service {
 public:
  using Handler = std::function<grpc::Status(grpc::ServerContext*, RawTrainServerStream*)>;

  explicit RawTrainService(Handler handler);
  ~RawTrainService() override;

 private:
  Handler handler_;
};

}  // namespace p3

#endif  // P3_PROTO_RAW_TRAIN_H_
