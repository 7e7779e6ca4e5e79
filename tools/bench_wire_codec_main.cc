// Measures the zero-copy codec (proto/wire_codec.h) against protobuf's own path for one
// slice message, without a network: per message, the median over --runs runs of ns and
// GB/s of value bytes, and operator-new allocations (//p3/base:allocation_count replaces
// the global operator new to count them; gRPC's own allocations go through malloc and are not counted).
//
//   bazel-bin/tools/bench_wire_codec [--runs=7]
//
// Encode: protobuf = set_values (a copy) + gRPC's serialisation into a ByteBuffer (another
// copy), with a new message each time as a sender does, and with one message reused (its
// string keeps its capacity; the difference is the cost of touching fresh memory); codec =
// EncodeSlice (the values are referenced). Decode, from a buffer of 64 KiB
// slices as gRPC hands them over: protobuf = ParseFromString of the flattened bytes, and
// gRPC's typed path (ProtoBufferReader over the slices); both leave the values in a
// protobuf string that the receiver then copies out. Codec = Decode + memcpy of the
// segments into the destination.
#include <grpcpp/impl/codegen/proto_utils.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <string>
#include <vector>

#include "p3/base/allocation_count.h"
#include "absl/flags/flag.h"
#include "proto/p3.pb.h"
#include "proto/program.h"
#include "proto/wire_codec.h"

ABSL_FLAG(int, runs, 7, "runs; the median is printed (at least 5)");

namespace {

struct Result {
  double ns = 0;
  double allocations = 0;
};

// Median per-call time of `f` over `runs` runs of `iterations` calls, after one warm-up run.
Result Measure(int runs, int iterations, const std::function<void()>& f) {
  for (int i = 0; i < iterations; ++i) f();
  std::vector<double> ns;
  long allocations = 0;
  for (int r = 0; r < runs; ++r) {
    const long before = p3::AllocationCount();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i) f();
    const auto end = std::chrono::steady_clock::now();
    allocations += p3::AllocationCount() - before;
    ns.push_back(std::chrono::duration<double, std::nano>(end - start).count() / iterations);
  }
  std::sort(ns.begin(), ns.end());
  return {ns[ns.size() / 2], static_cast<double>(allocations) / (runs * iterations)};
}

grpc::ByteBuffer Chunked(const std::string& bytes, size_t chunk) {
  std::vector<grpc::Slice> slices;
  for (size_t from = 0; from < bytes.size(); from += chunk) {
    slices.emplace_back(bytes.data() + from, std::min(chunk, bytes.size() - from));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

void Print(const char* what, size_t floats, size_t bytes, const Result& r) {
  std::printf("%-44s %8zu %12.0f %8.2f %8.1f\n", what, floats, r.ns, bytes / r.ns,
              r.allocations);
}

}  // namespace

int main(int argc, char** argv) {
  p3::Program program("bench_wire_codec", argc, argv);
  const int runs = std::max(5, absl::GetFlag(FLAGS_runs));
  std::printf("median of %d runs; GB/s of value bytes\n", runs);
  std::printf("%-44s %8s %12s %8s %8s\n", "path", "floats", "ns/message", "GB/s", "allocs");
  for (size_t floats : {size_t{40000}, size_t{1000000}}) {
    const size_t bytes = floats * sizeof(float);
    const int iterations = floats > 100000 ? 20 : 400;
    std::vector<float> values(floats);
    for (size_t i = 0; i < floats; ++i) values[i] = 0.001f * static_cast<float>(i);
    p3::SliceHeader h;
    h.slice_id = 17;
    h.set_iteration(1234);

    Print("encode protobuf: set_values+GenericSerialize", floats, bytes,
          Measure(runs, iterations, [&] {
            p3::wire::WorkerMessage m;
            p3::wire::SliceData* s = m.mutable_gradient();
            s->set_slice_id(h.slice_id);
            s->set_iteration(h.iteration());
            s->set_values(values.data(), bytes);
            grpc::ByteBuffer buffer;
            bool own = false;
            grpc::GenericSerialize<grpc::ProtoBufferWriter, p3::wire::WorkerMessage>(m, &buffer,
                                                                                   &own);
          }));
    p3::wire::WorkerMessage reused;
    Print("encode protobuf, message reused", floats, bytes, Measure(runs, iterations, [&] {
            p3::wire::SliceData* s = reused.mutable_gradient();
            s->set_slice_id(h.slice_id);
            s->set_iteration(h.iteration());
            s->set_values(values.data(), bytes);
            grpc::ByteBuffer buffer;
            bool own = false;
            grpc::GenericSerialize<grpc::ProtoBufferWriter, p3::wire::WorkerMessage>(
                reused, &buffer, &own);
          }));
    Print("encode codec: EncodeSlice", floats, bytes, Measure(runs, iterations, [&] {
            grpc::ByteBuffer buffer = p3::EncodeSlice(p3::wire::WorkerMessage::kGradientFieldNumber,
                                                      h, values.data(), bytes, nullptr);
          }));

    p3::wire::WorkerMessage m;
    m.mutable_gradient()->set_slice_id(h.slice_id);
    m.mutable_gradient()->set_iteration(h.iteration());
    m.mutable_gradient()->set_values(values.data(), bytes);
    const std::string flat = m.SerializeAsString();
    const grpc::ByteBuffer received = Chunked(flat, 64 << 10);
    std::vector<float> dst(floats);
    p3::wire::WorkerMessage parsed;
    Print("decode protobuf: ParseFromString(flat)+memcpy", floats, bytes,
          Measure(runs, iterations, [&] {
            if (!parsed.ParseFromString(flat)) std::abort();
            std::memcpy(dst.data(), parsed.gradient().values().data(), bytes);
          }));
    Print("decode protobuf: GenericDeserialize+memcpy", floats, bytes,
          Measure(runs, iterations, [&] {
            grpc::ByteBuffer copy(received);
            if (!grpc::GenericDeserialize<grpc::ProtoBufferReader, p3::wire::WorkerMessage>(
                     &copy, &parsed)
                     .ok()) {
              std::abort();
            }
            std::memcpy(dst.data(), parsed.gradient().values().data(), bytes);
          }));
    p3::DecodedWorkerMessage decoded;
    Print("decode codec: Decode+memcpy of segments", floats, bytes,
          Measure(runs, iterations, [&] {
            grpc::ByteBuffer copy(received);
            if (!p3::Decode(&copy, &decoded).ok() || decoded.value_bytes != bytes) std::abort();
            char* out = reinterpret_cast<char*>(dst.data());
            for (absl::string_view part : decoded.values) {
              std::memcpy(out, part.data(), part.size());
              out += part.size();
            }
          }));
    if (std::memcmp(dst.data(), values.data(), bytes) != 0) {
      std::printf("decoded values differ\n");
      return 1;
    }
    Print("reference: one memcpy of the values", floats, bytes, Measure(runs, iterations, [&] {
            std::memcpy(dst.data(), values.data(), bytes);
          }));
  }
  return 0;
}
