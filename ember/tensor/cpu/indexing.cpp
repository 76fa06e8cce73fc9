// index_select, gather, scatter_add. Indices are validated in one serial pass before any
// write (an exception must never leave an OpenMP region, and a bad index must not half-write).
#include <cstring>
#include <limits>

#include "ember/tensor/cpu/cpu_backend.h"
#include "ember/tensor/cpu/loops.h"
#include "ember/tensor/dim_split.h"
#include "ember/tensor/index_view.h"
#include "ember/tensor/ops.h"

namespace ember::cpu {
namespace {

void check_indices(const Tensor& index, int64_t bound, const char* op, int64_t dim) {
  const Tensor idx = native::contiguous(index);
  const int64_t* p = static_cast<const int64_t*>(idx.data_ptr());
  for (int64_t i = 0, n = idx.numel(); i < n; ++i)
    EMBER_CHECK(p[i] >= 0 && p[i] < bound, op, ": index ", p[i], " is out of bounds for dimension ", dim, " with size ",
                bound);
}

}  // namespace

// out [.., L, ..] = src [.., D, ..] rows picked by index [L]; src and out contiguous
void CpuBackend::index_select(const Tensor& src, int64_t dim, const Tensor& index, const Tensor& out) {
  const DimSplit split = split_at(src, dim);
  const int64_t outer = split.outer, D = split.size, inner = split.inner;
  check_indices(index, D, "index_select", dim);
  const Tensor idx = native::contiguous(index);
  const int64_t* ip = static_cast<const int64_t*>(idx.data_ptr());
  const int64_t L = idx.numel();
  if (out.numel() == 0) return;  // the indices checked, nothing to copy (a row of 0 bytes has no pointer)
  const size_t row_bytes = static_cast<size_t>(inner) * src.element_size();
  const char* s = static_cast<const char*>(src.data_ptr());
  char* o = static_cast<char*>(out.data_ptr());
  parallel_for(0, outer * L, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(inner, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t ou = r / L, l = r % L;
      std::memcpy(o + r * row_bytes, s + (ou * D + ip[l]) * row_bytes, row_bytes);
    }
  });
}

// out[i..] = src[i.. with dim replaced by index[i..]]
void CpuBackend::gather(const Tensor& src, int64_t dim, const Tensor& index, const Tensor& out) {
  check_indices(index, src.size(dim), "gather", dim);
  const Tensor src_r = index_aligned_view(src, index, dim);
  const int64_t step = src.stride(dim) * static_cast<int64_t>(src.element_size());
  StridedLoop<3> loop({&out, &index, &src_r});
  EMBER_DISPATCH_ALL(src.dtype(), "gather", [&] {
    loop.run([step](const std::array<char*, 3>& p, const std::array<int64_t, 3>& st, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t k = *reinterpret_cast<const int64_t*>(p[1] + i * st[1]);
        *reinterpret_cast<scalar_t*>(p[0] + i * st[0]) =
            *reinterpret_cast<const scalar_t*>(p[2] + i * st[2] + k * step);
      }
    });
  });
}

namespace {
// self[i.. with dim replaced by index[i..]] (+)= src[i..]   (serial: targets may collide; the
// last write in index order wins where they do)
template <bool kAccumulate>
void scatter_into(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, const char* op) {
  check_indices(index, self.size(dim), op, dim);
  const Tensor self_r = index_aligned_view(self, index, dim);
  const Tensor src_r = native::as_strided(src, index.sizes(), src.strides());
  const int64_t step = self.stride(dim) * static_cast<int64_t>(self.element_size());
  StridedLoop<3> loop({&self_r, &index, &src_r});
  EMBER_DISPATCH_ALL(self.dtype(), op, [&] {
    using M = opmath_t<scalar_t>;
    loop.run(
        [step](const std::array<char*, 3>& p, const std::array<int64_t, 3>& st, int64_t n) {
          for (int64_t i = 0; i < n; ++i) {
            const int64_t k = *reinterpret_cast<const int64_t*>(p[1] + i * st[1]);
            auto* dst = reinterpret_cast<scalar_t*>(p[0] + i * st[0] + k * step);
            const scalar_t v = *reinterpret_cast<const scalar_t*>(p[2] + i * st[2]);
            *dst = kAccumulate ? scalar_t(M(*dst) + M(v)) : v;
          }
        },
        std::numeric_limits<int64_t>::max());
  });
}
}  // namespace

void CpuBackend::scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  scatter_into<true>(self, dim, index, src, "scatter_add");
}
void CpuBackend::scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  scatter_into<false>(self, dim, index, src, "scatter");
}

}  // namespace ember::cpu
