#pragma once
// Mixed precision in the example trainers (--amp none|bf16|fp16): autocast around the forward
// and a GradScaler for float16's loss scale (saved with the optimizer: ember::save(opt, scaler, path)).
#include <string>

#include <ember/ember.h>

namespace ember::examples {

// Autocast for --amp bf16|fp16 on the training device (Note [Autocast]); off, and free, for none.
struct AmpScope : autocast::AutocastGuard {
  AmpScope(const std::string& amp, Device device)
      : autocast::AutocastGuard(device.type, amp == "fp16" ? kFloat16 : kBFloat16, amp != "none") {}
};

// float16 needs loss scaling; bfloat16 has float32's range and does not.
inline amp::GradScalerOptions scaler_options(const std::string& amp) {
  return amp::GradScalerOptions().enabled(amp == "fp16");
}

}  // namespace ember::examples
