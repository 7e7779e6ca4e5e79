// Fuzz target: the server's message handling (server/message_handler.h over a
// ParameterShard) fed arbitrary bytes as a sequence of worker messages.
//
// Input layout: byte 0 picks the scenario (bit 0: values on push; bit 1: parse the first
// chunk as the Hello instead of using a valid one; bits 2-3: the wire dtype, 1 bfloat16,
// 2 float16, else float32; bit 4: the shard is server 4 of 5, which owns none of the 4
// slices and checkpoints by worker 0's Reached messages). The rest is a sequence of chunks,
// each a 2-byte little-endian length, a rank byte (0 or 1) and that many bytes of a
// serialized WorkerMessage.
//
// Whatever the bytes, the handler must not crash, and every answer must be well formed:
// parameter messages carry exactly the slice's number of values (encoded on a 16-bit wire),
// and a checkpoint holds every slice the shard owns, at a version of the checkpoint
// interval, each one after the last.
//
// Differential: a second shard gets every message through the servers' real receive path
// instead (proto/wire_codec.h's Decode over the bytes cut into two gRPC slices, then the
// decoded-message handler). Both must accept and refuse the same messages and answer
// with the same messages and values.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include "p3/core/parameter_shard.h"
#include "p3/core/wire_dtype.h"
#include "proto/p3.pb.h"
#include "proto/wire.h"
#include "proto/wire_codec.h"
#include "server/message_handler.h"
#include "tests/fuzz/fuzz_seeds.h"

namespace {

p3::WireDType DTypeOf(uint8_t scenario) {
  switch ((scenario >> 2) & 3) {
    case 1:
      return p3::WireDType::kBFloat16;
    case 2:
      return p3::WireDType::kFloat16;
    default:
      return p3::WireDType::kFloat32;
  }
}

// Bit 4 of the scenario byte: the shard is server kSlicelessServer of kSlicelessServer + 1,
// and owns none of the model's 4 slices (the round robin gives servers 0 - 3 one each).
constexpr int kSlicelessServer = 4;

p3::wire::Hello ValidHello(int rank, bool values_on_push, p3::WireDType dtype, bool sliceless) {
  p3::ClusterSignature sig;
  sig.num_workers = 2;
  sig.num_servers = sliceless ? kSlicelessServer + 1 : 1;
  sig.tensors = {{"w", {4, 5}, "float32"}, {"b", {5}, "float32"}};
  sig.plan.slice_params = 8;  // w: 3 slices (8, 8, 4), b: 1 slice
  sig.values_on_push = values_on_push;
  sig.wire_dtype = dtype;
  p3::wire::Hello hello;
  p3::SignatureToHello(sig, &hello);
  hello.set_rank(rank);
  hello.set_server_index(sliceless ? kSlicelessServer : 0);
  return hello;
}

void CheckAt(bool condition, int line) {
  if (!condition) {
    std::fprintf(stderr, "shard_fuzz: check failed at line %d\n", line);
    std::abort();
  }
}
#define Check(condition) CheckAt((condition), __LINE__)

void CheckToWorker(const p3::ParameterShard& shard, const std::vector<p3::ToWorker>& out) {
  std::optional<p3::SlicePlan> plan = shard.plan();
  for (const p3::ToWorker& m : out) {
    const p3::Downstream& d = m.message;
    Check(m.rank == 0 || m.rank == 1);
    Check(plan.has_value() && d.slice_id >= 0 &&
          d.slice_id < static_cast<int>(plan->slices().size()));
    if (d.kind == p3::Downstream::Kind::kParams) {
      const int64_t length = plan->slices()[d.slice_id].length;
      Check(d.values != nullptr && d.values->dtype() == shard.wire_dtype() &&
            d.values->size() == length &&
            d.values->bytes().size() == length * p3::BytesPerValue(shard.wire_dtype()) &&
            m.bytes == static_cast<int64_t>(d.values->bytes().size()));
      const std::optional<int> e = d.values->scale_exponent();
      Check(e.has_value() == (shard.wire_dtype() == p3::WireDType::kFloat16));
      Check(!e.has_value() || (*e >= p3::kMinScaleExponent && *e <= p3::kMaxScaleExponent));
    }
  }
}

bool SameToWorker(const std::vector<p3::ToWorker>& a, const std::vector<p3::ToWorker>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const p3::Downstream& x = a[i].message;
    const p3::Downstream& y = b[i].message;
    if (x.kind != y.kind || a[i].rank != b[i].rank || x.slice_id != y.slice_id ||
        x.version != y.version || x.iteration != y.iteration || x.round != y.round ||
        a[i].bytes != b[i].bytes || (x.values == nullptr) != (y.values == nullptr) ||
        (x.buffers == nullptr) != (y.buffers == nullptr)) {
      return false;
    }
    // Bit for bit: fuzzed values include NaNs, which never compare equal as floats.
    if (x.values != nullptr && (x.values->bytes() != y.values->bytes() ||
                                x.values->scale_exponent() != y.values->scale_exponent())) {
      return false;
    }
    if (x.buffers != nullptr &&
        (x.buffers->size() != y.buffers->size() ||
         std::memcmp(x.buffers->data(), y.buffers->data(), x.buffers->size() * sizeof(float)) !=
             0)) {
      return false;
    }
  }
  return true;
}

