// The server's protobuf edge, driven directly: messages whose values are in a worker's
// shared memory, and the hostile forms of them; a rejoining worker's Hello and Resume.
#include "server/message_handler.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "proto/wire.h"

namespace p3 {
namespace {

// One tensor "w" of 5 values, slices of 3: slice 0 = [0,3), slice 1 = [3,5). One server,
// one worker, plain SGD with lr 1.
struct Fixture {
  Fixture() : shard(Options()) {
    ClusterSignature sig;
    sig.num_workers = 1;
    sig.num_servers = 1;
    sig.tensors = {{"w", {5}, "float32"}};
    sig.plan.granularity = Granularity::kSliced;
    sig.plan.slice_params = 3;
    CATCH_REQUIRE(shard.Join(sig, 0).ok());
    plan = *shard.plan();
    shared = SharedValues{.params = params.data(), .grads = grads.data(), .plan = &plan};
  }
  static ShardOptions Options() {
    ShardOptions o;
    o.optimizer.lr = 1.0;
    o.optimizer.momentum = 0;
    return o;
  }
  // A slice message naming `count` values at `offset` in shared memory.
  static wire::WorkerMessage Shared(bool init, uint32_t slice, uint64_t offset, uint64_t count) {
    wire::WorkerMessage msg;
    wire::SliceData* d = init ? msg.mutable_init() : msg.mutable_gradient();
    d->set_slice_id(slice);
    d->set_offset(offset);
    d->set_shared_count(count);
    return msg;
  }
  absl::Status Handle(const wire::WorkerMessage& msg, const SharedValues* with) {
    return HandleWorkerMessage(&shard, 0, msg, &handled, with);
  }

