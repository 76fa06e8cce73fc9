#pragma once
// Mixed precision in the example trainers (--amp none|bf16|fp16): autocast around the forward,
// a GradScaler for float16's loss scale, and the scaler's state kept in the checkpoint.
#include <map>
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

// The scaler's state as checkpoint metadata ("grad_scaler.scale", ...), and back.
inline void save_scaler(const amp::GradScaler& scaler, std::map<std::string, std::string>& metadata) {
  for (const auto& [key, value] : scaler.state_dict()) metadata["grad_scaler." + key] = std::to_string(value);
}
inline void load_scaler(amp::GradScaler& scaler, const std::map<std::string, std::string>& metadata) {
  if (!scaler.is_enabled() || !metadata.count("grad_scaler.scale")) return;
  std::map<std::string, double> state;
  for (const auto& [key, value] : metadata)
    if (key.rfind("grad_scaler.", 0) == 0) state[key.substr(12)] = std::stod(value);
  scaler.load_state_dict(state);
}

}  // namespace ember::examples