// `bytes` as a received message: two gRPC slices, cut at `cut` (clamped).
grpc::ByteBuffer Received(const std::string& bytes, size_t cut) {
  cut = std::min(cut, bytes.size());
  grpc::Slice parts[2] = {grpc::Slice(bytes.data(), cut),
                          grpc::Slice(bytes.data() + cut, bytes.size() - cut)};
  return grpc::ByteBuffer(parts, 2);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool values_on_push = data[0] & 1;
  const bool fuzz_hello = data[0] & 2;
  const p3::WireDType dtype = DTypeOf(data[0]);
  const bool sliceless = data[0] & 16;
  const int server = sliceless ? kSlicelessServer : 0;
  size_t pos = 1;
  auto next_chunk = [&](int* rank, std::string* bytes) {
    if (pos + 3 > size) return false;
    const size_t len = data[pos] | (data[pos + 1] << 8);
    *rank = data[pos + 2] & 1;
    pos += 3;
    const size_t take = std::min(len, size - pos);
    bytes->assign(reinterpret_cast<const char*>(data + pos), take);
    pos += take;
    return true;
  };

  p3::ShardOptions options;
  options.num_workers = 2;
  options.server_index = server;
  options.checkpoint_every = 2;
  options.wire_dtype = dtype;
  // Each shard's checkpoints: every slice it owns, at versions of the interval, in order.
  auto checks_checkpoints = [&](uint64_t* last) {
    p3::ShardOptions o = options;
    o.on_checkpoint = [last, sliceless](p3::ShardCheckpoint c) {
      Check(c.slices.size() == (sliceless ? 0u : 4u) && c.iteration % 2 == 0 &&
            c.iteration > *last);
      *last = c.iteration;
    };
    return o;
  };
  uint64_t last_checkpoint[2] = {0, 0};
  p3::ParameterShard shard(checks_checkpoints(&last_checkpoint[0]));
  p3::ParameterShard twin(checks_checkpoints(&last_checkpoint[1]));  // through the codec

  bool joined[2] = {false, false};
  int rank = 0;
  std::string bytes;
  if (fuzz_hello && next_chunk(&rank, &bytes)) {
    p3::wire::Hello hello;
    if (hello.ParseFromString(bytes)) {
      auto result = p3::HandleHello(&shard, hello, server);
      auto twin_result = p3::HandleHello(&twin, hello, server);
      Check(result.ok() == twin_result.ok());
      if (result.ok()) {
        joined[result->rank] = true;
        CheckToWorker(shard, result->out);
      }
    }
  }
  for (int r = 0; r < 2; ++r) {
    if (joined[r]) continue;
    const p3::wire::Hello hello = ValidHello(r, values_on_push, dtype, sliceless);
    auto result = p3::HandleHello(&shard, hello, server);
    auto twin_result = p3::HandleHello(&twin, hello, server);
    Check(result.ok() == twin_result.ok());
    if (result.ok()) joined[r] = true;  // refused when a fuzzed Hello fixed another model
  }
  p3::DecodedWorkerMessage decoded;
  p3::Handled twin_handled;
  while (next_chunk(&rank, &bytes)) {
    p3::wire::WorkerMessage msg;
    const bool parsed = msg.ParseFromString(bytes);
    grpc::ByteBuffer received = Received(bytes, bytes.empty() ? 0 : bytes[0] % (bytes.size() + 1));
    const bool decoded_ok = p3::Decode(&received, &decoded).ok();
    Check(parsed == decoded_ok);
    if (!parsed) continue;
    auto handled = p3::HandleWorkerMessage(&shard, rank, msg);
    const absl::Status twin_status =
        p3::HandleWorkerMessage(&twin, rank, decoded, &twin_handled, nullptr);
    Check(handled.ok() == twin_status.ok());
    if (handled.ok()) {
      CheckToWorker(shard, handled->out);
      Check(SameToWorker(handled->out, twin_handled.out));
      Check(handled->done == twin_handled.done && handled->all_done == twin_handled.all_done);
    }
  }
  return 0;
}

