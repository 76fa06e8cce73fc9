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
    std::vector<std::pair<Storage, uint64_t>> now;
    now.reserve(tensors.size());
    for (const Tensor& t : tensors)
      now.emplace_back(t.defined() ? t.storage() : nullptr, t.defined() ? t.version() : 0);
    if (!seen_.empty() && now == seen_) return;
    seen_.clear();
    derive();
    seen_ = std::move(now);
  }

 private:
  std::vector<std::pair<Storage, uint64_t>> seen_;
};

}  // namespace ember::quantization
