#pragma once
// Gradient clipping (torch.nn.utils.clip_grad_norm_ / clip_grad_value_) and parameters as one
// vector (parameters_to_vector / vector_to_parameters).
#include <vector>

#include "ember/tensor/tensor.h"

namespace ember::nn::utils {

// Scales every gradient by min(1, max_norm / (total_norm + 1e-6)), where total_norm is the
// norm_type-norm of all gradients as one vector (norm_type = inf: max |g|). Parameters without a
// gradient are skipped. Returns total_norm (before clipping) as a 0-d float32 tensor, 0 when no
// parameter has a gradient. A non-finite total throws only when error_if_nonfinite.
Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);
// Clamps every gradient element to [-clip_value, clip_value].
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value);

// The parameters flattened and concatenated, in order: a new 1-D tensor (recorded, so gradients
// flow back to the parameters). All on one device.
Tensor parameters_to_vector(const std::vector<Tensor>& parameters);
// Copies consecutive slices of vec (1-D, exactly as many elements as the parameters hold) into the
// parameters, in place and unrecorded (PyTorch assigns param.data the same way).
void vector_to_parameters(const Tensor& vec, const std::vector<Tensor>& parameters);

}  // namespace ember::nn::utils
