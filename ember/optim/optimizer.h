#pragma once
// The optimizer base (torch.optim.Optimizer): parameter groups with their own options,
// per-parameter state, zero_grad, state_dict / load_state_dict. Subclasses implement step().
// Options follow LibTorch's call shapes: SGD(params, SGDOptions(0.1).momentum(0.9)); the
// getter is the option's name, the setter the name with a value.
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ember/tensor/arg.h"
#include "ember/tensor/ordered_dict.h"
#include "ember/tensor/tensor.h"

namespace ember {

using StateDict = OrderedDict<Tensor>;

namespace optim {

// Options shared by a parameter group. Every option is a number (a bool is 0 or 1), so that
// state_dict() can store them by name.
class OptimizerOptions {
 public:
  virtual ~OptimizerOptions() = default;
  virtual std::unique_ptr<OptimizerOptions> clone() const = 0;
  virtual std::map<std::string, double> to_map() const = 0;
  virtual void from_map(const std::map<std::string, double>& values) = 0;
  // Throws an ember::Error naming the first invalid option.
  virtual void validate() const = 0;
  virtual double get_lr() const = 0;
  virtual void set_lr(double lr) = 0;
  // The momentum that OneCycleLR cycles: SGD's and RMSprop's momentum, Adam's beta1.
  virtual std::optional<double> get_momentum() const { return std::nullopt; }
  virtual void set_momentum(double) {}
};

// A count saved as a number (an option, a step, a scheduler's epoch in a checkpoint): a whole
// number in [lo, hi] or an Error naming `what`. Converting a NaN, a fraction or a double that
// an int64 cannot hold would be undefined, so loaders check with this before they convert.
int64_t whole_number(double value, int64_t lo, int64_t hi, const std::string& what);

class ParamGroup {
 public:
  explicit ParamGroup(std::vector<Tensor> params, std::unique_ptr<OptimizerOptions> options = nullptr)
      : params_(std::move(params)), options_(std::move(options)) {}
  ParamGroup(const ParamGroup& o)
      : initial_lr(o.initial_lr), params_(o.params_), options_(o.options_ ? o.options_->clone() : nullptr) {}
  ParamGroup& operator=(const ParamGroup& o) {
    initial_lr = o.initial_lr;
    params_ = o.params_;
    options_ = o.options_ ? o.options_->clone() : nullptr;
    return *this;
  }
  ParamGroup(ParamGroup&&) = default;
  ParamGroup& operator=(ParamGroup&&) = default;

  std::vector<Tensor>& params() { return params_; }
  const std::vector<Tensor>& params() const { return params_; }
  bool has_options() const { return options_ != nullptr; }
  OptimizerOptions& options() { return *options_; }
  const OptimizerOptions& options() const { return *options_; }
  void set_options(std::unique_ptr<OptimizerOptions> options) { options_ = std::move(options); }
  // The learning rate a scheduler started from (PyTorch's group["initial_lr"]); the first
  // scheduler attached to the optimizer sets it.
  std::optional<double> initial_lr;

