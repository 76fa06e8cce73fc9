// Fused optimizer steps (Note [Fused optimizer steps] in tensor/backend.h): every parameter
// of a step in one parallel region, each element's update written out in the order PyTorch's
// single-tensor optimizers apply their ops, in the parameter's opmath type. The options that
// change the shape of the loop (momentum, amsgrad, centering) are template arguments, so each
// inner loop is branch-free and the compiler vectorizes it.
#include <array>
#include <atomic>
#include <cmath>

#include "ember/tensor/cpu/cpu_backend.h"
#include "ember/tensor/parallel.h"

namespace ember::cpu {

namespace {

template <class T>
T* ptr(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.data_ptr()) : nullptr;
}

// Runs f(index, begin, end) over chunks of at most kGrainSize elements of every tensor, in
// parallel: many small parameters share the threads as well as one large one does. Below
// 2 · kGrainSize elements in all it stays on the calling thread, however many tensors: a
// parallel region for a few hundred elements costs more than the work (and, on a loaded
// machine, a wait for a core).
template <class F>
void for_each_chunk(const std::vector<int64_t>& numels, const F& f) {
  std::vector<std::array<int64_t, 3>> chunks;
  int64_t total = 0;
  for (size_t i = 0; i < numels.size(); ++i) {
    total += numels[i];
    for (int64_t b = 0; b < numels[i]; b += kGrainSize)
      chunks.push_back({static_cast<int64_t>(i), b, std::min(numels[i], b + kGrainSize)});
  }
  const int64_t grain = total < 2 * kGrainSize ? static_cast<int64_t>(chunks.size()) : 1;  // in chunks
  parallel_for(0, static_cast<int64_t>(chunks.size()), grain, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) f(static_cast<size_t>(chunks[c][0]), chunks[c][1], chunks[c][2]);
  });
}

template <class P>
std::vector<int64_t> numels_of(const std::vector<P>& params) {
  std::vector<int64_t> out;
  for (const auto& p : params) out.push_back(p.param.numel());
  return out;
}

// The start of every step (Note [Fused optimizer steps]): false when the overflow flag says to
// skip; otherwise each parameter's step count is incremented and true returned.
template <class P>
bool begin_step(const std::vector<P>& params, const Tensor& found_inf) {
  if (found_inf.defined() && *static_cast<const float*>(found_inf.data_ptr()) != 0.0f) return false;
  for (const P& p : params) ++*static_cast<int64_t*>(p.step.data_ptr());
  return true;
}

int64_t step_of(const Tensor& step) { return *static_cast<const int64_t*>(step.data_ptr()); }

// ---- SGD ----

template <class T, bool kMomentum, bool kFirst>
void sgd_chunk(const SgdParam& t, const SgdStep& s, int64_t b, int64_t e) {
  using A = opmath_t<T>;
  T* p = ptr<T>(t.param);
  const T* g = ptr<T>(t.grad);
  T* buf = ptr<T>(t.momentum_buffer);
  const A lr = static_cast<A>(s.lr), mu = static_cast<A>(s.momentum), wd = static_cast<A>(s.weight_decay);
  const A keep = static_cast<A>(1.0 - s.dampening), sign = s.maximize ? A(-1) : A(1);
  // nesterov: d + μ·buf; otherwise buf. As d·nd + buf·nb, without a branch.
  const A nd = s.nesterov ? A(1) : A(0), nb = s.nesterov ? mu : A(1);
  for (int64_t i = b; i < e; ++i) {
    const A pi = static_cast<A>(p[i]);
    A d = sign * static_cast<A>(g[i]) + wd * pi;
    if constexpr (kMomentum) {
      const A bi = kFirst ? d : static_cast<A>(buf[i]) * mu + keep * d;
      buf[i] = static_cast<T>(bi);
      d = d * nd + bi * nb;
    }
    p[i] = static_cast<T>(pi - lr * d);
  }
}

// ---- Adam / AdamW ----

struct AdamCoeffs {
  double step_size, bc2_sqrt;
};

