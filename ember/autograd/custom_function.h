#pragma once
// Custom autograd functions, as in LibTorch (Note [Custom functions]): an op whose forward and
// backward you write yourself.
//
//   struct Cube : autograd::Function<Cube> {
//     static Tensor forward(autograd::AutogradContext* ctx, const Tensor& x, double scale) {
//       ctx->save_for_backward({x});
//       ctx->saved_data["scale"] = scale;
//       return x * x * x * scale;
//     }
//     static autograd::tensor_list backward(autograd::AutogradContext* ctx, autograd::tensor_list grads) {
//       const Tensor x = ctx->get_saved_variables()[0];
//       const double scale = ctx->saved_data["scale"].toDouble();
//       return {grads[0] * x * x * (3 * scale), Tensor()};  // one per argument of forward
//     }
//   };
//   Tensor y = Cube::apply(x, 2.0);
//
// Note [Custom functions]: apply() runs forward with grad mode off (what it computes is not
// recorded), then, when grad mode is on and a tensor argument requires grad, records one node
// whose backward calls T::backward. backward receives one gradient per output (zeros for an
// output that got none) and returns one per argument of forward, tensor or not — undefined for
// an argument that is not a tensor or needs no gradient (trailing undefined ones for forward's
// defaulted parameters that apply() was not given are dropped); a wrong count, a gradient for a
// non-tensor, or a shape that differs from its input's is an ember::Error naming the function.
// save_for_backward keeps inputs and outputs with their version (in-place changes before
// backward are caught); mark_dirty declares inputs that forward modified in place (they must be
// returned, and their history now leads through this node); mark_non_differentiable declares
// outputs that carry no gradient (indices, masks). The backward is recorded when it runs in a
// create_graph backward (Note [Double backward]) if it is written with ember's public ops.
// Tensor arguments are `Tensor` (by value or reference); lists of tensors are not taken apart.
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "ember/autograd/grad_mode.h"
#include "ember/autograd/node.h"

namespace ember::autograd {

using tensor_list = std::vector<Tensor>;  // LibTorch's names
using variable_list = tensor_list;

// A small variant for AutogradContext::saved_data (LibTorch's IValue, for the types a backward
// usually needs). Reading it as another type is an ember::Error naming both types.
class IValue {
 public:
  IValue() = default;
  IValue(bool v) : v_(v) {}                             // NOLINT(google-explicit-constructor)
  IValue(int v) : v_(static_cast<int64_t>(v)) {}        // NOLINT(google-explicit-constructor)
  IValue(int64_t v) : v_(v) {}                          // NOLINT(google-explicit-constructor)
  IValue(double v) : v_(v) {}                           // NOLINT(google-explicit-constructor)
  IValue(std::string v) : v_(std::move(v)) {}           // NOLINT(google-explicit-constructor)
  IValue(const char* v) : v_(std::string(v)) {}         // NOLINT(google-explicit-constructor)
  IValue(Tensor v) : v_(std::move(v)) {}                // NOLINT(google-explicit-constructor)
  IValue(std::vector<int64_t> v) : v_(std::move(v)) {}  // NOLINT(google-explicit-constructor)
  IValue(std::vector<double> v) : v_(std::move(v)) {}   // NOLINT(google-explicit-constructor)

  bool isNone() const { return v_.index() == 0; }
  bool isBool() const { return std::holds_alternative<bool>(v_); }
  bool isInt() const { return std::holds_alternative<int64_t>(v_); }
  bool isDouble() const { return std::holds_alternative<double>(v_); }
  bool isString() const { return std::holds_alternative<std::string>(v_); }
  bool isTensor() const { return std::holds_alternative<Tensor>(v_); }
  bool isIntList() const { return std::holds_alternative<std::vector<int64_t>>(v_); }
  bool isDoubleList() const { return std::holds_alternative<std::vector<double>>(v_); }

