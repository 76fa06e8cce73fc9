// Random fills on CUDA from the CPU's Philox stream (Note [Philox streams]): the same blocks
// and lanes, so the same seed gives the same numbers on both devices (tensor/cpu/random.cpp).
#include <cmath>
#include <cstring>

#include "ember/cuda/cuda.h"
#include "ember/cuda/cuda_backend.h"
#include "ember/cuda/loops.cuh"
#include "ember/tensor/generator.h"
#include "ember/tensor/ops.h"

namespace ember::cuda {

namespace {
template <class T, int PerBlock, class F>
__global__ void philox_fill(T* out, int64_t n, uint64_t seed, uint64_t offset, F value) {
  const int64_t blocks = (n + PerBlock - 1) / PerBlock;
  for (int64_t blk = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; blk < blocks;
       blk += int64_t{gridDim.x} * blockDim.x) {
    const auto r = philox4x32(seed, offset + static_cast<uint64_t>(blk));
#pragma unroll
    for (int lane = 0; lane < PerBlock; ++lane) {
      const int64_t i = blk * PerBlock + lane;
      if (i < n) out[i] = value(r, lane);
    }
  }
}

template <class T, int PerBlock, class F>
void launch_philox(const Tensor& out, uint64_t seed, uint64_t offset, const F& f) {
  const int64_t n = out.numel();
  if (n == 0) return;
  DeviceGuard guard(out.device().index);
  philox_fill<T, PerBlock><<<grid_for((n + PerBlock - 1) / PerBlock), kBlock, 0, stream_of(out)>>>(
      static_cast<T*>(out.data_ptr()), n, seed, offset, f);
  EMBER_KERNEL_CHECK();
}

constexpr double kTwoPi = 6.283185307179586476925286766559;
}  // namespace

void CudaBackend::random_uniform(const Tensor& out, double from, double to, uint64_t seed, uint64_t offset) {
  EMBER_CUDA_DISPATCH_FLOATING(out.dtype(), "uniform_", [&] {
    using T = scalar_t;
    if constexpr (std::is_same_v<T, double>) {
      launch_philox<double, 2>(out, seed, offset, [=] __device__(const std::array<uint32_t, 4>& r, int lane) {
        return from + (to - from) * uniform_double(r[2 * lane], r[2 * lane + 1]);
      });
    } else {
      const float lo = static_cast<float>(from), span = static_cast<float>(to - from);
      launch_philox<T, 4>(out, seed, offset, [=] __device__(const std::array<uint32_t, 4>& r, int lane) {
        return convert<T>(lo + span * uniform_float(r[lane]));
      });
    }
  });
}

void CudaBackend::random_normal(const Tensor& out, double mean, double std, uint64_t seed, uint64_t offset) {
  EMBER_CUDA_DISPATCH_FLOATING(out.dtype(), "normal_", [&] {
    using T = scalar_t;
    if constexpr (std::is_same_v<T, double>) {
      launch_philox<double, 2>(out, seed, offset, [=] __device__(const std::array<uint32_t, 4>& r, int lane) {
        const double u1 = 1.0 - uniform_double(r[0], r[1]), u2 = uniform_double(r[2], r[3]);
        const double rad = sqrt(-2.0 * log(u1)), th = kTwoPi * u2;
        return mean + std * rad * (lane == 0 ? cos(th) : sin(th));
      });
    } else {
      const float m = static_cast<float>(mean), s = static_cast<float>(std);
      launch_philox<T, 4>(out, seed, offset, [=] __device__(const std::array<uint32_t, 4>& r, int lane) {
        const int pair = lane / 2 * 2;
        const float u1 = 1.0f - uniform_float(r[pair]), u2 = uniform_float(r[pair + 1]);
        const float rad = sqrtf(-2.0f * logf(u1)), th = static_cast<float>(kTwoPi) * u2;
        return convert<T>(m + s * rad * (lane % 2 == 0 ? cosf(th) : sinf(th)));
      });
    }
  });
}

void CudaBackend::random_int(const Tensor& out, int64_t low, int64_t high, uint64_t seed, uint64_t offset) {
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  EMBER_CUDA_DISPATCH_ALL(out.dtype(), "randint", [&] {
    using T = scalar_t;
    launch_philox<T, 2>(out, seed, offset, [=] __device__(const std::array<uint32_t, 4>& r, int lane) {
      const uint64_t bits = (uint64_t{r[2 * lane]} << 32) | r[2 * lane + 1];
      const int64_t v = static_cast<int64_t>(static_cast<uint64_t>(low) + bits % range);
      return convert<T>(static_cast<opmath_t<T>>(v));
    });
  });
}

// As tensor/cpu/random.cpp: u < p as the integer compare m < ceil(p 2^24) (53 bits for doubles).
void CudaBackend::random_bernoulli(const Tensor& out, double p, double value, uint64_t seed, uint64_t offset) {
  EMBER_CUDA_DISPATCH_ALL(out.dtype(), "bernoulli_", [&] {
    using T = scalar_t;
    // value in out's dtype, converted on the host as the CPU back end converts it; 0 is all zero bits.
    const Tensor host_on = full({}, value, TensorOptions(out.dtype()));
    T on, off;
    std::memcpy(&on, host_on.data_ptr(), sizeof(T));
    std::memset(&off, 0, sizeof(T));
    if (out.dtype() == kFloat64) {
      const uint64_t bound = static_cast<uint64_t>(std::ceil(p * 9007199254740992.0));
      launch_philox<T, 2>(out, seed, offset, [=] __device__(const std::array<uint32_t, 4>& r, int lane) {
        return (((uint64_t{r[2 * lane]} << 32) | r[2 * lane + 1]) >> 11) < bound ? on : off;
      });
    } else {
      const uint32_t bound = static_cast<uint32_t>(std::ceil(p * 16777216.0));
      launch_philox<T, 4>(out, seed, offset, [=] __device__(const std::array<uint32_t, 4>& r, int lane) {
        return (r[lane] >> 8) < bound ? on : off;
      });
    }
  });
}

}  // namespace ember::cuda
