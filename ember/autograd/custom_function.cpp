// Custom autograd functions (Note [Custom functions] in custom_function.h): the node that calls
// a user's backward, and what apply() checks and records around a user's forward.
#include "ember/autograd/custom_function.h"

#include <cxxabi.h>

#include <cstdlib>

#include "ember/autograd/function_helpers.h"

namespace ember::autograd {

const char* IValue::type_name() const {
  static const char* const names[] = {"None", "bool", "int", "double", "string", "Tensor", "int list", "double list"};
  return names[v_.index()];
}

void IValue::wrong_type(const char* wanted) const {
  throw Error(detail::concat("IValue: expected ", wanted, " but it holds ", type_name()));
}

void AutogradContext::save_for_backward(tensor_list to_save) {
  EMBER_CHECK(saved_.empty() && !saved_released_, name_,
              ": save_for_backward may only be called in forward (backward reads with get_saved_variables)");
  to_save_ = std::move(to_save);
}

tensor_list AutogradContext::get_saved_variables() const {
  EMBER_CHECK(!saved_released_, name_,
              ": the saved variables were freed after backward; pass retain_graph=true to the first backward "
              "to backward through the graph again");
  if (!to_save_.empty()) return to_save_;  // (still in forward)
  tensor_list out;
  for (const SavedTensor& s : saved_) out.push_back(s.unpack(name_));
  return out;
}

void AutogradContext::mark_dirty(const tensor_list& inputs) {
  for (const Tensor& t : inputs) dirty_.push_back(t.impl().get());
}

void AutogradContext::mark_non_differentiable(const tensor_list& outputs) {
  for (const Tensor& t : outputs) non_differentiable_.push_back(t.impl().get());
}

bool AutogradContext::needs_input_grad(size_t index) const {
  EMBER_CHECK(index < needs_input_grad_.size(), name_, ": needs_input_grad(", index, ") but forward has ",
              needs_input_grad_.size(), " arguments");
  return needs_input_grad_[index];
}

// The node apply() records: it calls T::backward and maps its results onto the tensor inputs.
class CustomFunctionNode final : public Node {
 public:
  CustomFunctionNode(const CustomFunctionCall& call, CustomFunctionCall::Backward backward)
      : Node(call.name),
        ctx_(call.ctx),
        backward_(backward),
        positions_(call.input_positions),
        num_args_(call.num_args) {
    for (const Tensor& t : call.inputs) inputs_.push_back({t.sizes(), t.dtype(), t.device()});
  }
  bool differentiable_backward() const override { return true; }
  void release_saved() override {
    ctx_->saved_.clear();
    ctx_->saved_data.clear();
    ctx_->saved_released_ = true;
  }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    tensor_list result = backward_(ctx_.get(), std::move(grads));
    // Gradients past the arguments apply() was given are for forward's defaulted parameters
    // (`Tensor bias = Tensor()`): dropped when undefined, as LibTorch drops them.
    while (result.size() > num_args_ && !result.back().defined()) result.pop_back();
    EMBER_CHECK(result.size() == num_args_, name(), ": backward returned ", result.size(), " gradients, expected ",
                num_args_,
                " (one per argument of forward; an undefined Tensor for an argument that is not a tensor "
                "or needs no gradient)");
    std::vector<bool> is_tensor(num_args_, false);
    for (size_t p : positions_) is_tensor[p] = true;
    for (size_t a = 0; a < num_args_; ++a)
      EMBER_CHECK(is_tensor[a] || !result[a].defined(), name(), ": backward returned a gradient for argument ", a,
                  " of forward, which is not a tensor");
    std::vector<Tensor> input_grads;
    for (size_t k = 0; k < positions_.size(); ++k) {
      Tensor g = result[positions_[k]];
      if (g.defined()) {
        const auto& in = inputs_[k];
        EMBER_CHECK(g.sizes() == in.sizes, name(), ": backward returned a gradient of shape ", shape_str(g.sizes()),
                    " for argument ", positions_[k], " of shape ", shape_str(in.sizes));
        EMBER_CHECK(g.device() == in.device, name(), ": backward returned a gradient on ", g.device(), " for argument ",
                    positions_[k], " on ", in.device);
        if (g.dtype() != in.dtype) g = g.to(in.dtype);
      }
      input_grads.push_back(std::move(g));
    }
    return input_grads;
  }

