#include "ember/nn/prune.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <ostream>
#include <sstream>

#include "ember/autograd/grad_mode.h"

namespace ember::nn::utils::prune {

// ---- amounts ----

Amount::Amount(int64_t count) : is_count_(true), count_(count) {
  EMBER_CHECK(count >= 0, "prune: amount=", count,
              " should either be a float in the range [0, 1] or a non-negative integer");
}

Amount::Amount(double fraction) : is_count_(false), fraction_(fraction) {
  EMBER_CHECK(fraction >= 0.0 && fraction <= 1.0, "prune: amount=", fraction,
              " should either be a float in the range [0, 1] or a non-negative integer");
}

int64_t Amount::of(int64_t n, const char* op) const {
  // Python's round(): half to even, which nearbyint does in the default rounding mode.
  const int64_t k = is_count_ ? count_ : static_cast<int64_t>(std::nearbyint(fraction_ * static_cast<double>(n)));
  EMBER_CHECK(k <= n, op, ": amount=", k, " should be smaller than the number of parameters to prune=", n);
  return k;
}

std::string Amount::str() const {
  std::ostringstream s;
  if (is_count_)
    s << count_;
  else
    s << fraction_;
  return s.str();
}

int64_t Method::dim() const { throw Error(::ember::detail::concat("prune: ", name(), " is not a structured method")); }

namespace {

// The values of a tensor on the host as doubles, and back into a tensor like `like`: masks are
// computed once per pruning call, so the host and double precision keep them simple and exact.
std::vector<double> host_values(const Tensor& t) { return t.detach().to(Device(kCPU)).to_vector<double>(); }
Tensor like(const std::vector<double>& values, const Tensor& like) {
  return tensor(values, like.sizes()).to(like.device(), like.dtype());
}

// The k positions of the smallest (largest = false) or largest values; ties go to the lower index.
std::vector<int64_t> extreme_k(const std::vector<double>& v, int64_t k, bool largest) {
  std::vector<int64_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  auto before = [&](int64_t a, int64_t b) {
    if (v[a] != v[b]) return largest ? v[a] > v[b] : v[a] < v[b];
    return a < b;
  };
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), before);
  idx.resize(static_cast<size_t>(k));
  return idx;
}

// A tensor seen as [outer, channels, inner] around dimension `dim`.
struct ChannelView {
  int64_t outer = 1, channels = 1, inner = 1;
  ChannelView(const Shape& shape, int64_t dim) {
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
      if (d < dim)
        outer *= shape[d];
      else if (d > dim)
        inner *= shape[d];
    }
    channels = shape[dim];
  }
  template <class F>
  void for_channel(int64_t c, F&& f) const {  // f(flat index) over channel c's entries
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) f((o * channels + c) * inner + i);
  }
};

int64_t structured_dim(const char* op, const Tensor& t, int64_t dim) {
  EMBER_CHECK(t.dim() > 1, op, ": structured pruning can only be applied to multidimensional tensors, got shape ",
              shape_str(t.sizes()));
  EMBER_CHECK(dim >= -t.dim() && dim < t.dim(), op, ": dim ", dim, " is out of range for shape ", shape_str(t.sizes()));
  return dim < 0 ? dim + t.dim() : dim;
}

void check_same_shape(const char* op, const Tensor& t, const Tensor& mask) {
  EMBER_CHECK(t.sizes() == mask.sizes(), op, ": the mask has shape ", shape_str(mask.sizes()), ", the tensor ",
              shape_str(t.sizes()));
}

class L1UnstructuredMethod : public Method {
 public:
  explicit L1UnstructuredMethod(Amount amount) : amount_(amount) {}
  const char* name() const override { return "L1Unstructured"; }
  PruningType type() const override { return PruningType::Unstructured; }
  Tensor compute_mask(const Tensor& t, const Tensor& default_mask) const override {
    check_same_shape(name(), t, default_mask);
    const int64_t k = amount_.of(t.numel(), name());
    std::vector<double> mask = host_values(default_mask), v = host_values(t);
    for (double& x : v) x = std::abs(x);
    for (int64_t i : extreme_k(v, k, /*largest=*/false)) mask[i] = 0;
    return like(mask, default_mask);
  }

 private:
  Amount amount_;
};

