#pragma once
// DataParallel (torch.nn.DataParallel): one process, several devices. Each forward scatters the
// batch into one chunk per device, runs one replica of the module on each chunk, every replica
// on a thread of its own, and gathers the outputs onto the output device. Backward through the
// gathered output reaches the module's own parameters: their gradients are the sum over the
// replicas, i.e. those of the whole batch (for a loss that averages over it).
//
//     Net model(cfg);
//     nn::DataParallel dp(model, [&] { return Net(cfg); },            // makes the replicas
//                         nn::DataParallelOptions().devices({Device("cuda:0"), Device("cuda:1")}));
//     optim::SGD opt(dp->parameters(), ...);                         // the module's parameters
//     loss_fn(dp(x), y).backward();
//
// Note [DataParallel replicas]: C++ cannot copy a module of an unknown type, so the constructor
// takes a function that builds one more of the same architecture (LibTorch asks for a Cloneable
// module with a reset() instead). Replica 0 is the module itself, on devices[0]. The others are
// built once, moved to their devices, and their own parameters are dropped at once: before each
// forward, every layer field a replica's forward reads (Note [Tensor attributes]) is pointed at
// the module's parameter — the very tensor on devices[0], a differentiable copy of it on another
// device — so there is one set of weights, the optimizer's, and nothing to keep in sync. Buffers
// (batch norm's running statistics) are copied from the module into the replicas before each
// forward; as in PyTorch, only replica 0's updates (the module's own) persist. Grad mode and
// autocast reach the replicas' threads. On a machine with one device, devices may name it
// several times (`{cpu, cpu}`): the replicas then share the device and the math is the same.
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "ember/nn/module.h"
#include "ember/tensor/arg.h"

namespace ember::nn {

struct DataParallelOptions {
  // Where the replicas run, replica i on devices[i]; the module must be on devices[0]. Empty:
  // every CUDA device when the module is on CUDA, else only the module's device (no replicas).
  EMBER_ARG(std::vector<Device>, devices) = {};
  EMBER_ARG(std::optional<Device>, output_device) = std::nullopt;  // default devices[0]
  EMBER_ARG(int64_t, dim) = 0;                                     // the batch dimension, scattered and gathered
};

class DataParallelImpl : public Module {
 public:
  using ReplicaFactory = std::function<std::shared_ptr<Module>()>;
  DataParallelImpl(std::shared_ptr<Module> module, ReplicaFactory make_replica, DataParallelOptions options = {});
  // The module as a holder (Net) and a factory returning holders or shared pointers.
  template <class Holder, class Make, class = decltype(std::declval<Holder>().slot()),
            class = decltype(as_module(std::declval<Make&>()()))>
  DataParallelImpl(const Holder& module, Make make_replica, DataParallelOptions options = {})
      : DataParallelImpl(
            module.module(), [make = std::move(make_replica)]() mutable { return as_module(make()); },
            std::move(options)) {}

  // input [..., B along dim, ...] -> the replicas' outputs, concatenated along dim on the
  // output device (0-d outputs, a loss per replica, become a vector of one per replica).
  Tensor forward(const Tensor& input) override;

  std::shared_ptr<Module> module() const { return module_; }
  const std::vector<Device>& devices() const { return devices_; }
  // Replica i (0: the module itself): to observe it, with hooks, in tests and tools.
  std::shared_ptr<Module> replica(size_t i) const;

 private:
  // A field of a replica's layer that its forward reads, and the module parameter it must see.
  struct Binding {
    Module* layer;
    std::string name;       // the layer's own name for it ("weight")
    std::string full_name;  // the module's name for the parameter ("0.weight")
  };
  void point_replica_at_parameters(size_t i, const OrderedDict<Tensor>& params);
  void copy_buffers_into_replica(size_t i);

  std::shared_ptr<Module> module_;
  std::vector<std::shared_ptr<Module>> replicas_;  // replicas_[i - 1] is replica i
  std::vector<std::vector<Binding>> bindings_;     // per replica i >= 1
  std::vector<Device> devices_;
  Device output_device_;
  int64_t dim_;
};
EMBER_MODULE(DataParallel);

}  // namespace ember::nn
