#pragma once
// ember: a from-scratch C++17 deep-learning engine in the spirit of PyTorch.
// The one header a program needs: #include <ember/ember.h>
#include "autograd/engine.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/node.h"
#include "cuda/cuda.h"
#include "io/checkpoint.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "tensor/allocator.h"
#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/error.h"
#include "tensor/generator.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"
