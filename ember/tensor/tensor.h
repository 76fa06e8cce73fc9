#pragma once
// Tensor: a cheap handle (shared pointer) to a TensorImpl, which is a Storage plus
// offset, sizes, strides, dtype and device. Views share the Storage.
#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "ember/tensor/device.h"
#include "ember/tensor/dtype.h"
#include "ember/tensor/op_macros.h"
#include "ember/tensor/scalar.h"
#include "ember/tensor/shape.h"
#include "ember/tensor/storage.h"

namespace ember {

// Options for factories, LibTorch style: zeros({2, 3}, kFloat64) or
// zeros({2, 3}, TensorOptions().dtype(kFloat64).device(kCUDA).requires_grad(true)).
class Tensor;
struct TensorOptions {
  DType dtype_ = kFloat32;
  Device device_ = kCPU;
  bool pinned_memory_ = false;  // host memory that is page-locked (cuda::pinned_allocator)
  // requires_grad(true): the factory makes its result a leaf that requires grad. The setter is
  // the autograd layer's (autograd/tensor_autograd.cpp) and leaves its own function here, so
  // that the factories below it call up through this pointer, never by name.
  void (*mark_requires_grad_)(Tensor&) = nullptr;
  // Whether dtype and device were given: zeros_like(t, options) takes the rest from t.
  bool has_dtype_ = false;
  bool has_device_ = false;
  TensorOptions() = default;
  TensorOptions(DType d) : dtype_(d), has_dtype_(true) {}         // NOLINT: implicit by design
  TensorOptions(Device d) : device_(d), has_device_(true) {}      // NOLINT
  TensorOptions(DeviceType d) : device_(d), has_device_(true) {}  // NOLINT
  TensorOptions dtype(DType d) const {
    auto o = *this;
    o.dtype_ = d;
    o.has_dtype_ = true;
    return o;
  }
  TensorOptions device(Device d) const {
    auto o = *this;
    o.device_ = d;
    o.has_device_ = true;
    return o;
  }
  TensorOptions pinned_memory(bool p = true) const {
    auto o = *this;
    o.pinned_memory_ = p;
    return o;
  }
  TensorOptions requires_grad(bool r) const;
  // Getters, LibTorch's names.
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool requires_grad() const { return mark_requires_grad_ != nullptr; }
};
// torch::dtype(kFloat64), torch::device(kCUDA), torch::requires_grad(): options with one field set.
inline TensorOptions dtype(DType d) { return TensorOptions(d); }
inline TensorOptions device(Device d) { return TensorOptions(d); }
inline TensorOptions requires_grad(bool r = true) { return TensorOptions().requires_grad(r); }

// The reductions whose parameters are (dims, keepdim): their integer forms below and in
// autograd/functions.h.
#define EMBER_KEEPDIM_REDUCTIONS(X) X(mean) X(prod) X(amax) X(amin) X(logsumexp) X(all) X(any)
// The operators, each with its op's name (the operators and in-place forms below use them).
#define EMBER_ARITHMETIC_OPERATORS(X) X(+, add) X(-, sub) X(*, mul) X(/, div)
#define EMBER_COMPARISON_OPERATORS(X) X(==, eq) X(!=, ne) X(<, lt) X(<=, le) X(>, gt) X(>=, ge)

template <class T, size_t N>
class TensorAccessor;
struct AutogradMeta;  // autograd/meta.h
class Node;           // autograd/node.h
class Tensor;
// Names for the ops' multi-tensor results (a macro argument cannot hold a bare comma).
using TensorPair = std::tuple<Tensor, Tensor>;
using TensorTriple = std::tuple<Tensor, Tensor, Tensor>;
using TensorList = std::vector<Tensor>;

struct TensorImpl {
  Storage storage;
  int64_t offset = 0;  // in elements
  Shape sizes;
  Shape strides;  // in elements
  DType dtype = kFloat32;
  Device device;
  std::shared_ptr<AutogradMeta> autograd;  // null for tensors that never took part in autograd
};

namespace indexing {
class TensorIndex;
}

class Tensor {
 public:
  Tensor() = default;  // undefined: holds no impl
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  const std::shared_ptr<TensorImpl>& impl() const { return impl_; }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

