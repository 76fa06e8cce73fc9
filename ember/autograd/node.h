#pragma once
// The tape. Note [The tape]: a differentiable op run in grad mode with an input that
// requires grad records a Node: its backward formula (a closure over the tensors it saved),
// one Edge per input to the node that produced that input's gradient, and a sequence
// number in recording order. backward() (autograd/engine.cpp) runs ready nodes in reverse
// recording order and frees each node's saved tensors right after it runs.
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

class Node {
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
  virtual bool is_accumulator() const { return false; }

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
  FunctionNode(std::string name, Backward backward) : Node(std::move(name)), backward_(std::move(backward)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  void release_saved() override { backward_ = nullptr; }

 private:
  Backward backward_;
};

// A tensor saved for backward, with the version its storage had when saved. Note
// [Saved tensors]: the tensor is kept detached (no grad_fn), which breaks the reference
// cycle output -> node -> saved output; the version check catches in-place changes.
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& t);
  // The tensor, or an ember::Error naming `op` if it was modified in place since saved.
  Tensor unpack(const std::string& op) const;

 private:
  Tensor tensor_;
  uint64_t version_ = 0;
};

}  // namespace ember
