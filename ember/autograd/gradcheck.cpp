#include "ember/autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "ember/autograd/engine.h"
#include "ember/autograd/functions.h"
#include "ember/autograd/grad_mode.h"

namespace ember::autograd {

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options) {
  std::vector<Tensor> leaves;
  for (const Tensor& t : inputs) {
    EMBER_CHECK(t.defined() && t.is_floating_point(), "gradcheck: inputs must be defined floating point tensors");
    NoGradGuard no_grad;
    leaves.push_back(t.to(kFloat64, /*copy=*/true).contiguous().set_requires_grad(true));
  }
  // Fixed weights: a deterministic pattern in [0.5, 1.5), different for every element.
  const Tensor out0 = f(leaves);
  EMBER_CHECK(out0.defined() && out0.dtype() == kFloat64, "gradcheck: f must return a float64 tensor (got ",
              out0.defined() ? dtype_name(out0.dtype()) : "undefined", ")");
  Tensor weights;
  {
    NoGradGuard no_grad;
    weights = (ember::sin(arange(out0.numel(), kFloat64) * 1.7 + 0.3) * 0.5 + 1.0).reshape(out0.sizes());
  }
  auto loss = [&](const std::vector<Tensor>& x) { return ember::sum(f(x) * weights); };

  const Tensor l = loss(leaves);
  std::vector<Tensor> wanted;
  for (const Tensor& leaf : leaves) wanted.push_back(leaf);
  const std::vector<Tensor> analytic = grad({l}, wanted, {}, std::nullopt, false, /*allow_unused=*/true);

  NoGradGuard no_grad;
  for (size_t i = 0; i < leaves.size(); ++i) {
    double* p = leaves[i].data_ptr<double>();
    const Tensor a = analytic[i].defined() ? analytic[i].contiguous() : zeros_like(leaves[i]);
    const double* ap = a.data_ptr<double>();
    for (int64_t j = 0; j < leaves[i].numel(); ++j) {
      const double saved = p[j];
      p[j] = saved + options.eps;
      const double up = loss(leaves).item<double>();
      p[j] = saved - options.eps;
      const double down = loss(leaves).item<double>();
      p[j] = saved;
      const double numeric = (up - down) / (2 * options.eps);
      if (!(std::fabs(ap[j] - numeric) <= options.atol + options.rtol * std::fabs(numeric))) {
        std::ostringstream os;
        os << "gradcheck: gradient mismatch for input " << i << " (shape " << shape_str(leaves[i].sizes())
           << ") at element " << j << ": analytic " << ap[j] << ", numeric " << numeric;
        return {false, os.str()};
      }
    }
  }
  return {};
}

GradcheckResult gradgradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                              const std::vector<Tensor>& inputs, const GradcheckOptions& options) {
  Tensor v;  // fixed weights for f's output, made on the first call
  auto first_gradients = [&](const std::vector<Tensor>& x) {
    // gradcheck calls this with grad mode on for the analytic gradient (which needs the graph
    // of this backward) and off for its finite differences (which need only the values).
    const bool create_graph = GradMode::is_enabled();
    EnableGradGuard grad_on;
    const Tensor out = f(x);
    if (!v.defined()) {
      NoGradGuard no_grad;
      v = (ember::cos(arange(out.numel(), kFloat64) * 0.9 + 0.1) * 0.5 + 1.0).reshape(out.sizes());
    }
    const std::vector<Tensor> g = grad({ember::sum(out * v)}, x, {}, std::nullopt, create_graph, /*allow_unused=*/true);
    std::vector<Tensor> flat;
    Tensor anchor = zeros({}, kFloat64);  // keeps the result on the tape when f is linear (zero curvature)
    for (size_t i = 0; i < x.size(); ++i) {
      flat.push_back((g[i].defined() ? g[i] : zeros_like(x[i])).reshape({-1}));
      anchor = anchor + x[i].sum() * 0.0;
    }
    const Tensor r = ember::cat(flat) + anchor;
    return create_graph ? r : r.detach();
  };
  return gradcheck(first_gradients, inputs, options);
}

}  // namespace ember::autograd
