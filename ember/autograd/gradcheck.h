#pragma once
// gradcheck: analytic gradients against float64 central finite differences.
//
//   auto r = ember::autograd::gradcheck([](const std::vector<Tensor>& x) { return x[0].tanh() * x[1]; },
//                                       {ember::randn({3, 4}, kFloat64), ember::randn({4}, kFloat64)});
//   if (!r.ok) std::cerr << r.message;
//
// The inputs are copied to float64 leaves that require grad. The output is reduced to the
// scalar sum(f(x) * w) with fixed random weights w (so every output element counts, with
// different weights), its gradient taken by backward, and each input element nudged by
// +-eps to estimate the same gradient numerically. Mismatches beyond atol + rtol * |numeric|
// are reported with the input, the element and both values.
#include <functional>
#include <string>
#include <vector>

#include "ember/tensor/tensor.h"

namespace ember::autograd {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
};

struct GradcheckResult {
  bool ok = true;
  std::string message;  // the first mismatch, when !ok
};

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options = {});

// gradgradcheck: second derivatives. gradcheck of x -> the gradients of sum(f(x) * v) w.r.t.
// every input (fixed weights v), taken with create_graph, so that their own gradient comes from
// a backward of the backward (Note [Double backward]). Throws the ember::Error of an op whose
// backward formula is not differentiable.
GradcheckResult gradgradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                              const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

}  // namespace ember::autograd
