// Tensor basics: metadata, element access, conversion and copies.
#include "tensor/tensor.h"

#include <cstring>

#include "tensor/backend.h"
#include "tensor/ops.h"

namespace ember {

TensorImpl& Tensor::ref() const {
  EMBER_CHECK(impl_ != nullptr, "Tensor: this tensor is undefined (default-constructed)");
  return *impl_;
}

int64_t Tensor::size(int64_t d) const { return sizes()[wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return strides()[wrap_dim(d, dim(), "stride")]; }

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
  const Tensor host = to(Device(kCPU));
  return EMBER_DISPATCH_ALL(dtype(), "item", [&]() -> Scalar { return Scalar(*host.data_ptr<scalar_t>()); });
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  const Tensor host = to(Device(kCPU), dtype_of<T>::value).contiguous();
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

Tensor Tensor::to(DType d, bool copy) const { return to(device(), d, false, copy); }
Tensor Tensor::to(Device dev, bool non_blocking, bool copy) const { return to(dev, dtype(), non_blocking, copy); }

Tensor Tensor::to(Device dev, DType d, bool non_blocking, bool copy) const {
  if (dev == device() && d == dtype() && !copy) return *this;
  Tensor out = empty(sizes(), TensorOptions().dtype(d).device(dev));
  if (dev == device()) {
    backend(dev).copy(*this, out);
  } else {
    // Change the dtype on the source device, then move the bytes.
    const Tensor src = d == dtype() ? contiguous() : to(d);
    Backend& b = dev.is_cpu() ? backend(device()) : backend(dev);
    b.copy_across(src, out, non_blocking);
  }
  return out;
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::clone() const {
  Tensor out = empty(sizes(), TensorOptions().dtype(dtype()).device(device()));
  backend(device()).copy(*this, out);
  return out;
}

Tensor& Tensor::copy_(const Tensor& src) {
  EMBER_CHECK(src.defined(), "copy_: the source tensor is undefined");
  broadcast_shapes(sizes(), src.sizes(), "copy_");
  EMBER_CHECK(broadcast_shapes(sizes(), src.sizes(), "copy_") == sizes(), "copy_: source shape ",
              shape_str(src.sizes()), " cannot be broadcast to destination shape ", shape_str(sizes()));
  if (numel() == 0) return *this;
  const Tensor expanded = src.expand(sizes());
  if (src.device() == device()) {
    backend(device()).copy(expanded, *this);
  } else {
    const Tensor moved = expanded.to(device(), dtype());
    backend(device()).copy(moved, *this);
  }
  return *this;
}

}  // namespace ember
