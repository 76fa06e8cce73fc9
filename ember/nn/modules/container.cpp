#include "ember/nn/modules/container.h"

namespace ember::nn {

const std::shared_ptr<Module>& ModuleSequence::operator[](size_t index) const {
  EMBER_CHECK(index < slots_.size(), type_name(), ": index ", index, " is out of range for ", slots_.size(),
              " modules");
  return slots_[index]->module;
}

Tensor SequentialImpl::forward(const Tensor& x) {
  EMBER_CHECK(!empty(), "Sequential: forward on an empty Sequential");
  Tensor y = x;
  for (size_t i = 0; i < size(); ++i) y = call(i, y);
  return y;
}

std::shared_ptr<Module> ModuleDictImpl::operator[](const std::string& key) const {
  auto m = find_module(key);
  EMBER_CHECK(m != nullptr, "ModuleDict: no module named '", key, "'");
  return m;
}

}  // namespace ember::nn
