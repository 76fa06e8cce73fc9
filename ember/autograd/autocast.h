#pragma once
// Autocast (torch.autocast): mixed precision by op. Note [Autocast]: while an AutocastGuard is
// active on a thread, a policy at the dispatch point (autograd/dispatch.h) casts the floating
// inputs on that device type of each op a user calls:
//   - lower precision (the autocast dtype, float16 or bfloat16): matmul, mm, bmm, addmm, linear,
//     conv2d, conv_transpose2d — the ops that tensor cores and bf16 GEMMs speed up;
//   - float32: ops whose range or accuracy needs it — exp, log, log1p, expm1, log2, log10, pow,
//     reciprocal, rsqrt, tan, asin, acos, sinh, cosh, erfinv, softplus, softmax, log_softmax,
//     logsumexp, the cumsum/cumprod scans, and the sum/mean/prod/norm/var/std reductions (so layer_norm, cross_entropy and the
//     losses, which nn::functional composes from these, compute in float32 too);
//   - every other op runs in its inputs' dtypes; binary ops, where and cat already promote to
//     the widest input type.
// float64 tensors, integer tensors and tensors of the other device type are left alone. Casts
// are ordinary differentiable ops, so float32 parameters get float32 gradients; the backward
// pass itself runs without autocast, each op in its forward dtype. The low-precision cast of a
// float32 leaf that requires grad (a weight) is cached until the outermost guard ends, so a
// forward casts each weight once. Ops called inside an op (a composite's parts) are not cast
// again.
#include <cstdint>
#include <optional>

#include "ember/autograd/dispatch.h"

namespace ember::autocast {

// Autocast on (or off, enabled = false) for `device_type` in this scope, on this thread.
// dtype defaults to float16 on CUDA and bfloat16 on the CPU, as in PyTorch. Guards nest; each
// restores the state it found.
class AutocastGuard {
 public:
  explicit AutocastGuard(DeviceType device_type, std::optional<DType> dtype = std::nullopt, bool enabled = true,
                         bool cache_enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DeviceType device_type_;
  bool prev_enabled_, prev_cache_enabled_;
  DType prev_dtype_;
  std::optional<dispatch::PolicyGuard> policy_;  // installed by the outermost enabled guard
};

bool is_enabled(DeviceType device_type);
DType get_autocast_dtype(DeviceType device_type);
// The weight casts cached in the current region (for tests and tools), and dropping them.
int64_t cached_casts();
void clear_cache();

// What autocast does with an op's floating inputs.
// refuse: binary_cross_entropy, unsafe in 16 bits (an ember::Error that points to
// binary_cross_entropy_with_logits, as PyTorch's error does).
enum class CastPolicy : int8_t { keep, lower_precision, fp32, refuse };
CastPolicy policy_of(dispatch::OpId op);

// Turns autocast off for its scope whatever guards are active (the backward pass uses it).
class SuspendGuard {
 public:
  SuspendGuard();
  ~SuspendGuard();
  SuspendGuard(const SuspendGuard&) = delete;
  SuspendGuard& operator=(const SuspendGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace ember::autocast
