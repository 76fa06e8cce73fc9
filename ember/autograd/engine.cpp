// The backward pass. Note [Engine order]: nodes run in reverse recording order (a max-heap
// on sequence number) and only once every node that feeds them has run, so each node sees
// the full sum of its output gradients. Everything runs on the calling thread, with grad mode
// off unless create_graph asks for a graph of the backward itself (Note [Double backward]).
#include "ember/autograd/engine.h"

#include <cmath>
#include <map>
#include <optional>
#include <queue>
#include <unordered_map>

#include "ember/autograd/autocast.h"
#include "ember/autograd/functions.h"
#include "ember/autograd/grad_mode.h"
#include "ember/autograd/meta.h"
#include "ember/autograd/profiler.h"
#include "ember/tensor/ops.h"

namespace ember::autograd {
namespace {

struct Task {
  std::unordered_map<Node*, int> dependencies;             // producers still to run, per node
  std::unordered_map<Node*, std::vector<Tensor>> buffers;  // gradients waiting, per node output
  std::map<std::pair<Node*, int>, size_t> captures;        // grad(): (node, output) -> input index
  std::vector<Tensor> captured;
  bool accumulate = true;                        // false for grad(): leaves' .grad stays untouched
  std::vector<std::function<void()>> callbacks;  // queue_callback(): run when the graph is done
};

thread_local Task* current_task = nullptr;        // the backward running on this thread (innermost)
thread_local std::shared_ptr<Node> current_node;  // the node whose apply() runs now

// What a node whose formula is not differentiable returns in a create_graph backward: its
// gradients, with a producer that refuses to be differentiated (PyTorch's DelayedError).
void mark_not_differentiable(const Node& node, std::vector<Tensor>& grads) {
  for (Tensor& g : grads) {
    if (!g.defined() || !g.is_floating_point()) continue;
    g = g.detach();
    const std::string name = node.name();
    record(std::make_shared<FunctionNode>(name + "Backward",
                                          [name](std::vector<Tensor>&) -> std::vector<Tensor> {
                                            throw Error(detail::concat(
                                                "backward: the gradient formula of ", name,
                                                " is not differentiable in ember yet, so a gradient computed with "
                                                "create_graph=true through ",
                                                name, " cannot be differentiated again (Note [Double backward])"));
                                          }),
           {}, {&g});
  }
}

void add_into(std::vector<Tensor>& buffer, size_t slot, Tensor g) {
  if (!buffer[slot].defined())
    buffer[slot] = std::move(g);
  else  // out of place: the first may be shared; recorded in a create_graph backward
    buffer[slot] = GradMode::is_enabled() ? ember::add(buffer[slot], g) : native::add(buffer[slot], g);
}

void check_finite(const Node& node, const std::vector<Tensor>& grads) {
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    if (!g.defined() || !g.is_floating_point()) continue;
    const bool finite = native::all(native::eq(native::sub(g, g), Scalar(0))).item<bool>();  // NaN/inf -> false
    EMBER_CHECK(finite, "anomaly detected: the backward of ", node.name(), " returned nan or inf values in its ", i,
                "-th output (gradient of shape ", shape_str(g.sizes()), ")");
  }
}

void run_graph(Task& task, const std::vector<Edge>& roots, std::vector<Tensor> root_grads, bool retain_graph,
               bool create_graph);

// The graph, then the callbacks it queued (which may queue more), with `task` as this thread's
// current backward throughout.
void run(Task& task, const std::vector<Edge>& roots, std::vector<Tensor> root_grads, bool retain_graph,
         bool create_graph) {
  struct Current {
    Task* previous;
    explicit Current(Task* t) : previous(current_task) { current_task = t; }
    ~Current() { current_task = previous; }
  } current(&task);
  run_graph(task, roots, std::move(root_grads), retain_graph, create_graph);
  NoGradGuard no_grad;
  for (size_t i = 0; i < task.callbacks.size(); ++i) {
    auto callback = std::move(task.callbacks[i]);  // the vector may grow while it runs
    callback();
  }
}

void run_graph(Task& task, const std::vector<Edge>& roots, std::vector<Tensor> root_grads, bool retain_graph,
               bool create_graph) {
  struct Mode {  // grad mode for the whole run: on only to build a graph of the backward
    bool previous = GradMode::is_enabled();
    explicit Mode(bool on) { GradMode::set_enabled(on); }
    ~Mode() { GradMode::set_enabled(previous); }
  } mode(create_graph);
  autocast::SuspendGuard no_autocast;  // each backward op keeps its forward's dtype (Note [Autocast])
  // Count, for every node reachable from the roots, how many edges lead into it.
  std::vector<Node*> stack;
  std::unordered_map<Node*, bool> seen;
  for (const Edge& e : roots)
    if (e.fn && !seen[e.fn.get()]) {
      seen[e.fn.get()] = true;
      stack.push_back(e.fn.get());
    }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges) {
      if (!e.fn) continue;
      ++task.dependencies[e.fn.get()];
      if (!seen[e.fn.get()]) {
        seen[e.fn.get()] = true;
        stack.push_back(e.fn.get());
      }
    }
  }
  auto later_first = [](Node* a, Node* b) { return a->sequence_nr() < b->sequence_nr(); };
  std::priority_queue<Node*, std::vector<Node*>, decltype(later_first)> ready(later_first);
  for (size_t i = 0; i < roots.size(); ++i) {
    Node* n = roots[i].fn.get();
    if (!n) continue;
    auto& buf = task.buffers[n];
    buf.resize(n->outputs.size());
    add_into(buf, static_cast<size_t>(roots[i].input_nr), std::move(root_grads[i]));
  }
  for (auto& [n, buf] : task.buffers)
    if (task.dependencies[n] == 0) ready.push(n);

  // Keep the nodes alive while they run even if the user dropped the roots' tensors.
  std::vector<std::shared_ptr<Node>> keep_alive;
  for (const Edge& e : roots) keep_alive.push_back(e.fn);

  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    std::vector<Tensor> grads = std::move(task.buffers[node]);
    task.buffers.erase(node);
    grads.resize(node->outputs.size());
    for (size_t i = 0; i < grads.size(); ++i) {
      if (!grads[i].defined()) {
        const auto& info = node->outputs[i];
        grads[i] = zeros(info.sizes, TensorOptions().dtype(info.dtype).device(info.device));
      }
      for (const auto& hook : node->output_hooks[i]) {
        Tensor r = hook(grads[i]);
        if (r.defined()) grads[i] = r;
      }
      auto cap = task.captures.find({node, static_cast<int>(i)});
      if (cap != task.captures.end()) task.captured[cap->second] = grads[i];
    }
    if (node->is_accumulator() && !task.accumulate) continue;
    EMBER_CHECK(!node->released, "backward: trying to backward through the graph a second time (or to use saved ",
                "tensors after they were freed) in ", node->name(),
                ". Saved tensors are freed after backward; pass retain_graph=true to the first backward "
                "if you need to backward through the graph again");
    std::vector<Tensor> input_grads;
    {
      // One event per node in a profile (Note [Profiler]); nothing otherwise.
      std::optional<profiler::RecordFunction> record;
      if (profiler::is_profiling()) record.emplace(node->name(), profiler::Event::Kind::Backward);
      struct Running {  // what SavedTensor::unpack ties a saved output to
        std::shared_ptr<Node> previous = std::move(current_node);
        explicit Running(std::shared_ptr<Node> n) { current_node = std::move(n); }
        ~Running() { current_node = std::move(previous); }
      } running(node->shared_from_this());
      if (create_graph && !node->differentiable_backward() && !node->is_accumulator()) {
        {
          NoGradGuard no_grad;
          input_grads = node->apply(std::move(grads));
        }
        mark_not_differentiable(*node, input_grads);
      } else {
        input_grads = node->apply(std::move(grads));
      }
    }
    if (AnomalyMode::is_enabled()) check_finite(*node, input_grads);
    if (!retain_graph && !node->is_accumulator() && node->saves_tensors()) {
      node->release_saved();
      node->released = true;
    }
    for (size_t i = 0; i < node->next_edges.size(); ++i) {
      const Edge& e = node->next_edges[i];
      if (!e.fn) continue;
      Node* next = e.fn.get();
      if (i < input_grads.size() && input_grads[i].defined()) {
        auto& buf = task.buffers[next];
        buf.resize(next->outputs.size());
        add_into(buf, static_cast<size_t>(e.input_nr), std::move(input_grads[i]));
      }
      if (--task.dependencies[next] == 0) {
        task.buffers[next].resize(next->outputs.size());  // may have received nothing: zero-filled
        ready.push(next);
      }
    }
  }
}

