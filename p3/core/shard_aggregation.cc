// ParameterShard's aggregation and update: initial values, gradients summed in rank
// order and applied, pulls, and the snapshot each new version is sent as.
#include "p3/core/parameter_shard.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "p3/base/status_macros.h"
#include "p3/core/wire_dtype.h"

namespace p3 {
namespace {

// Every one of the n values is finite. Branch-free per value (x - x is 0 exactly for
// finite x, NaN for an infinity or a NaN), so that GCC vectorises it.
bool AllFinite(const float* values, int64_t n) {
  float acc = 0;
  for (int64_t i = 0; i < n; ++i) acc += values[i] - values[i];
  return acc == 0;  // false for NaN
}

// sum[j] += g[j] for j < len. With len a compile-time constant GCC vectorises it at -O2
// (its cheapest cost model leaves loops of unknown count scalar).
template <typename Len>
inline void AddBlock(const float* __restrict g, Len len, float* __restrict sum) {
  for (int64_t j = 0; j < len; ++j) sum[j] += g[j];
}

// sum[i] += g[i] for i < n, in vectorised blocks.
void AddTo(const float* g, int64_t n, float* sum) {
  constexpr int64_t kBlock = 256;
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    AddBlock(g + i, std::integral_constant<int64_t, kBlock>{}, sum + i);
  }
  if (i < n) AddBlock(g + i, n - i, sum + i);
}

// The values of a gradient part read a block at a time, decoded as ReadPart decodes them
// all at once: from a received message's segments (a value cut between two of them put
// together on its own), or rounded to the wire from float32 values of any alignment. The
// sum and the update take them this way instead of from a decoded copy of the whole part.
class PartValues final : public TermSource {
 public:
  PartValues(WireDType dtype, const std::vector<absl::string_view>* segments, const float* from,
             int scale_exponent)
      : dtype_(dtype), from_(from), scale_exponent_(scale_exponent) {
    if (segments != nullptr) reader_.emplace(dtype, segments, scale_exponent);
  }

  void Next(int64_t n, float* out) override {
    if (reader_.has_value()) {
      reader_->Read(n, out);
      return;
    }
    RoundToWire(dtype_, from_, n, scale_exponent_, out);
    from_ += n;
  }

  void Skip(int64_t n) {
    if (reader_.has_value()) {
      reader_->Skip(n);
    } else {
      from_ += n;
    }
  }

 private:
  const WireDType dtype_;
  std::optional<SegmentReader> reader_;
  const float* from_;
  const int scale_exponent_;
};

// sum[i] += the next n values of `g`, a block at a time through a buffer that stays in L1.
void AddFrom(PartValues* g, int64_t n, float* sum) {
  constexpr int64_t kBlock = 256;
  float block[kBlock];
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    g->Next(kBlock, block);
    AddBlock(block, std::integral_constant<int64_t, kBlock>{}, sum + i);
  }
  if (i < n) {
    g->Next(n - i, block);
    AddBlock(block, n - i, sum + i);
  }
}

// A part of `n` values at `offset` must continue the `received` values so far of a slice
// of `length`, without gap or overlap, and carry at least one value.
absl::Status CheckPart(const char* what, int slice_id, int64_t length, int64_t received,
                       int64_t offset, int64_t n) {
  if (n < 1 || offset < 0 || n > length - offset) {
    return absl::InvalidArgumentError(absl::StrCat(what, " of slice ", slice_id, ": ", n,
                                                   " values at offset ", offset,
                                                   " do not fit the slice's ", length));
  }
  if (offset != received) {
    return absl::InvalidArgumentError(absl::StrCat(what, " of slice ", slice_id,
                                                   ": a part at offset ", offset, "; expected ",
                                                   received, " (parts must come in order)"));
  }
  return absl::OkStatus();
}

}  // namespace