template <class T, bool kAmsgrad>
void adam_chunk(const AdamParam& t, const AdamStep& s, const AdamCoeffs& c, int64_t b, int64_t e) {
  using A = opmath_t<T>;
  T* p = ptr<T>(t.param);
  const T* g = ptr<T>(t.grad);
  T* m = ptr<T>(t.exp_avg);
  T* v = ptr<T>(t.exp_avg_sq);
  T* vmax = ptr<T>(t.max_exp_avg_sq);
  const A step_size = static_cast<A>(c.step_size), bc2_sqrt = static_cast<A>(c.bc2_sqrt);
  const A beta1 = static_cast<A>(s.beta1), beta2 = static_cast<A>(s.beta2);
  const A one_minus_beta1 = static_cast<A>(1.0 - s.beta1), one_minus_beta2 = static_cast<A>(1.0 - s.beta2);
  const A eps = static_cast<A>(s.eps), sign = s.maximize ? A(-1) : A(1);
  const A l2 = s.decoupled_weight_decay ? A(0) : static_cast<A>(s.weight_decay);
  const A decay = static_cast<A>(s.decoupled_weight_decay ? 1.0 - s.lr * s.weight_decay : 1.0);
  for (int64_t i = b; i < e; ++i) {
    const A p0 = static_cast<A>(p[i]);
    const A gi = sign * static_cast<A>(g[i]) + l2 * p0;
    const A mi = static_cast<A>(m[i]) * beta1 + one_minus_beta1 * gi;
    A vi = static_cast<A>(v[i]) * beta2 + one_minus_beta2 * gi * gi;
    m[i] = static_cast<T>(mi);
    v[i] = static_cast<T>(vi);
    if constexpr (kAmsgrad) {
      vi = std::max(static_cast<A>(vmax[i]), vi);
      vmax[i] = static_cast<T>(vi);
    }
    const A denom = std::sqrt(vi) / bc2_sqrt + eps;
    p[i] = static_cast<T>(p0 * decay - step_size * (mi / denom));
  }
}

// ---- RMSprop ----

template <class T, bool kCentered, bool kMomentum>
void rmsprop_chunk(const RmspropParam& t, const RmspropStep& s, int64_t b, int64_t e) {
  using A = opmath_t<T>;
  T* p = ptr<T>(t.param);
  const T* g = ptr<T>(t.grad);
  T* sq = ptr<T>(t.square_avg);
  T* ga = ptr<T>(t.grad_avg);
  T* buf = ptr<T>(t.momentum_buffer);
  const A lr = static_cast<A>(s.lr), alpha = static_cast<A>(s.alpha), one_minus_alpha = static_cast<A>(1.0 - s.alpha);
  const A eps = static_cast<A>(s.eps), wd = static_cast<A>(s.weight_decay), mu = static_cast<A>(s.momentum);
  const A sign = s.maximize ? A(-1) : A(1);
  for (int64_t i = b; i < e; ++i) {
    const A pi = static_cast<A>(p[i]);
    const A gi = sign * static_cast<A>(g[i]) + wd * pi;
    const A si = static_cast<A>(sq[i]) * alpha + one_minus_alpha * gi * gi;
    sq[i] = static_cast<T>(si);
    A var = si;
    if constexpr (kCentered) {
      const A gai = static_cast<A>(ga[i]) * alpha + one_minus_alpha * gi;
      ga[i] = static_cast<T>(gai);
      var = si - gai * gai;
    }
    const A avg = std::sqrt(var) + eps;
    if constexpr (kMomentum) {
      const A bi = static_cast<A>(buf[i]) * mu + gi / avg;
      buf[i] = static_cast<T>(bi);
      p[i] = static_cast<T>(pi - lr * bi);
    } else {
      p[i] = static_cast<T>(pi - lr * (gi / avg));
    }
  }
}

// ---- Adagrad ----

template <class T>
void adagrad_chunk(const AdagradParam& t, const AdagradStep& s, double clr, int64_t b, int64_t e) {
  using A = opmath_t<T>;
  T* p = ptr<T>(t.param);
  const T* g = ptr<T>(t.grad);
  T* sum = ptr<T>(t.sum);
  const A minus_clr = static_cast<A>(-clr), eps = static_cast<A>(s.eps), wd = static_cast<A>(s.weight_decay);
  const A sign = s.maximize ? A(-1) : A(1);
  for (int64_t i = b; i < e; ++i) {
    const A pi = static_cast<A>(p[i]);
    const A gi = sign * static_cast<A>(g[i]) + wd * pi;
    const A si = static_cast<A>(sum[i]) + gi * gi;
    sum[i] = static_cast<T>(si);
    p[i] = static_cast<T>(pi + minus_clr * gi / (std::sqrt(si) + eps));
  }
}

}  // namespace

void CpuBackend::sgd_step(const std::vector<SgdParam>& params, const SgdStep& s) {
  if (!begin_step(params, s.found_inf)) return;
  for_each_chunk(numels_of(params), [&](size_t i, int64_t b, int64_t e) {
    const SgdParam& t = params[i];
    EMBER_DISPATCH_FLOATING(t.param.dtype(), "sgd_step", [&] {
      if (s.momentum == 0)
        sgd_chunk<scalar_t, false, false>(t, s, b, e);
      else if (step_of(t.step) == 1)
        sgd_chunk<scalar_t, true, true>(t, s, b, e);
      else
        sgd_chunk<scalar_t, true, false>(t, s, b, e);
    });
  });
}

