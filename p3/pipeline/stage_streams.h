// Stages on a device (pipeline.devices "cuda:<i>"): each stage thread computes on a stream
// of its own, so that stages sharing one GPU overlap as they do on separate CPU threads,
// and tensors handed from one stage to the next carry an event instead of a host wait.
//
// Example (a stage thread):
//   StageStream stream(replica.device);           // this thread's current stream, while alive
//   ...
//   next->Push(Message{..., y.detach(), ..., .ready = MarkReady(y)});   // producer
//   WaitReady(message.ready, message.tensor);     // consumer, before using message.tensor
//
// The streams and events are c10's device-generic ones: nothing here needs a CUDA libtorch
// to build, and on the CPU every call is a no-op.
#ifndef P3_P3_PIPELINE_STAGE_STREAMS_H_
#define P3_P3_PIPELINE_STAGE_STREAMS_H_

#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <torch/types.h>

#include <memory>
#include <optional>

namespace p3::pipeline {

// Makes a stream from the device's pool the calling thread's current stream on `device`
// while it lives; nothing on the CPU.
class StageStream {
 public:
  explicit StageStream(const torch::Device& device);
  StageStream(const StageStream&) = delete;
  StageStream& operator=(const StageStream&) = delete;

 private:
  std::optional<c10::StreamGuard> guard_;
};

// An event recorded on the current stream after the work issued so far (which made `t`),
// for the stage that receives `t`; null for a CPU tensor.
std::shared_ptr<c10::Event> MarkReady(const torch::Tensor& t);

// Makes the current stream wait, on the device, for `ready` (null: nothing to wait for), and
// tells the device's caching allocator that this stream uses `t`'s memory, so that the
// producing stage cannot reuse it before this stream is done with it.
void WaitReady(const std::shared_ptr<c10::Event>& ready, const torch::Tensor& t);

}  // namespace p3::pipeline

#endif  // P3_P3_PIPELINE_STAGE_STREAMS_H_