  // ---- metadata ----
  const Shape& sizes() const { return ref().sizes; }
  const Shape& shape() const { return sizes(); }
  const Shape& strides() const { return ref().strides; }
  int64_t size(int64_t dim) const;
  int64_t stride(int64_t dim) const;
  int64_t dim() const { return static_cast<int64_t>(sizes().size()); }
  int64_t ndimension() const { return dim(); }
  int64_t numel() const;
  DType dtype() const { return ref().dtype; }
  DType scalar_type() const { return dtype(); }
  Device device() const { return ref().device; }
  bool is_cpu() const { return device().is_cpu(); }
  bool is_cuda() const { return device().is_cuda(); }
  bool is_floating_point() const { return is_floating(dtype()); }
  int64_t storage_offset() const { return ref().offset; }
  const Storage& storage() const { return ref().storage; }
  size_t element_size() const { return ::ember::element_size(dtype()); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  bool is_contiguous() const { return is_contiguous_layout(sizes(), strides()); }
  bool shares_storage(const Tensor& o) const { return storage() == o.storage(); }

  // ---- data access (CPU) ----
  void* data_ptr() const;  // address of the first element
  template <class T>
  T* data_ptr() const;  // checks that T matches dtype()
  Scalar item() const;  // the one element of a one-element tensor
  template <class T>
  T item() const {
    return item().to<T>();
  }
  template <class T>
  std::vector<T> to_vector() const;  // all elements in logical order, converted to T

  // ---- autograd (autograd/tensor_autograd.cpp) ----
  bool requires_grad() const;
  Tensor& set_requires_grad(bool requires_grad);  // leaves only; floating dtypes only
  Tensor& requires_grad_(bool requires_grad = true) { return set_requires_grad(requires_grad); }
  const Tensor& grad() const;  // undefined until a backward reaches this leaf (or retain_grad)
  Tensor& mutable_grad();      // for optimizers and zero_grad: assign or modify in place
  std::shared_ptr<Node> grad_fn() const;
  bool is_leaf() const;  // no grad_fn: made by the user, not by a recorded op
  void retain_grad();    // keep .grad() for a non-leaf too
  bool retains_grad() const;
  // Backpropagates from this tensor; `gradient` defaults to 1 for a one-element tensor.
  // LibTorch's parameters: retain_graph defaults to create_graph; create_graph records the
  // backward itself so that the gradients can be differentiated again (Note [Double backward]).
  void backward(const Tensor& gradient = {}, std::optional<bool> retain_graph = std::nullopt,
                bool create_graph = false) const;
  // hook(grad) runs when this tensor's gradient is computed; a defined result replaces it.
  void register_hook(std::function<Tensor(const Tensor&)> hook) const;
  // hook(leaf) runs right after a gradient was accumulated into this leaf's .grad().
  void register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const;
  Tensor detach() const;  // shares storage and version counter, no history
  Tensor& detach_();
  // Makes this tensor refer to new_data's storage, shape, dtype and device, keeping its
  // identity and autograd state (PyTorch's `param.data = ...`); module.to() uses it.
  void set_data(const Tensor& new_data) const;
  uint64_t version() const;  // bumped by every in-place op on the storage
  void bump_version() const;

  // ---- the ops as methods: x.add(y), x.sum({1}), x.view({-1, 4}) ... ----
  // One method per op of ember/tensor/ops.def marked METHOD, NOGRAD_METHOD, UNARY or INPLACE:
  // self.name(args) is ember::name(self, args), through the dispatch point (autograd/ops.cpp).
#define EMBER_DEFAULT EMBER_DEFAULT_IN_DECLARATION
#define EMBER_METHOD(name, overload, returns, params, args) returns name EMBER_DROP_SELF params const;
#define EMBER_NOGRAD_METHOD EMBER_METHOD
#define EMBER_UNARY(name, domain, params, args) Tensor name EMBER_DROP_SELF params const;
#define EMBER_INPLACE(name, overload, returns, params, args) returns name EMBER_DROP_SELF params;
#include "ember/tensor/ops.def"

  // ---- methods beyond the op list: LibTorch's other forms of the same ops ----
  Tensor to(DType dtype, bool copy = false) const;
  Tensor to(Device device, bool non_blocking = false, bool copy = false) const;
  Tensor to(Device device, DType dtype, bool non_blocking = false, bool copy = false) const;
  Tensor cpu() const { return to(Device(kCPU)); }
  Tensor cuda(int index = 0) const { return to(Device(kCUDA, index)); }
  // A copy in page-locked host memory (itself when it is already there), so that copies to a
  // GPU with non_blocking = true are asynchronous. Needs a CUDA device.
  Tensor pin_memory() const;
  bool is_pinned() const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  // Python's x[...] (tensor/tensor_index.h; Note [Tensor indexing]): integers, Slice, None,
  // Ellipsis, bools and index or mask tensors. Without tensors among them the result is a view.
  Tensor index(std::initializer_list<indexing::TensorIndex> indices) const;
  Tensor index(const std::vector<indexing::TensorIndex>& indices) const;
  // x[...] = value, in place: the same indices; value broadcasts to what they select. With
  // `accumulate`, values add (repeated positions too) instead of replacing.
  Tensor& index_put_(std::initializer_list<indexing::TensorIndex> indices, const Tensor& value,
                     bool accumulate = false);
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, const Tensor& value, bool accumulate = false);
  Tensor& index_put_(std::initializer_list<indexing::TensorIndex> indices, const Scalar& value);
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, const Scalar& value);
  // The elements where mask (broadcast to self) is true, in row-major order: 1-D.
  Tensor masked_select(const Tensor& mask) const;
  // self tiled `repeats[i]` times along dim i (more repeats than dims: leading dims of 1 first),
  // a copy: x.repeat({2, 1}) stacks x twice along dim 0.
  Tensor repeat(const Shape& repeats) const;
  // The same shape and the same values (NaN equals nothing), as torch::equal; a bool, read back.
  bool equal(const Tensor& other) const;
  Tensor expand_as(const Tensor& other) const { return expand(other.sizes()); }
  Tensor sum(DType dtype) const { return sum({}, false, dtype); }
  // One dim as an integer where LibTorch's IntArrayRef takes one: x.sum(1), x.view(-1).
  template <class I, detail::if_index<I> = 0>
  Tensor sum(I dim, bool keepdim = false, std::optional<DType> dtype = std::nullopt) const {
    return sum(Shape{static_cast<int64_t>(dim)}, keepdim, dtype);
  }
#define EMBER_INDEX_FORM(name)                              \
  template <class I, detail::if_index<I> = 0>               \
  Tensor name(I dim, bool keepdim = false) const {          \
    return name(Shape{static_cast<int64_t>(dim)}, keepdim); \
  }
  EMBER_KEEPDIM_REDUCTIONS(EMBER_INDEX_FORM)
#undef EMBER_INDEX_FORM
  template <class I, detail::if_index<I> = 0>
  Tensor var(I dim, bool unbiased = true, bool keepdim = false) const {
    return var(Shape{static_cast<int64_t>(dim)}, unbiased, keepdim);
  }
  template <class I, detail::if_index<I> = 0>
  Tensor std(I dim, bool unbiased = true, bool keepdim = false) const {
    return std(Shape{static_cast<int64_t>(dim)}, unbiased, keepdim);
  }
  template <class I, detail::if_index<I> = 0>
  Tensor norm(double p, I dim, bool keepdim = false) const {
    return norm(p, Shape{static_cast<int64_t>(dim)}, keepdim);
  }
  template <class I, detail::if_index<I> = 0>
  Tensor view(I size) const {
    return view(Shape{static_cast<int64_t>(size)});
  }
  template <class I, detail::if_index<I> = 0>
  Tensor reshape(I size) const {
    return reshape(Shape{static_cast<int64_t>(size)});
  }
  Tensor max() const;  // of all elements (an error for an empty tensor, as in PyTorch)
  Tensor min() const;
  // LibTorch's composites (autograd/composites.cpp; their free forms in autograd/functions.h).
  Tensor max(const Tensor& other) const;  // elementwise, as maximum
  Tensor min(const Tensor& other) const;
  Tensor clamp_min(const Scalar& min) const;
  Tensor clamp_max(const Scalar& max) const;
  Tensor dot(const Tensor& other) const;
  Tensor outer(const Tensor& other) const;
  Tensor flip(const Shape& dims) const;
  Tensor roll(const Shape& shifts, const Shape& dims = {}) const;
  template <class I, detail::if_index<I> = 0>
  Tensor roll(I shift) const {
    return roll(Shape{static_cast<int64_t>(shift)});
  }
  template <class I, class J, detail::if_index<I> = 0, detail::if_index<J> = 0>
  Tensor roll(I shift, J dim) const {
    return roll(Shape{static_cast<int64_t>(shift)}, Shape{static_cast<int64_t>(dim)});
  }
  Tensor repeat_interleave(int64_t repeats, std::optional<int64_t> dim = std::nullopt) const;
  Tensor repeat_interleave(const Tensor& repeats, std::optional<int64_t> dim = std::nullopt) const;
  Tensor isnan() const;
  Tensor isinf() const;
  Tensor isfinite() const;
  Tensor isclose(const Tensor& other, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false) const;
  bool allclose(const Tensor& other, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false) const;
  std::vector<Tensor> split(const Shape& sizes, int64_t dim = 0) const;  // split_with_sizes
  std::vector<Tensor> unbind(int64_t dim = 0) const;
  Tensor lerp(const Tensor& end, const Scalar& weight) const;
  Tensor lerp(const Tensor& end, const Tensor& weight) const;
  Tensor clip(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;  // clamp
  Tensor swapaxes(int64_t dim0, int64_t dim1) const;                                       // transpose
  Tensor diagonal(int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1) const;
  Tensor diag(int64_t diagonal = 0) const;
  Tensor trace() const;
  Tensor median() const;
  std::tuple<Tensor, Tensor> median(int64_t dim, bool keepdim = false) const;
  Tensor nanmedian() const;
  std::tuple<Tensor, Tensor> nanmedian(int64_t dim, bool keepdim = false) const;
  // New tensors with this one's dtype and device.
  Tensor new_zeros(const Shape& sizes) const;
  Tensor new_ones(const Shape& sizes) const;
  Tensor new_empty(const Shape& sizes) const;
  Tensor new_full(const Shape& sizes, const Scalar& value) const;
  // in place: the result is cast to self's dtype; broadcasting must not grow self
  Tensor& add_(const Scalar& other, const Scalar& alpha = 1);
  Tensor& sub_(const Scalar& other, const Scalar& alpha = 1);
  Tensor& mul_(const Scalar& other);
  Tensor& div_(const Scalar& other);
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
  Tensor& masked_fill_(const Tensor& mask, const Scalar& value);
  Tensor& relu_();
  Tensor& zero_() { return fill_(0); }
  // self = (self op other) in self's dtype (1 where true, 0 where false), as LibTorch's eq_, lt_, ...
#define EMBER_DECLARE_COMPARISON_INPLACE(op, name) \
  Tensor& name##_(const Tensor& other);            \
  Tensor& name##_(const Scalar& other);
  EMBER_COMPARISON_OPERATORS(EMBER_DECLARE_COMPARISON_INPLACE)
#undef EMBER_DECLARE_COMPARISON_INPLACE
  // LibTorch's `.data()`: the values without their history, which is detach() here. Unlike in
  // PyTorch, an in-place change through it still bumps the version backward checks, so a saved
  // tensor changed behind the tape's back is an error, never a silently wrong gradient.
  Tensor data() const { return detach(); }
  // Element access on the CPU as LibTorch's: auto a = t.accessor<float, 2>(); a[i][j]. It points
  // into this tensor (keep the tensor alive); dtype, rank and device are checked here, indices not.
  template <class T, size_t N>
  TensorAccessor<T, N> accessor() const&;
  template <class T, size_t N>
  TensorAccessor<T, N> accessor() && = delete;  // the tensor would be gone
  // Random fills from the Philox generator (tensor/generator.h); they record nothing.
  Tensor& uniform_(double from = 0.0, double to = 1.0);
  Tensor& normal_(double mean = 0.0, double std = 1.0);
  // 1 with probability p, else 0 (any dtype): 1 where the element's uniform_() draw is below p.
  Tensor& bernoulli_(double p = 0.5);

 private:
  TensorImpl& ref() const;
  std::shared_ptr<TensorImpl> impl_;
};

// A view of a CPU tensor's elements (Tensor::accessor): a[i] is a TensorAccessor<T, N - 1>, or
// the element itself when N == 1.
template <class T, size_t N>
class TensorAccessor {
 public:
  TensorAccessor(T* data, const int64_t* sizes, const int64_t* strides)
      : data_(data), sizes_(sizes), strides_(strides) {}
  decltype(auto) operator[](int64_t i) const {
    if constexpr (N == 1)
      return data_[i * strides_[0]];
    else
      return TensorAccessor<T, N - 1>(data_ + i * strides_[0], sizes_ + 1, strides_ + 1);
  }
  int64_t size(int64_t d) const { return sizes_[d]; }
  int64_t stride(int64_t d) const { return strides_[d]; }
  T* data() const { return data_; }