class RandomUnstructuredMethod : public Method {
 public:
  explicit RandomUnstructuredMethod(Amount amount) : amount_(amount) {}
  const char* name() const override { return "RandomUnstructured"; }
  PruningType type() const override { return PruningType::Unstructured; }
  Tensor compute_mask(const Tensor& t, const Tensor& default_mask) const override {
    check_same_shape(name(), t, default_mask);
    const int64_t k = amount_.of(t.numel(), name());
    std::vector<double> mask = host_values(default_mask);
    const std::vector<double> prob = host_values(rand(t.sizes()));
    for (int64_t i : extreme_k(prob, k, /*largest=*/true)) mask[i] = 0;
    return like(mask, default_mask);
  }

 private:
  Amount amount_;
};

// The Lₙ norm of each channel along dim, as torch.norm(t, p=n, dim=<all others>).
std::vector<double> channel_norms(const std::vector<double>& v, const ChannelView& view, double n) {
  std::vector<double> norms(static_cast<size_t>(view.channels));
  for (int64_t c = 0; c < view.channels; ++c) {
    double acc = std::isinf(n) && n < 0 ? std::numeric_limits<double>::infinity() : 0.0;
    view.for_channel(c, [&](int64_t i) {
      const double a = std::abs(v[i]);
      if (std::isinf(n))
        acc = n > 0 ? std::max(acc, a) : std::min(acc, a);
      else if (n == 0)
        acc += a != 0;
      else
        acc += std::pow(a, n);
    });
    norms[c] = std::isinf(n) || n == 0 ? acc : std::pow(acc, 1.0 / n);
  }
  return norms;
}

// Keeps the channels of `keep` (others zero), times the mask so far.
Tensor channel_mask(const Tensor& default_mask, const ChannelView& view, const std::vector<int64_t>& keep) {
  std::vector<double> mask = host_values(default_mask), kept(mask.size(), 0.0);
  for (int64_t c : keep) view.for_channel(c, [&](int64_t i) { kept[i] = mask[i]; });
  return like(kept, default_mask);
}

// The structured methods differ only in how they score the channels along dim: the channels
// with the highest scores are kept, `amount` of them removed, the old mask kept within them.
class StructuredMethod : public Method {
 public:
  StructuredMethod(Amount amount, int64_t dim) : amount_(amount), dim_(dim) {}
  PruningType type() const override { return PruningType::Structured; }
  int64_t dim() const override { return dim_; }
  Tensor compute_mask(const Tensor& t, const Tensor& default_mask) const override {
    check_same_shape(name(), t, default_mask);
    const int64_t dim = structured_dim(name(), t, dim_);
    const ChannelView view(t.sizes(), dim);
    const int64_t k = amount_.of(view.channels, name());
    if (k == 0) return default_mask.clone();
    return channel_mask(default_mask, view, extreme_k(scores(t, view), view.channels - k, /*largest=*/true));
  }

 protected:
  virtual std::vector<double> scores(const Tensor& t, const ChannelView& view) const = 0;

 private:
  Amount amount_;
  int64_t dim_;
};

class LnStructuredMethod : public StructuredMethod {
 public:
  LnStructuredMethod(Amount amount, double n, int64_t dim) : StructuredMethod(amount, dim), n_(n) {
    EMBER_CHECK(!std::isnan(n) && n >= 0, "LnStructured: the norm n must be >= 0 or infinity, got ", n);
  }
  const char* name() const override { return "LnStructured"; }

 protected:
  std::vector<double> scores(const Tensor& t, const ChannelView& view) const override {
    return channel_norms(host_values(t), view, n_);
  }

 private:
  double n_;
};

class RandomStructuredMethod : public StructuredMethod {
 public:
  using StructuredMethod::StructuredMethod;
  const char* name() const override { return "RandomStructured"; }

 protected:
  std::vector<double> scores(const Tensor&, const ChannelView& view) const override {
    return host_values(rand({view.channels}));
  }
};

class CustomFromMaskMethod : public Method {
 public:
  explicit CustomFromMaskMethod(Tensor mask) : mask_(std::move(mask)) {
    EMBER_CHECK(mask_.defined(), "CustomFromMask: the mask is undefined");
  }
  const char* name() const override { return "CustomFromMask"; }
  PruningType type() const override { return PruningType::Global; }
  Tensor compute_mask(const Tensor& t, const Tensor& default_mask) const override {
    check_same_shape(name(), t, mask_);
    NoGradGuard no_grad;
    return default_mask * mask_.to(default_mask.device(), default_mask.dtype());
  }

