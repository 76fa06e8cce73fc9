#pragma once
// nn::Module: the base of every layer and model. A module owns named parameters (leaf
// tensors that require grad), named buffers (state that is saved but not trained, such as
// batch norm's running statistics) and named child modules; names join with dots
// ("features.0.weight") exactly as PyTorch prints them, so that state dicts move between
// the two. Layers are used through holders, as in LibTorch:
//     nn::Linear fc(784, 128);   // a shared pointer to a LinearImpl
//     Tensor y = fc(x);          // the forward pre-hooks, forward(), then the forward hooks
//     fc->weight;                // members through ->
#include <array>
#include <functional>
#include <memory>
#include <optional>
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

class Module;
using TensorList = ::ember::TensorList;

// Note [Module slots]: where a parent keeps one child. A holder (nn::Linear, ...) and the
// parent it is registered with share the slot, so replace_module re-points both at once, as
// rebinding an attribute does in Python: the parent's forward, its state_dict and the holder
// member all see the new module.
struct ModuleSlot {
  std::shared_ptr<Module> module;
  uint64_t generation = 0;  // bumped by replace_module: a holder's fast path checks it
  std::string first_type;   // the type of the module the slot was made for (for messages)
  static std::shared_ptr<ModuleSlot> of(std::shared_ptr<Module> module);
};

// Forward hooks, PyTorch's: a pre-hook sees the module and the tensor arguments of its call and
// may return replacements (the same number of tensors); a forward hook sees the module, the
// (possibly replaced) inputs and the output, and may return a replacement output.
using ForwardPreHook = std::function<std::optional<TensorList>(Module& module, const TensorList& inputs)>;
using ForwardHook =
    std::function<std::optional<Tensor>(Module& module, const TensorList& inputs, const Tensor& output)>;

// A module's hooks, shared with the handles that can remove them.
struct HookList {
  std::vector<std::pair<int, ForwardPreHook>> pre;
  std::vector<std::pair<int, ForwardHook>> post;
  int next_id = 0;
};

// What register_forward_(pre_)hook returns: remove() takes the hook off again (an error when it
// is already gone; nothing when the module itself is gone).
class HookHandle {
 public:
  HookHandle() = default;
  HookHandle(std::weak_ptr<HookList> hooks, int id) : hooks_(std::move(hooks)), id_(id) {}
  void remove() const;
  int id() const { return id_; }

 private:
  std::weak_ptr<HookList> hooks_;
  int id_ = -1;
};

