#pragma once
// The public tensor ops: ember::add(a, b), ember::matmul(a, b), ... one per entry of
// ember/tensor/ops.def (Note [One declaration per op]); Tensor's methods call them. Each
// passes through the dispatch point (autograd/dispatch.h) to ember::autograd::name, which runs
// the native op of tensor/ops.h and, when grad mode is on and an input requires grad, records
// a Node whose backward sits beside the forward in autograd/functions_<family>.cpp.
#include <array>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "ember/tensor/ops.h"

namespace ember {

#define EMBER_DEFAULT EMBER_DEFAULT_IN_DECLARATION
#define EMBER_PUBLIC_DECLARATION(name, overload, returns, params, args) returns name params;
#define EMBER_METHOD EMBER_PUBLIC_DECLARATION
#define EMBER_FUNCTION EMBER_PUBLIC_DECLARATION
#define EMBER_INPLACE EMBER_PUBLIC_DECLARATION
#define EMBER_NOGRAD_METHOD EMBER_PUBLIC_DECLARATION
#define EMBER_NOGRAD_FUNCTION EMBER_PUBLIC_DECLARATION
#define EMBER_UNARY(name, domain, params, args) Tensor name params;
#include "ember/tensor/ops.def"
#undef EMBER_PUBLIC_DECLARATION

// One dim as an integer, as LibTorch takes it: sum(x, 1), mean(x, 0, true), norm(x, 2, 1).
template <class I, detail::if_index<I> = 0>
Tensor sum(const Tensor& x, I dim, bool keepdim = false, std::optional<DType> dtype = std::nullopt) {
  return x.sum(dim, keepdim, dtype);
}
#define EMBER_INDEX_FORM(name)                                \
  template <class I, detail::if_index<I> = 0>                 \
  Tensor name(const Tensor& x, I dim, bool keepdim = false) { \
    return x.name(dim, keepdim);                              \
  }
EMBER_KEEPDIM_REDUCTIONS(EMBER_INDEX_FORM)
#undef EMBER_INDEX_FORM
template <class I, detail::if_index<I> = 0>
Tensor norm(const Tensor& x, double p, I dim, bool keepdim = false) {
  return x.norm(p, dim, keepdim);
}

// The gradient `grad` of a broadcast result, summed back to `sizes` (the input's shape).
Tensor sum_to(const Tensor& grad, const Shape& sizes);

// x's elements where mask (bool, broadcast with x) is true, row-major: 1-D (x.index({mask}),
// Note [Tensor indexing]).
Tensor masked_select(const Tensor& x, const Tensor& mask);
// Einstein summation (Note [einsum]): einsum("bij,bjk->bik", {a, b}); letters, "->" optional.
Tensor einsum(const std::string& equation, const TensorList& operands);
// torch::equal: the same shape and values (a.equal(b)).
inline bool equal(const Tensor& a, const Tensor& b) { return a.equal(b); }

// LibTorch's composite ops (autograd/composites.cpp): a few recorded ops each, so their
// gradients come with them.
Tensor clamp_min(const Tensor& x, const Scalar& min);
Tensor clamp_max(const Tensor& x, const Scalar& max);
Tensor max(const Tensor& a, const Tensor& b);  // elementwise: maximum(a, b), as at::max(a, b)
Tensor min(const Tensor& a, const Tensor& b);
Tensor dot(const Tensor& a, const Tensor& b);     // [n] . [n] -> [], same dtype
Tensor outer(const Tensor& a, const Tensor& b);   // [n] x [m] -> [n, m]
Tensor flip(const Tensor& x, const Shape& dims);  // a copy, reversed along each of dims
// Elements shifted by shifts[i] along dims[i], wrapping around; no dims: over the flattened x.
Tensor roll(const Tensor& x, const Shape& shifts, const Shape& dims = {});
template <class I, detail::if_index<I> = 0>
Tensor roll(const Tensor& x, I shift) {
  return roll(x, Shape{static_cast<int64_t>(shift)});
}
template <class I, class J, detail::if_index<I> = 0, detail::if_index<J> = 0>
Tensor roll(const Tensor& x, I shift, J dim) {
  return roll(x, Shape{static_cast<int64_t>(shift)}, Shape{static_cast<int64_t>(dim)});
}
// Each element `repeats` times in a row along dim (flattened without one): [a, b] -> [a, a, b, b].
Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim = std::nullopt);
// Element i repeats[i] times (repeats: int64/int32, one per element along dim, or one for all).
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim = std::nullopt);
// [0] * repeats[0] + [1] * repeats[1] + ...: int64 positions (read on the host).
Tensor repeat_interleave(const Tensor& repeats);
// Bool masks: NaN; +-inf; neither.
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);
Tensor isfinite(const Tensor& x);
// |a - b| <= atol + rtol |b| elementwise (equal infinities too, NaNs only with equal_nan);
// allclose: everywhere (a bool, read back). PyTorch's defaults.
Tensor isclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false);
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false);
// x.select(dim, i) for every i: views.
std::vector<Tensor> unbind(const Tensor& x, int64_t dim = 0);
// start + weight (end - start).
Tensor lerp(const Tensor& start, const Tensor& end, const Scalar& weight);
Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight);
inline Tensor clip(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) {
  return clamp(x, min, max);
}
// The offset-th diagonal of the (dim1, dim2) matrices, as the last dim (> 0: above the main one).
Tensor diagonal(const Tensor& x, int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1);
// [n] -> [n + |k|, n + |k|] with x on diagonal k; [n, m] -> its diagonal k.
Tensor diag(const Tensor& x, int64_t diagonal = 0);
Tensor trace(const Tensor& x);  // the sum of a matrix's diagonal
// (var, mean) and (std, mean) over dims, as torch.var_mean and torch.std_mean.
std::tuple<Tensor, Tensor> var_mean(const Tensor& x, const Shape& dims = {}, bool unbiased = true,
                                    bool keepdim = false);