 private:
  Tensor mask_;
};

class IdentityMethod : public Method {
 public:
  const char* name() const override { return "Identity"; }
  PruningType type() const override { return PruningType::Unstructured; }
  Tensor compute_mask(const Tensor&, const Tensor& default_mask) const override { return default_mask.clone(); }
};

// PruningContainer._combine_masks: `method` computes a mask on what survives of `mask` only, and
// the result is written back into those places.
Tensor combine(const Method& method, const Tensor& t, const Tensor& mask) {
  check_same_shape(method.name(), t, mask);
  if (method.type() == PruningType::Global) return method.compute_mask(t, mask);
  std::vector<double> values = host_values(t), old_mask = host_values(mask), new_mask = old_mask;
  if (method.type() == PruningType::Unstructured) {
    std::vector<int64_t> live;
    for (int64_t i = 0; i < static_cast<int64_t>(old_mask.size()); ++i)
      if (old_mask[i] == 1) live.push_back(i);
    std::vector<double> t_live, ones(live.size(), 1.0);
    for (int64_t i : live) t_live.push_back(values[i]);
    const Shape shape{static_cast<int64_t>(live.size())};
    const std::vector<double> partial =
        host_values(method.compute_mask(tensor(t_live, shape).to(t.dtype()), tensor(ones, shape).to(mask.dtype())));
    for (size_t j = 0; j < live.size(); ++j) new_mask[live[j]] = partial[j];
    return like(new_mask, mask);
  }
  // Structured: the channels along dim that have any entry left.
  const int64_t dim = structured_dim(method.name(), t, method.dim());
  const ChannelView view(t.sizes(), dim);
  std::vector<int64_t> live;
  for (int64_t c = 0; c < view.channels; ++c) {
    bool any = false;
    view.for_channel(c, [&](int64_t i) { any = any || old_mask[i] != 0; });
    if (any) live.push_back(c);
  }
  Shape shape = t.sizes();
  shape[dim] = static_cast<int64_t>(live.size());
  const ChannelView sub(shape, dim);
  std::vector<double> t_sub, m_sub;
  for (int64_t o = 0; o < view.outer; ++o)
    for (int64_t c : live)
      for (int64_t i = 0; i < view.inner; ++i) {
        t_sub.push_back(values[(o * view.channels + c) * view.inner + i]);
        m_sub.push_back(old_mask[(o * view.channels + c) * view.inner + i]);
      }
  const std::vector<double> partial =
      host_values(method.compute_mask(tensor(t_sub, shape).to(t.dtype()), tensor(m_sub, shape).to(mask.dtype())));
  for (int64_t o = 0; o < view.outer; ++o)
    for (size_t j = 0; j < live.size(); ++j)
      for (int64_t i = 0; i < view.inner; ++i)
        new_mask[(o * view.channels + live[j]) * view.inner + i] =
            partial[(o * sub.channels + static_cast<int64_t>(j)) * sub.inner + i];
  return like(new_mask, mask);
}

Hook* find_hook_mut(Module& module, const std::string& name) {
  for (auto& [id, hook] : module.forward_pre_hooks()) {
    auto* h = hook->target<Hook>();
    if (h != nullptr && h->tensor_name == name) return h;
  }
  return nullptr;
}

}  // namespace

MethodPtr L1Unstructured(Amount amount) { return std::make_shared<L1UnstructuredMethod>(amount); }
MethodPtr RandomUnstructured(Amount amount) { return std::make_shared<RandomUnstructuredMethod>(amount); }
MethodPtr LnStructured(Amount amount, double n, int64_t dim) {
  return std::make_shared<LnStructuredMethod>(amount, n, dim);
}
MethodPtr RandomStructured(Amount amount, int64_t dim) { return std::make_shared<RandomStructuredMethod>(amount, dim); }
MethodPtr CustomFromMask(Tensor mask) { return std::make_shared<CustomFromMaskMethod>(std::move(mask)); }
MethodPtr Identity() { return std::make_shared<IdentityMethod>(); }

// ---- the hook ----

