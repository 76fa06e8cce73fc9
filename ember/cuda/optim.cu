// Fused optimizer steps on CUDA (Note [Fused optimizer steps]): one launch updates up to 32
// parameters; each block takes a 64K-element chunk of one of them. The per-element math is
// the CPU's (tensor/cpu/optim.cpp), line for line, in the parameter's opmath type.
#include <cmath>

#include "ember/cuda/cuda.h"
#include "ember/cuda/cuda_backend.h"
#include "ember/cuda/loops.cuh"

namespace ember::cuda {
namespace {

constexpr int kMaxTensors = 32;
constexpr int64_t kChunk = 65536;

// What one launch updates: NPtr tensors per parameter (param, grad, state...), all of one dtype.
template <int NPtr>
struct TensorBatch {
  void* ptr[NPtr][kMaxTensors];
  int64_t* step[kMaxTensors] = {};  // each parameter's step count (one int64 on the device)
  int64_t numel[kMaxTensors];
  int64_t chunk_start[kMaxTensors + 1];  // blocks before each parameter's first chunk
  const float* found_inf = nullptr;      // nonzero: the step is skipped (nullptr: never)
  int count = 0;
};

template <int NPtr>
__device__ __forceinline__ bool skipped(const TensorBatch<NPtr>& b) {
  return b.found_inf != nullptr && *b.found_inf != 0.0f;
}

// The step counts of a batch += 1, unless the step is skipped; one thread per parameter,
// launched before the update (which reads the new counts).
template <int NPtr>
__global__ void bump_steps_kernel(TensorBatch<NPtr> batch) {
  if (threadIdx.x < batch.count && !skipped(batch)) ++*batch.step[threadIdx.x];
}

// Calls f(batch, tensor, element, c) for every element of every tensor of the batch, where
// c = setup(batch, tensor) is computed once per thread (per-parameter coefficients); nothing
// when the step is skipped.
template <int NPtr, class Setup, class F>
__global__ void batch_kernel(TensorBatch<NPtr> batch, Setup setup, F f) {
  if (skipped(batch)) return;
  int t = 0;
  while (t + 1 < batch.count && blockIdx.x >= batch.chunk_start[t + 1]) ++t;
  const int64_t begin = (blockIdx.x - batch.chunk_start[t]) * kChunk;
  const int64_t end = min(batch.numel[t], begin + kChunk);
  const auto c = setup(batch, t);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) f(batch, t, i, c);
}

struct NoSetup {
  template <int NPtr>
  __device__ int operator()(const TensorBatch<NPtr>&, int) const {
    return 0;
  }
};

// Groups the parameters into launches of up to kMaxTensors of one dtype; fill(batch, slot,
// param index) sets the pointers and coefficients of one slot.
template <int NPtr, class P, class Fill, class Launch>
void for_each_batch(const std::vector<P>& params, const Fill& fill, const Launch& launch) {
  if (params.empty()) return;
  DeviceGuard guard(params.front().param.device().index);  // the kernels run on the parameters' device
  for (const P& p : params)
    EMBER_CHECK(p.param.dtype() == kFloat32 || p.param.dtype() == kFloat64 || p.param.dtype() == kFloat16 ||
                    p.param.dtype() == kBFloat16,
                "optimizer step on CUDA: parameters must be floating point, got ", p.param.dtype());
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    TensorBatch<NPtr> batch;
    int64_t blocks = 0;
    auto flush = [&] {
      if (batch.count == 0) return;
      batch.chunk_start[batch.count] = blocks;
      launch(batch, dtype, blocks);
      batch = TensorBatch<NPtr>();
      blocks = 0;
    };
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor& p = params[i].param;
      if (p.dtype() != dtype) continue;  // empty ones too: their step counts advance
      const int slot = batch.count++;
      batch.numel[slot] = p.numel();
      batch.chunk_start[slot] = blocks;
      blocks += (p.numel() + kChunk - 1) / kChunk;
      fill(batch, slot, i);
      if (batch.count == kMaxTensors) flush();
    }
    flush();
  }
}