void ParameterShard::AppendParams(int slice_id, const SliceState& s, int rank,
                                  std::vector<ToWorker>* out) const {
  ToWorker& m = out->emplace_back();
  m.rank = rank;
  m.priority = s.priority;
  m.bytes = s.length * static_cast<int64_t>(BytesPerValue(options_.wire_dtype));
  m.message.kind = Downstream::Kind::kParams;
  m.message.slice_id = slice_id;
  m.message.version = s.version;
  m.message.offset = s.offset;
  m.message.values = s.snapshot;
}

void ParameterShard::AppendAck(int slice_id, const SliceState& s, int rank, uint64_t iteration,
                               std::vector<ToWorker>* out) {
  ToWorker& m = out->emplace_back();
  m.rank = rank;
  m.priority = s.priority;
  m.message.kind = Downstream::Kind::kAck;
  m.message.slice_id = slice_id;
  m.message.iteration = iteration;
}

void ParameterShard::TakeSnapshot(SliceState* s) const {
  // Encoded once per version, whatever the number of workers it goes to.
  std::shared_ptr<Snapshot> next = SnapshotStorage(s);
  next->Assign(s->params.data(), static_cast<int64_t>(s->params.size()));
  PublishSnapshot(s, std::move(next));
}

void ParameterShard::PublishSnapshot(SliceState* s, std::shared_ptr<Snapshot> next) {
  s->previous = std::move(s->snapshot);
  s->snapshot = std::move(next);
}

std::shared_ptr<Snapshot> ParameterShard::SnapshotStorage(SliceState* s) const {
  std::shared_ptr<Snapshot> next = std::move(s->previous);
  // use_count() 1: only this slice holds the storage, and nobody can take a new
  // reference without the slice's lock. The fence pairs with the release in the last
  // holder's decrement, so its reads of the old values happen before these writes.
  if (next != nullptr && next.use_count() == 1) {
    std::atomic_thread_fence(std::memory_order_acquire);
  } else if (s->spare != nullptr) {
    next = std::move(s->spare);  // only this slice has ever held it
  } else {
    next = std::make_shared<Snapshot>(options_.wire_dtype);
    ++snapshot_allocations_;
  }
  return next;
}

absl::StatusOr<std::vector<ToWorker>> ParameterShard::Init(int rank, int slice_id,
                                                           const float* values, int64_t n,
                                                           int64_t offset) {
  return InitFrom(rank, slice_id, Part{.n = n, .floats = values}, offset);
}

absl::StatusOr<std::vector<ToWorker>> ParameterShard::Init(
    int rank, int slice_id, const std::vector<absl::string_view>& segments, int64_t offset) {
  P3_ASSIGN_OR_RETURN(const int64_t n,
                      CountValues("initial values", slice_id, segments, WireDType::kFloat32));
  return InitFrom(rank, slice_id, Part{.n = n, .segments = &segments}, offset);
}

absl::StatusOr<std::vector<ToWorker>> ParameterShard::Init(int rank, int slice_id,
                                                           const SharedValues& shared, int64_t n,
                                                           int64_t offset) {
  return InitFrom(rank, slice_id, Part{.n = n, .flat = shared.params}, offset);
}

absl::StatusOr<std::vector<ToWorker>> ParameterShard::InitFrom(int rank, int slice_id,
                                                               const Part& part, int64_t offset) {
  if (rank != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("initial values from worker ", rank, "; only worker 0 sends them"));
  }
  P3_ASSIGN_OR_RETURN(SliceState* const found, Lookup(rank, slice_id, "initial values"));
  SliceState& s = *found;
  bool last = false;
  {
    absl::MutexLock slice_lock(&s.mu);
    if (s.initialized) {
      return absl::AlreadyExistsError(
          absl::StrCat("slice ", slice_id, " already has initial values"));
    }
    const int64_t n = part.n;
    P3_RETURN_IF_ERROR(CheckPart("initial values", slice_id, s.length, s.init_received, offset, n));
    if (options_.keep_values) {
      s.params.resize(s.length);
      s.sum.resize(s.length);  // here, so that the first gradients allocate nothing
      ReadPart(part, s, offset, WireDType::kFloat32, 0, s.params.data() + offset);
    }
    s.init_received = offset + n;
    if (s.init_received < s.length) return std::vector<ToWorker>{};
    if (options_.keep_values) TakeSnapshot(&s);
    s.initialized = true;
  }
  // Every slice is in: version 0 of all of them to every worker that has joined. The
  // ranks are taken in the same critical section as the count, so that a worker joining
  // right after gets version 0 from its Join and is not sent it a second time here.
  std::vector<int> ranks;
  std::vector<int> owned;
  {
    absl::MutexLock lock(&mu_);
    last = --uninitialized_ == 0;
    if (last) {
      ranks = JoinedRanksLocked();
      owned = plan_->server_slices(options_.server_index);
    }
  }
  if (!last) return std::vector<ToWorker>{};
  std::vector<ToWorker> out;
  for (int id : owned) {
    SliceState& t = *slices_[id];
    absl::MutexLock slice_lock(&t.mu);
    for (int r : ranks) {
      if (t.place[r] >= 0) AppendParams(id, t, r, &out);
    }
  }
  return out;
}