Tensor Hook::masked(Module& module) const {
  const Tensor* orig = module.find_parameter(tensor_name + "_orig");
  const Tensor* mask = module.find_buffer(tensor_name + "_mask");
  EMBER_CHECK(orig != nullptr && mask != nullptr, "prune: ", module.type_name(), " lost '", tensor_name, "_orig' or '",
              tensor_name, "_mask' of its pruned '", tensor_name, "'");
  return mask->to(orig->dtype()) * *orig;
}

std::optional<TensorList> Hook::operator()(Module& module, const TensorList&) const {
  module.set_attribute(tensor_name, masked(module));
  return std::nullopt;
}

const Hook* find_hook(Module& module, const std::string& name) { return find_hook_mut(module, name); }

// ---- applying and removing ----

void apply(Module& module, const std::string& name, const MethodPtr& method, const Tensor& importance_scores) {
  EMBER_CHECK(method != nullptr, "prune: the method is null");
  Hook* hook = find_hook_mut(module, name);
  const std::string what = ::ember::detail::concat(method->name(), " of ", module.type_name(), ".", name);
  Tensor orig;
  if (hook != nullptr) {
    orig = *module.find_parameter(name + "_orig");
  } else {
    const Tensor* param = module.find_parameter(name);
    EMBER_CHECK(param != nullptr && param->defined(), "prune: ", module.type_name(), " has no parameter '", name, "'");
    EMBER_CHECK(module.has_attribute_binding(name), "prune: ", module.type_name(), " does not bind its '", name,
                "' to a member, so its forward would never see the mask; call bind_attribute(\"", name,
                "\", member) in its constructor (Note [Tensor attributes])");
    orig = *param;
  }
  const Tensor scores = importance_scores.defined() ? importance_scores : orig;
  EMBER_CHECK(scores.sizes() == orig.sizes(), "prune: importance_scores of shape ", shape_str(scores.sizes()),
              " should match the parameter's shape ", shape_str(orig.sizes()), " (", what, ")");
  // Compute everything before changing the module, so an error leaves it as it was.
  Tensor mask;
  {
    NoGradGuard no_grad;
    mask = hook ? combine(*method, scores, *module.find_buffer(name + "_mask"))
                : method->compute_mask(scores, ones_like(orig).detach());
  }
  if (hook != nullptr) {
    *module.find_buffer(name + "_mask") = mask;
    hook->methods.push_back(method);
  } else {
    // PyTorch's order: `name` leaves the parameters, `name_orig` joins them at the end.
    module.remove_parameter(name);
    module.register_parameter(name + "_orig", orig, orig.requires_grad());
    module.register_buffer(name + "_mask", mask);
    module.register_forward_pre_hook(ForwardPreHook(Hook{name, {method}}));
    hook = find_hook_mut(module, name);
  }
  module.set_attribute(name, hook->masked(module));
}

void l1_unstructured(Module& module, const std::string& name, Amount amount, const Tensor& importance_scores) {
  apply(module, name, L1Unstructured(amount), importance_scores);
}
void random_unstructured(Module& module, const std::string& name, Amount amount) {
  apply(module, name, RandomUnstructured(amount));
}
void ln_structured(Module& module, const std::string& name, Amount amount, double n, int64_t dim,
                   const Tensor& importance_scores) {
  apply(module, name, LnStructured(amount, n, dim), importance_scores);
}
void random_structured(Module& module, const std::string& name, Amount amount, int64_t dim) {
  apply(module, name, RandomStructured(amount, dim));
}
void custom_from_mask(Module& module, const std::string& name, const Tensor& mask) {
  apply(module, name, CustomFromMask(mask));
}
void identity(Module& module, const std::string& name) { apply(module, name, Identity()); }