void* ptr(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

// One launch over the batch: the step counts first (when the batch has them), then the update.
template <int NPtr, class Setup, class F>
void launch_batch(const TensorBatch<NPtr>& batch, int64_t blocks, cudaStream_t stream, const Setup& setup, const F& f) {
  EMBER_CHECK(blocks <= 0x7fffffff, "optimizer step on CUDA: too many elements in one launch");
  if (batch.step[0] != nullptr) {
    bump_steps_kernel<NPtr><<<1, kMaxTensors, 0, stream>>>(batch);
    EMBER_KERNEL_CHECK();
  }
  if (blocks == 0) return;  // only empty tensors
  batch_kernel<NPtr><<<static_cast<unsigned>(blocks), kBlock, 0, stream>>>(batch, setup, f);
  EMBER_KERNEL_CHECK();
}

const float* found_inf_ptr(const Tensor& found_inf) {
  return found_inf.defined() ? static_cast<const float*>(found_inf.data_ptr()) : nullptr;
}
int64_t* step_ptr(const Tensor& step) { return static_cast<int64_t*>(step.data_ptr()); }

template <class A>
struct AdamCoeffs {
  A step_size, bc2_sqrt;
};

template <class T, class A>
__device__ __forceinline__ A ld(void* p, int64_t i) {
  return convert<A>(static_cast<const T*>(p)[i]);
}
template <class T, class A>
__device__ __forceinline__ void st(void* p, int64_t i, A v) {
  static_cast<T*>(p)[i] = convert<T>(v);
}

}  // namespace

// slots: param, grad, momentum buffer; on the first step (count 1) the buffer starts as d
void CudaBackend::sgd_step(const std::vector<SgdParam>& params, const SgdStep& s) {
  if (params.empty()) return;
  const cudaStream_t stream = stream_of(params.front().param);
  for_each_batch<3>(
      params,
      [&](TensorBatch<3>& b, int slot, size_t i) {
        b.ptr[0][slot] = ptr(params[i].param);
        b.ptr[1][slot] = ptr(params[i].grad);
        b.ptr[2][slot] = ptr(params[i].momentum_buffer);
        b.step[slot] = step_ptr(params[i].step);
        b.found_inf = found_inf_ptr(s.found_inf);
      },
      [&](const TensorBatch<3>& batch, DType dtype, int64_t blocks) {
        EMBER_CUDA_DISPATCH_FLOATING(dtype, "sgd_step", [&] {
          using T = scalar_t;
          using A = opmath_t<T>;
          const A lr = static_cast<A>(s.lr), mu = static_cast<A>(s.momentum), wd = static_cast<A>(s.weight_decay);
          const A keep = static_cast<A>(1.0 - s.dampening), sign = s.maximize ? A(-1) : A(1);
          const A nd = s.nesterov ? A(1) : A(0), nb = s.nesterov ? mu : A(1);
          const bool momentum = s.momentum != 0;
          const auto first_step = [] __device__(const TensorBatch<3>& b, int t) { return *b.step[t] == 1; };
          launch_batch(batch, blocks, stream, first_step,
                       [=] __device__(const TensorBatch<3>& b, int t, int64_t i, bool first) {
                         const A pi = ld<T, A>(b.ptr[0][t], i);
                         A d = sign * ld<T, A>(b.ptr[1][t], i) + wd * pi;
                         if (momentum) {
                           const A bi = first ? d : ld<T, A>(b.ptr[2][t], i) * mu + keep * d;
                           st<T, A>(b.ptr[2][t], i, bi);
                           d = d * nd + bi * nb;
                         }
                         st<T, A>(b.ptr[0][t], i, pi - lr * d);
                       });
        });
      });
}

