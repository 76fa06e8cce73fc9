#pragma once
// nn::Module: the base of every layer and model. A module owns named parameters (leaf
// tensors that require grad), named buffers (state that is saved but not trained, such as
// batch norm's running statistics) and named child modules; names join with dots
// ("features.0.weight") exactly as PyTorch prints them, so that state dicts move between
// the two. Layers are used through holders, as in LibTorch:
//     nn::Linear fc(784, 128);   // a shared pointer to a LinearImpl
//     Tensor y = fc(x);          // runs the forward pre-hooks, then forward()
//     fc->weight;                // members through ->
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ember/autograd/functions.h"
#include "ember/tensor/ordered_dict.h"

namespace ember {

using StateDict = OrderedDict<Tensor>;

namespace nn {

class Module : public std::enable_shared_from_this<Module> {
 public:
  explicit Module(std::string type_name = "Module");
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& type_name() const { return type_name_; }
  // This module as a T (e.g. LinearImpl), or null when it is not one.
  template <class T>
  T* as() {
    return dynamic_cast<T*>(this);
  }

  // The one-tensor forward that Sequential and the call operator use. Layers override it;
  // modules with other signatures (several inputs) add their own forward overloads.
  virtual Tensor forward(const Tensor& input);
  Tensor operator()(const Tensor& input);  // forward pre-hooks, then forward(input)

  // ---- registration ----
  // Parameters are leaves: registration detaches `tensor` and sets requires_grad. An
  // undefined tensor registers an absent parameter (bias=false), skipped by parameters().
  Tensor& register_parameter(std::string name, Tensor tensor, bool requires_grad = true);
  // Non-persistent buffers move with to() but stay out of state_dict().
  Tensor& register_buffer(std::string name, Tensor tensor, bool persistent = true);
  std::shared_ptr<Module> register_module(std::string name, std::shared_ptr<Module> module);
  template <class M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> module) {
    register_module(std::move(name), std::static_pointer_cast<Module>(module));
    return module;
  }
  template <class Holder, class = decltype(std::declval<Holder>().ptr())>
  Holder register_module(std::string name, Holder holder) {
    register_module(std::move(name), std::static_pointer_cast<Module>(holder.ptr()));
    return holder;
  }
  // Replaces a registered child (the holder in the parent's member must be updated too).
  void replace_module(const std::string& name, std::shared_ptr<Module> module);

  // ---- traversal (registration order, depth first, like PyTorch) ----
  std::vector<Tensor> parameters(bool recurse = true) const;
  OrderedDict<Tensor> named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  OrderedDict<Tensor> named_buffers(bool recurse = true) const;
  std::vector<std::shared_ptr<Module>> children() const;
  OrderedDict<std::shared_ptr<Module>> named_children() const;
  std::vector<std::shared_ptr<Module>> modules();  // this module first
  OrderedDict<std::shared_ptr<Module>> named_modules(const std::string& prefix = "");
  void apply(const std::function<void(Module&)>& fn);  // children first, then this module

  // Direct access to this module's own entries (not recursive).
  Tensor* find_parameter(const std::string& name);
  Tensor* find_buffer(const std::string& name);
  std::shared_ptr<Module> find_module(const std::string& name) const;

  // ---- modes, devices, dtypes ----
  virtual void train(bool on = true);  // recursive
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Converts parameters (and their grads) and buffers in place: the tensors keep their
  // identity, so optimizers and members that hold them stay valid. to(dtype) converts
  // floating tensors only, as PyTorch does.
  void to(Device device, bool non_blocking = false);
  void to(DType dtype);
  void to(Device device, DType dtype, bool non_blocking = false);
  void zero_grad(bool set_to_none = true);

  // ---- hooks ----
  // hook(module) runs before every call through operator(); pruning recomputes its masked
  // weights here. Returns a handle for remove_forward_pre_hook.
  int register_forward_pre_hook(std::function<void(Module&)> hook);
  void remove_forward_pre_hook(int handle);

  // ---- state ----
  StateDict state_dict() const;  // parameters and persistent buffers, dotted names
  struct LoadResult {
    std::vector<std::string> missing_keys, unexpected_keys;
  };
  // Copies values into the existing tensors (dtype cast allowed, shapes must match).
  // strict: a missing or unexpected key is an error listing all of them.
  LoadResult load_state_dict(const StateDict& state, bool strict = true);