void CpuBackend::adam_step(const std::vector<AdamParam>& params, const AdamStep& s) {
  if (!begin_step(params, s.found_inf)) return;
  std::vector<AdamCoeffs> coeffs;
  for (const auto& t : params) {
    const double step = static_cast<double>(step_of(t.step));
    coeffs.push_back({s.lr / (1.0 - std::pow(s.beta1, step)), std::sqrt(1.0 - std::pow(s.beta2, step))});
  }
  for_each_chunk(numels_of(params), [&](size_t i, int64_t b, int64_t e) {
    EMBER_DISPATCH_FLOATING(params[i].param.dtype(), "adam_step", [&] {
      if (s.amsgrad)
        adam_chunk<scalar_t, true>(params[i], s, coeffs[i], b, e);
      else
        adam_chunk<scalar_t, false>(params[i], s, coeffs[i], b, e);
    });
  });
}

void CpuBackend::rmsprop_step(const std::vector<RmspropParam>& params, const RmspropStep& s) {
  if (!begin_step(params, s.found_inf)) return;
  for_each_chunk(numels_of(params), [&](size_t i, int64_t b, int64_t e) {
    EMBER_DISPATCH_FLOATING(params[i].param.dtype(), "rmsprop_step", [&] {
      const bool momentum = s.momentum > 0;
      if (s.centered && momentum)
        rmsprop_chunk<scalar_t, true, true>(params[i], s, b, e);
      else if (s.centered)
        rmsprop_chunk<scalar_t, true, false>(params[i], s, b, e);
      else if (momentum)
        rmsprop_chunk<scalar_t, false, true>(params[i], s, b, e);
      else
        rmsprop_chunk<scalar_t, false, false>(params[i], s, b, e);
    });
  });
}

void CpuBackend::adagrad_step(const std::vector<AdagradParam>& params, const AdagradStep& s) {
  if (!begin_step(params, s.found_inf)) return;
  std::vector<double> clr;  // each parameter's decayed learning rate, from its own step count
  for (const auto& t : params) clr.push_back(s.lr / (1.0 + static_cast<double>(step_of(t.step) - 1) * s.lr_decay));
  for_each_chunk(numels_of(params), [&](size_t i, int64_t b, int64_t e) {
    EMBER_DISPATCH_FLOATING(params[i].param.dtype(), "adagrad_step",
                            [&] { adagrad_chunk<scalar_t>(params[i], s, clr[i], b, e); });
  });
}

// ---- the GradScaler's kernels ----

// found_inf |= any non-finite element; grads *= inv_scale (each in its opmath type)
void CpuBackend::amp_unscale(const std::vector<Tensor>& grads, const Tensor& found_inf, const Tensor& inv_scale) {
  const float inv = *static_cast<const float*>(inv_scale.data_ptr());
  std::vector<int64_t> numels;
  for (const Tensor& g : grads) numels.push_back(g.numel());
  std::atomic<bool> non_finite{false};
  for_each_chunk(numels, [&](size_t i, int64_t b, int64_t e) {
    EMBER_DISPATCH_FLOATING(grads[i].dtype(), "amp_unscale", [&] {
      using A = opmath_t<scalar_t>;
      scalar_t* g = ptr<scalar_t>(grads[i]);
      bool finite = true;
      for (int64_t k = b; k < e; ++k) {
        const A v = static_cast<A>(g[k]);
        finite &= std::isfinite(v);
        g[k] = static_cast<scalar_t>(v * static_cast<A>(inv));
      }
      if (!finite) non_finite.store(true, std::memory_order_relaxed);
    });
  });
  if (non_finite.load()) *static_cast<float*>(found_inf.data_ptr()) = 1.0f;
}

void CpuBackend::amp_update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                                  double growth, double backoff, int64_t interval) {
  float& s = *static_cast<float*>(scale.data_ptr());
  int32_t& tracker = *static_cast<int32_t*>(growth_tracker.data_ptr());
  if (*static_cast<const float*>(found_inf.data_ptr()) != 0.0f) {
    s = static_cast<float>(s * backoff);
    tracker = 0;
    return;
  }
  // (a tracker of INT32_MAX, possible only in a tracker given to the native op, wraps as the
  // int32 of PyTorch's CUDA kernel does: signed overflow is undefined in C++)
  const auto successful = static_cast<int32_t>(static_cast<uint32_t>(tracker) + 1u);
  if (successful == interval) {
    const float grown = static_cast<float>(s * growth);
    if (std::isfinite(grown)) s = grown;
    tracker = 0;
  } else {
    tracker = successful;
  }
}

}  // namespace ember::cpu