// slots: param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq; per thread: lr / bc1, √bc2 from the
// step count
void CudaBackend::adam_step(const std::vector<AdamParam>& params, const AdamStep& s) {
  if (params.empty()) return;
  const cudaStream_t stream = stream_of(params.front().param);
  for_each_batch<5>(
      params,
      [&](TensorBatch<5>& b, int slot, size_t i) {
        const AdamParam& p = params[i];
        b.ptr[0][slot] = ptr(p.param);
        b.ptr[1][slot] = ptr(p.grad);
        b.ptr[2][slot] = ptr(p.exp_avg);
        b.ptr[3][slot] = ptr(p.exp_avg_sq);
        b.ptr[4][slot] = ptr(p.max_exp_avg_sq);
        b.step[slot] = step_ptr(p.step);
        b.found_inf = found_inf_ptr(s.found_inf);
      },
      [&](const TensorBatch<5>& batch, DType dtype, int64_t blocks) {
        EMBER_CUDA_DISPATCH_FLOATING(dtype, "adam_step", [&] {
          using T = scalar_t;
          using A = opmath_t<T>;
          const A beta1 = static_cast<A>(s.beta1), beta2 = static_cast<A>(s.beta2);
          const A one_minus_beta1 = static_cast<A>(1.0 - s.beta1), one_minus_beta2 = static_cast<A>(1.0 - s.beta2);
          const A eps = static_cast<A>(s.eps), sign = s.maximize ? A(-1) : A(1);
          const A l2 = s.decoupled_weight_decay ? A(0) : static_cast<A>(s.weight_decay);
          const A decay = static_cast<A>(s.decoupled_weight_decay ? 1.0 - s.lr * s.weight_decay : 1.0);
          const bool amsgrad = s.amsgrad;
          const double lr = s.lr, beta1_d = s.beta1, beta2_d = s.beta2;
          const auto coefficients = [=] __device__(const TensorBatch<5>& b, int t) {
            const double step = static_cast<double>(*b.step[t]);
            return AdamCoeffs<A>{static_cast<A>(lr / (1.0 - pow(beta1_d, step))),
                                 static_cast<A>(sqrt(1.0 - pow(beta2_d, step)))};
          };
          launch_batch(batch, blocks, stream, coefficients,
                       [=] __device__(const TensorBatch<5>& b, int t, int64_t i, AdamCoeffs<A> c) {
                         const A step_size = c.step_size, bc2_sqrt = c.bc2_sqrt;
                         const A p0 = ld<T, A>(b.ptr[0][t], i);
                         const A gi = sign * ld<T, A>(b.ptr[1][t], i) + l2 * p0;
                         const A mi = ld<T, A>(b.ptr[2][t], i) * beta1 + one_minus_beta1 * gi;
                         A vi = ld<T, A>(b.ptr[3][t], i) * beta2 + one_minus_beta2 * gi * gi;
                         st<T, A>(b.ptr[2][t], i, mi);
                         st<T, A>(b.ptr[3][t], i, vi);
                         if (amsgrad) {
                           vi = max(ld<T, A>(b.ptr[4][t], i), vi);
                           st<T, A>(b.ptr[4][t], i, vi);
                         }
                         const A denom = sqrt(vi) / bc2_sqrt + eps;
                         st<T, A>(b.ptr[0][t], i, p0 * decay - step_size * (mi / denom));
                       });
        });
      });
}

// slots: param, grad, square_avg, grad_avg, momentum buffer
void CudaBackend::rmsprop_step(const std::vector<RmspropParam>& params, const RmspropStep& s) {
  if (params.empty()) return;
  const cudaStream_t stream = stream_of(params.front().param);
  for_each_batch<5>(
      params,
      [&](TensorBatch<5>& b, int slot, size_t i) {
        const RmspropParam& p = params[i];
        b.ptr[0][slot] = ptr(p.param);
        b.ptr[1][slot] = ptr(p.grad);
        b.ptr[2][slot] = ptr(p.square_avg);
        b.ptr[3][slot] = ptr(p.grad_avg);
        b.ptr[4][slot] = ptr(p.momentum_buffer);
        b.step[slot] = step_ptr(p.step);
        b.found_inf = found_inf_ptr(s.found_inf);
      },
      [&](const TensorBatch<5>& batch, DType dtype, int64_t blocks) {
        EMBER_CUDA_DISPATCH_FLOATING(dtype, "rmsprop_step", [&] {
          using T = scalar_t;
          using A = opmath_t<T>;
          const A lr = static_cast<A>(s.lr), alpha = static_cast<A>(s.alpha);
          const A one_minus_alpha = static_cast<A>(1.0 - s.alpha), eps = static_cast<A>(s.eps);
          const A wd = static_cast<A>(s.weight_decay), mu = static_cast<A>(s.momentum);
          const A sign = s.maximize ? A(-1) : A(1);
          const bool centered = s.centered, momentum = s.momentum > 0;
          launch_batch(batch, blocks, stream, NoSetup{},
                       [=] __device__(const TensorBatch<5>& b, int t, int64_t i, int) {
                         const A pi = ld<T, A>(b.ptr[0][t], i);
                         const A gi = sign * ld<T, A>(b.ptr[1][t], i) + wd * pi;
                         const A si = ld<T, A>(b.ptr[2][t], i) * alpha + one_minus_alpha * gi * gi;
                         st<T, A>(b.ptr[2][t], i, si);
                         A var = si;
                         if (centered) {
                           const A gai = ld<T, A>(b.ptr[3][t], i) * alpha + one_minus_alpha * gi;
                           st<T, A>(b.ptr[3][t], i, gai);
                           var = si - gai * gai;
                         }
                         const A avg = sqrt(var) + eps;
                         if (momentum) {
                           const A bi = ld<T, A>(b.ptr[4][t], i) * mu + gi / avg;
                           st<T, A>(b.ptr[4][t], i, bi);
                           st<T, A>(b.ptr[0][t], i, pi - lr * bi);
                         } else {
                           st<T, A>(b.ptr[0][t], i, pi - lr * (gi / avg));
                         }
                       });
        });
      });
}

