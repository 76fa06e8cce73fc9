#include "ember/nn/module.h"

#include <algorithm>
#include <sstream>

#include "ember/autograd/grad_mode.h"

namespace ember::nn {

namespace {

void check_name(const std::string& what, const std::string& name) {
  EMBER_CHECK(!name.empty(), "Module: a ", what, " name must not be empty");
  EMBER_CHECK(name.find('.') == std::string::npos, "Module: ", what, " name '", name, "' must not contain '.'");
}

std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

}  // namespace

Module::Module(std::string type_name) : type_name_(std::move(type_name)) {}

Tensor Module::forward(const Tensor&) {
  throw Error(type_name_ + ": this module has no forward(Tensor); call its own forward overload");
}

Tensor Module::operator()(const Tensor& input) { return call_module(*this, input); }

Tensor& Module::register_parameter(std::string name, Tensor tensor, bool requires_grad) {
  check_name("parameter", name);
  EMBER_CHECK(!buffers_.contains(name) && !children_.contains(name), type_name_, ": '", name,
              "' is already registered as a buffer or submodule");
  if (tensor.defined()) {
    EMBER_CHECK(!requires_grad || tensor.is_floating_point(), type_name_, ": parameter '", name,
                "' must be floating point to require grad, got ", tensor.dtype());
    // A leaf keeps its identity (pruning re-registers a parameter under a new name, and the
    // optimizers that hold it must keep training it); a recorded result is cut from its graph.
    if (!tensor.is_leaf()) tensor = tensor.detach();
    tensor.set_requires_grad(requires_grad);
  }
  return parameters_.insert(std::move(name), std::move(tensor));
}

Tensor& Module::register_buffer(std::string name, Tensor tensor, bool persistent) {
  check_name("buffer", name);
  EMBER_CHECK(!parameters_.contains(name) && !children_.contains(name), type_name_, ": '", name,
              "' is already registered as a parameter or submodule");
  if (!persistent) non_persistent_.push_back(name);
  return buffers_.insert(std::move(name), tensor.defined() ? tensor.detach() : tensor);
}

std::shared_ptr<Module> Module::register_module(std::string name, std::shared_ptr<Module> module) {
  EMBER_CHECK(module != nullptr, type_name_, ": submodule '", name, "' is null");
  register_slot(std::move(name), ModuleSlot::of(module));
  return module;
}

const std::shared_ptr<ModuleSlot>& Module::register_slot(std::string name, std::shared_ptr<ModuleSlot> slot) {
  check_name("submodule", name);
  EMBER_CHECK(slot != nullptr && slot->module != nullptr, type_name_, ": submodule '", name, "' is null");
  EMBER_CHECK(!parameters_.contains(name) && !buffers_.contains(name), type_name_, ": '", name,
              "' is already registered as a parameter or buffer");
  return children_.insert(std::move(name), std::move(slot));
}

void Module::replace_module(const std::string& name, std::shared_ptr<Module> module) {
  EMBER_CHECK(module != nullptr, type_name_, ".replace_module: the replacement for '", name, "' is null");
  Module* parent = this;
  std::string rest = name;
  for (size_t dot; (dot = rest.find('.')) != std::string::npos; rest = rest.substr(dot + 1)) {
    const auto* slot = parent->children_.find(rest.substr(0, dot));
    EMBER_CHECK(slot != nullptr, type_name_, ".replace_module: '", name, "' names no submodule ('", rest.substr(0, dot),
                "' is not a child of ", parent->type_name_, ")");
    parent = (*slot)->module.get();
  }
  auto* slot = parent->children_.find(rest);
  EMBER_CHECK(slot != nullptr, type_name_, ".replace_module: '", name, "' names no submodule (", parent->type_name_,
              " has no child '", rest, "')");
  (*slot)->module = std::move(module);
  ++(*slot)->generation;
}

std::shared_ptr<ModuleSlot> ModuleSlot::of(std::shared_ptr<Module> module) {
  auto slot = std::make_shared<ModuleSlot>();
  slot->first_type = module ? module->type_name() : "";
  slot->module = std::move(module);
  return slot;
}

Tensor* Module::find_parameter(const std::string& name) { return parameters_.find(name); }
Tensor* Module::find_buffer(const std::string& name) { return buffers_.find(name); }
std::shared_ptr<Module> Module::find_module(const std::string& name) const {
  const auto* slot = children_.find(name);
  return slot ? (*slot)->module : nullptr;
}

Tensor Module::remove_parameter(const std::string& name) {
  Tensor* t = parameters_.find(name);
  EMBER_CHECK(t != nullptr, type_name_, ".remove_parameter: no parameter '", name, "'");
  Tensor out = *t;
  parameters_.erase(name);
  return out;
}

Tensor Module::remove_buffer(const std::string& name) {
  Tensor* t = buffers_.find(name);
  EMBER_CHECK(t != nullptr, type_name_, ".remove_buffer: no buffer '", name, "'");
  Tensor out = *t;
  buffers_.erase(name);
  non_persistent_.erase(std::remove(non_persistent_.begin(), non_persistent_.end(), name), non_persistent_.end());
  return out;
}

// ---- tensor attributes ----

void Module::bind_attribute(const std::string& name, Tensor& member) {
  check_name("attribute", name);
  bound_members_.insert_or_assign(name, &member);
}

bool Module::has_attribute_binding(const std::string& name) const { return bound_members_.contains(name); }

Tensor Module::attribute(const std::string& name) const {
  if (const auto* member = bound_members_.find(name)) return **member;
  if (const auto* p = parameters_.find(name)) return *p;
  if (const auto* b = buffers_.find(name)) return *b;
  if (const auto* a = plain_attributes_.find(name)) return *a;
  throw Error(::ember::detail::concat(type_name_, ": no tensor attribute '", name, "'"));
}

void Module::set_attribute(const std::string& name, Tensor value) {
  check_name("attribute", name);
  EMBER_CHECK(!parameters_.contains(name) && !buffers_.contains(name), type_name_, ".set_attribute: '", name,
              "' is a registered ", parameters_.contains(name) ? "parameter" : "buffer",
              "; remove it first (a plain attribute may not shadow it)");
  if (auto* member = bound_members_.find(name)) **member = value;
  plain_attributes_.insert_or_assign(name, std::move(value));
}

void Module::remove_attribute(const std::string& name) {
  EMBER_CHECK(plain_attributes_.contains(name), type_name_, ".remove_attribute: no plain attribute '", name, "'");
  plain_attributes_.erase(name);
}

// ---- traversal ----

// The defined tensors of `member` (parameters_ or buffers_) of this module and, when recurse,
// of every descendant, under dotted names.
OrderedDict<Tensor> Module::named_tensors(OrderedDict<Tensor> Module::*member, const char* what, bool recurse) const {
  OrderedDict<Tensor> out(what);
  std::function<void(const Module&, const std::string&)> visit = [&](const Module& m, const std::string& prefix) {
    for (const auto& t : m.*member)
      if (t.value().defined()) out.insert(join(prefix, t.key()), t.value());
    if (recurse)
      for (const auto& c : m.children_) visit(*c.value()->module, join(prefix, c.key()));
  };
  visit(*this, "");
  return out;
}

OrderedDict<Tensor> Module::named_parameters(bool recurse) const {
  return named_tensors(&Module::parameters_, "parameter", recurse);
}

std::vector<Tensor> Module::parameters(bool recurse) const { return named_parameters(recurse).values(); }

OrderedDict<Tensor> Module::named_buffers(bool recurse) const {
  return named_tensors(&Module::buffers_, "buffer", recurse);
}

std::vector<Tensor> Module::buffers(bool recurse) const { return named_buffers(recurse).values(); }

std::vector<std::shared_ptr<Module>> Module::children() const { return named_children().values(); }
OrderedDict<std::shared_ptr<Module>> Module::named_children() const {
  OrderedDict<std::shared_ptr<Module>> out("submodule");
  for (const auto& c : children_) out.insert(c.key(), c.value()->module);
  return out;
}

OrderedDict<std::shared_ptr<Module>> Module::named_modules(const std::string& prefix) {
  OrderedDict<std::shared_ptr<Module>> out("module");
  std::function<void(Module&, const std::string&)> visit = [&](Module& m, const std::string& name) {
    out.insert(name, m.shared_from_this());
    for (const auto& c : m.children_) visit(*c.value()->module, join(name, c.key()));
  };
  visit(*this, prefix);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::modules() { return named_modules().values(); }

void Module::apply(const std::function<void(Module&)>& fn) {
  for (auto& c : children_) c.value()->module->apply(fn);
  fn(*this);
}

// ---- modes, devices, dtypes ----

void Module::train(bool on) {
  training_ = on;
  for (auto& c : children_) c.value()->module->train(on);
}

void Module::apply_to_tensors(const std::function<Tensor(const Tensor&)>& fn) {
  NoGradGuard no_grad;
  for (auto& p : parameters_) {
    if (!p.value().defined()) continue;
    p.value().set_data(fn(p.value()));
    if (p.value().grad().defined()) p.value().mutable_grad().set_data(fn(p.value().grad()));
  }
  for (auto& b : buffers_)
    if (b.value().defined()) b.value().set_data(fn(b.value()));
  for (auto& c : children_) c.value()->module->apply_to_tensors(fn);
}

void Module::to(Device device, bool non_blocking) {
  apply_to_tensors([&](const Tensor& t) { return t.to(device, non_blocking); });
}

void Module::to(DType dtype) {
  EMBER_CHECK(is_floating(dtype), type_name_, ".to: expects a floating dtype, got ", dtype);
  apply_to_tensors([&](const Tensor& t) { return t.is_floating_point() ? t.to(dtype) : t; });
}

void Module::to(Device device, DType dtype, bool non_blocking) {
  EMBER_CHECK(is_floating(dtype), type_name_, ".to: expects a floating dtype, got ", dtype);
  apply_to_tensors([&](const Tensor& t) {
    return t.is_floating_point() ? t.to(device, dtype, non_blocking) : t.to(device, non_blocking);
  });
}

void Module::zero_grad(bool set_to_none) {
  for (auto& p : parameters()) {
    if (!p.grad().defined()) continue;
    if (set_to_none) {
      p.mutable_grad() = Tensor();
    } else {
      NoGradGuard no_grad;
      p.mutable_grad().zero_();
    }
  }
}

// ---- hooks ----

HookHandle Module::register_forward_pre_hook(ForwardPreHook hook) {
  EMBER_CHECK(hook != nullptr, type_name_, ".register_forward_pre_hook: the hook is empty");
  if (!hooks_) hooks_ = std::make_shared<HookList>();
  hooks_->pre.emplace_back(hooks_->next_id, std::move(hook));
  return HookHandle(hooks_, hooks_->next_id++);
}

HookHandle Module::register_forward_pre_hook(std::function<void(Module&)> hook) {
  EMBER_CHECK(hook != nullptr, type_name_, ".register_forward_pre_hook: the hook is empty");
  return register_forward_pre_hook(
      ForwardPreHook([hook = std::move(hook)](Module& m, const TensorList&) -> std::optional<TensorList> {
        hook(m);
        return std::nullopt;
      }));
}

HookHandle Module::register_forward_hook(ForwardHook hook) {
  EMBER_CHECK(hook != nullptr, type_name_, ".register_forward_hook: the hook is empty");
  if (!hooks_) hooks_ = std::make_shared<HookList>();
  hooks_->post.emplace_back(hooks_->next_id, std::move(hook));
  return HookHandle(hooks_, hooks_->next_id++);
}

void Module::run_forward_pre_hooks(TensorList& inputs) {
  if (!hooks_) return;
  const auto pre = hooks_->pre;  // a copy: a hook may remove itself
  for (const auto& [id, hook] : pre) {
    std::optional<TensorList> replaced = hook(*this, inputs);
    if (!replaced) continue;
    EMBER_CHECK(replaced->size() == inputs.size(), type_name_, ": forward pre-hook ", id, " returned ",
                replaced->size(), " inputs for a call with ", inputs.size());
    inputs = std::move(*replaced);
  }
}

Tensor Module::run_forward_hooks(const TensorList& inputs, Tensor output) {
  if (!hooks_) return output;
  const auto post = hooks_->post;
  for (const auto& [id, hook] : post) {
    std::optional<Tensor> replaced = hook(*this, inputs, output);
    if (replaced) output = std::move(*replaced);
  }
  return output;
}

std::vector<std::pair<int, ForwardPreHook*>> Module::forward_pre_hooks() {
  std::vector<std::pair<int, ForwardPreHook*>> out;
  if (hooks_)
    for (auto& [id, hook] : hooks_->pre) out.emplace_back(id, &hook);
  return out;
}

void Module::remove_forward_pre_hook(int id) {
  EMBER_CHECK(hooks_ != nullptr, type_name_, ".remove_forward_pre_hook: no hook with id ", id);
  HookHandle(hooks_, id).remove();
}

void HookHandle::remove() const {
  auto hooks = hooks_.lock();
  if (!hooks) return;  // the module is gone, and its hooks with it
  auto erase = [this](auto& list) {
    auto it = std::find_if(list.begin(), list.end(), [&](const auto& h) { return h.first == id_; });
    if (it == list.end()) return false;
    list.erase(it);
    return true;
  };
  EMBER_CHECK(erase(hooks->pre) || erase(hooks->post), "HookHandle.remove: no hook with handle ", id_,
              " (it was removed already)");
}

// ---- state ----

void Module::collect_state(const std::string& prefix, StateDict& out) const {
  for (const auto& p : parameters_)
    if (p.value().defined()) out.insert(join(prefix, p.key()), p.value());
  for (const auto& b : buffers_) {
    const bool persistent = std::find(non_persistent_.begin(), non_persistent_.end(), b.key()) == non_persistent_.end();
    if (b.value().defined() && persistent) out.insert(join(prefix, b.key()), b.value());
  }
  for (const auto& c : children_) c.value()->module->collect_state(join(prefix, c.key()), out);
}

StateDict Module::state_dict() const {
  StateDict out("state_dict key");
  collect_state("", out);
  return out;
}

Module::LoadResult Module::load_state_dict(const StateDict& state, bool strict) {
  StateDict own = state_dict();
  LoadResult result;
  for (const auto& item : own)
    if (!state.contains(item.key())) result.missing_keys.push_back(item.key());
  for (const auto& item : state)
    if (!own.contains(item.key())) result.unexpected_keys.push_back(item.key());
  if (strict && (!result.missing_keys.empty() || !result.unexpected_keys.empty())) {
    std::ostringstream msg;
    msg << type_name_ << ".load_state_dict: ";
    auto list = [&](const char* what, const std::vector<std::string>& keys) {
      if (keys.empty()) return;
      msg << what << " keys:";
      for (const auto& k : keys) msg << " '" << k << "'";
      msg << ". ";
    };
    list("missing", result.missing_keys);
    list("unexpected", result.unexpected_keys);
    msg << "(strict=false loads the keys that match)";
    throw Error(msg.str());
  }
  // Check every shape before copying anything, so a failed load leaves the module unchanged.
  for (const auto& item : own) {
    const Tensor* src = state.find(item.key());
    if (src == nullptr) continue;
    EMBER_CHECK(src->defined(), type_name_, ".load_state_dict: '", item.key(), "' is undefined");
    EMBER_CHECK(src->sizes() == item.value().sizes(), type_name_, ".load_state_dict: size mismatch for '", item.key(),
                "': the checkpoint has shape ", shape_str(src->sizes()), ", the module has ",
                shape_str(item.value().sizes()));
  }
  NoGradGuard no_grad;
  for (auto& item : own) {
    const Tensor* src = state.find(item.key());
    if (src != nullptr) item.value().copy_(*src);
  }
  return result;
}

// ---- printing ----

void Module::pretty_print(std::ostream& os) const { os << type_name_; }

void Module::print_tree(std::ostream& os, int indent) const {
  if (children_.empty()) {
    std::ostringstream self;
    pretty_print(self);
    os << self.str();
    if (self.str().find('(') == std::string::npos) os << "()";
    return;
  }
  os << type_name_ << "(\n";
  for (const auto& c : children_) {
    os << std::string(indent + 2, ' ') << "(" << c.key() << "): ";
    c.value()->module->print_tree(os, indent + 2);
    os << "\n";
  }
  os << std::string(indent, ' ') << ")";
}

std::ostream& operator<<(std::ostream& os, const Module& module) {
  module.print_tree(os, 0);
  return os;
}

}  // namespace ember::nn