 private:
  std::vector<Tensor> params_;
  std::unique_ptr<OptimizerOptions> options_;
};

using OptimizerParamGroup = ParamGroup;  // LibTorch's name

// An optimizer's saved state: tensors ("state.<i>.<name>", i = the parameter's position over
// all groups, as PyTorch numbers them) and scalars as strings (optimizer type, param_groups as
// JSON, "state.<i>.step"). ember::save writes it as one safetensors file whose __metadata__
// holds the scalars.
struct OptimizerState {
  StateDict tensors{"optimizer state tensor"};
  std::map<std::string, std::string> metadata;
};

class Optimizer {
 public:
  Optimizer(std::string type_name, std::vector<ParamGroup> groups, std::unique_ptr<OptimizerOptions> defaults);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter with a gradient. `closure` (zero grads, compute the loss,
  // backward, return the loss) is optional except for LBFGS; step returns its loss.
  virtual Tensor step(const std::function<Tensor()>& closure = nullptr) = 0;
  // step(), unless `found_inf` (one float32, nonzero when a gradient overflowed: the
  // GradScaler's flag) says to skip. An optimizer whose step is a fused kernel passes the flag
  // to the kernel, which skips itself on the device (Note [Fused optimizer steps]): no host
  // read. Others (LBFGS, whose line search runs on the host) read the flag first.
  void step_unless(const Tensor& found_inf);
  virtual bool skips_on_device() const { return false; }
  void zero_grad(bool set_to_none = true);
  // Options missing from `group` come from the defaults; a parameter may be in one group only.
  void add_param_group(ParamGroup group);

  const std::string& type_name() const { return type_name_; }
  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  const OptimizerOptions& defaults() const { return *defaults_; }
  std::vector<Tensor> parameters() const;

  OptimizerState state_dict() const;
  // Restores state saved from an optimizer of the same type over parameters of the same shapes.
  void load_state_dict(const OptimizerState& state);

 protected:
  struct ParamState {
    // Steps taken: one int64 on the parameter's device, which the fused kernels increment (a
    // skipped step must not advance it, and the host does not know which steps are skipped).
    Tensor step;
    OrderedDict<Tensor> buffers{"optimizer state"};
    // The buffer `name`, created as zeros shaped like `param` on first use.
    Tensor buffer(const char* name, const Tensor& param);
    // `step`, created as 0 on first use.
    const Tensor& step_count(const Tensor& param);
  };
  ParamState& state_of(const Tensor& param) { return state_[param.impl().get()]; }
  // Runs the closure (if any) with grad mode on, as step() must; returns its loss.
  static Tensor evaluate(const std::function<Tensor()>& closure);
  // Inside step_unless(): the overflow flag on `device`, for the kernels; undefined otherwise.
  Tensor found_inf_on(Device device) const;
  // Hooks for optimizers with state beyond per-parameter buffers (LBFGS).
  virtual void save_extra(OptimizerState&) const {}
  virtual void load_extra(const OptimizerState&) {}

 private:
  std::string type_name_;
  std::unique_ptr<OptimizerOptions> defaults_;
  std::vector<ParamGroup> groups_;
  std::unordered_map<TensorImpl*, ParamState> state_;
  Tensor found_inf_;  // set during step_unless()
};

// Operands for the fused step kernels (Note [Fused optimizer steps] in tensor/backend.h),
// which take contiguous tensors: prepare() checks a parameter against its gradient and returns
// both contiguous (a non-contiguous parameter gets a contiguous stand-in), finish() copies the
// stand-ins back and bumps every parameter's version counter.
class FusedOperands {
 public:
  struct Operand {
    Tensor param, grad;
  };
  Operand prepare(const Tensor& param);
  void finish();

 private:
  std::vector<Tensor> params_;
  std::vector<std::pair<Tensor, Tensor>> stand_ins_;  // (parameter, contiguous copy)
};

// The kernel arguments of one step, one list per device (a kernel call runs on one device).
template <class Item>
class PerDevice {
 public:
  std::vector<Item>& operator[](Device device) {
    for (auto& [d, items] : lists_)
      if (d == device) return items;
    lists_.emplace_back(device, std::vector<Item>{});
    return lists_.back().second;
  }
  auto begin() { return lists_.begin(); }
  auto end() { return lists_.end(); }

 private:
  std::vector<std::pair<Device, std::vector<Item>>> lists_;
};

// Base for option structs: clone() through the copy constructor, and the learning rate
// through the derived struct's `lr_` option.
template <class Derived>
class OptimizerCloneableOptions : public OptimizerOptions {
 public:
  std::unique_ptr<OptimizerOptions> clone() const override {
    return std::make_unique<Derived>(static_cast<const Derived&>(*this));
  }
  double get_lr() const override { return static_cast<const Derived&>(*this).lr_; }
  void set_lr(double lr) override { static_cast<Derived&>(*this).lr_ = lr; }
};

}  // namespace optim
}  // namespace ember