 private:
  std::shared_ptr<AutogradContext> ctx_;
  CustomFunctionCall::Backward backward_;
  std::vector<size_t> positions_;
  size_t num_args_;
  std::vector<OutputInfo> inputs_;
};

CustomFunctionCall::CustomFunctionCall(std::string function_name) : name(function_name + "Backward") {
  ctx->name_ = name;
}

bool CustomFunctionCall::records() const {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

void CustomFunctionCall::before_forward() {
  ctx->needs_input_grad_.assign(num_args, false);
  const bool on = GradMode::is_enabled();
  for (size_t k = 0; k < inputs.size(); ++k)
    ctx->needs_input_grad_[input_positions[k]] = on && inputs[k].defined() && inputs[k].requires_grad();
}

void CustomFunctionCall::after_forward(tensor_list& outputs, Backward backward) {
  for (size_t j = 0; j < outputs.size(); ++j)
    EMBER_CHECK(outputs[j].defined(), name, ": forward returned an undefined tensor as output ", j);
  auto is_output = [&](const TensorImpl* impl) {
    for (const Tensor& o : outputs)
      if (o.impl().get() == impl) return true;
    return false;
  };
  for (const TensorImpl* d : ctx->dirty_)
    EMBER_CHECK(is_output(d), name,
                ": a tensor marked dirty in forward was not returned (return it, as PyTorch "
                "requires)");
  if (!records()) {  // nothing to record: the saved tensors are not needed
    ctx->to_save_.clear();
    return;
  }
  auto is_dirty = [&](const TensorImpl* impl) {
    for (const TensorImpl* d : ctx->dirty_)
      if (d == impl) return true;
    return false;
  };
  for (size_t j = 0; j < outputs.size(); ++j) {
    Tensor& out = outputs[j];
    for (const Tensor& in : inputs) {
      if (!in.defined() || !out.is_same(in)) continue;
      if (is_dirty(out.impl().get())) {
        EMBER_CHECK(!(in.is_leaf() && in.requires_grad()), name,
                    ": a leaf tensor that requires grad was modified in place (marked dirty) in forward");
      } else {
        out = out.detach();  // an input returned as it was: a new tensor (an alias) gets this node's history
      }
    }
  }
  // Saved tensors: an output is tied to the node when a create_graph backward unpacks it.
  for (const Tensor& s : ctx->to_save_) {
    int output_nr = -1;
    for (size_t j = 0; j < outputs.size(); ++j)
      if (s.defined() && s.impl() == outputs[j].impl()) output_nr = static_cast<int>(j);
    ctx->saved_.push_back(output_nr >= 0 ? SavedTensor::output(s, output_nr) : SavedTensor(s));
  }
  ctx->to_save_.clear();
  std::vector<const Tensor*> in_ptrs;
  for (const Tensor& t : inputs) in_ptrs.push_back(&t);
  std::vector<Tensor*> out_ptrs;
  for (Tensor& t : outputs) out_ptrs.push_back(&t);
  record(std::make_shared<CustomFunctionNode>(*this, backward), in_ptrs, out_ptrs);
  for (Tensor& t : outputs)
    for (const TensorImpl* nd : ctx->non_differentiable_)
      if (t.impl().get() == nd) {
        AutogradMeta& m = meta(t);
        m.grad_fn.reset();
        m.requires_grad = false;
      }
}

std::string demangled_function_name(const char* mangled) {
  int status = 0;
  char* raw = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = status == 0 && raw ? raw : mangled;
  std::free(raw);
  const size_t template_start = name.find('<');
  const size_t last = name.rfind("::", template_start);
  return last == std::string::npos ? name : name.substr(last + 2);
}

}  // namespace ember::autograd