  // ---- printing ----
  // One line describing this module without its children, e.g. "Linear(in_features=4, ...)".
  virtual void pretty_print(std::ostream& os) const;

 protected:
  void run_forward_pre_hooks();
  template <class Holder>
  friend class ModuleHolder;

 private:
  void print_tree(std::ostream& os, int indent) const;
  friend std::ostream& operator<<(std::ostream& os, const Module& module);
  void collect_state(const std::string& prefix, StateDict& out) const;
  OrderedDict<Tensor> named_tensors(OrderedDict<Tensor> Module::*member, const char* what, bool recurse) const;
  void apply_to_tensors(const std::function<Tensor(const Tensor&)>& fn);

  std::string type_name_;
  bool training_ = true;
  OrderedDict<Tensor> parameters_{"parameter"};
  OrderedDict<Tensor> buffers_{"buffer"};
  std::vector<std::string> non_persistent_;
  OrderedDict<std::shared_ptr<Module>> children_{"submodule"};
  std::vector<std::pair<int, std::function<void(Module&)>>> pre_hooks_;
  int next_hook_ = 0;
};

// A child module given as a holder or as a shared pointer, as a shared_ptr<Module>.
template <class M>
std::shared_ptr<Module> as_module(const std::shared_ptr<M>& module) {
  return std::static_pointer_cast<Module>(module);
}
template <class Holder, class = decltype(std::declval<Holder>().ptr())>
std::shared_ptr<Module> as_module(const Holder& holder) {
  return std::static_pointer_cast<Module>(holder.ptr());
}

// Prints the module tree as PyTorch does:
//   Sequential(
//     (0): Linear(in_features=4, out_features=2, bias=true)
//   )
std::ostream& operator<<(std::ostream& os, const Module& module);

// A shared pointer to a module implementation with LibTorch's calling conventions:
// `Linear fc(4, 2)` makes a LinearImpl, `fc->weight` reaches its members, `fc(x)` calls it.
template <class Impl>
class ModuleHolder {
 public:
  using ImplType = Impl;

  // Default-constructs the module when its Impl allows it (Sequential, ReLU, ...).
  template <class I = Impl, class = std::enable_if_t<std::is_default_constructible<I>::value>>
  ModuleHolder() : impl_(std::make_shared<Impl>()) {}
  ModuleHolder(std::nullptr_t) {}                                       // NOLINT: an empty holder
  ModuleHolder(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}  // NOLINT
  template <class Head, class... Tail,
            class = std::enable_if_t<!std::is_same<std::decay_t<Head>, ModuleHolder>::value &&
                                     !std::is_same<std::decay_t<Head>, std::shared_ptr<Impl>>::value &&
                                     !std::is_same<std::decay_t<Head>, std::nullptr_t>::value>>
  explicit ModuleHolder(Head&& head, Tail&&... tail)
      : impl_(std::make_shared<Impl>(std::forward<Head>(head), std::forward<Tail>(tail)...)) {}

  Impl* operator->() const { return get(); }
  Impl& operator*() const { return *get(); }
  Impl* get() const {
    EMBER_CHECK(impl_ != nullptr, "ModuleHolder: accessing an empty module holder");
    return impl_.get();
  }
  const std::shared_ptr<Impl>& ptr() const { return impl_; }
  bool is_empty() const { return impl_ == nullptr; }
  explicit operator bool() const { return impl_ != nullptr; }

  // Runs the forward pre-hooks, then Impl::forward with these arguments.
  template <class... Args>
  auto operator()(Args&&... args) const {
    get()->run_forward_pre_hooks();
    return get()->forward(std::forward<Args>(args)...);
  }

 private:
  std::shared_ptr<Impl> impl_;
};

template <class Impl>
std::ostream& operator<<(std::ostream& os, const ModuleHolder<Impl>& holder) {
  return os << *holder;
}

}  // namespace nn
}  // namespace ember

// Declares `Name` as the holder of `NameImpl`, as LibTorch's TORCH_MODULE.
#define EMBER_MODULE(Name)                                     \
  class Name : public ::ember::nn::ModuleHolder<Name##Impl> {  \
   public:                                                     \
    using ::ember::nn::ModuleHolder<Name##Impl>::ModuleHolder; \
    using Impl = Name##Impl;                                   \
  }
