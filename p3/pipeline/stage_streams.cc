#include "p3/pipeline/stage_streams.h"

#include <c10/core/impl/VirtualGuardImpl.h>

namespace p3::pipeline {

StageStream::StageStream(const torch::Device& device) {
  if (device.is_cpu()) return;
  guard_.emplace(c10::impl::VirtualGuardImpl(device.type()).getStreamFromGlobalPool(device));
}

std::shared_ptr<c10::Event> MarkReady(const torch::Tensor& t) {
  if (!t.defined() || t.device().is_cpu()) return nullptr;
  const c10::impl::VirtualGuardImpl guard(t.device().type());
  auto ready = std::make_shared<c10::Event>(t.device().type());
  ready->record(guard.getStream(t.device()));
  return ready;
}

void WaitReady(const std::shared_ptr<c10::Event>& ready, const torch::Tensor& t) {
  if (ready == nullptr || !t.defined() || t.device().is_cpu()) return;
  const c10::impl::VirtualGuardImpl guard(t.device().type());
  const c10::Stream here = guard.getStream(t.device());
  ready->block(here);
  guard.recordDataPtrOnStream(t.storage().data_ptr(), here);
}

}  // namespace p3::pipeline
