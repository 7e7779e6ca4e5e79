#include "p3/core/downstream.h"

namespace p3 {

std::vector<float> DecodedValues(const Downstream& message) {
  switch (message.kind) {
    case Downstream::Kind::kParams:
      return message.values == nullptr ? std::vector<float>() : message.values->Decoded();
    case Downstream::Kind::kBuffers:
      return message.buffers == nullptr ? std::vector<float>() : *message.buffers;
    default:
      return {};
  }
}

}  // namespace p3
