#pragma once
// Chainable options, as LibTorch's TORCH_ARG. Inside an options struct,
//     EMBER_ARG(int64_t, batch_size) = 1;
// declares the member batch_size_ (defaulting to 1), a setter batch_size(v) that returns the
// struct, for chains such as DataLoaderOptions().batch_size(64).shuffle(true), and a getter
// batch_size(). Every options struct of ember (layers, losses, optimizers, the loader) uses it.
#define EMBER_ARG(T, name)                                 \
 public:                                                   \
  auto name(const T& new_##name)->decltype(*this) {        \
    this->name##_ = new_##name;                            \
    return *this;                                          \
  }                                                        \
  const T& name() const noexcept { return this->name##_; } \
  T name##_
