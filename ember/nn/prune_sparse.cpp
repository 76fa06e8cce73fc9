// SparseLinear and sparsify (nn/prune.h): unstructured sparsity that saves time above a crossover.
#include <ostream>

#include "ember/autograd/grad_mode.h"
#include "ember/nn/prune.h"

namespace ember::nn::utils::prune {

SparseLinearImpl::SparseLinearImpl(const LinearImpl& linear)
    : Module("SparseLinear"), in_features(linear.options.in_features_), out_features(linear.options.out_features_) {
  NoGradGuard no_grad;
  const Tensor w = linear.weight.detach().to(Device(kCPU), kFloat32).contiguous();
  const std::vector<float> dense = w.to_vector<float>();
  std::vector<int64_t> rows{0}, cols;
  std::vector<float> vals;
  for (int64_t n = 0; n < out_features; ++n) {
    for (int64_t k = 0; k < in_features; ++k) {
      const float v = dense[static_cast<size_t>(n * in_features + k)];
      if (v == 0.0f) continue;
      cols.push_back(k);
      vals.push_back(v);
    }
    rows.push_back(static_cast<int64_t>(cols.size()));
  }
  const Shape nnz{static_cast<int64_t>(cols.size())};
  crow = register_buffer("crow", tensor(rows, Shape{out_features + 1}));
  col = register_buffer("col", cols.empty() ? empty({0}, TensorOptions().dtype(kInt64)) : tensor(cols, nnz));
  values = register_buffer("values", vals.empty() ? empty({0}) : tensor(vals, nnz));
  if (linear.bias.defined()) bias = register_buffer("bias", linear.bias.detach().to(Device(kCPU), kFloat32).clone());
}

Tensor SparseLinearImpl::forward(const Tensor& x) {
  EMBER_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == in_features, "SparseLinear: expects input [..., ",
              in_features, "], got ", x.defined() ? shape_str(x.sizes()) : std::string("an undefined tensor"));
  return native::csr_linear(x.detach().to(kFloat32), crow, col, values, bias, out_features);
}

double SparseLinearImpl::sparsity() const {
  const double total = static_cast<double>(in_features) * static_cast<double>(out_features);
  return total == 0 ? 0.0 : 1.0 - static_cast<double>(values.numel()) / total;
}

void SparseLinearImpl::pretty_print(std::ostream& os) const {
  os << "SparseLinear(in_features=" << in_features << ", out_features=" << out_features << ", nnz=" << values.numel()
     << ", bias=" << (bias.defined() ? "true" : "false") << ")";
}

int sparsify(Module& model, double min_sparsity) {
  EMBER_CHECK(min_sparsity >= 0 && min_sparsity <= 1, "prune.sparsify: min_sparsity must be in [0, 1], got ",
              min_sparsity);
  std::vector<std::string> names;
  for (const auto& item : model.named_modules())
    if (!item.key().empty() && item.value()->as<LinearImpl>()) names.push_back(item.key());
  int replaced = 0;
  for (const std::string& name : names) {
    // The module at this dotted path (replace_module takes the path; find it the same way).
    std::shared_ptr<Module> m = model.named_modules()[name];
    for (const std::string t : {"weight", "bias"})
      if (find_hook(*m, t)) remove(*m, t);
    const Tensor w = m->as<LinearImpl>()->weight;
    const double zeros = (w.detach() == 0).sum().item<double>() / static_cast<double>(std::max<int64_t>(1, w.numel()));
    if (zeros < min_sparsity) continue;
    model.replace_module(name, std::make_shared<SparseLinearImpl>(*m->as<LinearImpl>()));
    ++replaced;
  }
  return replaced;
}

}  // namespace ember::nn::utils::prune