// Note [Tensor attributes]: a layer's forward reads its tensors through fields (fc->weight), as
// LibTorch's layers do, not through a lookup by name. Python code can rebind such an attribute
// (`module.weight = orig * mask`, which is how pruning works), and ember offers the same through
// bind_attribute: a layer declares which field holds which named tensor, and set_attribute
// re-points that field. Parameters stay where they are registered (optimizers keep holding them);
// only what forward reads changes. A module that does not bind a field cannot be pruned by name,
// which prune says, rather than pruning a tensor its forward never reads.
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
  Tensor operator()(const Tensor& input);  // forward(input) between the forward pre-hooks and hooks

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
  // A holder joins the parent's slot for it (Note [Module slots]), and so do its copies.
  template <class Holder, class = decltype(std::declval<Holder>().slot())>
  Holder register_module(std::string name, Holder holder) {
    register_slot(std::move(name), holder.slot());
    return holder;
  }
  // Puts `module` in the place of a registered child, keeping its position: `name` is a child
  // of this module or a dotted path below it ("blocks.0.attn.c_attn"). The parent's forward, the
  // holders of the old child and state_dict() see the new one (Note [Module slots]).
  void replace_module(const std::string& name, std::shared_ptr<Module> module);
  template <class Holder, class = decltype(std::declval<Holder>().slot())>
  void replace_module(const std::string& name, const Holder& holder) {
    replace_module(name, holder.module());
  }

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
  // Takes a parameter or buffer out of the module and returns it (an error when absent).
  Tensor remove_parameter(const std::string& name);
  Tensor remove_buffer(const std::string& name);

  // ---- tensor attributes (Note [Tensor attributes]) ----
  // Declares `member` as the field this module's forward reads for `name` (layers: weight, bias).
  // The member must live as long as the module (a field of it).
  void bind_attribute(const std::string& name, Tensor& member);
  bool has_attribute_binding(const std::string& name) const;
  // What Python's getattr(module, name) gives for a tensor: the bound member, else the parameter,
  // the buffer or the plain attribute of that name (an error when there is none).
  Tensor attribute(const std::string& name) const;
  // Python's setattr for a plain tensor: the bound member (if any) and the plain attribute become
  // `value`. `name` must not be a parameter or buffer.
  void set_attribute(const std::string& name, Tensor value);
  void remove_attribute(const std::string& name);  // drops the plain attribute; the member is kept

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

  // ---- hooks (run by every call through operator() or a holder, in registration order) ----
  HookHandle register_forward_pre_hook(ForwardPreHook hook);
  // A pre-hook that needs only the module (pruning recomputes its masked weights here).
  HookHandle register_forward_pre_hook(std::function<void(Module&)> hook);
  HookHandle register_forward_hook(ForwardHook hook);
  bool has_forward_hooks() const { return hooks_ && (!hooks_->pre.empty() || !hooks_->post.empty()); }
  size_t forward_hook_count() const { return hooks_ ? hooks_->post.size() : 0; }
  // Used by the call paths: the pre-hooks may replace `inputs` (same count); the hooks, the output.
  void run_forward_pre_hooks(TensorList& inputs);
  Tensor run_forward_hooks(const TensorList& inputs, Tensor output);
  // The pre-hooks in order with their ids: a library finds its own by type, as PyTorch's
  // isinstance does (pruning: `hook.target<prune::Hook>()`), and removes it by id.
  std::vector<std::pair<int, ForwardPreHook*>> forward_pre_hooks();
  void remove_forward_pre_hook(int id);

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
  // Registers a child by its slot (Note [Module slots]); containers keep the slots in order.
  const std::shared_ptr<ModuleSlot>& register_slot(std::string name, std::shared_ptr<ModuleSlot> slot);

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
  OrderedDict<std::shared_ptr<ModuleSlot>> children_{"submodule"};
  std::shared_ptr<HookList> hooks_;  // made on the first registration
  OrderedDict<Tensor*> bound_members_{"tensor attribute"};
  OrderedDict<Tensor> plain_attributes_{"tensor attribute"};
};

namespace detail {
template <class A>
constexpr bool is_tensor_arg = std::is_same_v<std::decay_t<A>, Tensor>;

// For each argument, its index among the tensor arguments.
template <class... Args>
constexpr std::array<size_t, sizeof...(Args)> tensor_positions() {
  std::array<size_t, sizeof...(Args)> pos{};
  size_t k = 0, i = 0;
  ((pos[i++] = is_tensor_arg<Args> ? k++ : 0), ...);
  (void)k;
  (void)i;
  return pos;
}

template <class M, class Tuple, size_t... I>
decltype(auto) forward_with(M& m, const TensorList& inputs, Tuple& args, std::index_sequence<I...>) {
  constexpr auto pos = tensor_positions<std::tuple_element_t<I, Tuple>...>();
  auto pick = [&inputs](auto&& arg, size_t p) -> decltype(auto) {
    if constexpr (is_tensor_arg<decltype(arg)>) {
      return static_cast<const Tensor&>(inputs[p]);
    } else {
      (void)p;
      return std::forward<decltype(arg)>(arg);
    }
  };
  return m.forward(pick(std::get<I>(std::move(args)), pos[I])...);
}
}  // namespace detail

// m.forward(args...) between m's forward pre-hooks and forward hooks: the hooks see the tensor
// arguments, and the call uses the pre-hooks' replacements in their places.
template <class M, class... Args>
decltype(auto) call_module(M& m, Args&&... args) {
  if (!m.has_forward_hooks()) return m.forward(std::forward<Args>(args)...);
  TensorList inputs;
  (
      [&inputs](const auto& arg) {
        if constexpr (detail::is_tensor_arg<decltype(arg)>) inputs.push_back(arg);
      }(args),
      ...);
  m.run_forward_pre_hooks(inputs);
  std::tuple<Args&&...> forwarded(std::forward<Args>(args)...);
  using Result = decltype(m.forward(std::forward<Args>(args)...));
  if constexpr (std::is_same_v<std::decay_t<Result>, Tensor>) {
    Tensor out = detail::forward_with(m, inputs, forwarded, std::index_sequence_for<Args...>{});
    return static_cast<Result>(m.run_forward_hooks(inputs, std::move(out)));
  } else {
    EMBER_CHECK(m.forward_hook_count() == 0, m.type_name(), ": forward hooks need a forward that returns a Tensor");
    return detail::forward_with(m, inputs, forwarded, std::index_sequence_for<Args...>{});
  }
}

