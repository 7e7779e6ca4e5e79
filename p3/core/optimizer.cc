#include "p3/core/optimizer.h"

#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace p3 {

namespace {

// "<field>: <value> is out of range; allowed <allowed>" when `ok` is false.
void Check(bool ok, const char* field, double value, const char* allowed,
           std::vector<std::string>* errors) {
  if (!ok)
    errors->push_back(absl::StrCat(field, ": ", value, " is out of range; allowed ", allowed));
}

}  // namespace

absl::Status ValidateOptimizerOptions(const OptimizerOptions& o) {
  std::vector<std::string> errors;
  Check(o.lr > 0 && std::isfinite(o.lr), "optimizer.lr", o.lr, "> 0 (finite)", &errors);
  Check(o.momentum >= 0 && o.momentum < 1, "optimizer.momentum", o.momentum, "[0, 1)", &errors);
  Check(o.dampening >= 0 && o.dampening <= 1, "optimizer.dampening", o.dampening, "[0, 1]",
        &errors);
  Check(o.weight_decay >= 0 && std::isfinite(o.weight_decay), "optimizer.weight_decay",
        o.weight_decay, ">= 0 (finite)", &errors);
  if (o.nesterov && (o.kind != OptimizerKind::kSgd || !(o.momentum > 0) || o.dampening != 0)) {
    errors.push_back(
        "optimizer.nesterov: true requires SGD with optimizer.momentum > 0 and no dampening");
  }
  Check(o.beta1 >= 0 && o.beta1 < 1, "optimizer.beta1", o.beta1, "[0, 1)", &errors);
  Check(o.beta2 >= 0 && o.beta2 < 1, "optimizer.beta2", o.beta2, "[0, 1)", &errors);
  Check(o.eps > 0 && std::isfinite(o.eps), "optimizer.eps", o.eps, "> 0 (finite)", &errors);
  const absl::Status schedule = ValidateLrSchedule(o.schedule);
  if (!schedule.ok()) errors.push_back(std::string(schedule.message()));
  if (errors.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
}

namespace {

// The fused pass works on blocks of this many values: the mean gradient of a block lives
// in a stack buffer that stays in L1, and every loop over a whole block has a trip count
// known at compile time, which GCC's -O2 cost model ("very cheap") requires to vectorise.
constexpr int64_t kBlock = 256;
using FullBlock = std::integral_constant<int64_t, kBlock>;

// Calls block(offset, length) for [0, n) in blocks: full ones with a constant length,
// then the remainder.
template <typename Fn>
void ForEachBlock(int64_t n, Fn block) {
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) block(i, FullBlock{});
  if (i < n) block(i, n - i);
}

// d[j] = (grads[0][j] + grads[1][j] + ... + grads[num_grads-1][j] + last's next value) /
// divisor, summed in that order; no division by 1 (ApplySum: one gradient that is already
// the sum); `last` may be null. The same float operations, in the same order, as summing
// whole slices rank by rank and then dividing.
template <typename Len>
inline void MeanBlock(const float* const* grads, int num_grads, TermSource* last, int divisor,
                      int64_t offset, Len len, float* __restrict d) {
  if (num_grads == 0) {
    last->Next(len, d);  // the only term, decoded straight into the block
  } else {
    const float* __restrict g0 = grads[0] + offset;
    for (int64_t j = 0; j < len; ++j) d[j] = g0[j];
  }
  for (int r = 1; r < num_grads; ++r) {
    const float* __restrict g = grads[r] + offset;
    for (int64_t j = 0; j < len; ++j) d[j] += g[j];
  }
  if (last != nullptr && num_grads > 0) {
    float t[kBlock];
    last->Next(len, t);
    for (int64_t j = 0; j < len; ++j) d[j] += t[j];
  }
  if (divisor > 1) {
    const float w = static_cast<float>(divisor);
    for (int64_t j = 0; j < len; ++j) d[j] /= w;
  }
}

// out[j] = p[j]: the block just updated, still in L1, to the snapshot.
template <typename Len>
inline void CopyBlock(const float* __restrict p, Len len, float* __restrict out) {
  for (int64_t j = 0; j < len; ++j) out[j] = p[j];
}

// d[j] += wd * p[j] (weight decay; the caller skips it when wd is 0).
template <typename Len>
inline void WeightDecayBlock(float wd, const float* __restrict p, Len len, float* __restrict d) {
  for (int64_t j = 0; j < len; ++j) d[j] += wd * p[j];
}

// out[j] = sqrt(in[j]). GCC does not vectorise std::sqrt under -fmath-errno (the
// default), so SSE's sqrtps does it on x86-64: correctly rounded like sqrtss, hence the
// same values.
inline void SqrtBlock(const float* __restrict in, int64_t len, float* __restrict out) {
  int64_t done = 0;
#if defined(__SSE2__)
  done = len - len % 4;
  for (int64_t j = 0; j < done; j += 4) _mm_storeu_ps(out + j, _mm_sqrt_ps(_mm_loadu_ps(in + j)));
#endif
  for (int64_t j = done; j < len; ++j) out[j] = std::sqrt(in[j]);
}

// p[j] += neg_lr * d[j]: SGD without momentum.
template <typename Len>
inline void PlainStepBlock(float neg_lr, const float* __restrict d, Len len, float* __restrict p) {
  for (int64_t j = 0; j < len; ++j) p[j] += neg_lr * d[j];
}

// SGD with momentum: the buffer, then the step (Nesterov or not).
template <typename Len>
inline void MomentumBlock(float momentum, float keep, bool first, bool nesterov, float neg_lr,
                          const float* __restrict d, Len len, float* __restrict buf,
                          float* __restrict p) {
  if (first) {
    for (int64_t j = 0; j < len; ++j) buf[j] = d[j];
  } else {
    for (int64_t j = 0; j < len; ++j) buf[j] = buf[j] * momentum + keep * d[j];
  }
  if (nesterov) {
    for (int64_t j = 0; j < len; ++j) p[j] += neg_lr * (d[j] + momentum * buf[j]);
  } else {
    for (int64_t j = 0; j < len; ++j) p[j] += neg_lr * buf[j];
  }
}

struct AdamConstants {
  float b1, one_minus_b1, b2, one_minus_b2, bias2_sqrt, eps, neg_step_size;
};

template <typename Len>
inline void AdamBlock(const AdamConstants& c, const float* __restrict g, Len len,
                      float* __restrict m, float* __restrict v, float* __restrict p) {
  for (int64_t j = 0; j < len; ++j) m[j] = m[j] * c.b1 + c.one_minus_b1 * g[j];
  for (int64_t j = 0; j < len; ++j) v[j] = v[j] * c.b2 + c.one_minus_b2 * g[j] * g[j];
  float root[kBlock];
  SqrtBlock(v, len, root);
  for (int64_t j = 0; j < len; ++j)
    p[j] += c.neg_step_size * (m[j] / (root[j] / c.bias2_sqrt + c.eps));
}

}  // namespace

