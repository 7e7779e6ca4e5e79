// A colocated worker's SharedSlices message of gradients (WorkerMessage.shared_gradients),
// driven through the server's protobuf edge: its slices are handled in its order, each as
// the Gradient message of its own would be, and a malformed one is refused, naming what
// is wrong, before any of it is handled.
#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <vector>

#include "p3/core/downstream.h"
#include "p3/core/parameter_shard.h"
#include "proto/wire.h"
#include "proto/wire_codec.h"
#include "server/message_handler.h"

namespace p3 {
namespace {

// One tensor "w" of 9 values, slices of 3: slices 0, 1, 2. One server, one worker, plain
// SGD with lr 1, the worker's buffers in "shared memory" (two vectors).
struct Shard {
  Shard() : shard(Options()) {
    ClusterSignature sig;
    sig.num_workers = 1;
    sig.num_servers = 1;
    sig.tensors = {{"w", {9}, "float32"}};
    sig.plan.granularity = Granularity::kSliced;
    sig.plan.slice_params = 3;
    CATCH_REQUIRE(shard.Join(sig, 0).ok());
    shared = SharedValues{.params = params.data(), .grads = grads.data()};
    for (uint32_t slice = 0; slice < 3; ++slice) {
      wire::WorkerMessage init;
      init.mutable_init()->set_slice_id(slice);
      init.mutable_init()->set_shared_count(3);
      CATCH_REQUIRE(HandleWorkerMessage(&shard, 0, init, &handled, &shared).ok());
    }
  }
  static ShardOptions Options() {
    ShardOptions o;
    o.optimizer.lr = 1.0;
    o.optimizer.momentum = 0;
    return o;
  }
  absl::Status Handle(const wire::WorkerMessage& msg) {
    return HandleWorkerMessage(&shard, 0, msg, &handled, &shared);
  }
  // The slices and values of what the last message sent down, in order.
  std::vector<std::pair<int, std::vector<float>>> Out() const {
    std::vector<std::pair<int, std::vector<float>>> out;
    for (const ToWorker& m : handled.out) {
      out.emplace_back(m.message.slice_id, DecodedValues(m.message));
    }
    return out;
  }

  ParameterShard shard;
  std::vector<float> params = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<float> grads = {0.5f, 0.25f, 2, -1, 3, 0.125f, 10, 20, 30};
  SharedValues shared;
  Handled handled;
};

// A Gradient message of iteration 0 naming slice `slice`'s 3 values in shared memory.
wire::WorkerMessage Single(uint32_t slice) {
  wire::WorkerMessage msg;
  msg.mutable_gradient()->set_slice_id(slice);
  msg.mutable_gradient()->set_shared_count(3);
  return msg;
}

// A SharedSlices message of the gradients of iteration 0 of `slices`, in that order.
wire::WorkerMessage Batch(const std::vector<uint32_t>& slices) {
  wire::WorkerMessage msg;
  wire::SharedSlices* batch = msg.mutable_shared_gradients();
  for (uint32_t slice : slices) {
    SliceHeader h;
    h.slice_id = slice;
    h.shared_count = 3;
    SetHeader(h, batch->add_slices());
  }
  return msg;
}

bool Mentions(const absl::Status& s, const std::string& text) {
  return s.message().find(text) != absl::string_view::npos;
}

CATCH_TEST_CASE("a batch's slices are handled in its order, as single messages would be") {
  Shard batched;
  CATCH_REQUIRE(batched.Handle(Batch({2, 0, 1})).ok());
  // Each slice's new version, in the batch's order, each once.
  const auto out = batched.Out();
  CATCH_REQUIRE(out.size() == 3);
  CATCH_CHECK(out[0].first == 2);
  CATCH_CHECK(out[1].first == 0);
  CATCH_CHECK(out[2].first == 1);
  Shard single;
  std::vector<std::pair<int, std::vector<float>>> one_by_one;
  for (uint32_t slice : {2u, 0u, 1u}) {
    CATCH_REQUIRE(single.Handle(Single(slice)).ok());
    const auto part = single.Out();
    CATCH_REQUIRE(part.size() == 1);
    one_by_one.push_back(part[0]);
  }
  CATCH_CHECK(out == one_by_one);  // bit for bit: the same floats
  CATCH_CHECK(out[1].second == std::vector<float>{1 - 0.5f, 2 - 0.25f, 3 - 2});
  // Every slice is at version 1 now: a slice handled twice would have been refused
  // above, as this gradient of the past iteration is.
  const absl::Status again = batched.Handle(Batch({0}));
  CATCH_CHECK(absl::IsInvalidArgument(again));
  CATCH_CHECK(Mentions(again, "gradient of slice 0 for iteration 0"));
}

CATCH_TEST_CASE("a malformed batch is refused, naming what is wrong, and none of it is handled") {
  Shard f;
  // A slice twice.
  absl::Status s = f.Handle(Batch({1, 0, 1}));
  CATCH_CHECK(absl::IsInvalidArgument(s));
  CATCH_CHECK(Mentions(s, "names slice 1 twice (1 and 3 of 3)"));
  // Values in the message.
  wire::WorkerMessage with_values = Batch({0, 2});
  with_values.mutable_shared_gradients()->mutable_slices(1)->set_values(std::string(12, '\0'));
  s = f.Handle(with_values);
  CATCH_CHECK(Mentions(s, "slice 2 (2 of 2) has values in the message"));
  // No shared_count.
  wire::WorkerMessage no_count = Batch({0, 2});
  no_count.mutable_shared_gradients()->mutable_slices(0)->set_shared_count(0);
  CATCH_CHECK(Mentions(f.Handle(no_count), "slice 0 (1 of 2) has values in the message"));
  // Empty, and too long.
  CATCH_CHECK(Mentions(f.Handle(Batch({})), "of 0 gradients (1 to 1024 allowed)"));
  std::vector<uint32_t> many(kSharedBatchMax + 1);
  for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<uint32_t>(i);
  CATCH_CHECK(Mentions(f.Handle(Batch(many)), "of 1025 gradients (1 to 1024 allowed)"));
  // On a stream without shared memory.
  s = HandleWorkerMessage(&f.shard, 0, Batch({0}), &f.handled, nullptr);
  CATCH_CHECK(Mentions(s, "a SharedSlices message of 1 gradients, on a stream without shared"));
  // None of them changed anything: every slice still takes its gradient of iteration 0.
  CATCH_REQUIRE(f.Handle(Batch({0, 1, 2})).ok());
  CATCH_CHECK(f.handled.out.size() == 3);
}

CATCH_TEST_CASE("a slice the shard refuses inside a batch ends it with the shard's status") {
  Shard f;
  CATCH_REQUIRE(f.Handle(Single(0)).ok());  // slice 0 is at version 1 now
  const absl::Status s = f.Handle(Batch({1, 0, 2}));
  CATCH_CHECK(absl::IsInvalidArgument(s));
  CATCH_CHECK(Mentions(s,
                       "gradient of slice 0 for iteration 0 from worker 0; the slice is at "
                       "iteration 1"));
  // The slices before it were handled, the ones after it not (the stream ends here).
  CATCH_CHECK(f.handled.out.size() == 1);
  CATCH_CHECK(f.handled.out[0].message.slice_id == 1);
  CATCH_CHECK(f.Handle(Single(1)).code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(f.Handle(Single(2)).ok());
}

}  // namespace
}  // namespace p3
