#pragma once
// Running the tape backwards.
#include <functional>
#include <optional>
#include <vector>

#include "ember/tensor/tensor.h"

namespace ember::autograd {

// Backpropagates from `roots` (seeded with `grad_roots`; an undefined seed means ones for a
// one-element root) and accumulates into the .grad of every leaf reached. With create_graph
// the backward is itself recorded (Note [Double backward]), so the gradients can be
// differentiated again; retain_graph defaults to create_graph, as in PyTorch.
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots = {},
              std::optional<bool> retain_graph = std::nullopt, bool create_graph = false);

// The gradients of `outputs` w.r.t. `inputs`, returned instead of accumulated into .grad
// (torch.autograd.grad, LibTorch's parameter order). An input the outputs do not depend on is
// an error unless allow_unused, which gives it an undefined tensor.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, std::optional<bool> retain_graph = std::nullopt,
                         bool create_graph = false, bool allow_unused = false);

// Runs `callback` when the backward now running on this thread has gone through its whole graph,
// before backward() returns (PyTorch's Variable._execution_engine.queue_callback): what a
// gradient hook uses to act once per backward, as DistributedDataParallel waits for its
// all-reduces. Callbacks run in the order queued, with grad mode off; an error outside a backward.
void queue_callback(std::function<void()> callback);
bool in_backward();  // whether a backward is running on this thread

// Clears the gradients of `params`: set to none (undefined, PyTorch 2's default, which frees
// the memory and lets the next backward write instead of add) or filled with zeros.
void zero_grad(const std::vector<Tensor>& params, bool set_to_none = true);

}  // namespace ember::autograd
