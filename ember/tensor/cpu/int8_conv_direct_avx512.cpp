// The direct int8 convolution's tile for AVX-512 VNNI (int8_conv_direct_kernels.h), compiled
// with -mavx512f -mavx512vnni (this file only) and called only where the CPU has them: 16
// positions per register, one vpdpbusd per 64 multiply-adds; 32 zmm registers hold 8 x 3
// accumulators, 3 input vectors and the broadcast.
#include "ember/tensor/cpu/int8_conv_direct_kernels.h"

namespace ember::cpu::int8_direct {
namespace {

struct Vnni {
  using I = __m512i;
  static constexpr int64_t lanes = kVnniLanes;
  static I zero() { return _mm512_setzero_si512(); }
  static I load(const void* p) { return _mm512_loadu_si512(p); }
  static void store(int32_t* p, I v) { _mm512_storeu_si512(p, v); }
  static I set1(int32_t x) { return _mm512_set1_epi32(x); }
  static I dot(I acc, I x, I w) { return _mm512_dpbusd_epi32(acc, x, w); }
};

}  // namespace

void tile_vnni(int64_t vectors, const TileArgs& a, const uint8_t* x, const int8_t* w, int32_t* acc) {
  tile_of<Vnni, kVnniBlock, kVnniVectors>(vectors, a, x, w, acc);
}

}  // namespace ember::cpu::int8_direct
