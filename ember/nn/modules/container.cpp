#include "ember/nn/modules/container.h"

namespace ember::nn {

void SequentialImpl::push_back(const std::string& name, std::shared_ptr<Module> module) {
  modules_.push_back(register_module(name, std::move(module)));
}

Tensor SequentialImpl::forward(const Tensor& x) {
  EMBER_CHECK(!modules_.empty(), "Sequential: forward on an empty Sequential");
  Tensor y = x;
  for (const auto& m : modules_) y = (*m)(y);
  return y;
}

const std::shared_ptr<Module>& SequentialImpl::operator[](size_t index) const {
  EMBER_CHECK(index < modules_.size(), "Sequential: index ", index, " is out of range for ", modules_.size(),
              " modules");
  return modules_[index];
}

void ModuleListImpl::push_back_module(std::shared_ptr<Module> module) {
  modules_.push_back(register_module(std::to_string(modules_.size()), std::move(module)));
}

const std::shared_ptr<Module>& ModuleListImpl::operator[](size_t index) const {
  EMBER_CHECK(index < modules_.size(), "ModuleList: index ", index, " is out of range for ", modules_.size(),
              " modules");
  return modules_[index];
}

std::shared_ptr<Module> ModuleDictImpl::operator[](const std::string& key) const {
  auto m = find_module(key);
  EMBER_CHECK(m != nullptr, "ModuleDict: no module named '", key, "'");
  return m;
}

}  // namespace ember::nn
