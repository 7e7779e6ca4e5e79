#include "proto/wire_codec.h"

#include <grpcpp/impl/codegen/proto_utils.h>

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace p3 {
namespace {

// Protobuf's wire types (https://protobuf.dev/programming-guides/encoding/).
constexpr int kVarint = 0;
constexpr int kLengthDelimited = 2;

// SliceData's field numbers, as generated.
constexpr int kSliceIdField = wire::SliceData::kSliceIdFieldNumber;
constexpr int kIterationField = wire::SliceData::kIterationFieldNumber;
constexpr int kValuesField = wire::SliceData::kValuesFieldNumber;
constexpr int kOffsetField = wire::SliceData::kOffsetFieldNumber;
constexpr int kSharedCountField = wire::SliceData::kSharedCountFieldNumber;
constexpr int kScaleExponentField = wire::SliceData::kScaleExponentFieldNumber;  // sint32: zigzag

// Every field of SliceData, which the direct walk reads; it marks those seen in a bit
// mask, so their numbers must stay below 32.
constexpr bool IsSliceDataField(int f) {
  return f == kSliceIdField || f == kIterationField || f == kValuesField || f == kOffsetField ||
         f == kSharedCountField || f == kScaleExponentField;
}
static_assert(kSliceIdField < 32 && kIterationField < 32 && kValuesField < 32 &&
                  kOffsetField < 32 && kSharedCountField < 32 && kScaleExponentField < 32,
              "the walk's mask of fields seen");

// Protobuf reads sizes (length prefixes) with at most 5 bytes; longer encodings, and tags
// of more than one byte, are left to its parser rather than reimplemented here.
constexpr int kMaxSizeVarintBytes = 5;
constexpr int kMaxVarintBytes = 10;

// The flattening buffer of the fallback keeps up to this much capacity between messages.
constexpr size_t kKeptFlatCapacity = 64 * 1024;

char* PutVarint(uint64_t v, char* p) {
  while (v >= 0x80) {
    *p++ = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}

char* PutTag(int field, int wire_type, char* p) {
  return PutVarint((static_cast<uint64_t>(field) << 3) | wire_type, p);
}

void DeleteKeepalive(void* p) { delete static_cast<std::shared_ptr<const void>*>(p); }

// Reads bytes in order across a buffer's slices; never reads past the last one.
class SliceReader {
 public:
  explicit SliceReader(const std::vector<grpc::Slice>& slices) : slices_(slices) {
    for (const grpc::Slice& s : slices_) remaining_ += s.size();
    SkipEmpty();
  }

  size_t remaining() const { return remaining_; }

  // Requires remaining() > 0.
  uint8_t Next() {
    const uint8_t b = slices_[index_].begin()[pos_];
    Advance(1);
    return b;
  }

  enum class VarintResult { kOk, kTruncated, kTooLong };

  // Reads a varint as protobuf does: at most 10 bytes, bits past 64 dropped. `*bytes`:
  // how many bytes it took.
  VarintResult ReadVarint(uint64_t* value, int* bytes) {
    uint64_t v = 0;
    for (int i = 0; i < kMaxVarintBytes; ++i) {
      if (remaining_ == 0) return VarintResult::kTruncated;
      const uint8_t b = Next();
      v |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
      if ((b & 0x80) == 0) {
        *value = v;
        *bytes = i + 1;
        return VarintResult::kOk;
      }
    }
    return VarintResult::kTooLong;
  }

  // Appends views of the next n bytes (n <= remaining()) to `out`.
  void Take(size_t n, std::vector<absl::string_view>* out) {
    while (n > 0) {
      const grpc::Slice& s = slices_[index_];
      const size_t here = std::min(n, s.size() - pos_);
      out->emplace_back(reinterpret_cast<const char*>(s.begin()) + pos_, here);
      Advance(here);
      n -= here;
    }
  }

 private:
  // Requires n <= bytes left in the current slice.
  void Advance(size_t n) {
    pos_ += n;
    remaining_ -= n;
    if (pos_ == slices_[index_].size()) {
      ++index_;
      pos_ = 0;
      SkipEmpty();
    }
  }

  void SkipEmpty() {
    while (index_ < slices_.size() && slices_[index_].size() == 0) ++index_;
  }

  const std::vector<grpc::Slice>& slices_;
  size_t index_ = 0;
  size_t pos_ = 0;
  size_t remaining_ = 0;
};

// What the direct walk concluded: decoded, leave it to protobuf's parser, or malformed.
enum class Walk { kDecoded, kFallback, kMalformed };

bool IsSliceField(const wire::WorkerMessage*, int field) {
  return field == wire::WorkerMessage::kInitFieldNumber ||
         field == wire::WorkerMessage::kGradientFieldNumber;
}
bool IsSliceField(const wire::ServerMessage*, int field) {
  return field == wire::ServerMessage::kParamsFieldNumber;
}

const wire::SliceData* SliceOf(const wire::WorkerMessage& m) {
  switch (m.kind_case()) {
    case wire::WorkerMessage::kInit:
      return &m.init();
    case wire::WorkerMessage::kGradient:
      return &m.gradient();
    default:
      return nullptr;
  }
}
const wire::SliceData* SliceOf(const wire::ServerMessage& m) {
  return m.kind_case() == wire::ServerMessage::kParams ? &m.params() : nullptr;
}

// The fast path: one SliceData member, each of its fields at most once with its own wire
// type, read straight from the slices. Anything else legal is kFallback; kMalformed only
// for what protobuf's parser rejects as well (with `*error` saying what).
template <typename Message>
Walk WalkSlice(DecodedMessage<Message>* out, std::string* error) {
  SliceReader r(out->slices_);
  if (r.remaining() == 0) return Walk::kFallback;
  const uint8_t tag = r.Next();
  if (tag & 0x80) return Walk::kFallback;
  const int field = tag >> 3;
  if ((tag & 7) != kLengthDelimited || !IsSliceField(static_cast<Message*>(nullptr), field)) {
    return Walk::kFallback;
  }
  uint64_t len = 0;
  int len_bytes = 0;
  switch (r.ReadVarint(&len, &len_bytes)) {
    case SliceReader::VarintResult::kOk:
      break;
    case SliceReader::VarintResult::kTruncated:
      *error = absl::StrCat("field ", field, ": the length prefix is cut off");
      return Walk::kMalformed;
    case SliceReader::VarintResult::kTooLong:
      return Walk::kFallback;  // protobuf rejects it too, in its own words
  }
  if (len_bytes > kMaxSizeVarintBytes) return Walk::kFallback;
  if (len > r.remaining()) {
    *error = absl::StrCat("field ", field, ": length ", len, " runs past the end (",
                          r.remaining(), " bytes left)");
    return Walk::kMalformed;
  }
  if (len != r.remaining()) return Walk::kFallback;  // more top-level fields follow

  SliceHeader h;
  unsigned seen = 0;
  while (r.remaining() > 0) {
    const uint8_t t = r.Next();
    if (t & 0x80) return Walk::kFallback;
    const int f = t >> 3;
    const int wire_type = t & 7;
    if (!IsSliceDataField(f) || (seen & (1u << f))) {
      return Walk::kFallback;
    }
    seen |= 1u << f;
    if (f == kValuesField) {
      if (wire_type != kLengthDelimited) return Walk::kFallback;
      uint64_t n = 0;
      int n_bytes = 0;
      const SliceReader::VarintResult v = r.ReadVarint(&n, &n_bytes);
      if (v == SliceReader::VarintResult::kTruncated) {
        *error = absl::StrCat("field ", field, ".values: the length prefix is cut off");
        return Walk::kMalformed;
      }
      if (v == SliceReader::VarintResult::kTooLong || n_bytes > kMaxSizeVarintBytes) {
        return Walk::kFallback;
      }
      if (n > r.remaining()) {
        *error = absl::StrCat("field ", field, ".values: length ", n, " runs past the end (",
                              r.remaining(), " bytes left)");
        return Walk::kMalformed;
      }
      r.Take(n, &out->values);
      out->value_bytes = n;
      continue;
    }
    if (wire_type != kVarint) return Walk::kFallback;
    uint64_t v = 0;
    int v_bytes = 0;
    switch (r.ReadVarint(&v, &v_bytes)) {
      case SliceReader::VarintResult::kOk:
        break;
      case SliceReader::VarintResult::kTruncated:
        *error = absl::StrCat("field ", field, ".", f, ": varint cut off at the end");
        return Walk::kMalformed;
      case SliceReader::VarintResult::kTooLong:
        *error = absl::StrCat("field ", field, ".", f, ": varint longer than 10 bytes");
        return Walk::kMalformed;
    }
    switch (f) {
      case kSliceIdField:
        h.slice_id = static_cast<uint32_t>(v);  // protobuf keeps the low 32 bits
        break;
      case kIterationField:
        h.set_iteration(v);  // or the version: the same field (SliceHeader)
        break;
      case kOffsetField:
        h.offset = v;
        break;
      case kSharedCountField:
        h.shared_count = v;
        break;
      case kScaleExponentField: {
        // As protobuf reads a sint32: the low 32 bits, zigzag-decoded.
        const uint32_t z = static_cast<uint32_t>(v);
        h.has_scale_exponent = true;
        h.scale_exponent = static_cast<int32_t>((z >> 1) ^ (~(z & 1) + 1));
        break;
      }
    }
  }
  out->field = field;
  out->is_slice = true;
  out->header = h;
  return Walk::kDecoded;
}

template <typename Message>
absl::Status DecodeImpl(grpc::ByteBuffer* buffer, DecodedMessage<Message>* out) {
  out->Release();
  out->field = 0;
  out->is_slice = false;
  out->header = SliceHeader();
  out->value_bytes = 0;
  if (buffer->Valid()) {
    const grpc::Status dumped = buffer->Dump(&out->slices_);
    if (!dumped.ok()) {
      return absl::InternalError(absl::StrCat("reading the buffer: ", dumped.error_message()));
    }
    buffer->Clear();
  }

  std::string error;
  switch (WalkSlice(out, &error)) {
    case Walk::kDecoded:
      if (out->control.kind_case() != 0) out->control.Clear();
      return absl::OkStatus();
    case Walk::kMalformed:
      out->Release();
      return absl::InvalidArgumentError(
          absl::StrCat("malformed ", out->control.GetTypeName(), ": ", error));
    case Walk::kFallback:
      break;
  }

  // Protobuf's parser decides, and its result is reported. Control messages (small, one
  // slice as a rule) are parsed in place; several slices are flattened first.
  out->values.clear();
  out->value_bytes = 0;
  size_t total = 0;
  for (const grpc::Slice& s : out->slices_) total += s.size();
  bool parsed = false;
  if (total > static_cast<size_t>(std::numeric_limits<int>::max())) {
    parsed = false;  // beyond protobuf's limit
  } else if (out->slices_.size() == 1) {
    parsed = out->control.ParseFromArray(out->slices_[0].begin(), static_cast<int>(total));
  } else {
    out->flat_.clear();
    out->flat_.reserve(total);
    for (const grpc::Slice& s : out->slices_) {
      out->flat_.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
    parsed = out->control.ParseFromString(out->flat_);
    // A large unusual message is rare: do not keep its copy's memory.
    if (out->flat_.capacity() > kKeptFlatCapacity) std::string().swap(out->flat_);
  }
  out->slices_.clear();
  if (!parsed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "malformed ", out->control.GetTypeName(), ": protobuf's parser refused ", total, " bytes"));
  }
  out->field = static_cast<int>(out->control.kind_case());
  if (const wire::SliceData* slice = SliceOf(out->control)) {
    out->is_slice = true;
    out->header = HeaderOf(*slice);
    out->value_bytes = slice->values().size();
    if (out->value_bytes > 0) out->values.emplace_back(slice->values());
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

// The header slice of a SliceData message whose values (`bytes` of them) follow it.
grpc::Slice SliceHeaderBytes(int field, const SliceHeader& h, size_t bytes) {
  // SliceData's fields (tags of 1 byte): slice_id 1 + 5, three 64-bit varints 3 * (1 + 10),
  // scale_exponent 1 + 5, the values tag and length 1 + 10: at most 56 bytes. Before them
  // the top-level tag and length, at most 5 + 10 bytes, copied in once the length is known.
  char header[16 + 56];
  char* inner = header + 16;
  char* p = inner;
  if (h.slice_id != 0) p = PutVarint(h.slice_id, PutTag(kSliceIdField, kVarint, p));
  if (h.iteration() != 0) p = PutVarint(h.iteration(), PutTag(kIterationField, kVarint, p));
  if (h.offset != 0) p = PutVarint(h.offset, PutTag(kOffsetField, kVarint, p));
  if (h.shared_count != 0) p = PutVarint(h.shared_count, PutTag(kSharedCountField, kVarint, p));
  if (h.has_scale_exponent) {
    const uint32_t e = static_cast<uint32_t>(h.scale_exponent);
    const uint32_t zigzag = (e << 1) ^ static_cast<uint32_t>(h.scale_exponent >> 31);
    p = PutVarint(zigzag, PutTag(kScaleExponentField, kVarint, p));
  }
  if (bytes > 0) p = PutVarint(bytes, PutTag(kValuesField, kLengthDelimited, p));
  const uint64_t inner_len = static_cast<uint64_t>(p - inner) + bytes;

  char prefix[16];
  char* q = PutVarint(inner_len, PutTag(field, kLengthDelimited, prefix));
  const size_t prefix_len = q - prefix;
  char* start = inner - prefix_len;
  std::copy(prefix, q, start);
  return grpc::Slice(start, p - start);
}

}  // namespace

SliceHeader HeaderOf(const wire::SliceData& slice) {
  SliceHeader h;
  h.slice_id = slice.slice_id();
  h.set_iteration(slice.iteration());  // or the version: the same field (SliceHeader)
  h.offset = slice.offset();
  h.shared_count = slice.shared_count();
  h.has_scale_exponent = slice.has_scale_exponent();
  h.scale_exponent = slice.scale_exponent();
  return h;
}

void SetHeader(const SliceHeader& h, wire::SliceData* slice) {
  slice->set_slice_id(h.slice_id);
  slice->set_iteration(h.iteration());  // or the version: the same field (SliceHeader)
  slice->set_offset(h.offset);
  slice->set_shared_count(h.shared_count);
  if (h.has_scale_exponent) {
    slice->set_scale_exponent(h.scale_exponent);
  } else {
    slice->clear_scale_exponent();
  }
}

grpc::ByteBuffer EncodeSlice(int field, const SliceHeader& h, const void* values, size_t bytes,
                             std::shared_ptr<const void> keepalive) {
  grpc::Slice slices[2] = {SliceHeaderBytes(field, h, bytes), grpc::Slice()};
  if (bytes == 0) return grpc::ByteBuffer(slices, 1);
  // gRPC never writes through a slice it sends; the const_cast only fits its signature.
  void* data = const_cast<void*>(values);
  if (keepalive) {
    slices[1] = grpc::Slice(data, bytes, &DeleteKeepalive,
                            new std::shared_ptr<const void>(std::move(keepalive)));
  } else {
    slices[1] = grpc::Slice(data, bytes, grpc::Slice::STATIC_SLICE);
  }
  return grpc::ByteBuffer(slices, 2);
}

grpc::ByteBuffer EncodeSlice(int field, const SliceHeader& h, grpc::Slice values) {
  const size_t bytes = values.size();
  grpc::Slice slices[2] = {SliceHeaderBytes(field, h, bytes), std::move(values)};
  return grpc::ByteBuffer(slices, bytes == 0 ? 1 : 2);
}

grpc::ByteBuffer EncodeMessage(const google::protobuf::MessageLite& m) {
  grpc::ByteBuffer buffer;
  bool own_buffer = false;
  // Serialising a well-formed message into memory does not fail; the status is gRPC's.
  grpc::GenericSerialize<grpc::ProtoBufferWriter, google::protobuf::MessageLite>(m, &buffer,
                                                                                 &own_buffer);
  return buffer;
}

absl::Status Decode(grpc::ByteBuffer* buffer, DecodedWorkerMessage* out) {
  return DecodeImpl(buffer, out);
}

absl::Status Decode(grpc::ByteBuffer* buffer, DecodedServerMessage* out) {
  return DecodeImpl(buffer, out);
}

}  // namespace p3
