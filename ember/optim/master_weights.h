#pragma once
// Float32 master weights for a model kept in float16 or bfloat16 (module->to(kFloat16)). Note
// [Master weights]: a 16-bit parameter cannot take an update smaller than half its last bit
// (bfloat16 has 8 significant bits: w = 1 ignores any step below 2^-8), so small learning-rate
// steps vanish. The optimizer works on float32 copies instead; their gradients come from the
// model's, and after each step the copies are rounded back into the model:
//
//     model->to(kFloat16);
//     optim::MasterWeights master(model->parameters());
//     optim::AdamW opt(master.parameters(), optim::AdamWOptions(1e-4));
//     amp::GradScaler scaler;                    // float16 gradients need the loss scale
//     for (...) {
//       opt.zero_grad(); master.zero_model_grads();
//       scaler.scale(loss_fn(model(x), y)).backward();
//       master.copy_grads_to_master();           // 16-bit gradients -> float32 (inf/NaN kept)
//       scaler.step(opt);                        // skipped on the device after an overflow
//       master.copy_master_to_model();           // (then the model gets the same values back)
//       scaler.update();
//     }
#include <vector>

#include "ember/tensor/tensor.h"

namespace ember::optim {

class MasterWeights {
 public:
  // Float32 copies of `model_params` (16-bit or not; float32 ones are shared, not copied).
  explicit MasterWeights(std::vector<Tensor> model_params);
  // The float32 leaves to give the optimizer, in the order of the model's parameters.
  const std::vector<Tensor>& parameters() const { return master_; }
  // master.grad = float32(model.grad) for every model parameter with a gradient.
  void copy_grads_to_master();
  // model = round(master), in place (the model's tensors keep their identity).
  void copy_master_to_model();
  void zero_model_grads();
  // Bytes the float32 copies hold (0 for a float32 model): the memory master weights cost.
  int64_t bytes() const;

 private:
  std::vector<Tensor> model_, master_;
};

}  // namespace ember::optim
