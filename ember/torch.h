#pragma once
// Porting a LibTorch program: include this header where the program includes <torch/torch.h>,
// and the C++ frontend's names resolve to ember's (`namespace torch = ember`): torch::Tensor,
// torch::nn::Conv2d, torch::optim::Adam, torch::data::make_data_loader, torch::autograd::grad,
// torch::autograd::Function... ember's own API is the frontend's where they meet; the LibTorch
// shapes that differ from ember's (the data API's templates, ATen-style function signatures)
// sit beside ember's own, over the same implementation. What is here is what LibTorch programs
// need that is not a name: the frontend's macros.
#include <cmath>  // LibTorch programs get std::isnan and M_PI through <torch/torch.h>
#include <iostream>

#include "ember/distributed/c10d.h"
#include "ember/ember.h"

namespace torch = ::ember;
namespace c10d = ::ember::distributed::c10d;  // ProcessGroupMPI::createProcessGroupMPI(), allreduce, Work

namespace ember {
using std::nullopt;  // torch::optional, torch::nullopt
using std::optional;
// torch::str("epoch ", 3, ": ", loss): its arguments printed into one string.
template <class... Args>
std::string str(const Args&... args) {
  return detail::concat(args...);
}
}  // namespace ember

// nn modules: TORCH_MODULE(Net) makes `Net` the holder of `NetImpl`.
#define TORCH_MODULE(Name) EMBER_MODULE(Name)
// Options structs: TORCH_ARG(int64_t, size) = 4;
#define TORCH_ARG(T, name) EMBER_ARG(T, name)
// Checks that throw (ember::Error here, c10::Error there) with the message's parts concatenated.
#define TORCH_CHECK(cond, ...) EMBER_CHECK(cond, "Expected " #cond " to be true. ", ##__VA_ARGS__)
#define AT_ASSERT(cond) EMBER_CHECK(cond, "Assertion failed: " #cond)
#define TORCH_INTERNAL_ASSERT(cond, ...) EMBER_CHECK(cond, "Internal assertion failed: " #cond ". ", ##__VA_ARGS__)
#define TORCH_WARN(...) (std::cerr << "Warning: " << ::ember::detail::concat(__VA_ARGS__) << "\n")
