// index_select, gather and scatter_add on CUDA. Indices are checked on the device before any
// write (one small kernel and a copy back of its verdict), so a bad index is an ember::Error
// naming it, never a memory fault, as on the CPU.
#include <array>
#include <memory>

#include "ember/cuda/cuda.h"
#include "ember/cuda/cuda_backend.h"
#include "ember/cuda/loops.cuh"
#include "ember/tensor/dim_split.h"
#include "ember/tensor/index_view.h"
#include "ember/tensor/ops.h"

namespace ember::cuda {
namespace {

// found[0] = the first position i with idx[i] outside [0, bound) (or n when there is none).
__global__ void find_bad_index(const int64_t* idx, int64_t n, int64_t bound, unsigned long long* found) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    if (idx[i] < 0 || idx[i] >= bound) atomicMin(found, static_cast<unsigned long long>(i));
}

// The index tensors this thread validated last, so that a backward pass reusing its forward's
// indices (gather -> scatter_add, embedding -> its gradient) does not wait for the GPU again.
// An entry matches only the same live storage (a weak pointer: a freed one never matches),
// view and version (any in-place write bumps it), for a bound no larger than checked.
struct ValidatedIndex {
  std::weak_ptr<StorageImpl> storage;
  int64_t offset = 0;
  Shape sizes, strides;
  uint64_t version = 0;
  int64_t bound = 0;
  bool matches(const Tensor& index, int64_t b) const {
    const std::shared_ptr<StorageImpl> alive = storage.lock();
    return alive && alive == index.storage() && offset == index.storage_offset() && version == index.version() &&
           b >= bound && sizes == index.sizes() && strides == index.strides();
  }
};
thread_local std::array<ValidatedIndex, 4> validated;
thread_local size_t next_validated = 0;

void check_indices(const Tensor& index, int64_t bound, const char* op, int64_t dim) {
  for (const ValidatedIndex& v : validated)
    if (v.matches(index, bound)) return;
  const Tensor idx = native::contiguous(index);
  const int64_t n = idx.numel();
  if (n == 0) return;
  Tensor found = full({1}, n, TensorOptions(kInt64).device(index.device()));
  find_bad_index<<<grid_for(n), kBlock, 0, stream_of(idx)>>>(static_cast<const int64_t*>(idx.data_ptr()), n, bound,
                                                             static_cast<unsigned long long*>(found.data_ptr()));
  EMBER_KERNEL_CHECK();
  const int64_t at = found.item<int64_t>();  // waits for the kernel
  if (at < n)
    throw Error(detail::concat(op, ": index ", native::select(native::reshape(idx, {-1}), 0, at).item<int64_t>(),
                               " is out of bounds for dimension ", dim, " with size ", bound));
  validated[next_validated++ % validated.size()] = {index.storage(), index.storage_offset(), index.sizes(),
                                                    index.strides(), index.version(),        bound};
}

template <class R>
__global__ void select_rows(const R* src, R* out, const int64_t* idx, int64_t outer, int64_t L, int64_t D,
                            int64_t inner) {
  const int64_t n = outer * L * inner;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < n; e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t in = e % inner, r = e / inner, l = r % L, ou = r / L;
    out[e] = src[(ou * D + idx[l]) * inner + in];
  }
}

// CUDA has no 8-bit atomics: a byte is updated by compare-and-swap of the aligned 32-bit word
// that holds it, retried while another thread changed the word in between. Integers wrap (the
// two's-complement bits of a sum are the same signed or not); bools combine by "or", as the
// CPU's bool + bool converted back to bool does.
template <bool kOr>
__device__ void atomic_add_byte(uint8_t* address, uint8_t value) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(address);
  auto* word = reinterpret_cast<unsigned int*>(at & ~uintptr_t{3});
  const unsigned int shift = static_cast<unsigned int>(at & 3) * 8;
  unsigned int seen = *word, assumed;
  do {
    assumed = seen;
    const unsigned int current = (assumed >> shift) & 0xffu;
    const unsigned int updated = kOr ? (current | (value != 0)) : ((current + value) & 0xffu);
    seen = atomicCAS(word, assumed, (assumed & ~(0xffu << shift)) | (updated << shift));
  } while (seen != assumed);
}

template <class T>
__device__ __forceinline__ void atomic_add(T* address, T value) {
  if constexpr (std::is_same_v<T, int64_t>)
    atomicAdd(reinterpret_cast<unsigned long long*>(address), static_cast<unsigned long long>(value));
  else if constexpr (std::is_same_v<T, bool>)
    atomic_add_byte<true>(reinterpret_cast<uint8_t*>(address), static_cast<uint8_t>(value));
  else if constexpr (sizeof(T) == 1)
    atomic_add_byte<false>(reinterpret_cast<uint8_t*>(address), static_cast<uint8_t>(value));
  else
    atomicAdd(address, value);
}