 private:
  T* data_;
  const int64_t* sizes_;
  const int64_t* strides_;
};

// Operators, as in LibTorch: each is its named op (autograd/tensor_methods.cpp); comparisons
// return bool tensors.
#define EMBER_DECLARE_OPERATOR(op, name)                \
  Tensor operator op(const Tensor& a, const Tensor& b); \
  Tensor operator op(const Tensor& a, const Scalar& b);
EMBER_ARITHMETIC_OPERATORS(EMBER_DECLARE_OPERATOR)
EMBER_COMPARISON_OPERATORS(EMBER_DECLARE_OPERATOR)
#undef EMBER_DECLARE_OPERATOR
// a += b is a.add_(b), and so on.
#define EMBER_DECLARE_COMPOUND_OPERATOR(op, name)     \
  Tensor& operator op##=(Tensor& a, const Tensor& b); \
  Tensor& operator op##=(Tensor& a, const Scalar& b);
EMBER_ARITHMETIC_OPERATORS(EMBER_DECLARE_COMPOUND_OPERATOR)
#undef EMBER_DECLARE_COMPOUND_OPERATOR
Tensor operator+(const Scalar& a, const Tensor& b);
Tensor operator-(const Scalar& a, const Tensor& b);
Tensor operator*(const Scalar& a, const Tensor& b);
Tensor operator/(const Scalar& a, const Tensor& b);
Tensor operator-(const Tensor& a);
// On bool tensors: logical and, or, not (other dtypes are an error).
Tensor operator&(const Tensor& a, const Tensor& b);
Tensor operator|(const Tensor& a, const Tensor& b);
Tensor operator~(const Tensor& a);

// PyTorch-style printing: tensor([[1.0000, 2.0000], ...], dtype=float64).
std::ostream& operator<<(std::ostream& os, const Tensor& t);
std::string to_string(const Tensor& t);

// ---- implementation of the templates ----
template <class T, size_t N>
TensorAccessor<T, N> Tensor::accessor() const& {
  static_assert(N > 0, "accessor: a 0-d tensor has no elements to index; use item<T>()");
  EMBER_CHECK(dim() == static_cast<int64_t>(N), "accessor: expected a ", N, "-d tensor, got shape ",
              shape_str(sizes()));
  EMBER_CHECK(is_cpu(), "accessor: the tensor is on ", device(), "; copy it to the CPU first");
  return TensorAccessor<T, N>(data_ptr<T>(), sizes().data(), strides().data());
}

template <class T>
T* Tensor::data_ptr() const {
  EMBER_CHECK(dtype_of<T>::value == dtype(), "data_ptr: expected a tensor of dtype ", dtype_of<T>::value,
              " but it has dtype ", dtype());
  return static_cast<T*>(data_ptr());
}

}  // namespace ember

#include "ember/tensor/tensor_index.h"  // Tensor::index's entries (needs Tensor complete)
