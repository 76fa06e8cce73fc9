#pragma once
// ember: a from-scratch C++17 deep-learning engine in the spirit of PyTorch.
// The one header a program needs: #include <ember/ember.h>
//
// A tour in five steps:
//
//   using namespace ember;
//
//   // 1. A tensor: a shared handle to storage + sizes + strides + dtype + device. Views share
//   //    storage; ops broadcast and promote types as PyTorch does.
//   Tensor x = randn({64, 784});                      // float32 on the CPU
//   Tensor y = x.view({64, 28, 28}).sum({1, 2});      // [64]
//
//   // 2. The tape: an op on a tensor that requires grad records a Node; backward() runs the
//   //    nodes in reverse and leaves gradients in .grad().
//   Tensor w = zeros({784, 10}).requires_grad_(), targets = randint(0, 10, {64});
//   Tensor loss = nn::functional::cross_entropy(x.matmul(w), targets);
//   loss.backward();                                   // w.grad(): [784, 10]
//   { NoGradGuard no_grad; x.matmul(w); }              // inference records nothing
//
//   // 3. A module owns parameters and children, with PyTorch's names and initialisation.
//   //    Hooks see (and may replace) every call's inputs and output; replace_module swaps a
//   //    child in place (a quantized Linear for a Linear, say).
//   nn::Sequential model(nn::Linear(784, 128), nn::ReLU(), nn::Linear(128, 10));
//
//   // 4. An optimizer updates the parameters in one fused pass each.
//   optim::AdamW opt(model->parameters(), optim::AdamWOptions(1e-3));
//   opt.zero_grad();
//   nn::functional::cross_entropy(model(x), targets).backward();
//   opt.step();
//
//   // 5. Devices: the same code on a GPU.
//   model->to(kCUDA);
//   model(x.to(kCUDA));
//
// Where an op lives (softplus, say): its declaration is one line of ember/tensor/ops.def; its
// backward sits beside its forward in ember/autograd/functions_<family>.cpp; its CPU kernel is
// in ember/tensor/cpu/<family>.cpp and its CUDA kernel in ember/cuda/<family>.cu (for the
// elementwise ops, both share the math of ember/tensor/elementwise_math.h). Every public op
// passes through one dispatch point, ember/autograd/dispatch.h.
#include "ember/autograd/autocast.h"
#include "ember/autograd/custom_function.h"
#include "ember/autograd/dispatch.h"
#include "ember/autograd/engine.h"
#include "ember/autograd/functions.h"
#include "ember/autograd/grad_mode.h"
#include "ember/autograd/gradcheck.h"
#include "ember/autograd/linalg.h"
#include "ember/autograd/node.h"
#include "ember/autograd/profiler.h"
#include "ember/cuda/cuda.h"
#include "ember/data/csv.h"
#include "ember/data/dataloader.h"
#include "ember/data/datasets.h"
#include "ember/data/gzip_file.h"
#include "ember/data/idx.h"
#include "ember/data/sampler.h"
#include "ember/data/synthetic_digits.h"
#include "ember/data/text.h"
#include "ember/data/transforms.h"
#include "ember/distributed/c10d.h"
#include "ember/distributed/process_group.h"
#include "ember/io/checkpoint.h"
#include "ember/io/quantized.h"
#include "ember/io/training_state.h"
#include "ember/nn/nn.h"
#include "ember/optim/optim.h"
#include "ember/tensor/allocator.h"
#include "ember/tensor/cpu/cpu.h"
#include "ember/tensor/device.h"
#include "ember/tensor/dtype.h"
#include "ember/tensor/error.h"
#include "ember/tensor/generator.h"
#include "ember/tensor/memory_overlap.h"
#include "ember/tensor/ops.h"
#include "ember/tensor/quantized.h"
#include "ember/tensor/tensor.h"
