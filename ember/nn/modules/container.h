#pragma once
// Containers: Sequential (calls its children in order), ModuleList and ModuleDict (hold
// children for the owner's forward to use).
#include <functional>
#include <iterator>
#include <string>
#include <type_traits>
#include <vector>

#include "ember/nn/module.h"

namespace ember::nn {

// The children of a container in order, each as the module its slot holds now.
class SlotIterator {
 public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = std::shared_ptr<Module>;
  using difference_type = std::ptrdiff_t;
  using pointer = const std::shared_ptr<Module>*;
  using reference = const std::shared_ptr<Module>&;
  explicit SlotIterator(std::vector<std::shared_ptr<ModuleSlot>>::const_iterator it) : it_(it) {}
  reference operator*() const { return (*it_)->module; }
  pointer operator->() const { return &(*it_)->module; }
  SlotIterator& operator++() {
    ++it_;
    return *this;
  }
  bool operator==(const SlotIterator& o) const { return it_ == o.it_; }
  bool operator!=(const SlotIterator& o) const { return it_ != o.it_; }

 private:
  std::vector<std::shared_ptr<ModuleSlot>>::const_iterator it_;
};

// What Sequential and ModuleList share: children in order, by slot.
class ModuleSequence : public Module {
 public:
  using Module::Module;
  size_t size() const { return slots_.size(); }
  bool empty() const { return slots_.empty(); }
  SlotIterator begin() const { return SlotIterator(slots_.begin()); }
  SlotIterator end() const { return SlotIterator(slots_.end()); }
  const std::shared_ptr<Module>& operator[](size_t index) const;
  template <class T>
  T* at(size_t index) const {
    auto* m = (*this)[index]->as<T>();
    EMBER_CHECK(m != nullptr, type_name(), ": child ", index, " is a ", (*this)[index]->type_name(),
                ", not the type asked for");
    return m;
  }
  // A holder's slot joins the sequence (Note [Module slots]): replace_module("1", ...) re-points it.
  template <class M>
  void push_back(const M& module) {
    push_back(std::to_string(size()), module);
  }
  template <class Holder, class = decltype(std::declval<Holder>().slot())>
  void push_back(const std::string& name, const Holder& holder) {
    slots_.push_back(register_slot(name, holder.slot()));
    callers_.push_back(caller_of(holder));
  }
  template <class M, class = std::enable_if_t<std::is_base_of_v<Module, M>>>
  void push_back(const std::string& name, std::shared_ptr<M> module) {
    push_back(name, ModuleHolder<M>(std::move(module)));
  }
  void push_back(const std::string& name, std::shared_ptr<Module> module) {
    slots_.push_back(register_slot(name, ModuleSlot::of(std::move(module))));
    callers_.push_back(nullptr);
  }

 protected:
  // Child `index` called on x: through its holder when it came as one, so that a module whose
  // forward is its own (LibTorch's `Tensor forward(Tensor x)`, which does not override
  // Module::forward) is called as its type declares it; else through Module::operator().
  Tensor call(size_t index, const Tensor& x) const {
    return callers_[index] ? callers_[index](x) : (*slots_[index]->module)(x);
  }

 private:
  template <class Holder>
  static std::function<Tensor(const Tensor&)> caller_of(const Holder& holder) {
    if constexpr (std::is_invocable_r_v<Tensor, const Holder&, const Tensor&>)
      return [holder](const Tensor& x) { return Tensor(holder(x)); };
    else
      return nullptr;
  }
  std::vector<std::shared_ptr<ModuleSlot>> slots_;
  std::vector<std::function<Tensor(const Tensor&)>> callers_;
};

class SequentialImpl : public ModuleSequence {
 public:
  SequentialImpl() : ModuleSequence("Sequential") {}
  template <class First, class... Rest>
  explicit SequentialImpl(First&& first, Rest&&... rest) : ModuleSequence("Sequential") {
    push_back(std::forward<First>(first));
    (push_back(std::forward<Rest>(rest)), ...);
  }
  Tensor forward(const Tensor& x) override;  // each child's operator() in order
};
EMBER_MODULE(Sequential);

class ModuleListImpl : public ModuleSequence {
 public:
  ModuleListImpl() : ModuleSequence("ModuleList") {}
  template <class First, class... Rest>
  explicit ModuleListImpl(First&& first, Rest&&... rest) : ModuleSequence("ModuleList") {
    push_back(std::forward<First>(first));
    (push_back(std::forward<Rest>(rest)), ...);
  }
};
EMBER_MODULE(ModuleList);

class ModuleDictImpl : public Module {
 public:
  ModuleDictImpl() : Module("ModuleDict") {}
  template <class M>
  void insert(const std::string& key, const M& module) {
    register_module(key, module);
  }
  bool contains(const std::string& key) const { return find_module(key) != nullptr; }
  std::shared_ptr<Module> operator[](const std::string& key) const;
  std::vector<std::string> keys() const { return named_children().keys(); }
  size_t size() const { return children().size(); }
};
EMBER_MODULE(ModuleDict);

// A module of any type held by its base (LibTorch's AnyModule, for the one signature ember's
// modules share: forward(Tensor) -> Tensor, called with the module's hooks).
class AnyModule {
 public:
  AnyModule() = default;
  template <class Impl>
  AnyModule(const ModuleHolder<Impl>& holder) : module_(holder.module()) {}  // NOLINT: implicit, as LibTorch's
  template <class M, class = std::enable_if_t<std::is_base_of_v<Module, M>>>
  AnyModule(std::shared_ptr<M> module) : module_(std::move(module)) {}  // NOLINT
  Tensor forward(const Tensor& x) const {
    EMBER_CHECK(module_ != nullptr, "AnyModule: forward on an empty AnyModule");
    return (*module_)(x);
  }
  const std::shared_ptr<Module>& ptr() const { return module_; }
  bool is_empty() const { return module_ == nullptr; }

 private:
  std::shared_ptr<Module> module_;
};

}  // namespace ember::nn
