// Losses that need a backward of their own (composed losses live in nn/functional.cpp).
#include "ember/tensor/ops/internal.h"

namespace ember::native {

// -w (y log x + (1 - y) log(1 - x)), the logs clamped at -100 as in PyTorch.
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                            const std::string& reduction) {
  const char* op = "binary_cross_entropy";
  ops::check_defined(input, op);
  ops::check_defined(target, op, "target");
  ops::check_same_device({&input, &target, &weight}, op);
  EMBER_CHECK(reduction == "mean" || reduction == "sum" || reduction == "none", op,
              ": reduction must be 'mean', 'sum' or 'none', got '", reduction, "'");
  EMBER_CHECK(input.is_floating_point() && target.dtype() == input.dtype(), op,
              ": expected probabilities and targets of one floating dtype, got ", input.dtype(), " and ",
              target.dtype());
  EMBER_CHECK(target.sizes() == input.sizes(), op, ": the target of shape ", shape_str(target.sizes()),
              " must have the input's shape ", shape_str(input.sizes()));
  if (input.numel() > 0) {
    // Both bounds in one copy to the host (on a GPU each copy waits for the queued work).
    const std::vector<double> b =
        to(stack({amin(input), amax(input)}, 0), Device(kCPU), kFloat64, false, false).to_vector<double>();
    EMBER_CHECK(b[0] >= 0 && b[1] <= 1, op, ": every input must be a probability in [0, 1], got values in [", b[0],
                ", ", b[1], "] (for logits, use binary_cross_entropy_with_logits)");
  }
  const Tensor log_x = clamp(log(input), Scalar(-100.0));
  const Tensor log_1mx = clamp(log(add(neg(input), Scalar(1.0))), Scalar(-100.0));
  // -(y log x + (1 - y) log(1 - x)) = -(log(1 - x) + y (log x - log(1 - x)))
  Tensor loss = neg(add(log_1mx, mul(target, sub(log_x, log_1mx))));
  if (weight.defined()) {
    EMBER_CHECK(broadcast_shapes(weight.sizes(), input.sizes(), op) == input.sizes(), op, ": the weight of shape ",
                shape_str(weight.sizes()), " does not broadcast to the input's shape ", shape_str(input.sizes()));
    loss = mul(loss, to(weight, input.dtype()));
  }
  if (reduction == "none") return loss;
  return reduction == "sum" ? sum(loss) : mean(loss);
}

}  // namespace ember::native