  bool toBool() const { return get<bool>("bool"); }
  int64_t toInt() const { return get<int64_t>("int"); }
  double toDouble() const { return get<double>("double"); }
  const std::string& toStringRef() const { return get<std::string>("string"); }
  const Tensor& toTensor() const { return get<Tensor>("Tensor"); }
  const std::vector<int64_t>& toIntVector() const { return get<std::vector<int64_t>>("int list"); }
  const std::vector<double>& toDoubleVector() const { return get<std::vector<double>>("double list"); }
  const char* type_name() const;

 private:
  template <class V>
  const V& get(const char* wanted) const {
    if (const V* p = std::get_if<V>(&v_)) return *p;
    wrong_type(wanted);
  }
  [[noreturn]] void wrong_type(const char* wanted) const;

  std::variant<std::monostate, bool, int64_t, double, std::string, Tensor, std::vector<int64_t>, std::vector<double>>
      v_;
};

class AutogradContext {
 public:
  // Tensors backward will need: inputs or outputs of forward (or anything forward computed).
  void save_for_backward(tensor_list to_save);
  // The saved tensors, in order; an ember::Error if one was modified in place since, or after
  // the graph was freed.
  tensor_list get_saved_variables() const;
  void mark_dirty(const tensor_list& inputs);
  void mark_non_differentiable(const tensor_list& outputs);
  // Whether the index-th argument of forward is a tensor that needs a gradient.
  bool needs_input_grad(size_t index) const;
  std::unordered_map<std::string, IValue> saved_data;

 private:
  friend struct CustomFunctionCall;
  friend class CustomFunctionNode;
  tensor_list to_save_;             // during forward
  std::vector<SavedTensor> saved_;  // after it
  bool saved_released_ = false;
  std::vector<const TensorImpl*> dirty_, non_differentiable_;
  std::vector<bool> needs_input_grad_;
  std::string name_;
};

// One apply(): the non-template part of Function<T>::apply (custom_function.cpp).
struct CustomFunctionCall {
  using Backward = tensor_list (*)(AutogradContext*, tensor_list);
  std::shared_ptr<AutogradContext> ctx = std::make_shared<AutogradContext>();
  std::string name;                     // "CubeBackward"
  tensor_list inputs;                   // the tensor arguments (shared, not copied)
  std::vector<size_t> input_positions;  // their argument indices
  size_t num_args = 0;

  explicit CustomFunctionCall(std::string function_name);
  void add_argument(const Tensor& t) {
    inputs.push_back(t);
    input_positions.push_back(num_args++);
  }
  template <class A>
  void add_argument(const A&) {
    ++num_args;
  }
  bool records() const;  // grad mode on and a tensor argument requires grad
  void before_forward();
  // After forward: checks, and when recording, the node and the outputs' history.
  void after_forward(tensor_list& outputs, Backward backward);
};

std::string demangled_function_name(const char* mangled);  // "ns::Cube" -> "Cube"

template <class T>
struct Function {
  template <class... Args>
  static auto apply(Args&&... args) {
    CustomFunctionCall call(demangled_function_name(typeid(T).name()));
    (call.add_argument(args), ...);
    call.before_forward();
    using Out = decltype(T::forward(call.ctx.get(), std::forward<Args>(args)...));
    static_assert(std::is_same_v<Out, Tensor> || std::is_same_v<Out, tensor_list>,
                  "Function<T>: T::forward must return a Tensor or a tensor_list");
    tensor_list outputs;
    {
      NoGradGuard no_grad;
      if constexpr (std::is_same_v<Out, Tensor>)
        outputs.push_back(T::forward(call.ctx.get(), std::forward<Args>(args)...));
      else
        outputs = T::forward(call.ctx.get(), std::forward<Args>(args)...);
    }
    call.after_forward(outputs, &T::backward);
    if constexpr (std::is_same_v<Out, Tensor>)
      return outputs[0];
    else
      return outputs;
  }
};

}  // namespace ember::autograd