// A child module given as a holder or as a shared pointer, as a shared_ptr<Module>.
template <class M>
std::shared_ptr<Module> as_module(const std::shared_ptr<M>& module) {
  return std::static_pointer_cast<Module>(module);
}
template <class Holder, class = decltype(std::declval<Holder>().slot())>
std::shared_ptr<Module> as_module(const Holder& holder) {
  return holder.module();
}

// Prints the module tree as PyTorch does:
//   Sequential(
//     (0): Linear(in_features=4, out_features=2, bias=true)
//   )
std::ostream& operator<<(std::ostream& os, const Module& module);

// A shared pointer to a module implementation with LibTorch's calling conventions:
// `Linear fc(4, 2)` makes a LinearImpl, `fc->weight` reaches its members, `fc(x)` calls it.
// The holder refers to the module through a slot (Note [Module slots]): once registered, the
// parent's replace_module re-points it. A replacement that is not an Impl is still called by
// fc(x) (through its one-tensor forward); fc->member then is an error naming both types.
template <class Impl>
class ModuleHolder {
 public:
  using ImplType = Impl;

  // Default-constructs the module when its Impl allows it (Sequential, ReLU, ...).
  template <class I = Impl, class = std::enable_if_t<std::is_default_constructible<I>::value>>
  ModuleHolder() : ModuleHolder(std::make_shared<Impl>()) {}
  ModuleHolder(std::nullptr_t) {}           // NOLINT: an empty holder
  ModuleHolder(std::shared_ptr<Impl> impl)  // NOLINT
      : original_(impl.get()), slot_(impl ? ModuleSlot::of(std::move(impl)) : nullptr) {}
  template <class Head, class... Tail,
            class = std::enable_if_t<!std::is_same<std::decay_t<Head>, ModuleHolder>::value &&
                                     !std::is_same<std::decay_t<Head>, std::shared_ptr<Impl>>::value &&
                                     !std::is_same<std::decay_t<Head>, std::nullptr_t>::value>>
  explicit ModuleHolder(Head&& head, Tail&&... tail)
      : ModuleHolder(std::make_shared<Impl>(std::forward<Head>(head), std::forward<Tail>(tail)...)) {}

  Impl* operator->() const { return get(); }
  Impl& operator*() const { return *get(); }
  Impl* get() const {
    Module* m = current();
    if (slot_->generation == 0) return original_;  // never replaced (the common case): one compare
    auto* impl = dynamic_cast<Impl*>(m);
    EMBER_CHECK(impl != nullptr, "ModuleHolder: this ", slot_->first_type, " was replaced by a ", m->type_name(),
                "; reach it through module()");
    return impl;
  }
  // The module in the slot (after replace_module, the replacement) and the slot itself.
  std::shared_ptr<Module> module() const { return current() ? slot_->module : nullptr; }
  const std::shared_ptr<ModuleSlot>& slot() const { return slot_; }
  std::shared_ptr<Impl> ptr() const { return std::shared_ptr<Impl>(slot_->module, get()); }
  bool is_empty() const { return slot_ == nullptr; }
  explicit operator bool() const { return slot_ != nullptr; }

  // Calls the module: its hooks around Impl::forward(args...), or the replacement's forward.
  template <class... Args>
  decltype(auto) operator()(Args&&... args) const {
    Module* m = current();
    if (slot_->generation == 0) return call_module(*original_, std::forward<Args>(args)...);
    if (auto* impl = dynamic_cast<Impl*>(m)) return call_module(*impl, std::forward<Args>(args)...);
    if constexpr (sizeof...(Args) == 1 && (detail::is_tensor_arg<Args> && ...)) {
      using Result = decltype(call_module(*original_, std::forward<Args>(args)...));
      if constexpr (std::is_same_v<std::decay_t<Result>, Tensor>) return static_cast<Result>((*m)(args...));
    }
    throw Error(::ember::detail::concat("ModuleHolder: this ", slot_->first_type, " was replaced by a ", m->type_name(),
                                        ", which cannot take this call's arguments"));
  }

 private:
  Module* current() const {
    EMBER_CHECK(slot_ != nullptr && slot_->module != nullptr, "ModuleHolder: accessing an empty module holder");
    return slot_->module.get();
  }

  // What the holder was made with; valid while its slot was never re-pointed (generation 0),
  // which is the fast path. After a replacement it may be gone: only the slot is used then.
  Impl* original_ = nullptr;
  std::shared_ptr<ModuleSlot> slot_;
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