template <class T>
__global__ void gather_kernel(OffsetCalc<3> calc, char* out, const char* index, const char* src, int64_t step,
                              int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    int64_t off[3];
    calc.get(i, off);
    const int64_t k = *reinterpret_cast<const int64_t*>(index + off[1]);
    *reinterpret_cast<T*>(out + off[0]) = *reinterpret_cast<const T*>(src + off[2] + k * step);
  }
}

// kAccumulate: atomics, as targets may collide; else plain stores (one of colliding writes wins).
template <class T, bool kAccumulate>
__global__ void scatter_kernel(OffsetCalc<3> calc, char* self, const char* index, const char* src, int64_t step,
                               int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    int64_t off[3];
    calc.get(i, off);
    const int64_t k = *reinterpret_cast<const int64_t*>(index + off[1]);
    T* dst = reinterpret_cast<T*>(self + off[0] + k * step);
    if constexpr (kAccumulate)
      atomic_add(dst, *reinterpret_cast<const T*>(src + off[2]));
    else
      *dst = *reinterpret_cast<const T*>(src + off[2]);
  }
}

// self[i.. with dim replaced by index[i..]] (+)= src[i..]
template <bool kAccumulate>
void scatter_into(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, const char* op) {
  DeviceGuard guard(self.device().index);
  check_indices(index, self.size(dim), op, dim);
  const Tensor self_r = index_aligned_view(self, index, dim);
  const Tensor src_r = native::as_strided(src, index.sizes(), src.strides());
  const int64_t n = index.numel();
  if (n == 0) return;
  const int64_t step = self.stride(dim) * static_cast<int64_t>(self.element_size());
  const OffsetCalc<3> calc = make_offset_calc<3>({&self_r, &index, &src_r}, op);
  char* o = static_cast<char*>(self_r.data_ptr());
  const char* ix = static_cast<const char*>(index.data_ptr());
  const char* s = static_cast<const char*>(src_r.data_ptr());
  EMBER_CUDA_DISPATCH_ALL(self.dtype(), op, [&] {
    scatter_kernel<scalar_t, kAccumulate><<<grid_for(n), kBlock, 0, stream_of(self)>>>(calc, o, ix, s, step, n);
  });
  EMBER_KERNEL_CHECK();
}

}  // namespace

// out [.., L, ..] = src [.., D, ..] rows picked by index [L]; src and out contiguous
void CudaBackend::index_select(const Tensor& src, int64_t dim, const Tensor& index, const Tensor& out) {
  DeviceGuard guard(out.device().index);
  const DimSplit split = split_at(src, dim);
  const int64_t outer = split.outer, D = split.size, inner = split.inner;
  check_indices(index, D, "index_select", dim);
  const Tensor idx = native::contiguous(index);
  const int64_t n = out.numel();
  if (n == 0) return;
  auto launch = [&](auto* tag) {
    using R = std::remove_pointer_t<decltype(tag)>;
    select_rows<R><<<grid_for(n), kBlock, 0, stream_of(out)>>>(
        static_cast<const R*>(src.data_ptr()), static_cast<R*>(out.data_ptr()),
        static_cast<const int64_t*>(idx.data_ptr()), outer, idx.numel(), D, inner);
  };
  switch (src.element_size()) {
    case 1:
      launch(static_cast<uint8_t*>(nullptr));
      break;
    case 2:
      launch(static_cast<uint16_t*>(nullptr));
      break;
    case 4:
      launch(static_cast<uint32_t*>(nullptr));
      break;
    default:
      launch(static_cast<uint64_t*>(nullptr));
      break;
  }
  EMBER_KERNEL_CHECK();
}

// out[i..] = src[i.. with dim replaced by index[i..]]
void CudaBackend::gather(const Tensor& src, int64_t dim, const Tensor& index, const Tensor& out) {
  DeviceGuard guard(out.device().index);
  check_indices(index, src.size(dim), "gather", dim);
  const Tensor src_r = index_aligned_view(src, index, dim);
  const int64_t n = out.numel();
  if (n == 0) return;
  const int64_t step = src.stride(dim) * static_cast<int64_t>(src.element_size());
  const OffsetCalc<3> calc = make_offset_calc<3>({&out, &index, &src_r}, "gather");
  char* o = static_cast<char*>(out.data_ptr());
  const char* ix = static_cast<const char*>(index.data_ptr());
  const char* s = static_cast<const char*>(src_r.data_ptr());
  EMBER_CUDA_DISPATCH_ALL(src.dtype(), "gather", [&] {
    using T = scalar_t;
    gather_kernel<T><<<grid_for(n), kBlock, 0, stream_of(out)>>>(calc, o, ix, s, step, n);
  });
  EMBER_KERNEL_CHECK();
}

void CudaBackend::scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  scatter_into<true>(self, dim, index, src, "scatter_add");
}
void CudaBackend::scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  scatter_into<false>(self, dim, index, src, "scatter");
}

}  // namespace ember::cuda