std::tuple<Tensor, Tensor> std_mean(const Tensor& x, const Shape& dims = {}, bool unbiased = true,
                                    bool keepdim = false);
// The lower median (of two middle values, the smaller) of all elements, or along dim with its
// index; NaN when the slice holds one (its first). nanmedian leaves the NaNs out (NaN only when
// all are). The gradient goes to the chosen element, as PyTorch's.
Tensor median(const Tensor& x);
std::tuple<Tensor, Tensor> median(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor nanmedian(const Tensor& x);
std::tuple<Tensor, Tensor> nanmedian(const Tensor& x, int64_t dim, bool keepdim = false);
template <class I, detail::if_index<I> = 0>
std::tuple<Tensor, Tensor> var_mean(const Tensor& x, I dim, bool unbiased = true, bool keepdim = false) {
  return var_mean(x, Shape{static_cast<int64_t>(dim)}, unbiased, keepdim);
}
template <class I, detail::if_index<I> = 0>
std::tuple<Tensor, Tensor> std_mean(const Tensor& x, I dim, bool unbiased = true, bool keepdim = false) {
  return std_mean(x, Shape{static_cast<int64_t>(dim)}, unbiased, keepdim);
}
// 1-D convolution and pooling over x [N, C, L] (or [C, L]): conv2d / max_pool2d / avg_pool2d on
// [N, C, 1, L]. conv1d's weight is [out, in / groups, k].
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, int64_t stride = 1, int64_t padding = 0,
              int64_t dilation = 1, int64_t groups = 1);
Tensor max_pool1d(const Tensor& x, int64_t kernel, std::optional<int64_t> stride = std::nullopt, int64_t padding = 0,
                  int64_t dilation = 1, bool ceil_mode = false);
Tensor avg_pool1d(const Tensor& x, int64_t kernel, std::optional<int64_t> stride = std::nullopt, int64_t padding = 0,
                  bool ceil_mode = false, bool count_include_pad = true);
// base ** linspace(start, end, steps), float32 unless the options say otherwise.
Tensor logspace(double start, double end, int64_t steps, double base = 10.0, TensorOptions options = {});

// The differentiable implementations the public ops dispatch to (autograd/functions_*.cpp):
// the native op, then the tape. Call the public ops, not these: they skip the dispatch point.
namespace autograd {
#define EMBER_AUTOGRAD_DECLARATION(name, overload, returns, params, args) returns name params;
#define EMBER_METHOD EMBER_AUTOGRAD_DECLARATION
#define EMBER_FUNCTION EMBER_AUTOGRAD_DECLARATION
#define EMBER_INPLACE EMBER_AUTOGRAD_DECLARATION
#define EMBER_UNARY(name, domain, params, args) Tensor name params;
#include "ember/tensor/ops.def"
#undef EMBER_AUTOGRAD_DECLARATION
}  // namespace autograd

}  // namespace ember
