// Tensor basics: metadata, element access, conversion and copies.
#include "ember/tensor/tensor.h"

#include <cstring>

#include "ember/tensor/backend.h"
#include "ember/tensor/memory_overlap.h"
#include "ember/tensor/ops.h"

namespace ember {

TensorImpl& Tensor::ref() const {
  EMBER_CHECK(impl_ != nullptr, "Tensor: this tensor is undefined (default-constructed)");
  return *impl_;
}

// wrap_dim lets a 0-d tensor name dim 0 or -1 (as reductions over it do); it has no size there.
int64_t Tensor::size(int64_t d) const {
  EMBER_CHECK(dim() > 0, "size: dimension ", d, " of a 0-d tensor (it has no dimensions)");
  return sizes()[wrap_dim(d, dim(), "size")];
}
int64_t Tensor::stride(int64_t d) const {
  EMBER_CHECK(dim() > 0, "stride: dimension ", d, " of a 0-d tensor (it has no dimensions)");
  return strides()[wrap_dim(d, dim(), "stride")];
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes()) n *= s;  // validated when the tensor was made
  return n;
}

void* Tensor::data_ptr() const {
  const auto& t = ref();
  if (!t.storage || !t.storage->data()) return nullptr;
  return static_cast<char*>(t.storage->data()) + t.offset * static_cast<int64_t>(element_size());
}

Scalar Tensor::item() const {
  EMBER_CHECK(numel() == 1, "item: a tensor with ", numel(), " elements (shape ", shape_str(sizes()),
              ") cannot be converted to a Scalar");
  const Tensor host = native::to(*this, Device(kCPU), dtype(), false, false);
  return EMBER_DISPATCH_ALL(dtype(), "item", [&]() -> Scalar { return Scalar(*host.data_ptr<scalar_t>()); });
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  // Native ops: reading values records nothing on the tape.
  Tensor host = native::to(*this, Device(kCPU), dtype_of<T>::value, false, false);
  if (!host.is_contiguous()) host = native::clone(host);
  std::vector<T> out(static_cast<size_t>(host.numel()));
  if (!out.empty()) std::memcpy(static_cast<void*>(out.data()), host.data_ptr(), out.size() * sizeof(T));
  return out;
}
template std::vector<uint8_t> Tensor::to_vector<uint8_t>() const;
template std::vector<int8_t> Tensor::to_vector<int8_t>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<Half> Tensor::to_vector<Half>() const;
template std::vector<BFloat16> Tensor::to_vector<BFloat16>() const;
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;

uint64_t Tensor::version() const { return storage() ? storage()->version() : 0; }
void Tensor::bump_version() const {
  if (storage()) storage()->bump_version();
}

bool Tensor::is_pinned() const {
  return defined() && is_cpu() && storage() && storage()->allocator() && storage()->allocator()->is_pinned_host();
}

namespace native {

Tensor to(const Tensor& self, DType d) { return to(self, self.device(), d, false, false); }
Tensor contiguous(const Tensor& self) { return self.is_contiguous() ? self : clone(self); }

Tensor& fill_(Tensor& self, const Scalar& value) {
  if (self.numel() > 0) backend(self.device()).fill(self, value);
  return self;
}

Tensor to(const Tensor& self, Device dev, DType d, bool non_blocking, bool copy) {
  if (dev == self.device() && d == self.dtype() && !copy) return self;
  Tensor out = empty(self.sizes(), TensorOptions().dtype(d).device(dev));
  if (dev == self.device()) {
    backend(dev).copy(self, out);
  } else {
    // Change the dtype on the source device, then move the bytes.
    const Tensor src = d == self.dtype() ? contiguous(self) : to(self, self.device(), d, false, false);
    Backend& b = dev.is_cpu() ? backend(self.device()) : backend(dev);
    b.copy_across(src, out, non_blocking);
  }
  return out;
}

Tensor clone(const Tensor& self) {
  Tensor out = empty(self.sizes(), TensorOptions().dtype(self.dtype()).device(self.device()));
  backend(self.device()).copy(self, out);
  return out;
}

Tensor& copy_(Tensor& self, const Tensor& src) {
  EMBER_CHECK(src.defined(), "copy_: the source tensor is undefined");
  EMBER_CHECK(broadcast_shapes(self.sizes(), src.sizes(), "copy_") == self.sizes(), "copy_: source shape ",
              shape_str(src.sizes()), " cannot be broadcast to destination shape ", shape_str(self.sizes()));
  if (self.numel() == 0) return self;
  // Note [Memory overlap]: a copy onto the very same view is a no-op; other overlaps are refused.
  if (overlap(self, src) == MemOverlap::Full && self.sizes() == src.sizes()) return self;
  assert_no_internal_overlap(self, "copy_");
  assert_no_partial_overlap(self, src, "copy_");
  const Tensor expanded = expand(src, self.sizes());
  if (src.device() == self.device()) {
    backend(self.device()).copy(expanded, self);
  } else {
    backend(self.device()).copy(to(expanded, self.device(), self.dtype(), false, false), self);
  }
  return self;
}

}  // namespace native

}  // namespace ember