  ParameterShard shard;
  SlicePlan plan = *SlicePlan::Create({{"w", 5}}, {});
  std::vector<float> params = {1, 2, 3, 4, 5};
  std::vector<float> grads = {10, 20, 30, 40, 50};
  SharedValues shared;
  Handled handled;
};

bool Mentions(const absl::Status& s, const std::string& text) {
  return s.message().find(text) != absl::string_view::npos;
}

CATCH_TEST_CASE("init and gradient values are read from the worker's shared memory") {
  Fixture f;
  CATCH_REQUIRE(f.Handle(Fixture::Shared(true, 0, 0, 3), &f.shared).ok());
  CATCH_REQUIRE(f.Handle(Fixture::Shared(true, 1, 0, 2), &f.shared).ok());
  CATCH_REQUIRE(f.handled.out.size() == 2);  // version 0 of both slices goes out
  CATCH_CHECK(*f.handled.out[1].values == std::vector<float>{4, 5});
  // Gradient of slice 1 in two parts: [3,4) then [4,5) of the gradient buffer.
  CATCH_REQUIRE(f.Handle(Fixture::Shared(false, 1, 0, 1), &f.shared).ok());
  CATCH_CHECK(f.handled.out.empty());
  CATCH_REQUIRE(f.Handle(Fixture::Shared(false, 1, 1, 1), &f.shared).ok());
  CATCH_REQUIRE(f.handled.out.size() == 1);
  CATCH_CHECK(*f.handled.out[0].values == std::vector<float>{4 - 40, 5 - 50});
}

CATCH_TEST_CASE("a shared-memory message that does not fit is refused and changes nothing") {
  Fixture f;
  CATCH_REQUIRE(f.Handle(Fixture::Shared(true, 0, 0, 3), &f.shared).ok());
  CATCH_REQUIRE(f.Handle(Fixture::Shared(true, 1, 0, 2), &f.shared).ok());
  // No shared memory set up on this stream.
  absl::Status none = f.Handle(Fixture::Shared(false, 0, 0, 3), nullptr);
  CATCH_CHECK(absl::IsInvalidArgument(none));
  CATCH_CHECK(Mentions(none, "did not set up"));
  // Values both in the message and in shared memory.
  wire::WorkerMessage both = Fixture::Shared(false, 0, 0, 3);
  both.mutable_gradient()->set_values(std::string(12, '\0'));
  CATCH_CHECK(Mentions(f.Handle(both, &f.shared), "both in the message and in shared memory"));
  // Past the end of the slice, by count or by offset, including overflowing sums.
  CATCH_CHECK(Mentions(f.Handle(Fixture::Shared(false, 0, 0, 4), &f.shared), "past its end"));
  CATCH_CHECK(Mentions(f.Handle(Fixture::Shared(false, 0, 2, 2), &f.shared), "past its end"));
  CATCH_CHECK(Mentions(f.Handle(Fixture::Shared(false, 0, UINT64_MAX - 1, 2), &f.shared),
                       "out of range"));
  CATCH_CHECK(
      Mentions(f.Handle(Fixture::Shared(false, 0, 1, UINT64_MAX), &f.shared), "past its end"));
  // A slice the plan does not have.
  CATCH_CHECK(Mentions(f.Handle(Fixture::Shared(false, 7, 0, 1), &f.shared), "out of range"));
  // Nothing was aggregated: the whole gradient still completes the update.
  CATCH_REQUIRE(f.Handle(Fixture::Shared(false, 0, 0, 3), &f.shared).ok());
  CATCH_REQUIRE(f.handled.out.size() == 1);
  CATCH_CHECK(*f.handled.out[0].values == std::vector<float>{1 - 10, 2 - 20, 3 - 30});
}

CATCH_TEST_CASE("a worker's buffers come back as their mean; malformed ones are refused") {
  Fixture f;  // one worker: the mean of one contribution is itself
  wire::WorkerMessage msg;
  const std::vector<float> values = {0.5f, 2.0f};
  msg.mutable_buffers()->set_round(0);
  msg.mutable_buffers()->set_values(values.data(), values.size() * sizeof(float));
  // Not a whole number of float32.
  wire::WorkerMessage odd = msg;
  odd.mutable_buffers()->mutable_values()->push_back('x');
  absl::Status refused = f.Handle(odd, nullptr);
  CATCH_CHECK(absl::IsInvalidArgument(refused));
  CATCH_CHECK(Mentions(refused, "whole number of float32"));
  // The right one, after the refusal.
  msg.mutable_buffers()->set_round(3);
  CATCH_REQUIRE(f.Handle(msg, nullptr).ok());
  CATCH_REQUIRE(f.handled.out.size() == 1);
  CATCH_CHECK(f.handled.out[0].kind == Outgoing::Kind::kBuffers);
  CATCH_CHECK(f.handled.out[0].iteration == 3);
  CATCH_CHECK(*f.handled.out[0].values == values);
  // A round before the one completed.
  wire::WorkerMessage earlier = msg;
  earlier.mutable_buffers()->set_round(2);
  CATCH_CHECK(Mentions(f.Handle(earlier, nullptr), "round 3 has completed"));
}

CATCH_TEST_CASE("buffers sent to a server other than server 0 are refused") {
  ShardOptions o;
  o.server_index = 1;
  ParameterShard shard(o);
  const float v = 1.0f;
  absl::StatusOr<std::vector<Outgoing>> out = shard.Buffers(0, 0, &v, 1);
  CATCH_CHECK(absl::IsInvalidArgument(out.status()));
  CATCH_CHECK(Mentions(out.status(), "not server 0"));
}

CATCH_TEST_CASE("a Hello with rejoin is taken as a rejoin, and the Resume hands out the values") {
  ShardOptions options = Fixture::Options();
  options.num_workers = 1;
  ClusterSignature sig;
  sig.num_workers = 1;
  sig.num_servers = 1;
  sig.tensors = {{"w", {5}, "float32"}};
  sig.plan.granularity = Granularity::kSliced;
  sig.plan.slice_params = 3;
  wire::Hello hello;
  SignatureToHello(sig, &hello);
  hello.set_protocol_version(kProtocolVersion);
  hello.set_rank(0);
  hello.set_rejoin(true);

  // Rejoins off (the default): refused, naming the setting.
  ParameterShard off(options);
  CATCH_REQUIRE(off.Join(sig, 0).ok());
  absl::StatusOr<HelloResult> refused = HandleHello(&off, hello, 0);
  CATCH_CHECK(absl::IsFailedPrecondition(refused.status()));
  CATCH_CHECK(Mentions(refused.status(), "cluster.rejoin_timeout_s"));

  options.accept_rejoin = true;
  ParameterShard shard(options);
  CATCH_REQUIRE(shard.Join(sig, 0).ok());
  std::vector<float> w = {1, 2, 3, 4, 5};
  CATCH_REQUIRE(shard.Init(0, 0, w.data(), 3).ok());
  CATCH_REQUIRE(shard.Init(0, 1, w.data() + 3, 2).ok());
  absl::StatusOr<HelloResult> joined = HandleHello(&shard, hello, 0);
  CATCH_REQUIRE(joined.ok());
  CATCH_CHECK(joined->rejoined);
  CATCH_CHECK(joined->current_version == 0);
  CATCH_CHECK(joined->out.empty());  // the values come with the Resume

  Handled handled;
  wire::WorkerMessage gradient;
  gradient.mutable_gradient()->set_slice_id(0);
  gradient.mutable_gradient()->set_values(std::string(12, '\0'));
  CATCH_CHECK(absl::IsFailedPrecondition(HandleWorkerMessage(&shard, 0, gradient, &handled)));
  wire::WorkerMessage resume;
  resume.mutable_resume()->set_version(0);
  CATCH_REQUIRE(HandleWorkerMessage(&shard, 0, resume, &handled).ok());
  CATCH_REQUIRE(handled.out.size() == 2);
  CATCH_CHECK(*handled.out[1].values == std::vector<float>{4, 5});
  CATCH_CHECK(HandleWorkerMessage(&shard, 0, gradient, &handled).ok());
}

}  // namespace
}  // namespace p3
