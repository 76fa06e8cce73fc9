// Nodes, saved tensors, leaf accumulators and the recording of ops on the tape.
#include <atomic>

#include "ember/autograd/functions.h"
#include "ember/autograd/grad_mode.h"
#include "ember/autograd/meta.h"
#include "ember/tensor/ops.h"

namespace ember {
namespace {
std::atomic<uint64_t> next_sequence_nr{0};
}  // namespace

Node::Node(std::string name) : name_(std::move(name)), sequence_nr_(next_sequence_nr.fetch_add(1)) {}

std::vector<Tensor> FunctionNode::apply(std::vector<Tensor>&& grads) {
  EMBER_ASSERT(backward_ != nullptr, "FunctionNode ", name(), " applied after release");
  return backward_(grads);
}

SavedTensor::SavedTensor(const Tensor& t)
    : tensor_(t.defined() ? t.detach() : t),
      original_(t.defined() && t.requires_grad() ? t : Tensor()),
      version_(t.defined() ? t.version() : 0) {}

SavedTensor SavedTensor::output(const Tensor& out, int output_nr) {
  SavedTensor s;
  s.tensor_ = out.defined() ? out.detach() : out;
  s.version_ = out.defined() ? out.version() : 0;
  s.output_nr_ = output_nr;
  return s;
}

Tensor SavedTensor::unpack(const std::string& op) const {
  if (tensor_.defined() && tensor_.version() != version_)
    throw Error(
        detail::concat("one of the variables needed for gradient computation has been modified by an inplace "
                       "operation: [",
                       dtype_name(tensor_.dtype()), " ", shape_str(tensor_.sizes()), "], saved by ", op,
                       ", is at version ", tensor_.version(), "; expected version ", version_, " instead"));
  if (!GradMode::is_enabled() || !tensor_.defined()) return tensor_;  // an ordinary backward
  if (original_.defined()) return original_;
  if (output_nr_ >= 0) {
    if (auto node = autograd::running_node()) {
      Tensor out = tensor_.detach();  // a fresh alias whose producer is the node running now
      AutogradMeta& m = autograd::meta(out);
      m.grad_fn = std::move(node);
      m.output_nr = output_nr_;
      m.requires_grad = true;
      return out;
    }
  }
  return tensor_;
}

namespace autograd {
namespace {

// Accumulates incoming gradients into a leaf's .grad (Note [Gradient accumulation]:
// repeated backward calls add up, which is how gradient accumulation works).
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(const std::shared_ptr<TensorImpl>& leaf) : Node("AccumulateGrad"), leaf_(leaf) {}
  bool is_accumulator() const override { return true; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    auto impl = leaf_.lock();
    if (!impl) return {};
    const Tensor leaf(impl);
    AutogradMeta& m = *impl->autograd;
    const std::lock_guard<std::mutex> lock(m.mutex);  // another thread's backward may add into .grad now
    Tensor g = std::move(grads[0]);
    for (const auto& hook : m.leaf_hooks) {
      Tensor r = hook(g);
      if (r.defined()) g = r;
    }
    if (GradMode::is_enabled()) {  // a create_graph backward: .grad keeps its graph (and is not stolen)
      m.grad = m.grad.defined() ? m.grad + g : g;
      for (const auto& hook : m.post_accumulate_hooks) hook(leaf);
      return {};
    }
    NoGradGuard no_grad;
    if (!m.grad.defined()) {
      // Steal the buffer when nothing else holds it; otherwise copy, so that .grad never
      // aliases a tensor another leaf's .grad (or the caller) also holds.
      m.grad = (g.impl().use_count() == 1 && g.storage().use_count() == 1 && g.sizes() == leaf.sizes()) ? g : g.clone();
      if (m.grad.sizes() != leaf.sizes()) m.grad = m.grad.reshape(leaf.sizes());
    } else {
      m.grad.add_(g);
    }
    for (const auto& hook : m.post_accumulate_hooks) hook(leaf);
    return {};
  }

 private:
  std::weak_ptr<TensorImpl> leaf_;
};

}  // namespace

AutogradMeta& meta(const Tensor& t) {
  auto& slot = t.impl()->autograd;
  if (!slot) slot = std::make_shared<AutogradMeta>();
  return *slot;
}

Edge edge_of(const Tensor& t) {
  if (!t.defined() || !t.impl()->autograd) return {};
  AutogradMeta& m = *t.impl()->autograd;
  if (m.grad_fn) return {m.grad_fn, m.output_nr};
  if (!m.requires_grad) return {};
  const std::lock_guard<std::mutex> lock(m.mutex);  // one accumulator per leaf, whichever thread builds a graph
  std::shared_ptr<Node> acc = m.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl());
    acc->outputs.push_back({t.sizes(), t.dtype(), t.device()});
    acc->output_hooks.resize(1);
    m.grad_accumulator = acc;
  }
  return {acc, 0};
}

bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor* t : inputs)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}

void record(const std::shared_ptr<Node>& node, const std::vector<const Tensor*>& inputs,
            const std::vector<Tensor*>& outputs) {
  node->next_edges.reserve(inputs.size());
  for (const Tensor* in : inputs) node->next_edges.push_back(edge_of(*in));
  node->output_hooks.resize(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor& out = *outputs[i];
    node->outputs.push_back({out.sizes(), out.dtype(), out.device()});
    if (!out.is_floating_point()) continue;  // indices and masks carry no gradient
    AutogradMeta& m = meta(out);
    m.grad_fn = node;
    m.output_nr = static_cast<int>(i);
    m.requires_grad = true;
  }
}

void record(const std::shared_ptr<Node>& node, std::initializer_list<const Tensor*> inputs,
            std::initializer_list<Tensor*> outputs) {
  record(node, std::vector<const Tensor*>(inputs), std::vector<Tensor*>(outputs));
}

}  // namespace autograd
}  // namespace ember