void SliceOptimizer::ApplyMean(float* params, const float* const* grads, int num_grads, int64_t n,
                               SliceOptimizerState* state, double lr) const {
  // The mean of num_grads gradients is their rank-order sum divided by num_grads.
  ApplySum(params, grads, num_grads, num_grads, n, state, lr);
}

void SliceOptimizer::ApplySum(float* params, const float* const* terms, int num_terms,
                              int divisor, int64_t n, SliceOptimizerState* state, double lr,
                              float* values_out, TermSource* last) const {
  if (options_.kind == OptimizerKind::kSgd) {
    ApplySgd(params, terms, num_terms, last, divisor, n, state, lr, values_out);
  } else {
    ApplyAdam(params, terms, num_terms, last, divisor, n, state, lr, values_out);
  }
}

// torch::optim::SGD, per element, in float as libtorch computes it:
//   d = grad + wd * param;  buf = first ? d : buf * momentum + (1 - dampening) * d;
//   param += -lr * (nesterov ? d + momentum * buf : buf)      (momentum 0: -lr * d)
void SliceOptimizer::ApplySgd(float* params, const float* const* grads, int num_grads,
                              TermSource* last, int divisor, int64_t n,
                              SliceOptimizerState* state, double lr, float* values_out) const {
  const float neg_lr = -static_cast<float>(lr);
  const float wd = static_cast<float>(options_.weight_decay);
  const float momentum = static_cast<float>(options_.momentum);
  const float keep = static_cast<float>(1.0 - options_.dampening);
  const bool nesterov = options_.nesterov;
  const bool first = state->steps == 0;
  ++state->steps;
  if (momentum != 0 && first) state->buf.assign(n, 0.0f);
  float* const buf = state->buf.data();
  ForEachBlock(n, [&](int64_t i, auto len) {
    float d[kBlock];
    MeanBlock(grads, num_grads, last, divisor, i, len, d);
    if (wd != 0) WeightDecayBlock(wd, params + i, len, d);
    if (momentum == 0) {
      PlainStepBlock(neg_lr, d, len, params + i);
    } else {
      MomentumBlock(momentum, keep, first, nesterov, neg_lr, d, len, buf + i, params + i);
    }
    if (values_out != nullptr) CopyBlock(params + i, len, values_out + i);
  });
}

// torch::optim::Adam (no amsgrad), per element:
//   g = grad + wd * param;  m = m * b1 + (1 - b1) * g;  v = v * b2 + (1 - b2) * g * g;
//   param += -(lr / bias1) * (m / (sqrt(v) / sqrt(bias2) + eps))
void SliceOptimizer::ApplyAdam(float* params, const float* const* grads, int num_grads,
                               TermSource* last, int divisor, int64_t n,
                               SliceOptimizerState* state, double lr, float* values_out) const {
  if (state->steps == 0) {
    state->buf.assign(n, 0.0f);
    state->buf_sq.assign(n, 0.0f);
  }
  ++state->steps;
  const double b1 = options_.beta1;
  const double b2 = options_.beta2;
  const double bias1 = 1 - std::pow(b1, static_cast<double>(state->steps));
  const double bias2 = 1 - std::pow(b2, static_cast<double>(state->steps));
  AdamConstants c;
  c.b1 = static_cast<float>(b1);
  c.b2 = static_cast<float>(b2);
  c.one_minus_b1 = 1 - c.b1;
  c.one_minus_b2 = 1 - c.b2;
  c.neg_step_size = -static_cast<float>(lr / bias1);
  c.bias2_sqrt = static_cast<float>(std::sqrt(bias2));
  c.eps = static_cast<float>(options_.eps);
  const float wd = static_cast<float>(options_.weight_decay);
  float* const m = state->buf.data();
  float* const v = state->buf_sq.data();
  ForEachBlock(n, [&](int64_t i, auto len) {
    float g[kBlock];
    MeanBlock(grads, num_grads, last, divisor, i, len, g);
    if (wd != 0) WeightDecayBlock(wd, params + i, len, g);
    AdamBlock(c, g, len, m + i, v + i, params + i);
    if (values_out != nullptr) CopyBlock(params + i, len, values_out + i);
  });
}

}  // namespace p3