std::vector<Edge> root_edges(const std::vector<Tensor>& roots, std::vector<Tensor>& grads, const char* op) {
  EMBER_CHECK(grads.empty() || grads.size() == roots.size(), op, ": got ", grads.size(), " gradients for ",
              roots.size(), " outputs");
  grads.resize(roots.size());
  std::vector<Edge> edges;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    EMBER_CHECK(r.defined(), op, ": output ", i, " is undefined");
    EMBER_CHECK(r.requires_grad(), op, ": element ", i,
                " of tensors does not require grad and does not have a grad_fn");
    if (!grads[i].defined()) {
      EMBER_CHECK(r.numel() == 1, op, ": grad can be implicitly created only for one-element outputs, but output ", i,
                  " has shape ", shape_str(r.sizes()));
      grads[i] = ones_like(r);
    } else {
      EMBER_CHECK(grads[i].sizes() == r.sizes(), op, ": gradient of shape ", shape_str(grads[i].sizes()),
                  " does not match output ", i, " of shape ", shape_str(r.sizes()));
    }
    edges.push_back(edge_of(r));
  }
  return edges;
}

}  // namespace

std::shared_ptr<Node> running_node() { return current_node; }

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots, std::optional<bool> retain_graph,
              bool create_graph) {
  std::vector<Tensor> grads = grad_roots;
  const std::vector<Edge> edges = root_edges(roots, grads, "backward");
  Task task;
  run(task, edges, std::move(grads), retain_graph.value_or(create_graph), create_graph);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, std::optional<bool> retain_graph, bool create_graph,
                         bool allow_unused) {
  std::vector<Tensor> grads = grad_outputs;
  const std::vector<Edge> edges = root_edges(outputs, grads, "grad");
  Task task;
  task.accumulate = false;
  task.captured.resize(inputs.size());
  std::vector<std::shared_ptr<Node>> keep;  // accumulators made here must live through the run
  for (size_t i = 0; i < inputs.size(); ++i) {
    EMBER_CHECK(inputs[i].defined() && inputs[i].requires_grad(), "grad: input ", i,
                " does not require grad, so no gradient can be computed for it");
    const Edge e = edge_of(inputs[i]);
    keep.push_back(e.fn);
    task.captures[{e.fn.get(), e.input_nr}] = i;
  }
  run(task, edges, std::move(grads), retain_graph.value_or(create_graph), create_graph);
  for (size_t i = 0; i < inputs.size(); ++i)
    EMBER_CHECK(allow_unused || task.captured[i].defined(), "grad: input ", i,
                " was not used in the graph of the outputs (pass allow_unused=true to get an undefined gradient "
                "for it instead)");
  return task.captured;
}

void queue_callback(std::function<void()> callback) {
  EMBER_CHECK(current_task != nullptr,
              "queue_callback: no backward is running on this thread (call it from a hook during backward)");
  EMBER_CHECK(callback != nullptr, "queue_callback: the callback is empty");
  current_task->callbacks.push_back(std::move(callback));
}

bool in_backward() { return current_task != nullptr; }

void zero_grad(const std::vector<Tensor>& params, bool set_to_none) {
  NoGradGuard no_grad;
  for (Tensor p : params) {
    if (!p.defined() || !p.grad().defined()) continue;
    if (set_to_none)
      p.mutable_grad() = Tensor();
    else
      p.mutable_grad().zero_();
  }
}

}  // namespace ember::autograd
