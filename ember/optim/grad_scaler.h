#pragma once
// GradScaler (torch.amp.GradScaler): dynamic loss scaling for float16 training. Note
// [GradScaler]: float16 gradients of small magnitude underflow to zero; scaling the loss by S
// before backward scales every gradient by S and keeps them representable. Before the step the
// gradients are unscaled (× 1/S) and checked for inf/NaN in one multi-tensor kernel per device;
// a step with a non-finite gradient is skipped (parameters and optimizer state untouched) and S
// backs off, and after `growth_interval` clean steps in a row S grows. S and its growth tracker
// live on the device and are updated there, as in PyTorch. Beyond PyTorch (whose step() reads
// the inf flag on the host unless the optimizer is a `fused=True` one): every optimizer with a
// fused kernel (SGD, Adam, AdamW, RMSprop, Adagrad) takes the flag on the device and skips itself, so a
// whole iteration — scale, unscale_, step, update — never waits for the GPU:
//
//     amp::GradScaler scaler;
//     for (...) {
//       opt.zero_grad();
//       Tensor loss;
//       { autocast::AutocastGuard amp(kCUDA); loss = loss_fn(model(x), y); }
//       scaler.scale(loss).backward();
//       scaler.unscale_(opt);                         // optional: to clip the true gradients
//       nn::utils::clip_grad_norm_(model->parameters(), 1.0);
//       scaler.step(opt);                             // skipped if a gradient is inf/NaN
//       scaler.update();
//     }
//
// With gradient accumulation, scale each micro-batch's loss and unscale/step/update once per
// window; with several optimizers, step each, then update once. Where each rank steps different
// parameters (pipeline stages, sharded optimizers), give the scaler the ranks' process group:
// the inf flags are then agreed over it (the max over ranks, as PyTorch's ShardedGradScaler
// does), so every rank skips the same steps and keeps the same scale; a rank that scales no
// loss (an earlier stage) unscales what the later stages' scaled gradients sent it. (DDP needs
// none: its averaged gradients carry one rank's inf to all.)
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ember/distributed/process_group.h"
#include "ember/optim/optimizer.h"
#include "ember/tensor/arg.h"

namespace ember::amp {

struct GradScalerOptions {
  EMBER_ARG(double, init_scale) = 65536.0;  // 2^16
  EMBER_ARG(double, growth_factor) = 2.0;
  EMBER_ARG(double, backoff_factor) = 0.5;
  EMBER_ARG(int64_t, growth_interval) = 2000;
  EMBER_ARG(bool, enabled) = true;
  // The ranks that must agree on skipping (each unscale_ is then a collective over them), or none.
  EMBER_ARG(std::shared_ptr<distributed::ProcessGroup>, process_group);
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  // outputs * scale (the scale is made on outputs' device on first use); outputs as they are
  // when disabled.
  Tensor scale(const Tensor& outputs);
  std::vector<Tensor> scale(const std::vector<Tensor>& outputs);
  // Divides the optimizer's gradients by the scale in place and records whether any is inf or
  // NaN. At most once per optimizer between update()s, and not after step().
  void unscale_(optim::Optimizer& optimizer);
  // optimizer.step(), unless a gradient was inf or NaN; unscales first if unscale_ was not
  // called. No host read for optimizers that skip on the device (Optimizer::skips_on_device);
  // others read the inf flag (a wait for the device on a GPU, as PyTorch always does).
  void step(optim::Optimizer& optimizer);
  // The new scale from this iteration's inf checks (over every optimizer stepped), or
  // `new_scale` as given; then ready for the next iteration.
  void update(std::optional<double> new_scale = std::nullopt);

  double get_scale() const;  // init_scale before the first scale(), 1 when disabled
  int64_t growth_tracker() const;
  // Iterations whose update() found an inf/NaN (their steps were skipped), since construction;
  // counted on the device, read here (a wait for the device: call it once per epoch, not per step).
  int64_t skipped_steps() const;
  const Tensor& scale_tensor() const { return scale_; }  // float32, one element (undefined before first use)
  bool is_enabled() const { return options_.enabled(); }
  const GradScalerOptions& options() const { return options_; }

  // PyTorch's keys: scale, growth_factor, backoff_factor, growth_interval, _growth_tracker.
  std::map<std::string, double> state_dict() const;
  void load_state_dict(const std::map<std::string, double>& state);

 private:
  enum class Stage { ready, unscaled, stepped };
  struct PerOptimizer {
    Stage stage = Stage::ready;
    std::vector<Tensor> found_inf;  // one float32 flag per device of the gradients
  };
  void lazy_init(Device device);

  GradScalerOptions options_;
  int64_t init_growth_tracker_ = 0;
  Tensor scale_, growth_tracker_, skipped_;
  std::map<const optim::Optimizer*, PerOptimizer> per_optimizer_;
};

}  // namespace ember::amp
