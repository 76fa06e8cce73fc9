#pragma once
// Per-tensor autograd state, allocated on first use (TensorImpl::autograd).
#include <memory>
#include <mutex>
#include <vector>

#include "ember/autograd/node.h"

namespace ember {

struct AutogradMeta {
  bool requires_grad = false;  // leaves: set by the user; non-leaves: implied by grad_fn
  Tensor grad;
  std::shared_ptr<Node> grad_fn;         // null for leaves
  int output_nr = 0;                     // which output of grad_fn this tensor is
  std::weak_ptr<Node> grad_accumulator;  // a leaf's AccumulateGrad node, while the graph holds it
  bool retains_grad = false;
  std::vector<TensorHook> leaf_hooks;  // register_hook on a leaf
  std::vector<std::function<void(const Tensor&)>> post_accumulate_hooks;
  // Guards grad and grad_accumulator: backward passes on several threads (hogwild training,
  // one model shared by worker threads) reach the same leaf, and each addition must land.
  std::mutex mutex;
};

namespace autograd {

AutogradMeta& meta(const Tensor& t);  // creates it on first use
// The edge along which a gradient for `t` flows: its grad_fn, its leaf accumulator, or none.
Edge edge_of(const Tensor& t);
// Whether the tape must record an op on these inputs (grad mode on, one of them requires grad).
bool needs_grad(std::initializer_list<const Tensor*> inputs);
inline bool needs_grad(const Tensor& a) { return needs_grad({&a}); }
inline bool needs_grad(const Tensor& a, const Tensor& b) { return needs_grad({&a, &b}); }
// Throws unless an in-place op `op` may modify `self`: the tape does not rewrite history, so
// tensors that require grad are refused while grad mode is on (leaves as in PyTorch).
void check_inplace_allowed(const Tensor& self, const char* op);
// Records `node` as the producer of `outputs` (floating outputs only) with edges to `inputs`.
void record(const std::shared_ptr<Node>& node, std::initializer_list<const Tensor*> inputs,
            std::initializer_list<Tensor*> outputs);
void record(const std::shared_ptr<Node>& node, const std::vector<const Tensor*>& inputs,
            const std::vector<Tensor*>& outputs);

}  // namespace autograd
}  // namespace ember