absl::StatusOr<std::vector<ToWorker>> ParameterShard::Gradient(int rank, int slice_id,
                                                               uint64_t iteration,
                                                               const float* values, int64_t n,
                                                               int64_t offset,
                                                               std::optional<int> scale_exponent) {
  std::vector<ToWorker> out;
  P3_RETURN_IF_ERROR(
      Gradient(rank, slice_id, iteration, values, n, offset, &out, scale_exponent));
  return out;
}

absl::Status ParameterShard::Gradient(int rank, int slice_id, uint64_t iteration,
                                      const float* values, int64_t n, int64_t offset,
                                      std::vector<ToWorker>* out,
                                      std::optional<int> scale_exponent) {
  return GradientFrom(rank, slice_id, iteration, Part{.n = n, .floats = values}, offset,
                      scale_exponent, out);
}

absl::Status ParameterShard::Gradient(int rank, int slice_id, uint64_t iteration,
                                      const std::vector<absl::string_view>& segments,
                                      int64_t offset, std::vector<ToWorker>* out,
                                      std::optional<int> scale_exponent) {
  P3_ASSIGN_OR_RETURN(const int64_t n,
                      CountValues("gradient", slice_id, segments, options_.wire_dtype));
  return GradientFrom(rank, slice_id, iteration, Part{.n = n, .segments = &segments}, offset,
                      scale_exponent, out);
}

absl::Status ParameterShard::Gradient(int rank, int slice_id, uint64_t iteration,
                                      const SharedValues& shared, int64_t n, int64_t offset,
                                      std::vector<ToWorker>* out,
                                      std::optional<int> scale_exponent) {
  return GradientFrom(rank, slice_id, iteration, Part{.n = n, .flat = shared.grads}, offset,
                      scale_exponent, out);
}

absl::StatusOr<int64_t> ParameterShard::CountValues(const char* what, int slice_id,
                                                    const std::vector<absl::string_view>& segments,
                                                    WireDType dtype) {
  size_t bytes = 0;
  for (const absl::string_view& segment : segments) bytes += segment.size();
  const size_t width = BytesPerValue(dtype);
  if (bytes % width != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " of slice ", slice_id, ": ", bytes, " bytes, not a whole number of ",
                     WireDTypeName(dtype), " values (", width, " bytes each)"));
  }
  return static_cast<int64_t>(bytes / width);
}

void ParameterShard::ReadPart(const Part& part, const SliceState& s, int64_t offset,
                              WireDType dtype, int scale_exponent, float* dest) {
  if (part.segments != nullptr) {
    // A value may straddle segments.
    DecodeSegments(dtype, *part.segments, scale_exponent, dest);
    return;
  }
  // Shared memory: only now, with the part checked against the slice, is the address formed.
  const float* from = PartFloats(part, s, offset);
  // float32: copied (any alignment); 16-bit: rounded as the wire would round them.
  RoundToWire(dtype, from, part.n, scale_exponent, dest);
}

