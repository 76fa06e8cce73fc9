#pragma once
// Whether the buffers a quantized layer derived something from (its weight's packed form, host
// copies of its scales and zero points) changed since it last looked: load_state_dict writes
// into them (their version moves), to(device) gives them new storages. The layer re-derives
// then, so a loaded or moved model computes with what it holds. Holding the storages seen keeps
// their addresses from being reused by others.
#include <functional>
#include <initializer_list>
#include <utility>
#include <vector>

#include "ember/tensor/tensor.h"

namespace ember::quantization {

class BufferWatch {
 public:
  // Runs `derive` on the first call and whenever a tensor has another storage or version than at
  // the last call that derived (an undefined tensor, an absent bias, counts as one state). When
  // `derive` throws (a bad loaded value), nothing is remembered: the next call derives again.
  template <class Derive>
  void update(std::initializer_list<std::reference_wrapper<const Tensor>> tensors, const Derive& derive) {
    if (unchanged(tensors)) return;  // every forward but the first after a change: no allocation
    seen_.clear();
    derive();
    for (const Tensor& t : tensors) seen_.emplace_back(state_of(t));
  }

 private:
  using State = std::pair<Storage, uint64_t>;
  static State state_of(const Tensor& t) {
    return {t.defined() ? t.storage() : nullptr, t.defined() ? t.version() : 0};
  }
  bool unchanged(std::initializer_list<std::reference_wrapper<const Tensor>> tensors) const {
    if (seen_.size() != tensors.size()) return false;
    size_t i = 0;
    for (const Tensor& t : tensors) {
      const State& seen = seen_[i++];
      if ((t.defined() ? t.storage().get() : nullptr) != seen.first.get() ||
          (t.defined() ? t.version() : 0) != seen.second)
        return false;
    }
    return true;
  }
  std::vector<State> seen_;
};

}  // namespace ember::quantization
