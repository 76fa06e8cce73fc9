#pragma once
// LibTorch's indexing API, Python's x[...] in C++ (Note [Tensor indexing] in
// autograd/tensor_indexing.cpp):
//   using namespace ember::indexing;
//   x.index({Slice(), 0})                  // x[:, 0]
//   x.index({"...", None, Slice(1, None, 2)})  // x[..., None, 1::2]
//   x.index({mask})                        // x[mask], a bool tensor
//   x.index_put_({Slice(0, 2), idx}, 0.5)  // x[0:2, idx] = 0.5
// tensor.h includes it after Tensor; the methods are Tensor::index and Tensor::index_put_.
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "ember/tensor/error.h"
#include "ember/tensor/tensor.h"

namespace ember {
namespace indexing {

// x[None]: a new dimension of size 1. It is std::nullopt, as LibTorch's c10::nullopt, so that
// Slice(None, 2) reads as Python's [:2].
constexpr std::nullopt_t None = std::nullopt;

// x[...]: as many whole dimensions as the other indices leave. Also written "...".
struct EllipsisIndexType {};
constexpr EllipsisIndexType Ellipsis{};

// start:stop:step with Python's meaning: missing bounds are the ends, negative ones count from
// the end, out-of-range ones clamp; the step is positive (as in PyTorch).
class Slice {
 public:
  Slice(std::optional<int64_t> start = std::nullopt, std::optional<int64_t> stop = std::nullopt,
        std::optional<int64_t> step = std::nullopt)
      : start_(start), stop_(stop), step_(step.value_or(1)) {}
  std::optional<int64_t> start() const { return start_; }
  std::optional<int64_t> stop() const { return stop_; }
  int64_t step() const { return step_; }

 private:
  std::optional<int64_t> start_, stop_;
  int64_t step_;
};

// One entry of an index list: None, Ellipsis ("..."), an integer, a bool, a Slice or a tensor
// (int64/int32 positions, or a bool/uint8 mask).
class TensorIndex {
 public:
  enum class Kind { None, Ellipsis, Integer, Boolean, Slice, Tensor };

  TensorIndex(std::nullopt_t) : kind_(Kind::None) {}         // NOLINT: implicit, as LibTorch's
  TensorIndex(EllipsisIndexType) : kind_(Kind::Ellipsis) {}  // NOLINT
  TensorIndex(const char* text) : kind_(Kind::Ellipsis) {    // NOLINT: "..." only
    EMBER_CHECK(text != nullptr && std::char_traits<char>::compare(text, "...", 4) == 0,
                "index: the only string an index takes is \"...\" (Ellipsis), got \"", text ? text : "(null)", "\"");
  }
  template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  TensorIndex(I integer) : kind_(Kind::Integer), integer_(static_cast<int64_t>(integer)) {}  // NOLINT
  TensorIndex(bool boolean) : kind_(Kind::Boolean), boolean_(boolean) {}                     // NOLINT
  TensorIndex(Slice slice) : kind_(Kind::Slice), slice_(slice) {}                            // NOLINT
  TensorIndex(Tensor tensor) : kind_(Kind::Tensor), tensor_(std::move(tensor)) {}            // NOLINT

  Kind kind() const { return kind_; }
  int64_t integer() const { return integer_; }
  bool boolean() const { return boolean_; }
  const Slice& slice() const { return slice_; }
  const Tensor& tensor() const { return tensor_; }

 private:
  Kind kind_;
  int64_t integer_ = 0;
  bool boolean_ = false;
  Slice slice_;
  Tensor tensor_;
};

}  // namespace indexing
}  // namespace ember
