#pragma once
// The tape. Note [The tape]: a differentiable op run in grad mode with an input that
// requires grad records a Node: its backward formula (a closure over the tensors it saved),
// one Edge per input to the node that produced that input's gradient, and a sequence
// number in recording order. backward() (autograd/engine.cpp) runs ready nodes in reverse
// recording order and frees each node's saved tensors right after it runs.
//
// Note [Double backward]: with create_graph, backward runs the formulas with grad mode on, so
// the ops a formula calls record a tape of their own and the gradients it returns can be
// differentiated again (a gradient penalty, a Hessian-vector product). That is only right for a
// formula written entirely with differentiable (public) ops, and its saved tensors must come back
// connected to the graph: a saved input as itself, a saved output as an output of the node
// running now. A node says so with differentiable_backward(); the gradients of one that cannot
// (a fused native kernel in its formula) get a grad_fn that throws when reached, never a
// silently wrong second derivative.
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ember/tensor/tensor.h"

namespace ember {

class Node;

struct Edge {
  std::shared_ptr<Node> fn;  // null: this input needs no gradient
  int input_nr = 0;          // which output of fn this edge feeds
};

using TensorHook = std::function<Tensor(const Tensor&)>;

class Node : public std::enable_shared_from_this<Node> {
 public:
  explicit Node(std::string name);
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  const std::string& name() const { return name_; }
  uint64_t sequence_nr() const { return sequence_nr_; }
  // Gradients w.r.t. this node's outputs (zero-filled where none arrived) -> gradients
  // w.r.t. its inputs, one per next_edges entry (undefined: no gradient).
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) = 0;
  virtual void release_saved() {}
  // Whether the node holds tensors for its backward. One that holds none is not released after
  // a backward and may be run again (as in PyTorch, where only a freed saved tensor stops a
  // second backward): the autocast cache's weight casts are shared by every forward of a region.
  virtual bool saves_tensors() const { return true; }
  virtual bool is_accumulator() const { return false; }
  // Whether apply() may run with grad mode on to build a graph of the backward (Note [Double backward]).
  virtual bool differentiable_backward() const { return false; }

  std::vector<Edge> next_edges;
  // Shape, dtype and device of each output, to zero-fill gradients that never arrive.
  struct OutputInfo {
    Shape sizes;
    DType dtype;
    Device device;
  };
  std::vector<OutputInfo> outputs;
  // Hooks registered on an output tensor (register_hook, retain_grad), by output number.
  std::vector<std::vector<TensorHook>> output_hooks;
  bool released = false;

 private:
  std::string name_;
  uint64_t sequence_nr_;
};

// A node whose backward is a closure: the saved tensors live in the closure's captures,
// so releasing them is dropping the closure.
class FunctionNode final : public Node {
 public:
  using Backward = std::function<std::vector<Tensor>(std::vector<Tensor>&)>;
  FunctionNode(std::string name, Backward backward, bool differentiable = false, bool saves_tensors = true)
      : Node(std::move(name)),
        backward_(std::move(backward)),
        differentiable_(differentiable),
        saves_tensors_(saves_tensors) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  void release_saved() override { backward_ = nullptr; }
  bool saves_tensors() const override { return saves_tensors_; }
  bool differentiable_backward() const override { return differentiable_; }

 private:
  Backward backward_;
  bool differentiable_;
  bool saves_tensors_;
};

// A tensor saved for backward, with the version its storage had when saved. Note
// [Saved tensors]: the tensor is kept detached (no grad_fn), which breaks the reference
// cycle output -> node -> saved output; the version check catches in-place changes. For a
// double backward (Note [Double backward]) an input that requires grad is also kept as itself
// (an input's history lies before this node: no cycle), and an output is marked as such
// (SavedTensor::output) so that unpack can tie it to the node that is running.
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& t);
  static SavedTensor output(const Tensor& out, int output_nr = 0);  // an output of the node that saves it
  // The tensor, or an ember::Error naming `op` if it was modified in place since saved. In a
  // backward with create_graph (grad mode on), connected to the graph as described above.
  Tensor unpack(const std::string& op) const;

 private:
  Tensor tensor_;
  Tensor original_;  // an input that required grad, with its history
  uint64_t version_ = 0;
  int output_nr_ = -1;  // >= 0: an output of the saving node
};

namespace autograd {
// The node whose backward runs now on this thread (set by the engine), or null.
std::shared_ptr<Node> running_node();
}  // namespace autograd

}  // namespace ember