absl::Status ParameterShard::CheckScale(int slice_id, std::optional<int> scale_exponent) const {
  absl::Status s = CheckScaleExponent(options_.wire_dtype, scale_exponent);
  if (s.ok()) return s;
  return absl::InvalidArgumentError(absl::StrCat("gradient of slice ", slice_id, ": ", s.message()));
}

const float* ParameterShard::DirectValues(const Part& part, const SliceState& s,
                                          int64_t offset) const {
  if (part.segments != nullptr || options_.wire_dtype != WireDType::kFloat32) return nullptr;
  const float* from = PartFloats(part, s, offset);
  if (from == nullptr || reinterpret_cast<uintptr_t>(from) % alignof(float) != 0) return nullptr;
  return from;
}

void ParameterShard::TakeGradientValues(const Part& part, SliceState* s, int rank,
                                        int64_t offset, int64_t skip,
                                        int scale_exponent) const {
  const int64_t n = part.n;
  const int place = s->place[rank];  // rank order among the present ranks
  const bool adds = place == s->folded && place > 0;
  float* dest;  // where the values are written when they are not added
  if (place == s->folded) {
    // Sized by Init or a re-plan; a shard restored from a checkpoint sizes it here once.
    if (static_cast<int64_t>(s->sum.size()) != s->length) s->sum.resize(s->length);
    dest = s->sum.data();  // rank 0: the first term
  } else {
    // Allocates the first time this rank comes before a rank ranked above it.
    s->early[rank].resize(s->length);
    dest = s->early[rank].data();
  }
  if (!adds && skip == 0) {
    // Decoded straight into place.
    ReadPart(part, *s, offset, options_.wire_dtype, scale_exponent, dest + offset);
    return;
  }
  if (const float* values = DirectValues(part, *s, offset); values != nullptr) {
    if (adds) {
      AddTo(values + skip, n - skip, dest + offset + skip);
    } else {
      std::copy_n(values + skip, n - skip, dest + offset + skip);
    }
    return;
  }
  // Decoded a block at a time from where the values are (a received message's buffers).
  PartValues values(options_.wire_dtype, part.segments, PartFloats(part, *s, offset),
                    scale_exponent);
  values.Skip(skip);
  if (adds) {
    AddFrom(&values, n - skip, dest + offset + skip);
  } else {
    values.Next(n - skip, dest + offset + skip);
  }
}

void ParameterShard::FoldEarly(SliceState* s) {
  const int workers = static_cast<int>(s->present.size());
  while (s->folded < workers) {
    const int f = s->present[s->folded];  // the rank at that place
    const int64_t available = s->has[f] ? s->length : s->received[f];
    // The first present rank never waits (it is always `folded` when it arrives), so f is
    // a later one here: added.
    if (s->in_sum[f] < available && !s->early[f].empty()) {
      AddTo(s->early[f].data() + s->in_sum[f], available - s->in_sum[f],
            s->sum.data() + s->in_sum[f]);
    }
    s->in_sum[f] = std::max(s->in_sum[f], available);
    if (s->in_sum[f] < s->length) return;
    ++s->folded;
  }
}

