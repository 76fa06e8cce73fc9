#pragma once
// What the register-tiled GEMMs share (Note [16-bit GEMM] in gemm16.cpp, Note [float32 GEMM] in
// gemm32.cpp): where a tile's outputs go, and its row count as a compile-time constant.
#include <cstdint>
#include <type_traits>

namespace ember::cpu {

// Where a tile's outputs go: c + r * ldc + j * cs for r < rows, j < cols; out = alpha acc +
// beta out (beta == 0: out is not read, as BLAS). T is the output's storage type.
template <class T>
struct TileOut {
  T* c;
  int64_t ldc, cs, rows, cols;
  float alpha, beta;
};

// f(std::integral_constant<int, R>{}) with R = rows (1 .. MAX): a tile's row count as the
// compile-time constant the kernels need to keep their accumulators in registers.
template <int MAX, class F>
void with_rows(int64_t rows, const F& f) {
  if constexpr (MAX > 1) {
    if (rows < MAX) return with_rows<MAX - 1>(rows, f);
  }
  f(std::integral_constant<int, MAX>{});
}

}  // namespace ember::cpu
