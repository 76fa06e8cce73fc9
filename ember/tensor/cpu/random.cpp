// Random fills from Philox blocks (Note [Philox streams]). Element i of a float/half
// draw uses lane i % 4 of block offset + i / 4; doubles and 64-bit integers use two
// lanes each, so block offset + i / 2. tensor/ops/factory.cpp reserves exactly these blocks.
#include <cmath>

#include "ember/tensor/cpu/cpu_backend.h"
#include "ember/tensor/generator.h"
#include "ember/tensor/parallel.h"

namespace ember::cpu {
namespace {

template <class T, class F>
void fill_by_block(const Tensor& out, uint64_t seed, uint64_t offset, int64_t per_block, const F& value) {
  T* y = static_cast<T*>(out.data_ptr());
  const int64_t n = out.numel();
  const int64_t blocks = (n + per_block - 1) / per_block;
  parallel_for(0, blocks, kGrainSize / 4, [&](int64_t b, int64_t e) {
    for (int64_t blk = b; blk < e; ++blk) {
      const auto r = philox4x32(seed, offset + static_cast<uint64_t>(blk));
      for (int64_t lane = 0; lane < per_block; ++lane) {
        const int64_t i = blk * per_block + lane;
        if (i < n) y[i] = value(r, lane);
      }
    }
  });
}

constexpr double kTwoPi = 6.283185307179586476925286766559;

}  // namespace

void CpuBackend::random_uniform(const Tensor& out, double from, double to, uint64_t seed, uint64_t offset) {
  EMBER_DISPATCH_FLOATING(out.dtype(), "uniform_", [&] {
    if constexpr (std::is_same_v<scalar_t, double>) {
      fill_by_block<double>(out, seed, offset, 2, [=](const std::array<uint32_t, 4>& r, int64_t lane) {
        return from + (to - from) * uniform_double(r[2 * lane], r[2 * lane + 1]);
      });
    } else {
      const float lo = static_cast<float>(from), span = static_cast<float>(to - from);
      fill_by_block<scalar_t>(out, seed, offset, 4, [=](const std::array<uint32_t, 4>& r, int64_t lane) {
        return scalar_t(lo + span * uniform_float(r[lane]));
      });
    }
  });
}

// Box-Muller: two uniforms (u1 in (0, 1]) make two normals.
void CpuBackend::random_normal(const Tensor& out, double mean, double std, uint64_t seed, uint64_t offset) {
  EMBER_DISPATCH_FLOATING(out.dtype(), "normal_", [&] {
    if constexpr (std::is_same_v<scalar_t, double>) {
      fill_by_block<double>(out, seed, offset, 2, [=](const std::array<uint32_t, 4>& r, int64_t lane) {
        const double u1 = 1.0 - uniform_double(r[0], r[1]), u2 = uniform_double(r[2], r[3]);
        const double rad = std::sqrt(-2.0 * std::log(u1)), th = kTwoPi * u2;
        return mean + std * rad * (lane == 0 ? std::cos(th) : std::sin(th));
      });
    } else {
      const float m = static_cast<float>(mean), s = static_cast<float>(std);
      fill_by_block<scalar_t>(out, seed, offset, 4, [=](const std::array<uint32_t, 4>& r, int64_t lane) {
        const int64_t pair = lane / 2 * 2;
        const float u1 = 1.0f - uniform_float(r[pair]), u2 = uniform_float(r[pair + 1]);
        const float rad = std::sqrt(-2.0f * std::log(u1)), th = static_cast<float>(kTwoPi) * u2;
        return scalar_t(m + s * rad * (lane % 2 == 0 ? std::cos(th) : std::sin(th)));
      });
    }
  });
}

// Uniform integers in [low, high) from 64 random bits (bias below 2^-32 for any range).
void CpuBackend::random_int(const Tensor& out, int64_t low, int64_t high, uint64_t seed, uint64_t offset) {
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  EMBER_DISPATCH_ALL(out.dtype(), "randint", [&] {
    fill_by_block<scalar_t>(out, seed, offset, 2, [=](const std::array<uint32_t, 4>& r, int64_t lane) {
      const uint64_t bits = (uint64_t{r[2 * lane]} << 32) | r[2 * lane + 1];
      const int64_t v = static_cast<int64_t>(static_cast<uint64_t>(low) + bits % range);
      if constexpr (std::is_same_v<scalar_t, bool>)
        return v != 0;
      else
        return scalar_t(static_cast<opmath_t<scalar_t>>(v));
    });
  });
}

}  // namespace ember::cpu
