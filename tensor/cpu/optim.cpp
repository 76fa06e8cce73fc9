// Fused optimizer steps (Note [Fused optimizer steps] in tensor/backend.h): one pass per
// parameter, each element's update written out in the order PyTorch's single-tensor
// optimizers apply their ops, in the parameter's opmath type.
#include <cmath>

#include "tensor/cpu/kernels.h"
#include "tensor/parallel.h"

namespace ember::cpu {

namespace {

template <class T>
T* ptr(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.data_ptr()) : nullptr;
}

}  // namespace

// param, grad, momentum_buffer: [n]
void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdStep& s) {
  EMBER_DISPATCH_FLOATING(param.dtype(), "sgd_step", [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    T* p = ptr<T>(param);
    const T* g = ptr<T>(grad);
    T* buf = ptr<T>(momentum_buffer);
    const A lr = static_cast<A>(s.lr), mu = static_cast<A>(s.momentum), wd = static_cast<A>(s.weight_decay);
    const A keep = static_cast<A>(1.0 - s.dampening);
    const bool use_momentum = s.momentum != 0, first = s.first_step, nesterov = s.nesterov;
    const A sign = s.maximize ? A(-1) : A(1);
    parallel_for(0, param.numel(), kGrainSize, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const A pi = static_cast<A>(p[i]);
        A d = sign * static_cast<A>(g[i]);
        if (wd != A(0)) d = d + wd * pi;
        if (use_momentum) {
          const A bi = first ? d : static_cast<A>(buf[i]) * mu + keep * d;
          buf[i] = static_cast<T>(bi);
          d = nesterov ? d + mu * bi : bi;
        }
        p[i] = static_cast<T>(pi - lr * d);
      }
    });
  });
}

// param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq: [n]
void adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const Tensor& max_exp_avg_sq, const AdamStep& s) {
  EMBER_DISPATCH_FLOATING(param.dtype(), "adam_step", [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    T* p = ptr<T>(param);
    const T* g = ptr<T>(grad);
    T* m = ptr<T>(exp_avg);
    T* v = ptr<T>(exp_avg_sq);
    T* vmax = ptr<T>(max_exp_avg_sq);
    const double bc1 = 1.0 - std::pow(s.beta1, static_cast<double>(s.step));
    const double bc2 = 1.0 - std::pow(s.beta2, static_cast<double>(s.step));
    const A step_size = static_cast<A>(s.lr / bc1), bc2_sqrt = static_cast<A>(std::sqrt(bc2));
    const A beta1 = static_cast<A>(s.beta1), beta2 = static_cast<A>(s.beta2);
    const A one_minus_beta1 = static_cast<A>(1.0 - s.beta1), one_minus_beta2 = static_cast<A>(1.0 - s.beta2);
    const A eps = static_cast<A>(s.eps), sign = s.maximize ? A(-1) : A(1);
    const A l2 = s.decoupled_weight_decay ? A(0) : static_cast<A>(s.weight_decay);
    const A decay = static_cast<A>(s.decoupled_weight_decay ? 1.0 - s.lr * s.weight_decay : 1.0);
    const bool amsgrad = s.amsgrad;
    parallel_for(0, param.numel(), kGrainSize, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        A pi = static_cast<A>(p[i]);
        A gi = sign * static_cast<A>(g[i]);
        if (l2 != A(0)) gi = gi + l2 * pi;
        pi = pi * decay;
        const A mi = static_cast<A>(m[i]) * beta1 + one_minus_beta1 * gi;
        A vi = static_cast<A>(v[i]) * beta2 + one_minus_beta2 * gi * gi;
        m[i] = static_cast<T>(mi);
        v[i] = static_cast<T>(vi);
        if (amsgrad) {
          vi = std::max(static_cast<A>(vmax[i]), vi);
          vmax[i] = static_cast<T>(vi);
        }
        const A denom = std::sqrt(vi) / bc2_sqrt + eps;
        p[i] = static_cast<T>(pi - step_size * (mi / denom));
      }
    });
  });
}

// param, grad, square_avg, grad_avg, momentum_buffer: [n]
void rmsprop_step(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& grad_avg,
                  const Tensor& momentum_buffer, const RmspropStep& s) {
  EMBER_DISPATCH_FLOATING(param.dtype(), "rmsprop_step", [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    T* p = ptr<T>(param);
    const T* g = ptr<T>(grad);
    T* sq = ptr<T>(square_avg);
    T* ga = ptr<T>(grad_avg);
    T* buf = ptr<T>(momentum_buffer);
    const A lr = static_cast<A>(s.lr), alpha = static_cast<A>(s.alpha), one_minus_alpha = static_cast<A>(1.0 - s.alpha);
    const A eps = static_cast<A>(s.eps), wd = static_cast<A>(s.weight_decay), mu = static_cast<A>(s.momentum);
    const A sign = s.maximize ? A(-1) : A(1);
    const bool centered = s.centered, use_momentum = s.momentum > 0;
    parallel_for(0, param.numel(), kGrainSize, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const A pi = static_cast<A>(p[i]);
        A gi = sign * static_cast<A>(g[i]);
        if (wd != A(0)) gi = gi + wd * pi;
        const A si = static_cast<A>(sq[i]) * alpha + one_minus_alpha * gi * gi;
        sq[i] = static_cast<T>(si);
        A var = si;
        if (centered) {
          const A gai = static_cast<A>(ga[i]) * alpha + one_minus_alpha * gi;
          ga[i] = static_cast<T>(gai);
          var = si - gai * gai;
        }
        const A avg = std::sqrt(var) + eps;
        if (use_momentum) {
          const A bi = static_cast<A>(buf[i]) * mu + gi / avg;
          buf[i] = static_cast<T>(bi);
          p[i] = static_cast<T>(pi - lr * bi);
        } else {
          p[i] = static_cast<T>(pi - lr * (gi / avg));
        }
      }
    });
  });
}

}  // namespace ember::cpu
