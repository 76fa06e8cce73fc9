#pragma once
// Helpers shared by the op implementations in tensor/ops/.
#include <initializer_list>

#include "ember/tensor/backend.h"
#include "ember/tensor/ops.h"

namespace ember::ops {

inline void check_defined(const Tensor& t, const char* op, const char* what = "input") {
  EMBER_CHECK(t.defined(), op, ": the ", what, " tensor is undefined");
}

// All tensors on one device; names the devices otherwise.
inline void check_same_device(std::initializer_list<const Tensor*> ts, const char* op) {
  const Tensor* first = nullptr;
  for (const Tensor* t : ts) {
    if (!t->defined()) continue;
    if (!first) first = t;
    EMBER_CHECK(t->device() == first->device(), op, ": expected all tensors to be on the same device, but found ",
                first->device(), " and ", t->device());
  }
}

// Sizes computed from a caller's arguments (padding, stride, dilation, groups): a + b and a * b,
// or an Error naming `op` where int64 would overflow (signed overflow is undefined behaviour).
inline int64_t size_add(int64_t a, int64_t b, const char* op) {
  int64_t r = 0;
  EMBER_CHECK(!__builtin_add_overflow(a, b, &r), op, ": the arguments make a size beyond int64's range (", a, " + ", b,
              ")");
  return r;
}
inline int64_t size_mul(int64_t a, int64_t b, const char* op) {
  int64_t r = 0;
  EMBER_CHECK(!__builtin_mul_overflow(a, b, &r), op, ": the arguments make a size beyond int64's range (", a, " * ", b,
              ")");
  return r;
}

inline Tensor empty_on(const Shape& sizes, DType dtype, Device device) {
  return empty(sizes, TensorOptions().dtype(dtype).device(device));
}

// A [K, R] view (or copy) of x with `reduced` dims last, for the reduce kernel.
Tensor as_rows(const Tensor& x, const std::vector<bool>& reduced);

// The shape after reducing `reduced` dims (kept as 1 with keepdim).
Shape reduced_shape(const Shape& sizes, const std::vector<bool>& reduced, bool keepdim);

// Marks dims to reduce; empty `dims` marks all.
std::vector<bool> reduction_mask(const Tensor& x, const Shape& dims, const char* op);

}  // namespace ember::ops
