#pragma once
// Shared pieces of the differentiable ops (autograd/functions_*.cpp).
#include <utility>

#include "ember/autograd/functions.h"
#include "ember/autograd/grad_mode.h"
#include "ember/autograd/meta.h"

namespace ember::autograd {

// Runs the native op with recording off: the public op records one node around it.
template <class F>
auto forward(F&& f) {
  NoGradGuard no_grad;
  return f();
}

// `differentiable`: the formula uses only public (recorded) ops on the gradients and on what
// it saved, so it may run in a create_graph backward (Note [Double backward]).
inline void record_fn(const char* name, std::initializer_list<const Tensor*> inputs,
                      std::initializer_list<Tensor*> outputs, FunctionNode::Backward backward,
                      bool differentiable = false, bool saves_tensors = true) {
  record(std::make_shared<FunctionNode>(name, std::move(backward), differentiable, saves_tensors), inputs, outputs);
}
constexpr bool kDifferentiable = true;
constexpr bool kSavesNoTensors = false;  // the closure keeps no tensor (Node::saves_tensors)

// Whether a create_graph backward is running (grad mode is on only there): formulas that use a
// fused native kernel in an ordinary backward call the public ops instead then.
inline bool building_graph() { return GradMode::is_enabled(); }

// A gradient fitted to an input: broadcast dims summed away, cast to the input's dtype.
inline Tensor fit(const Tensor& g, const Shape& sizes, DType dtype) {
  Tensor r = sum_to(g, sizes);
  return r.dtype() == dtype ? r : r.to(dtype);
}

// The shape, dtype and device of a tensor, kept by a node instead of the tensor itself.
struct Like {
  Shape sizes;
  DType dtype;
  Device device;
  explicit Like(const Tensor& t) : sizes(t.sizes()), dtype(t.dtype()), device(t.device()) {}
  Tensor zeros() const { return ember::zeros(sizes, TensorOptions().dtype(dtype).device(device)); }
};

}  // namespace ember::autograd

namespace ember {
// The functions_*.cpp files define ember's public ops with these helpers.
using autograd::building_graph;
using autograd::fit;
using autograd::forward;
using autograd::kDifferentiable;
using autograd::kSavesNoTensors;
using autograd::Like;
using autograd::needs_grad;
using autograd::record_fn;
}  // namespace ember