// slots: param, grad, sum; per thread: -lr / (1 + (step - 1) lr_decay) from the step count
void CudaBackend::adagrad_step(const std::vector<AdagradParam>& params, const AdagradStep& s) {
  if (params.empty()) return;
  const cudaStream_t stream = stream_of(params.front().param);
  for_each_batch<3>(
      params,
      [&](TensorBatch<3>& b, int slot, size_t i) {
        b.ptr[0][slot] = ptr(params[i].param);
        b.ptr[1][slot] = ptr(params[i].grad);
        b.ptr[2][slot] = ptr(params[i].sum);
        b.step[slot] = step_ptr(params[i].step);
        b.found_inf = found_inf_ptr(s.found_inf);
      },
      [&](const TensorBatch<3>& batch, DType dtype, int64_t blocks) {
        EMBER_CUDA_DISPATCH_FLOATING(dtype, "adagrad_step", [&] {
          using T = scalar_t;
          using A = opmath_t<T>;
          const A eps = static_cast<A>(s.eps), wd = static_cast<A>(s.weight_decay);
          const A sign = s.maximize ? A(-1) : A(1);
          const double lr = s.lr, lr_decay = s.lr_decay;
          const auto minus_clr = [=] __device__(const TensorBatch<3>& b, int t) {
            return static_cast<A>(-(lr / (1.0 + static_cast<double>(*b.step[t] - 1) * lr_decay)));
          };
          launch_batch(batch, blocks, stream, minus_clr,
                       [=] __device__(const TensorBatch<3>& b, int t, int64_t i, A mclr) {
                         const A pi = ld<T, A>(b.ptr[0][t], i);
                         const A gi = sign * ld<T, A>(b.ptr[1][t], i) + wd * pi;
                         const A si = ld<T, A>(b.ptr[2][t], i) + gi * gi;
                         st<T, A>(b.ptr[2][t], i, si);
                         st<T, A>(b.ptr[0][t], i, pi + mclr * gi / (sqrt(si) + eps));
                       });
        });
      });
}

// ---- the GradScaler's kernels ----

namespace {
// One update of the loss scale, by a single thread: the state lives on the device.
__global__ void update_scale_kernel(float* scale, int32_t* tracker, const float* found_inf, double growth,
                                    double backoff, int64_t interval) {
  if (*found_inf != 0.0f) {
    *scale = static_cast<float>(*scale * backoff);
    *tracker = 0;
    return;
  }
  const auto successful = static_cast<int32_t>(static_cast<uint32_t>(*tracker) + 1u);  // wraps, as the CPU's
  if (successful == interval) {
    const float grown = static_cast<float>(*scale * growth);
    if (isfinite(grown)) *scale = grown;
    *tracker = 0;
  } else {
    *tracker = successful;
  }
}

// for_each_batch's view of one gradient
struct GradOperand {
  Tensor param;  // the gradient (for_each_batch reads .param)
};
}  // namespace

// slots: grad. Every block may find a non-finite element; all of them write the same 1.
void CudaBackend::amp_unscale(const std::vector<Tensor>& grads, const Tensor& found_inf, const Tensor& inv_scale) {
  if (grads.empty()) return;
  std::vector<GradOperand> operands;
  for (const Tensor& g : grads) operands.push_back({g});
  const cudaStream_t stream = stream_of(grads.front());
  float* found = static_cast<float*>(found_inf.data_ptr());
  const float* inv = static_cast<const float*>(inv_scale.data_ptr());
  for_each_batch<1>(
      operands, [&](TensorBatch<1>& b, int slot, size_t i) { b.ptr[0][slot] = ptr(operands[i].param); },
      [&](const TensorBatch<1>& batch, DType dtype, int64_t blocks) {
        EMBER_CUDA_DISPATCH_FLOATING(dtype, "amp_unscale", [&] {
          using T = scalar_t;
          using A = opmath_t<T>;
          launch_batch(batch, blocks, stream, NoSetup{},
                       [=] __device__(const TensorBatch<1>& b, int t, int64_t i, int) {
                         const A v = ld<T, A>(b.ptr[0][t], i);
                         if (!isfinite(v)) *found = 1.0f;
                         st<T, A>(b.ptr[0][t], i, v * static_cast<A>(*inv));
                       });
        });
      });
}

void CudaBackend::amp_update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                                   double growth, double backoff, int64_t interval) {
  DeviceGuard guard(scale.device().index);
  update_scale_kernel<<<1, 1, 0, stream_of(scale)>>>(
      static_cast<float*>(scale.data_ptr()), static_cast<int32_t*>(growth_tracker.data_ptr()),
      static_cast<const float*>(found_inf.data_ptr()), growth, backoff, interval);
  EMBER_KERNEL_CHECK();
}

}  // namespace ember::cuda