absl::Status ParameterShard::GradientFrom(int rank, int slice_id, uint64_t iteration,
                                          const Part& part, int64_t offset,
                                          std::optional<int> scale_exponent,
                                          std::vector<ToWorker>* out) {
  const int64_t n = part.n;
  P3_RETURN_IF_ERROR(CheckScale(slice_id, scale_exponent));
  P3_ASSIGN_OR_RETURN(SliceState* const found, Lookup(rank, slice_id, "gradient"));
  SliceState& s = *found;
  const bool values_on_push = signature_values_on_push();
  std::optional<SliceCheckpoint> captured;
  uint64_t captured_version = 0;
  std::optional<uint64_t> advanced;  // the slice's new version, when this completed it
  {
    absl::MutexLock slice_lock(&s.mu);
    if (s.retired) return RetiredSlice("gradient", slice_id);
    if (!s.initialized) {
      return absl::FailedPreconditionError(
          absl::StrCat("gradient for slice ", slice_id, " before its initial values"));
    }
    if (iteration + 1 == s.version && s.catch_up[rank]) {
      // A rejoined worker's gradient of the iteration it resumed at, for a slice that
      // summed the dead process's (the same values: same parameters, same batch) already.
      // Its parts are checked and counted, not stored; the last one is answered.
      P3_RETURN_IF_ERROR(CheckPart("gradient", slice_id, s.length, s.received[rank], offset, n));
      s.received[rank] = offset + n;
      if (s.received[rank] < s.length) return absl::OkStatus();
      s.received[rank] = 0;
      s.catch_up[rank] = false;
      if (values_on_push) {
        AppendParams(slice_id, s, rank, out);
      } else {
        AppendAck(slice_id, s, rank, iteration, out);
      }
      return absl::OkStatus();
    }
    if (iteration != s.version) {
      return absl::InvalidArgumentError(
          absl::StrCat("gradient of slice ", slice_id, " for iteration ", iteration,
                       " from worker ", rank, "; the slice is at iteration ", s.version));
    }
    const int place = s.place[rank];
    if (place < 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "gradient of slice ", slice_id, " for iteration ", iteration, " from worker ", rank,
          ", which is not present in that iteration (workers ", DescribeRanks(s.present), ")"));
    }
    if (s.has[rank]) {
      return absl::AlreadyExistsError(absl::StrCat("duplicate gradient of slice ", slice_id,
                                                   " for iteration ", iteration, " from worker ",
                                                   rank));
    }
    P3_RETURN_IF_ERROR(CheckPart("gradient", slice_id, s.length, s.received[rank], offset, n));
    // Values before in_sum[rank] are in the sum already (a rejoined worker's resend).
    const int64_t skip = std::clamp<int64_t>(s.in_sum[rank] - offset, 0, n);
    const int workers = static_cast<int>(s.present.size());
    // The last rank's whole gradient, with every other one in the sum: it is added inside
    // the update's pass (ApplySum's second term) instead of in a pass of its own. (Not
    // with skip_nonfinite, which checks the whole sum first.)
    // Read where it is when it needs no decoding, else (a received message's buffers)
    // decoded a block at a time inside that pass (last_values).
    const float* last_term = nullptr;
    std::optional<PartValues> last_values;
    if (options_.keep_values && !options_.skip_nonfinite && place == workers - 1 &&
        s.folded == place && s.count == workers - 1 && offset == 0 && n == s.length &&
        skip == 0) {
      last_term = DirectValues(part, s, offset);
      if (last_term == nullptr) {
        last_values.emplace(options_.wire_dtype, part.segments, PartFloats(part, s, offset),
                            scale_exponent.value_or(0));
      }
    } else if (options_.keep_values && skip < n) {
      TakeGradientValues(part, &s, rank, offset, skip, scale_exponent.value_or(0));
    }
    if (place == s.folded) s.in_sum[rank] = std::max(s.in_sum[rank], offset + n);
    s.received[rank] = offset + n;
    if (s.received[rank] < s.length) return absl::OkStatus();  // more parts to come
    s.received[rank] = 0;
    s.has[rank] = true;
    ++s.count;
    FoldEarly(&s);
    if (!values_on_push) {
      AppendAck(slice_id, s, rank, iteration, out);
    }
    if (s.count < workers) return absl::OkStatus();
    if (s.folded != workers) {
      return absl::InternalError(absl::StrCat("slice ", slice_id, ": every gradient of iteration ",
                                              iteration, " is in, but only ", s.folded,
                                              " are summed"));
    }

    // All gradients are in, summed in rank order so that the result does not depend on
    // arrival order: their mean and the update in one pass (SliceOptimizer::ApplySum), at
    // the scheduled rate of this iteration: the version is the iteration whose gradients
    // these are, also after a restore, so a resumed run keeps its schedule. With
    // skip_nonfinite, a sum with an infinity or a NaN (from any gradient, or one that
    // overflowed in the sum) changes nothing.
    // The new version's snapshot: on a float32 wire written by the optimizer's pass as it
    // updates each block; otherwise encoded from the values after it (TakeSnapshot).
    std::shared_ptr<Snapshot> written;
    if (options_.keep_values) {
      const float* terms[2] = {s.sum.data(), last_term};
      int num_terms = 1;
      if (last_term != nullptr) {
        if (workers == 1) {
          terms[0] = last_term;  // the only gradient, read where it is
        } else {
          num_terms = 2;
        }
      } else if (last_values.has_value() && workers == 1) {
        num_terms = 0;  // the only gradient, decoded into the pass's blocks
      }
      if (!options_.skip_nonfinite || AllFinite(s.sum.data(), s.length)) {
        float* values_out = nullptr;
        if (options_.wire_dtype == WireDType::kFloat32) {
          written = SnapshotStorage(&s);
          values_out = written->Float32Storage(s.length);
        }
        optimizer_.ApplySum(s.params.data(), terms, num_terms, workers, s.length, &s.opt,
                            optimizer_.LearningRate(static_cast<int64_t>(s.version)),
                            values_out, last_values.has_value() ? &*last_values : nullptr);
      } else {
        ++skipped_updates_;
      }
    }
    ++s.version;
    advanced = s.version;
    s.has.assign(s.has.size(), false);
    s.in_sum.assign(s.in_sum.size(), 0);
    s.folded = 0;
    s.count = 0;
    AdvancePresent(&s);
    if (written != nullptr) {
      PublishSnapshot(&s, std::move(written));
    } else if (options_.keep_values) {
      TakeSnapshot(&s);
    }
    if (values_on_push) {
      for (int r : s.present) AppendParams(slice_id, s, r, out);
    } else {
      for (int r : s.pending_pulls) AppendParams(slice_id, s, r, out);
      s.pending_pulls.clear();  // keeps its capacity for the next iteration
    }
    if (options_.keep_values && options_.checkpoint_every > 0 &&
        s.version % options_.checkpoint_every == 0) {
      captured = SliceCheckpoint{slice_id, s.params, s.opt};
      captured_version = s.version;
    }
  }  // slice_lock
  // Outside the slice's lock: the last slice of a checkpoint hands it on.
  if (captured.has_value()) AddToCheckpoint(captured_version, *std::move(captured));
  // The values appended above keep their slice ids; a re-plan may switch after them.
  if (advanced.has_value()) SliceAdvanced(*advanced);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ToWorker>> ParameterShard::Pull(int rank, int slice_id,
                                                           uint64_t version) {
  P3_ASSIGN_OR_RETURN(SliceState* const found, Lookup(rank, slice_id, "pull"));
  SliceState& s = *found;
  absl::MutexLock slice_lock(&s.mu);
  if (s.retired) return RetiredSlice("pull", slice_id);
  if (!s.initialized) {
    return absl::FailedPreconditionError(
        absl::StrCat("pull of slice ", slice_id, " before its initial values"));
  }
  if (version == s.version && s.place[rank] >= 0) {
    std::vector<ToWorker> out;
    AppendParams(slice_id, s, rank, &out);
    return out;
  }
  // A rank that a membership change makes present at the next version has no gradient
  // of this one; its pull of the next waits like the others'.
  const bool joins_next = !s.upcoming.empty() && s.upcoming.front().from_iteration == version &&
                          s.place[rank] < 0 &&
                          std::binary_search(s.upcoming.front().present.begin(),
                                             s.upcoming.front().present.end(), rank);
  if (version == s.version + 1 && (s.has[rank] || joins_next)) {
    for (int r : s.pending_pulls) {
      if (r == rank) {
        return absl::AlreadyExistsError(
            absl::StrCat("duplicate pull of slice ", slice_id, " from worker ", rank));
      }
    }
    s.pending_pulls.push_back(rank);
    return std::vector<ToWorker>{};
  }
  return absl::InvalidArgumentError(absl::StrCat("pull of slice ", slice_id, " version ", version,
                                                 " from worker ", rank,
                                                 "; the slice is at version ", s.version));
}

}  // namespace p3
