#include "p3/core/worker_core.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "p3/core/slice_plan.h"
#include "p3/core/version_tracker.h"
#include "p3/core/wire_dtype.h"
#include "tests/p3/core/worker_core_test_util.h"

namespace p3 {
namespace {

using worker_core_test::Fixture;
using worker_core_test::Mentions;
using worker_core_test::TestPlan;

CATCH_TEST_CASE("parts of a slice reassemble into the whole, marked with the last part") {
  Fixture f;
  absl::StatusOr<bool> first = f.Part(/*server=*/0, /*slice=*/0, /*version=*/0, 0, 3, 10.0f);
  CATCH_REQUIRE(first.ok());
  CATCH_CHECK_FALSE(*first);
  CATCH_CHECK_FALSE(f.Holds(0, 0));
  absl::StatusOr<bool> last = f.Part(0, 0, 0, 3, 1, 13.0f);
  CATCH_REQUIRE(last.ok());
  CATCH_CHECK(*last);
  CATCH_CHECK(f.Holds(0, 0));
  CATCH_CHECK(f.params[0] == 10.0f);
  CATCH_CHECK(f.params[1] == 11.0f);
  CATCH_CHECK(f.params[2] == 12.0f);
  CATCH_CHECK(f.params[3] == 13.0f);
  CATCH_CHECK(f.params[4] == -1.0f);  // the next slice is untouched
  // A whole slice in one message; the slice's offset in the flat buffer is respected.
  absl::StatusOr<bool> whole = f.Part(1, 3, 0, 0, 3, 7.0f);
  CATCH_REQUIRE(whole.ok());
  CATCH_CHECK(*whole);
  CATCH_CHECK(f.params[10] == 7.0f);
  CATCH_CHECK(f.params[12] == 9.0f);
  CATCH_CHECK(f.Holds(3, 0));
}

CATCH_TEST_CASE(
    "a part with a gap, an overlap, past the end or empty is refused, naming the "
    "slice, and changes nothing") {
  Fixture f;
  CATCH_REQUIRE(f.Part(0, 0, 0, 0, 2, 10.0f).ok());
  const std::vector<float> before = f.params;

  absl::StatusOr<bool> gap = f.Part(0, 0, 0, 3, 1, 50.0f);
  CATCH_CHECK(gap.status().code() == absl::StatusCode::kInternal);
  CATCH_CHECK(Mentions(gap.status(), "slice 0"));
  CATCH_CHECK(Mentions(gap.status(), "expected offset 2"));

  absl::StatusOr<bool> overlap = f.Part(0, 0, 0, 1, 2, 50.0f);
  CATCH_CHECK_FALSE(overlap.ok());
  CATCH_CHECK(Mentions(overlap.status(), "slice 0"));

  absl::StatusOr<bool> oversize = f.Part(0, 0, 0, 2, 3, 50.0f);
  CATCH_CHECK_FALSE(oversize.ok());
  CATCH_CHECK(Mentions(oversize.status(), "slice 0 (4 values)"));

  absl::StatusOr<bool> empty = f.Part(0, 0, 0, 2, 0, 50.0f);
  CATCH_CHECK_FALSE(empty.ok());

  const char odd[5] = {};
  CATCH_CHECK_FALSE(f.core.Params(0, 0, 0, 2, odd, sizeof(odd)).ok());

  // Parts of one slice belong to one version.
  absl::StatusOr<bool> other = f.Part(0, 0, 1, 2, 2, 50.0f);
  CATCH_CHECK_FALSE(other.ok());
  CATCH_CHECK(Mentions(other.status(), "slice 0"));

  CATCH_CHECK(f.params == before);
  CATCH_CHECK_FALSE(f.Holds(0, 0));
  // The refusals left the reassembly where it was: the right continuation completes it.
  absl::StatusOr<bool> rest = f.Part(0, 0, 0, 2, 2, 12.0f);
  CATCH_REQUIRE(rest.ok());
  CATCH_CHECK(*rest);
  CATCH_CHECK(f.Holds(0, 0));
}

CATCH_TEST_CASE("values of a slice the server does not own, or outside the plan, are refused") {
  Fixture f;
  absl::StatusOr<bool> foreign = f.Part(/*server=*/1, /*slice=*/0, 0, 0, 4, 1.0f);
  CATCH_CHECK(foreign.status().code() == absl::StatusCode::kInternal);
  CATCH_CHECK(Mentions(foreign.status(), "server 1 sent values of slice 0, which it does not own"));
  CATCH_CHECK_FALSE(f.Part(0, 4, 0, 0, 4, 1.0f).ok());
  CATCH_CHECK_FALSE(f.Part(0, -1, 0, 0, 4, 1.0f).ok());
  CATCH_CHECK(f.params[0] == -1.0f);
  CATCH_CHECK(f.tracker.Missing(0, 4, 0) == 4);
}

CATCH_TEST_CASE(
    "each version is marked once per complete slice; duplicates and stale ones are "
    "refused") {
  Fixture f;
  CATCH_REQUIRE(f.Part(1, 1, 0, 0, 4, 1.0f).value());
  CATCH_CHECK(f.Holds(1, 0));
  CATCH_CHECK_FALSE(f.Holds(1, 1));

  absl::StatusOr<bool> duplicate = f.Part(1, 1, 0, 0, 4, 9.0f);
  CATCH_CHECK_FALSE(duplicate.ok());
  CATCH_CHECK(Mentions(duplicate.status(), "slice 1"));
  CATCH_CHECK(f.params[4] == 1.0f);

  CATCH_REQUIRE(f.Part(1, 1, 1, 0, 2, 20.0f).ok());
  CATCH_CHECK_FALSE(f.Holds(1, 1));  // not before its last part
  CATCH_REQUIRE(f.Part(1, 1, 1, 2, 2, 22.0f).value());
  CATCH_CHECK(f.Holds(1, 1));

  absl::StatusOr<bool> stale = f.Part(1, 1, 0, 0, 4, 9.0f);
  CATCH_CHECK_FALSE(stale.ok());
  CATCH_CHECK(Mentions(stale.status(), "holds version 1"));
  CATCH_CHECK(f.params[4] == 20.0f);
  CATCH_CHECK(f.params[7] == 23.0f);
}

CATCH_TEST_CASE("rank 0 of a fresh run sends every slice's initial values at the start") {
  Fixture f(/*rank=*/0);
  absl::StatusOr<std::vector<ToServer>> out = f.core.Start({0, 0});
  CATCH_REQUIRE(out.ok());
  CATCH_REQUIRE(out->size() == 4);
  for (int i = 0; i < 4; ++i) {
    const ToServer& m = (*out)[i];
    const Slice& slice = f.plan.slices()[i];
    CATCH_CHECK(m.message.kind == Upstream::Kind::kInit);
    CATCH_CHECK(m.message.slice_id == i);
    CATCH_CHECK(m.server == slice.server);
    CATCH_CHECK(m.priority == slice.priority);
    CATCH_CHECK(m.tiebreak == slice.id);
    CATCH_CHECK(m.bytes == slice.length * 4);
  }
  // Init points at the parameters, Gradient at the gradient buffer, each at its slice.
  CATCH_CHECK((*out)[2].message.values == f.params.data() + 8);
  CATCH_CHECK((*out)[2].message.length == 2);
  CATCH_CHECK((*out)[2].message.encoding.dtype == WireDType::kFloat32);
  absl::StatusOr<ToServer> g = f.core.Gradient(3, 0);
  CATCH_REQUIRE(g.ok());
  CATCH_CHECK(g->message.values == f.grads.data() + 10);
  CATCH_CHECK(g->message.length == 3);
  CATCH_CHECK(f.core.start_version() == 0);
  CATCH_CHECK(f.core.Start({0, 0}).status().code() == absl::StatusCode::kFailedPrecondition);
}

CATCH_TEST_CASE("other ranks, and a run resumed from a checkpoint, send no initial values") {
  Fixture other(/*rank=*/1);
  absl::StatusOr<std::vector<ToServer>> none = other.core.Start({0, 0});
  CATCH_REQUIRE(none.ok());
  CATCH_CHECK(none->empty());

  Fixture resumed(/*rank=*/0);
  absl::StatusOr<std::vector<ToServer>> after = resumed.core.Start({30, 30});
  CATCH_REQUIRE(after.ok());
  CATCH_CHECK(after->empty());
  CATCH_CHECK(resumed.core.start_version() == 30);
}

CATCH_TEST_CASE("servers that start from different versions, or a wrong count, are refused") {
  Fixture f;
  absl::StatusOr<std::vector<ToServer>> mixed = f.core.Start({0, 30});
  CATCH_CHECK(mixed.status().code() == absl::StatusCode::kFailedPrecondition);
  CATCH_CHECK(Mentions(mixed.status(), "server 1 at 30"));
  CATCH_CHECK(f.core.Start({0}).status().code() == absl::StatusCode::kInvalidArgument);
  // Nothing changed: the handshake can still happen, and gradients wait for it.
  CATCH_CHECK(f.core.start_version() == 0);
  CATCH_CHECK(f.core.Gradient(0, 0).status().code() == absl::StatusCode::kFailedPrecondition);
  CATCH_CHECK(f.core.Start({0, 0}).ok());
}

CATCH_TEST_CASE("a gradient goes to its slice's server with the slice's priority") {
  Fixture f;
  CATCH_REQUIRE(f.core.Start({0, 0}).ok());
  absl::StatusOr<ToServer> g = f.core.Gradient(3, 7);
  CATCH_REQUIRE(g.ok());
  CATCH_CHECK(g->server == 1);
  CATCH_CHECK(g->message.kind == Upstream::Kind::kGradient);
  CATCH_CHECK(g->message.slice_id == 3);
  CATCH_CHECK(g->message.iteration == 7);
  CATCH_CHECK(g->priority == 1);
  CATCH_CHECK(g->bytes == 12);
  CATCH_CHECK(f.core.Gradient(4, 7).status().code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(f.core.Gradient(-1, 7).status().code() == absl::StatusCode::kInvalidArgument);
}

CATCH_TEST_CASE(
    "a gradient given where its tensor's gradient lies points there, at the slice's place "
    "in the tensor, and otherwise into the gradient buffer") {
  Fixture f;
  CATCH_REQUIRE(f.core.Start({0, 0}).ok());
  const std::vector<float> tensor_a(10, 1.0f);  // tensor a: slices 0 - 2, offsets 0 - 9
  const std::vector<float> tensor_b(3, 2.0f);   // tensor b: slice 3, offsets 10 - 12
  absl::StatusOr<ToServer> middle = f.core.Gradient(1, 0, tensor_a.data());
  absl::StatusOr<ToServer> other = f.core.Gradient(3, 0, tensor_b.data());
  absl::StatusOr<ToServer> buffer = f.core.Gradient(3, 0);
  CATCH_REQUIRE(middle.ok());
  CATCH_REQUIRE(other.ok());
  CATCH_REQUIRE(buffer.ok());
  CATCH_CHECK(middle->message.values == tensor_a.data() + 4);
  CATCH_CHECK(middle->message.length == 4);
  CATCH_CHECK(other->message.values == tensor_b.data());
  CATCH_CHECK(other->message.length == 3);
  CATCH_CHECK(buffer->message.values == f.grads.data() + 10);
}

CATCH_TEST_CASE("without values on push, an Ack leads to a Pull of the next version, once") {
  Fixture f(/*rank=*/0, /*values_on_push=*/false);
  CATCH_REQUIRE(f.core.Start({0, 0}).ok());
  // An Ack for a gradient never sent.
  absl::StatusOr<ToServer> early = f.core.Ack(0, 2, 0);
  CATCH_CHECK_FALSE(early.ok());
  CATCH_CHECK(Mentions(early.status(), "slice 2"));

  CATCH_REQUIRE(f.core.Gradient(2, 5).ok());
  CATCH_CHECK_FALSE(f.core.Ack(0, 2, 4).ok());  // not the iteration sent
  CATCH_CHECK_FALSE(f.core.Ack(1, 2, 5).ok());  // not the slice's server
  absl::StatusOr<ToServer> pull = f.core.Ack(0, 2, 5);
  CATCH_REQUIRE(pull.ok());
  CATCH_CHECK(pull->server == 0);
  CATCH_CHECK(pull->message.kind == Upstream::Kind::kPull);
  CATCH_CHECK(pull->message.slice_id == 2);
  CATCH_CHECK(pull->message.version == 6);
  CATCH_CHECK(pull->message.values == nullptr);
  CATCH_CHECK(pull->priority == 0);
  CATCH_CHECK(pull->tiebreak == 2);
  CATCH_CHECK(pull->bytes == 0);
  // The same Ack again.
  absl::StatusOr<ToServer> again = f.core.Ack(0, 2, 5);
  CATCH_CHECK_FALSE(again.ok());
  CATCH_CHECK(Mentions(again.status(), "slice 2"));
  // The next iteration's gradient is acknowledged in turn.
  CATCH_REQUIRE(f.core.Gradient(2, 6).ok());
  CATCH_CHECK(f.core.Ack(0, 2, 6).ok());
}

CATCH_TEST_CASE("with values on push, an Ack never leads to a Pull") {
  Fixture f(/*rank=*/0, /*values_on_push=*/true);
  CATCH_REQUIRE(f.core.Start({0, 0}).ok());
  CATCH_REQUIRE(f.core.Gradient(2, 0).ok());
  absl::StatusOr<ToServer> ack = f.core.Ack(0, 2, 0);
  CATCH_CHECK_FALSE(ack.ok());
  CATCH_CHECK(Mentions(ack.status(), "values come with the push"));
  CATCH_CHECK(Mentions(ack.status(), "slice 2"));
}

CATCH_TEST_CASE("a part split into segments at any byte is copied once into its place") {
  std::vector<float> values = {1.5f, -2.25f, 3.0f, 4.125f};
  const std::string bytes(reinterpret_cast<const char*>(values.data()), 16);
  for (size_t cut1 = 0; cut1 <= 16; ++cut1) {
    for (size_t cut2 = cut1; cut2 <= 16; ++cut2) {
      Fixture f;
      const absl::string_view all(bytes);
      const std::vector<absl::string_view> segments = {
          all.substr(0, cut1), all.substr(cut1, cut2 - cut1), all.substr(cut2)};
      absl::StatusOr<bool> done =
          f.core.Params(0, 0, 0, 0, ReceivedValues{.segments = segments, .bytes = 16});
      CATCH_REQUIRE(done.ok());
      CATCH_REQUIRE(*done);
      CATCH_REQUIRE(std::vector<float>(f.params.begin(), f.params.begin() + 4) == values);
      CATCH_REQUIRE(f.params[4] == -1.0f);
    }
  }
  Fixture f;
  const std::vector<absl::string_view> short_segments = {absl::string_view(bytes).substr(0, 8)};
  CATCH_CHECK_FALSE(  // sizes disagree
      f.core.Params(0, 0, 0, 0, ReceivedValues{.segments = short_segments, .bytes = 16}).ok());
  CATCH_CHECK(f.params[0] == -1.0f);
}

CATCH_TEST_CASE("values written in place are checked and marked like copied ones, not copied") {
  Fixture f;
  f.params[4] = 42.0f;  // the server wrote slice 1 (a[4,8)) itself
  absl::StatusOr<bool> done = f.core.ParamsInPlace(/*server=*/1, /*slice=*/1, 0, 0, 4);
  CATCH_REQUIRE(done.ok());
  CATCH_CHECK(*done);
  CATCH_CHECK(f.Holds(1, 0));
  CATCH_CHECK(f.params[4] == 42.0f);
  // The same checks as for copied values: a stale version, a slice of another server, a
  // count past the end, nothing at all.
  CATCH_CHECK(Mentions(f.core.ParamsInPlace(1, 1, 0, 0, 4).status(), "version 0 already"));
  CATCH_CHECK(Mentions(f.core.ParamsInPlace(0, 1, 1, 0, 4).status(), "does not own"));
  CATCH_CHECK_FALSE(f.core.ParamsInPlace(1, 1, 1, 0, 5).ok());
  CATCH_CHECK_FALSE(f.core.ParamsInPlace(1, 1, 1, 0, 0).ok());
  CATCH_CHECK_FALSE(f.core.ParamsInPlace(1, 1, 1, 0, -3).ok());
  CATCH_CHECK_FALSE(f.Holds(1, 1));
  CATCH_CHECK(f.core.ParamsInPlace(1, 1, 1, 0, 4).ok());
  CATCH_CHECK(f.Holds(1, 1));
  // What a transport hands over says which: a count in place, through the same checks.
  TransportCore& core = f.core;
  CATCH_CHECK(core.Params(1, 1, 2, 0, ReceivedValues{.in_place_count = 4}).value());
  CATCH_CHECK(f.Holds(1, 2));
  CATCH_CHECK(Mentions(core.Params(1, 1, 2, 0, ReceivedValues{.in_place_count = 4}).status(),
                       "version 2 already"));
}

CATCH_TEST_CASE("a restarted worker resumes at the oldest version any server holds, even rank 0") {
  Fixture f(/*rank=*/0);
  // Server 0's slices are all one version ahead; server 1 still waits at 7.
  absl::StatusOr<std::vector<ToServer>> out = f.core.Resume({8, 7});
  CATCH_REQUIRE(out.ok());
  CATCH_REQUIRE(out->size() == 2);  // one Resume per server, no Init
  for (int s = 0; s < 2; ++s) {
    CATCH_CHECK((*out)[s].server == s);
    CATCH_CHECK((*out)[s].message.kind == Upstream::Kind::kResume);
    CATCH_CHECK((*out)[s].message.version == 7);
    CATCH_CHECK((*out)[s].bytes == 0);
  }
  CATCH_CHECK(f.core.start_version() == 7);
  // Version 7 of a slice arrives as for any worker; its gradient of 7 goes out.
  CATCH_CHECK(f.Part(0, 0, 7, 0, 4, 1.0f).ok());
  CATCH_CHECK(f.Holds(0, 7));
  CATCH_CHECK(f.core.Gradient(0, 7).ok());
  CATCH_CHECK(f.core.Resume({7, 7}).status().code() == absl::StatusCode::kFailedPrecondition);
  CATCH_CHECK(f.core.Start({7, 7}).status().code() == absl::StatusCode::kFailedPrecondition);
}

CATCH_TEST_CASE(
    "a restarted worker whose servers are all new processes starts as at a first start") {
  Fixture f(/*rank=*/0);
  // Every server restarted from the checkpoint of 15: no Resume, no Init.
  absl::StatusOr<std::vector<ToServer>> out = f.core.Resume({15, 15}, {false, false});
  CATCH_REQUIRE(out.ok());
  CATCH_CHECK(out->empty());
  CATCH_CHECK(f.core.start_version() == 15);
  // All new and without a checkpoint: rank 0 sends the initial values, as at a first start.
  Fixture g(/*rank=*/0);
  out = g.core.Resume({0, 0}, {false, false});
  CATCH_REQUIRE(out.ok());
  CATCH_CHECK(out->size() == g.plan.slices().size());
  // New servers that disagree are refused as at a first start.
  Fixture h(/*rank=*/1);
  CATCH_CHECK(Mentions(h.core.Resume({15, 10}, {false, false}).status(),
                       "servers resumed from different checkpoints"));
}

CATCH_TEST_CASE("a worker meeting old and new servers resumes the old ones at the new start") {
  Fixture f(/*rank=*/1);
  // Server 0 continued (its slices at 15 or 16); server 1 is new, restored at 15.
  absl::StatusOr<std::vector<ToServer>> out = f.core.Resume({15, 15}, {true, false});
  CATCH_REQUIRE(out.ok());
  CATCH_REQUIRE(out->size() == 1);  // a Resume to the old server only
  CATCH_CHECK((*out)[0].server == 0);
  CATCH_CHECK((*out)[0].message.kind == Upstream::Kind::kResume);
  CATCH_CHECK((*out)[0].message.version == 15);
  CATCH_CHECK(f.core.start_version() == 15);
  // The old server further on (18): the Resume at the new server's 15 goes out, and the
  // old server refuses it (it cannot go back), failing the run so that it restarts too.
  Fixture g(/*rank=*/1);
  out = g.core.Resume({18, 15}, {true, false});
  CATCH_REQUIRE(out.ok());
  CATCH_CHECK((*out)[0].message.version == 15);
  // A new server ahead of what an old one holds cannot be reached: refused, naming it.
  Fixture h(/*rank=*/1);
  const absl::Status ahead = h.core.Resume({10, 15}, {true, false}).status();
  CATCH_CHECK(ahead.code() == absl::StatusCode::kFailedPrecondition);
  CATCH_CHECK(Mentions(ahead, "server 1 is a new process starting at iteration 15"));
  // Rank 0 at 0 with a new server without a checkpoint: the Init of that server's slices.
  Fixture z(/*rank=*/0);
  out = z.core.Resume({0, 0}, {true, false});
  CATCH_REQUIRE(out.ok());
  int inits = 0;
  for (const ToServer& m : *out) {
    if (m.message.kind == Upstream::Kind::kInit) {
      ++inits;
      CATCH_CHECK(m.server == 1);
    }
  }
  CATCH_CHECK(inits == 2);  // slices 1 and 3 are server 1's
}

CATCH_TEST_CASE(
    "a resume without a version to resume at, or for a wrong server count, is refused") {
  Fixture f;
  CATCH_CHECK(f.core.Resume({7}).status().code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(f.core.Resume({UINT64_MAX, UINT64_MAX}).status().code() ==
              absl::StatusCode::kFailedPrecondition);
  // A server that owns no slice (UINT64_MAX) does not hold the others back.
  absl::StatusOr<std::vector<ToServer>> out = f.core.Resume({UINT64_MAX, 3});
  CATCH_REQUIRE(out.ok());
  CATCH_CHECK(f.core.start_version() == 3);
}

// --- A 16-bit wire.
struct WireFixture {
  explicit WireFixture(WireDType dtype)
      : plan(TestPlan()),
        params(plan.total_params(), -1.0f),
        grads(plan.total_params(), 0.0f),
        tracker(static_cast<int>(plan.slices().size())),
        core({.rank = 0, .num_servers = 2, .values_on_push = true, .wire_dtype = dtype}, plan,
             params.data(), grads.data(), &tracker) {
    for (size_t i = 0; i < grads.size(); ++i) grads[i] = 1e-3f * (static_cast<float>(i) + 0.37f);
  }
  SlicePlan plan;
  std::vector<float> params;
  std::vector<float> grads;
  VersionTracker tracker;
  WorkerCore core;
};

CATCH_TEST_CASE("on a 16-bit wire a gradient is 2 bytes a value, initial values stay 4") {
  for (WireDType dtype : {WireDType::kBFloat16, WireDType::kFloat16}) {
    CATCH_CAPTURE(WireDTypeName(dtype));
    WireFixture f(dtype);
    absl::StatusOr<std::vector<ToServer>> inits = f.core.Start({0, 0});
    CATCH_REQUIRE(inits.ok());
    CATCH_CHECK((*inits)[0].bytes == 4 * 4);  // slice 0: 4 values of float32
    CATCH_CHECK((*inits)[0].message.encoding.dtype == WireDType::kFloat32);
    CATCH_CHECK_FALSE((*inits)[0].message.encoding.scale_exponent.has_value());
    absl::StatusOr<ToServer> g = f.core.Gradient(3, 0);
    CATCH_REQUIRE(g.ok());
    CATCH_CHECK(g->bytes == 3 * 2);  // slice 3: 3 values of 2 bytes
    const ValueEncoding& e = g->message.encoding;
    CATCH_CHECK(e.dtype == dtype);
    // float16: the scale of the whole slice 3 (values 10..12 of the gradient buffer),
    // taken when the message is made: a writer needs nothing from the core.
    CATCH_CHECK(e.scale_exponent.has_value() == (dtype == WireDType::kFloat16));
    if (e.scale_exponent) {
      CATCH_CHECK(*e.scale_exponent == Float16ScaleExponent(f.grads.data() + 10, 3));
    }
    // The part [1, 3) a writer encodes from the message is the gradient's values 11 and 12.
    std::string got(4, '\0');
    EncodeValues(e.dtype, g->message.values + 1, 2, e.scale_exponent.value_or(0), got.data());
    std::string want(4, '\0');
    EncodeValues(dtype, f.grads.data() + 11, 2, e.scale_exponent.value_or(0), want.data());
    CATCH_CHECK(got == want);
  }
}

CATCH_TEST_CASE("16-bit values from a server are decoded into the float32 parameters") {
  for (WireDType dtype : {WireDType::kBFloat16, WireDType::kFloat16}) {
    CATCH_CAPTURE(WireDTypeName(dtype));
    WireFixture f(dtype);
    const std::vector<float> values = {0.1f, -2.5e-4f, 3.0f, 1234.5f};
    const std::optional<int> scale =
        dtype == WireDType::kFloat16 ? std::optional<int>(Float16ScaleExponent(values.data(), 4))
                                     : std::nullopt;
    std::string bytes(8, '\0');
    EncodeValues(dtype, values.data(), 4, scale.value_or(0), bytes.data());
    std::vector<float> want(4);
    DecodeValues(dtype, bytes.data(), 4, scale.value_or(0), want.data());
    // Slice 0 (4 values, server 0) in two segments cut inside the second value.
    const std::vector<absl::string_view> segments = {absl::string_view(bytes.data(), 3),
                                                     absl::string_view(bytes.data() + 3, 5)};
    absl::StatusOr<bool> done = f.core.Params(
        0, 0, 1, 0, ReceivedValues{.segments = segments, .bytes = 8, .scale_exponent = scale});
    CATCH_REQUIRE(done.ok());
    CATCH_CHECK(*done);
    CATCH_CHECK(std::vector<float>(f.params.begin(), f.params.begin() + 4) == want);
    CATCH_CHECK(want != values);  // rounded
  }
}

CATCH_TEST_CASE("a server's 16-bit values that do not fit the stream are refused") {
  WireFixture bf(WireDType::kBFloat16);
  const std::string bytes(8, '\0');
  // An odd byte count.
  absl::StatusOr<bool> r = bf.core.Params(0, 0, 1, 0, bytes.data(), 7);
  CATCH_CHECK(absl::IsInternal(r.status()));
  CATCH_CHECK(Mentions(r.status(), "sent slice 0 (4 values) with 7 bytes of bfloat16"));
  // float32 values of the slice: 16 bytes are 8 values, more than the slice's 4.
  const std::string f32(16, '\0');
  r = bf.core.Params(0, 0, 1, 0, f32.data(), 16);
  CATCH_CHECK(Mentions(r.status(), "with 16 bytes of bfloat16"));
  // A scale on a bfloat16 stream (the words of the one check, CheckScaleExponent).
  r = bf.core.Params(0, 0, 1, 0, bytes.data(), 8, 2);
  CATCH_CHECK(Mentions(r.status(), "values of slice 0: a scale_exponent on a bfloat16 stream"));
  // float16 without a scale, or with one out of range.
  WireFixture half(WireDType::kFloat16);
  r = half.core.Params(0, 0, 1, 0, bytes.data(), 8);
  CATCH_CHECK(Mentions(r.status(), "values of slice 0: no scale_exponent on a float16 stream"));
  r = half.core.Params(0, 0, 1, 0, bytes.data(), 8, -101);
  CATCH_CHECK(Mentions(r.status(), "scale_exponent -101 is out of range; allowed -100..100"));
  // Nothing changed: the parameters and the tracker are as before.
  CATCH_CHECK(bf.params == std::vector<float>(bf.params.size(), -1.0f));
  CATCH_CHECK(bf.tracker.Missing(0, 1, 1) == 1);
  CATCH_CHECK(half.tracker.Missing(0, 1, 1) == 1);
}

}  // namespace
}  // namespace p3