// Valid, interesting inputs to start from: a full iteration of both workers, on a float32
// wire (with and without values on push) and on the 16-bit ones.
std::vector<std::string> FuzzSeeds() {
  std::vector<std::string> seeds;
  for (int scenario : {0, 1, 1 | (1 << 2), 1 | (2 << 2), 0 | (2 << 2), 1 | (1 << 4)}) {
    const p3::WireDType dtype = DTypeOf(static_cast<uint8_t>(scenario));
    std::string input(1, static_cast<char>(scenario));
    auto add = [&](int rank, const p3::wire::WorkerMessage& msg) {
      std::string bytes = msg.SerializeAsString();
      input += static_cast<char>(bytes.size() & 0xff);
      input += static_cast<char>(bytes.size() >> 8);
      input += static_cast<char>(rank);
      input += bytes;
    };
    const int64_t lengths[] = {8, 8, 4, 5};
    if (scenario & (1 << 4)) {
      // Server 4 owns no slice: worker 0 says which versions it holds; worker 1's Reached,
      // a version told again and a gradient are refused or ignored.
      for (uint64_t v : {1, 2, 2, 3, 4}) {
        p3::wire::WorkerMessage reached;
        reached.mutable_reached()->set_version(v);
        add(v == 3 ? 1 : 0, reached);
      }
      p3::wire::WorkerMessage grad;
      grad.mutable_gradient()->set_slice_id(0);
      grad.mutable_gradient()->set_values(std::string(8 * sizeof(float), '\x02'));
      add(0, grad);
      p3::wire::WorkerMessage done;
      done.mutable_done();
      add(0, done);
      add(1, done);
      seeds.push_back(input);
      continue;
    }
    for (int s = 0; s < 4; ++s) {
      p3::wire::WorkerMessage init;
      init.mutable_init()->set_slice_id(s);
      init.mutable_init()->set_values(std::string(lengths[s] * sizeof(float), '\x01'));
      add(0, init);
    }
    for (uint64_t it = 0; it < 3; ++it) {
      for (int r = 0; r < 2; ++r) {
        for (int s = 0; s < 4; ++s) {
          p3::wire::WorkerMessage grad;
          grad.mutable_gradient()->set_slice_id(s);
          grad.mutable_gradient()->set_iteration(it);
          grad.mutable_gradient()->set_values(
              std::string(lengths[s] * p3::BytesPerValue(dtype), '\x02'));
          if (dtype == p3::WireDType::kFloat16) grad.mutable_gradient()->set_scale_exponent(-3);
          add(r, grad);
          if ((scenario & 1) == 0) {
            p3::wire::WorkerMessage pull;
            pull.mutable_pull()->set_slice_id(s);
            pull.mutable_pull()->set_version(it + 1);
            add(r, pull);
          }
        }
      }
    }
    p3::wire::WorkerMessage done;
    done.mutable_done();
    add(0, done);
    add(1, done);
    seeds.push_back(input);
  }
  return seeds;
}
