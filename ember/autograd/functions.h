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