void global_unstructured(const std::vector<Target>& targets, const MethodPtr& method,
                         const std::vector<Tensor>& importance_scores) {
  EMBER_CHECK(method != nullptr, "global_unstructured: the method is null");
  EMBER_CHECK(method->type() == PruningType::Unstructured, "global_unstructured: only unstructured methods apply, got ",
              method->name());
  EMBER_CHECK(!targets.empty(), "global_unstructured: no tensors to prune");
  EMBER_CHECK(importance_scores.empty() || importance_scores.size() == targets.size(),
              "global_unstructured: ", importance_scores.size(), " importance scores for ", targets.size(), " tensors");
  std::vector<double> scores, masks;
  std::vector<Tensor> shapes_of;
  for (size_t i = 0; i < targets.size(); ++i) {
    const Target& target = targets[i];
    EMBER_CHECK(target.module != nullptr, "global_unstructured: target ", i, " ('", target.name, "') has no module");
    const Tensor value = target.module->attribute(target.name);
    EMBER_CHECK(value.defined(), "global_unstructured: ", target.module->type_name(), ".", target.name,
                " is undefined");
    const Tensor score = importance_scores.empty() ? value : importance_scores[i];
    EMBER_CHECK(score.sizes() == value.sizes(), "global_unstructured: importance scores of shape ",
                shape_str(score.sizes()), " for ", target.module->type_name(), ".", target.name, " of shape ",
                shape_str(value.sizes()));
    const std::vector<double> s = host_values(score);
    scores.insert(scores.end(), s.begin(), s.end());
    const Tensor* mask = target.module->find_buffer(target.name + "_mask");
    const std::vector<double> m = mask ? host_values(*mask) : std::vector<double>(s.size(), 1.0);
    masks.insert(masks.end(), m.begin(), m.end());
    shapes_of.push_back(value);
  }
  const Shape flat{static_cast<int64_t>(scores.size())};
  const std::vector<double> final_mask = host_values(combine(*method, tensor(scores, flat), tensor(masks, flat)));
  size_t offset = 0;
  for (size_t i = 0; i < targets.size(); ++i) {
    const size_t n = static_cast<size_t>(shapes_of[i].numel());
    std::vector<double> part(final_mask.begin() + static_cast<std::ptrdiff_t>(offset),
                             final_mask.begin() + static_cast<std::ptrdiff_t>(offset + n));
    custom_from_mask(*targets[i].module, targets[i].name, like(part, shapes_of[i]));
    offset += n;
  }
}

void remove(Module& module, const std::string& name) {
  for (auto& [id, hook] : module.forward_pre_hooks()) {
    const auto* h = hook->target<Hook>();
    if (h == nullptr || h->tensor_name != name) continue;
    Tensor weight;
    {
      NoGradGuard no_grad;
      weight = h->masked(module);
    }
    Tensor orig = module.remove_parameter(name + "_orig");
    module.remove_buffer(name + "_mask");
    module.remove_forward_pre_hook(id);
    orig.set_data(weight);             // the same tensor (optimizers keep it), now holding orig * mask
    module.set_attribute(name, orig);  // what forward reads is the parameter again
    module.remove_attribute(name);
    module.register_parameter(name, orig, orig.requires_grad());
    return;
  }
  throw Error(::ember::detail::concat("prune.remove: parameter '", name, "' of module ", module.type_name(),
                                      " has to be pruned before pruning can be removed"));
}

bool is_pruned(Module& module) {
  for (auto& m : module.modules())
    for (auto& [id, hook] : m->forward_pre_hooks())
      if (hook->target<Hook>() != nullptr) return true;
  return false;
}

// ---- sparsity ----

Sparsity sparsity(Module& module) {
  Sparsity out;
  out.global.name = "global";
  for (const auto& item : module.named_modules()) {
    Module& m = *item.value();
    for (const auto& p : m.named_parameters(/*recurse=*/false)) {
      std::string name = p.key();
      Tensor value = p.value();
      const std::string suffix = "_orig";
      if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        name.resize(name.size() - suffix.size());
        const Hook* hook = find_hook(m, name);
        if (hook == nullptr) continue;
        NoGradGuard no_grad;
        value = hook->masked(m);
      }
      SparsityRow row;
      row.name = item.key().empty() ? name : item.key() + "." + name;
      for (double v : host_values(value)) row.zeros += v == 0;
      row.total = value.numel();
      out.global.zeros += row.zeros;
      out.global.total += row.total;
      out.rows.push_back(row);
    }
  }
  return out;
}

std::ostream& operator<<(std::ostream& os, const Sparsity& s) {
  auto line = [&os](const SparsityRow& r) {
    os << "  " << r.name << ": " << r.zeros << " / " << r.total << " zero (" << 100.0 * r.fraction() << " %)\n";
  };
  os << "sparsity\n";
  for (const auto& r : s.rows) line(r);
  line(s.global);
  return os;
}

}  // namespace ember::nn::utils::prune
