#include "p3/core/slice_plan.h"

#include <catch2/catch.hpp>
#include <algorithm>
#include <utility>
#include <vector>

namespace p3 {
namespace {

SlicePlanOptions Sliced(int64_t slice_params, int servers) {
  SlicePlanOptions o;
  o.granularity = Granularity::kSliced;
  o.slice_params = slice_params;
  o.num_servers = servers;
  return o;
}

CATCH_TEST_CASE("a tensor that is an exact multiple of the slice size is cut into equal slices") {
  auto plan = SlicePlan::Create({{"w", 120}}, Sliced(40, 1));
  CATCH_REQUIRE(plan.ok());
  CATCH_REQUIRE(plan->slices().size() == 3);
  for (int i = 0; i < 3; ++i) {
    CATCH_CHECK(plan->slices()[i].offset == 40 * i);
    CATCH_CHECK(plan->slices()[i].length == 40);
  }
}

CATCH_TEST_CASE("a tensor smaller than a slice is one slice of its own size") {
  auto plan = SlicePlan::Create({{"b", 7}}, Sliced(40000, 2));
  CATCH_REQUIRE(plan.ok());
  CATCH_REQUIRE(plan->slices().size() == 1);
  CATCH_CHECK(plan->slices()[0].length == 7);
}

CATCH_TEST_CASE("the last slice of a tensor is short and slices never span two tensors") {
  auto plan = SlicePlan::Create({{"w", 100}, {"b", 10}}, Sliced(40, 1));
  CATCH_REQUIRE(plan.ok());
  const auto& s = plan->slices();
  CATCH_REQUIRE(s.size() == 4);
  CATCH_CHECK(s[2].offset == 80);
  CATCH_CHECK(s[2].length == 20);
  CATCH_CHECK(s[3].tensor == 1);
  CATCH_CHECK(s[3].offset == 100);
  CATCH_CHECK(s[3].length == 10);
  CATCH_CHECK(plan->total_params() == 110);
  CATCH_CHECK(plan->tensor_slices(0) == std::make_pair(0, 3));
  CATCH_CHECK(plan->tensor_slices(1) == std::make_pair(3, 4));
  CATCH_CHECK(plan->tensors_slices(0, 2) == std::make_pair(0, 4));
  CATCH_CHECK(plan->tensors_slices(2, 2) == std::make_pair(4, 4));
  CATCH_CHECK_FALSE(plan->is_pack(3));
  CATCH_CHECK(plan->tensor_offset(1) == 100);
}

CATCH_TEST_CASE("slice i of the stream goes to server i mod S, continuing across tensors") {
  auto plan = SlicePlan::Create({{"a", 100}, {"b", 10}, {"c", 50}}, Sliced(40, 3));
  CATCH_REQUIRE(plan.ok());
  const auto& s = plan->slices();
  CATCH_REQUIRE(s.size() == 6);
  for (int i = 0; i < 6; ++i) CATCH_CHECK(s[i].server == i % 3);
  CATCH_CHECK(plan->server_slices(0) == std::vector<int>{0, 3});
  CATCH_CHECK(plan->server_slices(1) == std::vector<int>{1, 4});
}

// The server of every parameter of `plan`, in flat order.
std::vector<int> OwnerOfEachParameter(const SlicePlan& plan) {
  std::vector<int> owner(plan.total_params(), -1);
  for (const Slice& slice : plan.slices()) {
    for (int64_t i = 0; i < slice.length; ++i) owner[slice.offset + i] = slice.server;
  }
  return owner;
}

CATCH_TEST_CASE("with ownership stripes the stripes go round-robin and their slices stay on the stripe's server") {
  SlicePlanOptions o = Sliced(40, 2);
  o.owner_params = 80;
  // a: stripes [0,80) [80,100); b: [0,10); c: [0,50).
  auto plan = SlicePlan::Create({{"a", 100}, {"b", 10}, {"c", 50}}, o);
  CATCH_REQUIRE(plan.ok());
  const auto& s = plan->slices();
  CATCH_REQUIRE(s.size() == 6);
  const std::vector<std::pair<int64_t, int>> want = {{0, 0}, {40, 0}, {80, 1},
                                                     {100, 0}, {110, 1}, {150, 1}};
  for (size_t i = 0; i < want.size(); ++i) {
    CATCH_CAPTURE(i);
    CATCH_CHECK(s[i].offset == want[i].first);
    CATCH_CHECK(s[i].server == want[i].second);
  }
  CATCH_CHECK(s[5].length == 10);  // c's stripe [0,50) cut into 40 + 10
  CATCH_CHECK(plan->server_slices(0) == std::vector<int>{0, 1, 3});
}

CATCH_TEST_CASE("every slice size within the same stripes leaves each parameter on its server") {
  SlicePlanOptions o = Sliced(1000, 3);
  o.owner_params = 2000;
  const std::vector<TensorEntry> tensors = {{"a", 12345}, {"b", 7}, {"c", 4001}, {"d", 2000}};
  auto base = SlicePlan::Create(tensors, o);
  CATCH_REQUIRE(base.ok());
  const std::vector<int> owners = OwnerOfEachParameter(*base);
  for (int64_t size : {1, 7, 500, 999, 1000, 1999, 2000, 5000}) {
    CATCH_CAPTURE(size);
    absl::StatusOr<SlicePlan> other = base->WithSliceParams(size);
    CATCH_REQUIRE(other.ok());
    CATCH_CHECK(OwnerOfEachParameter(*other) == owners);
    CATCH_CHECK(other->options().owner_params == 2000);
    for (const Slice& slice : other->slices()) CATCH_CHECK(slice.length <= std::min<int64_t>(size, 2000));
  }
  // Without stripes a different slice size moves parameters between servers.
  o.owner_params = 0;
  auto plain = SlicePlan::Create(tensors, o);
  CATCH_REQUIRE(plain.ok());
  CATCH_CHECK(OwnerOfEachParameter(*plain->WithSliceParams(2000)) != OwnerOfEachParameter(*plain));
}

CATCH_TEST_CASE("stripes of the slice size plan exactly as no stripes") {
  SlicePlanOptions o = Sliced(40, 3);
  auto plain = SlicePlan::Create({{"a", 100}, {"b", 10}, {"c", 50}}, o);
  o.owner_params = 40;
  auto striped = SlicePlan::Create({{"a", 100}, {"b", 10}, {"c", 50}}, o);
  CATCH_REQUIRE(plain.ok());
  CATCH_REQUIRE(striped.ok());
  CATCH_REQUIRE(plain->slices().size() == striped->slices().size());
  for (size_t i = 0; i < plain->slices().size(); ++i) {
    CATCH_CHECK(plain->slices()[i].offset == striped->slices()[i].offset);
    CATCH_CHECK(plain->slices()[i].server == striped->slices()[i].server);
  }
}

CATCH_TEST_CASE("priority is the tensor's forward index, so the first layer is most urgent") {
  auto plan = SlicePlan::Create({{"a", 100}, {"b", 10}}, Sliced(40, 2));
  CATCH_REQUIRE(plan.ok());
  for (const Slice& s : plan->slices()) CATCH_CHECK(s.priority == s.tensor);
}

CATCH_TEST_CASE("tensor granularity keeps small tensors whole and splits large ones evenly") {
  SlicePlanOptions o;
  o.granularity = Granularity::kTensor;
  o.split_threshold = 1000;
  o.num_servers = 2;
  auto plan = SlicePlan::Create({{"big", 2001}, {"small", 1000}, {"other", 5}}, o);
  CATCH_REQUIRE(plan.ok());
  const auto& s = plan->slices();
  CATCH_REQUIRE(s.size() == 4);
  CATCH_CHECK(s[0].length == 1000);
  CATCH_CHECK(s[1].length == 1001);
  CATCH_CHECK(s[0].server != s[1].server);
  CATCH_CHECK(s[2].length == 1000);  // at the threshold: not split
  CATCH_CHECK(s[3].length == 5);
}

CATCH_TEST_CASE("tensor granularity on one server never splits") {
  SlicePlanOptions o;
  o.granularity = Granularity::kTensor;
  o.split_threshold = 10;
  auto plan = SlicePlan::Create({{"big", 2001}}, o);
  CATCH_REQUIRE(plan.ok());
  CATCH_CHECK(plan->slices().size() == 1);
}

CATCH_TEST_CASE("bad plan options and empty tensors are refused with the field named") {
  auto a = SlicePlan::Create({{"w", 10}}, Sliced(0, 1));
  CATCH_REQUIRE_FALSE(a.ok());
  CATCH_CHECK(a.status().message().find("slice_params") != std::string::npos);
  auto b = SlicePlan::Create({{"w", 10}}, Sliced(10, 0));
  CATCH_REQUIRE_FALSE(b.ok());
  CATCH_CHECK(b.status().message().find("num_servers") != std::string::npos);
  CATCH_CHECK_FALSE(SlicePlan::Create({}, Sliced(10, 1)).ok());
  CATCH_CHECK_FALSE(SlicePlan::Create({{"w", 0}}, Sliced(10, 1)).ok());
  SlicePlanOptions o = Sliced(10, 1);
  o.owner_params = -5;
  auto c = SlicePlan::Create({{"w", 10}}, o);
  CATCH_REQUIRE_FALSE(c.ok());
  CATCH_CHECK(c.status().message().find("owner_params") != std::string::npos);
  o.owner_params = 0;
  o.pack_params = -1;
  auto d = SlicePlan::Create({{"w", 10}}, o);
  CATCH_REQUIRE_FALSE(d.ok());
  CATCH_CHECK(d.status().message().find("pack_params") != std::string::npos);
}

// A model's small tensors around a large one: conv.w (500), bn.w, bn.b (8 each), fc.w
// (30), fc.b (4), then out.w (500) and out.b (4).
std::vector<TensorEntry> SmallAndLarge() {
  return {{"conv.w", 500}, {"bn.w", 8}, {"bn.b", 8}, {"fc.w", 30},
          {"fc.b", 4},     {"out.w", 500}, {"out.b", 4}};
}

CATCH_TEST_CASE("with packs, consecutive small tensors share one slice up to pack_params values") {
  SlicePlanOptions o = Sliced(200, 2);
  o.pack_params = 50;
  auto plan = SlicePlan::Create(SmallAndLarge(), o);
  CATCH_REQUIRE(plan.ok());
  const auto& s = plan->slices();
  // conv.w in 3 slices, one pack, out.w in 3 slices, out.b alone.
  CATCH_REQUIRE(s.size() == 3 + 1 + 3 + 1);
  const Slice& pack = s[3];
  CATCH_CHECK(pack.tensor == 1);
  CATCH_CHECK(pack.last_tensor == 4);  // bn.w, bn.b, fc.w, fc.b: 50 values, at the bound
  CATCH_CHECK(pack.offset == 500);
  CATCH_CHECK(pack.length == 50);
  CATCH_CHECK(pack.priority == 1);  // its first tensor's: the forward pass needs it first
  CATCH_CHECK(plan->is_pack(3));
  for (int t = 1; t <= 4; ++t) CATCH_CHECK(plan->tensor_slices(t) == std::make_pair(3, 4));
  // A small tensor after a large one, with no small neighbour: a slice of its own.
  CATCH_CHECK(s[7].tensor == 6);
  CATCH_CHECK(s[7].last_tensor == 6);
  CATCH_CHECK_FALSE(plan->is_pack(7));
  // A range of tensors holds the pack that holds any of them: on both sides of a bound.
  CATCH_CHECK(plan->tensors_slices(0, 2) == std::make_pair(0, 4));
  CATCH_CHECK(plan->tensors_slices(2, 5) == std::make_pair(3, 4));
  CATCH_CHECK(plan->tensors_slices(3, 3) == std::make_pair(3, 3));
  // Every value is in exactly one slice, in order.
  int64_t at = 0;
  for (const Slice& slice : s) {
    CATCH_CHECK(slice.offset == at);
    at += slice.length;
  }
  CATCH_CHECK(at == plan->total_params());
  // Round robin: the pack counts as one slice.
  CATCH_CHECK(pack.server == 1);
  CATCH_CHECK(s[4].server == 0);
}

CATCH_TEST_CASE("a pack is never cut and keeps its server whatever the slice size") {
  SlicePlanOptions o = Sliced(10, 3);
  o.owner_params = 100;
  o.pack_params = 50;
  auto plan = SlicePlan::Create(SmallAndLarge(), o);
  CATCH_REQUIRE(plan.ok());
  for (int64_t size : {5, 20, 100, 1000}) {
    auto other = plan->WithSliceParams(size);
    CATCH_REQUIRE(other.ok());
    const auto [first, last] = other->tensor_slices(2);
    CATCH_REQUIRE(last == first + 1);
    const Slice& pack = other->slices()[first];
    CATCH_CHECK(pack.offset == 500);
    CATCH_CHECK(pack.length == 50);
    // Ownership stays: each value on the same server in both plans.
    for (const Slice& a : plan->slices()) {
      for (const Slice& b : other->slices()) {
        if (b.offset < a.offset + a.length && a.offset < b.offset + b.length) {
          CATCH_CHECK(a.server == b.server);
        }
      }
    }
  }
}

CATCH_TEST_CASE("packs that would leave a server without a slice are left out") {
  // Three small tensors, one pack of 30: server 1 would own nothing.
  SlicePlanOptions o = Sliced(8, 2);
  o.pack_params = 100;
  auto plan = SlicePlan::Create({{"a", 10}, {"b", 10}, {"c", 10}}, o);
  CATCH_REQUIRE(plan.ok());
  CATCH_CHECK(plan->slices().size() == 6);  // each tensor in slices of 8, as without packs
  CATCH_CHECK_FALSE(plan->is_pack(0));
  CATCH_CHECK(plan->server_slices(1).size() == 3);
  CATCH_CHECK(plan->options().pack_params == 100);
  // With a slice for each server the packs stay.
  auto two = SlicePlan::Create({{"a", 10}, {"b", 10}, {"big", 500}, {"c", 10}, {"d", 10}}, o);
  CATCH_REQUIRE(two.ok());
  CATCH_CHECK(two->is_pack(0));
  // One server: a single pack is fine.
  o.num_servers = 1;
  auto one = SlicePlan::Create({{"a", 10}, {"b", 10}, {"c", 10}}, o);
  CATCH_REQUIRE(one.ok());
  CATCH_CHECK(one->slices().size() == 1);
}

CATCH_TEST_CASE("without packs, or with tensor granularity, pack_params changes nothing") {
  SlicePlanOptions o = Sliced(200, 2);
  auto plain = SlicePlan::Create(SmallAndLarge(), o);
  o.pack_params = 1;  // no tensor has fewer than 1 value
  auto one = SlicePlan::Create(SmallAndLarge(), o);
  CATCH_REQUIRE(plain.ok());
  CATCH_REQUIRE(one.ok());
  CATCH_REQUIRE(one->slices().size() == plain->slices().size());
  for (size_t i = 0; i < plain->slices().size(); ++i) {
    CATCH_CHECK(one->slices()[i].offset == plain->slices()[i].offset);
    CATCH_CHECK(one->slices()[i].server == plain->slices()[i].server);
  }
  SlicePlanOptions t;
  t.granularity = Granularity::kTensor;
  t.num_servers = 2;
  t.pack_params = 1000;
  auto tensor = SlicePlan::Create(SmallAndLarge(), t);
  CATCH_REQUIRE(tensor.ok());
  CATCH_CHECK(tensor->slices().size() == SmallAndLarge().size());
}

}  // namespace
}  // namespace p3

namespace p3 {
namespace {

CATCH_TEST_CASE("WriteInParts covers a slice with bounded parts in order and stops on failure") {
  std::vector<std::pair<int64_t, int64_t>> parts;
  auto record = [&](int64_t offset, int64_t count) {
    parts.push_back({offset, count});
    return true;
  };
  CATCH_CHECK(WriteInParts(10, 4, record));
  CATCH_CHECK(parts == std::vector<std::pair<int64_t, int64_t>>{{0, 4}, {4, 4}, {8, 2}});
  parts.clear();
  CATCH_CHECK(WriteInParts(8, 8, record));  // fits: one part
  CATCH_CHECK(parts == std::vector<std::pair<int64_t, int64_t>>{{0, 8}});
  parts.clear();
  CATCH_CHECK(WriteInParts(3, 0, record));  // a bound below 1 counts as 1
  CATCH_CHECK(parts.size() == 3);
  int calls = 0;
  CATCH_CHECK_FALSE(WriteInParts(10, 4, [&](int64_t, int64_t) { return ++calls < 2; }));
  CATCH_CHECK(calls == 2);  // nothing after the failed part
}

}  // namespace
}  // namespace p3
