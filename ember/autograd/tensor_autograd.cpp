// Tensor's autograd methods: requires_grad, grad, backward, hooks, detach, versions.
#include "ember/autograd/engine.h"
#include "ember/autograd/grad_mode.h"
#include "ember/autograd/meta.h"

namespace ember {

// The read-only queries answer for an undefined tensor as LibTorch's do (no gradient, a leaf
// without grad_fn), so that code may ask them of an optional tensor (a bias) before using it.
bool Tensor::requires_grad() const {
  if (!defined()) return false;
  const auto& m = impl()->autograd;
  return m && (m->requires_grad || m->grad_fn);
}

Tensor& Tensor::set_requires_grad(bool requires_grad) {
  EMBER_CHECK(defined(), "requires_grad_: the tensor is undefined");
  EMBER_CHECK(is_leaf(),
              "requires_grad_: you can only change requires_grad flags of leaf tensors (this one is the "
              "output of ",
              grad_fn()->name(), "); use detach() to make a new leaf");
  EMBER_CHECK(!requires_grad || is_floating_point(),
              "requires_grad_: only tensors of floating point dtype can require "
              "gradients, got ",
              dtype());
  if (requires_grad || impl()->autograd) autograd::meta(*this).requires_grad = requires_grad;
  return *this;
}

namespace {
void mark_requires_grad(Tensor& t) { t.set_requires_grad(true); }
}  // namespace

TensorOptions TensorOptions::requires_grad(bool r) const {
  auto o = *this;
  o.mark_requires_grad_ = r ? &mark_requires_grad : nullptr;
  return o;
}

const Tensor& Tensor::grad() const {
  static const Tensor undefined;
  if (!defined()) return undefined;
  const auto& m = impl()->autograd;
  return m ? m->grad : undefined;
}

Tensor& Tensor::mutable_grad() {
  EMBER_CHECK(defined(), "mutable_grad: the tensor is undefined");
  return autograd::meta(*this).grad;
}

std::shared_ptr<Node> Tensor::grad_fn() const {
  if (!defined()) return nullptr;
  const auto& m = impl()->autograd;
  return m ? m->grad_fn : nullptr;
}

bool Tensor::is_leaf() const { return grad_fn() == nullptr; }

void Tensor::retain_grad() {
  EMBER_CHECK(requires_grad(), "retain_grad: can't retain_grad on a tensor that has requires_grad=false");
  if (is_leaf()) return;  // leaves keep their gradient anyway
  AutogradMeta& m = autograd::meta(*this);
  if (m.retains_grad) return;
  m.retains_grad = true;
  std::weak_ptr<TensorImpl> weak = impl();
  m.grad_fn->output_hooks[static_cast<size_t>(m.output_nr)].push_back([weak](const Tensor& g) {
    if (auto self = weak.lock()) {
      Tensor& slot = self->autograd->grad;
      slot = slot.defined() ? slot + g : g.clone();
    }
    return Tensor();
  });
}

bool Tensor::retains_grad() const {
  if (!defined()) return false;
  const auto& m = impl()->autograd;
  return m && m->retains_grad;
}

void Tensor::backward(const Tensor& gradient, std::optional<bool> retain_graph, bool create_graph) const {
  autograd::backward({*this}, {gradient}, retain_graph, create_graph);
}

void Tensor::register_hook(std::function<Tensor(const Tensor&)> hook) const {
  EMBER_CHECK(requires_grad(), "register_hook: cannot register a hook on a tensor that doesn't require gradient");
  AutogradMeta& m = autograd::meta(*this);
  if (m.grad_fn)
    m.grad_fn->output_hooks[static_cast<size_t>(m.output_nr)].push_back(std::move(hook));
  else
    m.leaf_hooks.push_back(std::move(hook));
}

void Tensor::register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const {
  EMBER_CHECK(is_leaf() && requires_grad(),
              "register_post_accumulate_grad_hook: only leaf tensors that require grad "
              "accumulate gradients");
  autograd::meta(*this).post_accumulate_hooks.push_back(std::move(hook));
}

Tensor Tensor::detach() const {
  EMBER_CHECK(defined(), "detach: the tensor is undefined");
  auto impl_copy = std::make_shared<TensorImpl>(*impl());
  impl_copy->autograd = nullptr;
  return Tensor(std::move(impl_copy));
}

Tensor& Tensor::detach_() {
  EMBER_CHECK(defined(), "detach_: the tensor is undefined");
  impl()->autograd = nullptr;
  return *this;
}

void Tensor::set_data(const Tensor& new_data) const {
  EMBER_CHECK(defined() && new_data.defined(), "set_data: both tensors must be defined");
  EMBER_CHECK(!requires_grad() || is_floating(new_data.dtype()), "set_data: a tensor that requires grad cannot take ",
              new_data.dtype(), " data");
  TensorImpl& self = *impl();
  const TensorImpl& src = *new_data.impl();
  self.storage = src.storage;
  self.offset = src.offset;
  self.sizes = src.sizes;
  self.strides = src.strides;
  self.dtype = src.dtype;
  self.device = src.device;
}

}  // namespace ember
