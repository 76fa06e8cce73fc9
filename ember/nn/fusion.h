#pragma once
// Folding an eval-mode BatchNorm into the Conv2d or Linear before it (PyTorch's
// torch.nn.utils.fusion.fuse_conv_bn_eval and fuse_linear_bn_eval, and the conv-bn pairs of
// torch.ao.quantization.fuse_modules).
//
// Note [Folding batch_norm]: in eval a BatchNorm is a per-channel affine map of its input z,
//   y = (z - running_mean) s + bias,   s = weight / sqrt(running_var + eps),
// so for z = W x + b the layer with W' = s W (output channel o's weights scaled by s_o) and
// b' = (b - running_mean) s + bias gives the same y: one pass fewer at inference, nothing to keep,
// and a CNN with BatchNorm becomes a chain that static int8 quantization takes (quant/static.h
// has no int8 BatchNorm, nor has PyTorch's eager mode). The new weights are computed in float64
// and rounded once to the layer's dtype. Training needs the batch's statistics, so both layers
// must be in eval mode.
#include <memory>

#include "ember/nn/modules/container.h"
#include "ember/nn/modules/conv_pool.h"
#include "ember/nn/modules/linear.h"
#include "ember/nn/modules/norm.h"

namespace ember::nn::utils {

// A new Conv2d, on conv's device and of its dtype, computing bn(conv(x)); bn has conv's output
// channels and running statistics. Both in eval mode; neither is changed.
std::shared_ptr<Conv2dImpl> fuse_conv_bn_eval(const Conv2dImpl& conv, const BatchNormImpl& bn);
// The same for a Linear followed by a BatchNorm1d of its output features.
std::shared_ptr<LinearImpl> fuse_linear_bn_eval(const LinearImpl& linear, const BatchNormImpl& bn);

// A Sequential with the layers of `model` under their names, where each Conv2d or Linear
// directly followed by a BatchNorm is replaced by the fused layer and the BatchNorm left out
// (fuse_modules puts an Identity there; leaving it out lets a ReLU after it join the layer
// in quantization::convert). The other layers are the same modules, shared with `model`. The
// model must be in eval mode.
Sequential fuse_batch_norms(const Sequential& model);

}  // namespace ember::nn::utils
