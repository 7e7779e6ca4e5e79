#include "proto/raw_train.h"

#include <grpcpp/impl/channel_interface.h>
#include <grpcpp/impl/rpc_method.h>
#include <grpcpp/impl/rpc_service_method.h>
#include <grpcpp/support/method_handler.h>

#include <utility>

namespace p3 {

std::unique_ptr<RawTrainClientStream> OpenRawTrain(grpc::ChannelInterface* channel,
                                                   grpc::ClientContext* context) {
  // Not registered with the channel (the generated stub registers its method once per
  // stub): the call is the same on the wire, created by path.
  const grpc::internal::RpcMethod method(kTrainMethodPath,
                                         grpc::internal::RpcMethod::BIDI_STREAMING);
  return std::unique_ptr<RawTrainClientStream>(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          channel, method, context));
}

RawTrainService::RawTrainService(Handler handler) : handler_(std::move(handler)) {
  AddMethod(new grpc::internal::RpcServiceMethod(
      kTrainMethodPath, grpc::internal::RpcMethod::BIDI_STREAMING,
      new grpc::internal::BidiStreamingHandler<RawTrainService, grpc::ByteBuffer,
                                               grpc::ByteBuffer>(
          [](RawTrainService* service, grpc::ServerContext* context,
             RawTrainServerStream* stream) { return service->handler_(context, stream); },
          this)));
}

RawTrainService::~RawTrainService() = default;

}  // namespace p3
