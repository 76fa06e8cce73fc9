#pragma once
// Containers: Sequential (calls its children in order), ModuleList and ModuleDict (hold
// children for the owner's forward to use).
#include <string>

#include "ember/nn/module.h"

namespace ember::nn {

class SequentialImpl : public Module {
 public:
  SequentialImpl() : Module("Sequential") {}
  template <class First, class... Rest>
  explicit SequentialImpl(First&& first, Rest&&... rest) : Module("Sequential") {
    push_back(std::forward<First>(first));
    (push_back(std::forward<Rest>(rest)), ...);
  }
  template <class M>
  void push_back(const M& module) {
    push_back(std::to_string(modules_.size()), as_module(module));
  }
  void push_back(const std::string& name, std::shared_ptr<Module> module);
  Tensor forward(const Tensor& x) override;  // each child's operator() in order

  size_t size() const { return modules_.size(); }
  bool empty() const { return modules_.empty(); }
  const std::shared_ptr<Module>& operator[](size_t index) const;
  template <class T>
  T* at(size_t index) const {
    auto* m = (*this)[index]->as<T>();
    EMBER_CHECK(m != nullptr, "Sequential: child ", index, " is a ", (*this)[index]->type_name(),
                ", not the type asked for");
    return m;
  }
  std::vector<std::shared_ptr<Module>>::const_iterator begin() const { return modules_.begin(); }
  std::vector<std::shared_ptr<Module>>::const_iterator end() const { return modules_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};
EMBER_MODULE(Sequential);

class ModuleListImpl : public Module {
 public:
  ModuleListImpl() : Module("ModuleList") {}
  template <class First, class... Rest>
  explicit ModuleListImpl(First&& first, Rest&&... rest) : Module("ModuleList") {
    push_back(std::forward<First>(first));
    (push_back(std::forward<Rest>(rest)), ...);
  }
  template <class M>
  void push_back(const M& module) {
    push_back_module(as_module(module));
  }
  size_t size() const { return modules_.size(); }
  bool empty() const { return modules_.empty(); }
  const std::shared_ptr<Module>& operator[](size_t index) const;
  std::vector<std::shared_ptr<Module>>::const_iterator begin() const { return modules_.begin(); }
  std::vector<std::shared_ptr<Module>>::const_iterator end() const { return modules_.end(); }

 private:
  void push_back_module(std::shared_ptr<Module> module);
  std::vector<std::shared_ptr<Module>> modules_;
};
EMBER_MODULE(ModuleList);

class ModuleDictImpl : public Module {
 public:
  ModuleDictImpl() : Module("ModuleDict") {}
  template <class M>
  void insert(const std::string& key, const M& module) {
    register_module(key, as_module(module));
  }
  bool contains(const std::string& key) const { return find_module(key) != nullptr; }
  std::shared_ptr<Module> operator[](const std::string& key) const;
  std::vector<std::string> keys() const { return named_children().keys(); }
  size_t size() const { return children().size(); }
};
EMBER_MODULE(ModuleDict);

}  // namespace ember::nn
