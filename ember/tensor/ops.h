#pragma once
// Factories (ember::zeros, ember::randn, ...) and the native ops: ember::native::add(a, b),
// ember::native::matmul(a, b), ... Note [Native ops]: a native op computes its result, records
// nothing, and calls only native functions and kernels (never a Tensor method or a public op,
// which would record the tape); tools/check_layers.sh checks it. The public, differentiable ops
// (ember::add, Tensor::add, ...; autograd/functions.h) run the native op and then record a tape
// Node when an input requires grad. Every function validates its arguments and throws an
// ember::Error naming the op and the offending shapes, dtypes or devices.
#include <array>
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "ember/tensor/tensor.h"

namespace ember {

// ---- factories (tensor/ops/factory.cpp) ----
Tensor empty(const Shape& sizes, TensorOptions options = {});
Tensor empty_strided(const Shape& sizes, const Shape& strides, TensorOptions options = {});
Tensor zeros(const Shape& sizes, TensorOptions options = {});
Tensor ones(const Shape& sizes, TensorOptions options = {});
Tensor full(const Shape& sizes, const Scalar& value, TensorOptions options = {});
Tensor scalar_tensor(const Scalar& value, TensorOptions options = {});
// arange infers int64 when start, end and step are all integers, float32 otherwise.
Tensor arange(const Scalar& end);
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = 1);
Tensor arange(const Scalar& end, TensorOptions options);
Tensor arange(const Scalar& start, const Scalar& end, TensorOptions options);
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, TensorOptions options);
Tensor linspace(double start, double end, int64_t steps, TensorOptions options = {});
Tensor eye(int64_t n, int64_t m = -1, TensorOptions options = {});
Tensor rand(const Shape& sizes, TensorOptions options = {});
Tensor randn(const Shape& sizes, TensorOptions options = {});
Tensor randint(int64_t low, int64_t high, const Shape& sizes, TensorOptions options = kInt64);
Tensor randperm(int64_t n, TensorOptions options = kInt64);
// t's shape; the dtype and device the options give, t's where they give none (requires_grad
// only when asked): ones_like(t), ones_like(t, kFloat64).
Tensor empty_like(const Tensor& t, TensorOptions options = {});
Tensor zeros_like(const Tensor& t, TensorOptions options = {});
Tensor ones_like(const Tensor& t, TensorOptions options = {});
Tensor full_like(const Tensor& t, const Scalar& value, TensorOptions options = {});
Tensor rand_like(const Tensor& t, TensorOptions options = {});
Tensor randn_like(const Tensor& t, TensorOptions options = {});
// What dropout multiplies by: 1 / (1 - p) with probability 1 - p, else 0 (a floating dtype), in one
// pass: the values bernoulli_(1 - p) * (1 / (1 - p)) would give. p in [0, 1).
Tensor dropout_mask(const Shape& sizes, double p, TensorOptions options = {});
// Wraps memory the caller owns (no copy, not counted by the allocator). `deleter`, if
// given, runs when the last tensor using the memory goes away.
Tensor from_blob(void* data, const Shape& sizes, TensorOptions options = {});
Tensor from_blob(void* data, const Shape& sizes, const Shape& strides, std::function<void(void*)> deleter = nullptr,
                 TensorOptions options = {});
// A tensor holding a copy of `values`; the dtype follows T, the shape defaults to 1-D. A braced
// list of int literals is int64, as in PyTorch and LibTorch (tensor({0, 2, 1}): class targets).
template <class T>
Tensor tensor(const std::vector<T>& values, std::optional<Shape> sizes = std::nullopt);
template <class T>
Tensor tensor(std::initializer_list<T> values, std::optional<Shape> sizes = std::nullopt) {
  if constexpr (std::is_same_v<T, int>)
    return tensor(std::vector<int64_t>(values.begin(), values.end()), std::move(sizes));
  else
    return tensor(std::vector<T>(values), std::move(sizes));
}
// A 0-d tensor holding `value`: tensor(3.5) is float64, tensor(3) int64, tensor(true) bool,
// unless the options give a dtype.
template <class T,
          std::enable_if_t<std::is_integral_v<T> || std::is_same_v<T, float> || std::is_same_v<T, double>, int> = 0>
Tensor tensor(T value, TensorOptions options = {}) {
  if (!options.has_dtype_) {
    if constexpr (std::is_same_v<T, bool>)
      options = options.dtype(kBool);
    else if constexpr (std::is_integral_v<T>)
      options = options.dtype(kInt64);
    else
      options = options.dtype(std::is_same_v<T, float> ? kFloat32 : kFloat64);
  }
  return full({}, value, options);
}

// A 1-D size as an integer, as LibTorch takes it: zeros(n), randn(n, kFloat64).
#define EMBER_INDEX_FACTORY(name)                                    \
  template <class I, detail::if_index<I> = 0>                        \
  Tensor name(I n, TensorOptions options = {}) {                     \
    return name(Shape{static_cast<int64_t>(n)}, std::move(options)); \
  }
EMBER_INDEX_FACTORY(empty)
EMBER_INDEX_FACTORY(zeros)
EMBER_INDEX_FACTORY(ones)
EMBER_INDEX_FACTORY(rand)
EMBER_INDEX_FACTORY(randn)
#undef EMBER_INDEX_FACTORY
template <class I, detail::if_index<I> = 0>
Tensor full(I n, const Scalar& value, TensorOptions options = {}) {
  return full(Shape{static_cast<int64_t>(n)}, value, std::move(options));
}
// tensor({1.0, 2.0}, options): the values in the options' dtype (T's without one, int64 for int)
// and device (requires_grad too).
template <class T>
Tensor tensor(std::initializer_list<T> values, TensorOptions options);

// Binary ops broadcast and promote types as PyTorch does (tensor/ops/elementwise.cpp).
DType result_type(const Tensor& a, const Tensor& b);
DType result_type(const Tensor& a, const Scalar& b);

// ---- threads (tensor/parallel.cpp) ----
void set_num_threads(int n);
int get_num_threads();

// The native ops: one per entry of ember/tensor/ops.def, written in tensor/ops/<family>.cpp.
namespace native {
#define EMBER_DEFAULT EMBER_DEFAULT_IN_DECLARATION
#define EMBER_NATIVE_DECLARATION(name, overload, returns, params, args) returns name params;
#define EMBER_METHOD EMBER_NATIVE_DECLARATION
#define EMBER_FUNCTION EMBER_NATIVE_DECLARATION
#define EMBER_INPLACE EMBER_NATIVE_DECLARATION
#define EMBER_NOGRAD_METHOD EMBER_NATIVE_DECLARATION
#define EMBER_NOGRAD_FUNCTION EMBER_NATIVE_DECLARATION
#define EMBER_NATIVE EMBER_NATIVE_DECLARATION
#define EMBER_UNARY(name, domain, params, args) Tensor name params;
#include "ember/tensor/ops.def"
#undef EMBER_NATIVE_DECLARATION
}  // namespace native
}  // namespace ember
