// DataParallel: the replicas of Note [DataParallel replicas] (data_parallel.h).
#include "ember/nn/parallel/data_parallel.h"

#include <exception>
#include <thread>
#include <utility>

#include "ember/autograd/autocast.h"
#include "ember/autograd/grad_mode.h"
#include "ember/cuda/cuda.h"
#include "ember/tensor/parallel.h"

namespace ember::nn {

namespace {

std::string shape_list(const OrderedDict<Tensor>& tensors) {
  std::string out;
  for (const auto& item : tensors) {
    if (!out.empty()) out += ", ";
    out += item.key() + " " + shape_str(item.value().sizes());
  }
  return "[" + out + "]";
}

bool same_layout(const OrderedDict<Tensor>& a, const OrderedDict<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a.items()[i].key() != b.items()[i].key() || a.items()[i].value().sizes() != b.items()[i].value().sizes())
      return false;
  }
  return true;
}

// The thread-local state a replica's thread takes over from the caller's (PyTorch's
// parallel_apply does the same for grad mode and autocast).
struct CallerState {
  bool grad = GradMode::is_enabled();
  bool anomaly = AnomalyMode::is_enabled();
  int threads = get_num_threads();
  bool autocast_cpu = autocast::is_enabled(kCPU), autocast_cuda = autocast::is_enabled(kCUDA);
  DType dtype_cpu = autocast::get_autocast_dtype(kCPU), dtype_cuda = autocast::get_autocast_dtype(kCUDA);
};

}  // namespace

DataParallelImpl::DataParallelImpl(std::shared_ptr<Module> module, ReplicaFactory make_replica,
                                   DataParallelOptions options)
    : Module("DataParallel"), module_(std::move(module)), devices_(options.devices()), dim_(options.dim()) {
  EMBER_CHECK(module_ != nullptr, "DataParallel: the module is empty");
  register_module("module", module_);  // state_dict keys "module.<name>", as PyTorch's
  const OrderedDict<Tensor> params = module_->named_parameters(), buffers = module_->named_buffers();
  const Device home = !params.empty()    ? params.items()[0].value().device()
                      : !buffers.empty() ? buffers.items()[0].value().device()
                                         : Device(kCPU);
  if (devices_.empty()) {
    devices_.push_back(home);
    if (home.is_cuda())
      for (int d = 0; d < cuda::device_count(); ++d)
        if (d != home.index) devices_.emplace_back(kCUDA, d);
  }
  output_device_ = options.output_device().value_or(devices_[0]);
  for (const auto& item : params)
    EMBER_CHECK(item.value().device() == devices_[0], "DataParallel: the module must be on devices[0] = ", devices_[0],
                ", but its parameter '", item.key(), "' is on ", item.value().device());
  for (const auto& item : buffers)
    EMBER_CHECK(item.value().device() == devices_[0], "DataParallel: the module must be on devices[0] = ", devices_[0],
                ", but its buffer '", item.key(), "' is on ", item.value().device());
  for (const Device& d : devices_)
    EMBER_CHECK(d.is_cpu() || d.index < cuda::device_count(), "DataParallel: device ", d, " does not exist (",
                cuda::device_count(), " CUDA device(s))");
  if (devices_.size() > 1)
    EMBER_CHECK(make_replica != nullptr, "DataParallel: ", devices_.size(),
                " devices need a function that makes the replicas; it is empty");

  for (size_t i = 1; i < devices_.size(); ++i) {
    std::shared_ptr<Module> replica = make_replica();
    EMBER_CHECK(replica != nullptr && replica != module_,
                "DataParallel: the replica function must return a new "
                "module (it returned ",
                replica ? "the module itself" : "an empty one", ")");
    const OrderedDict<Tensor> rparams = replica->named_parameters(), rbuffers = replica->named_buffers();
    EMBER_CHECK(same_layout(params, rparams) && same_layout(buffers, rbuffers),
                "DataParallel: the replica function made a module of another architecture: parameters ",
                shape_list(rparams), " and buffers ", shape_list(rbuffers), ", the module has ", shape_list(params),
                " and ", shape_list(buffers));
    // The replica takes the module's device and, where the factory built it in another floating
    // type (a float32 default for a float64 module), its dtype: buffers are copied into it.
    const Tensor& first = !params.empty()   ? params.items()[0].value()
                          : buffers.empty() ? Tensor()
                                            : buffers.items()[0].value();
    if (first.defined() && first.is_floating_point())
      replica->to(devices_[i], first.dtype());
    else
      replica->to(devices_[i]);
    std::vector<Binding> bindings;
    for (const auto& named : replica->named_modules()) {
      Module& layer = *named.value();
      for (const auto& p : layer.named_parameters(/*recurse=*/false)) {
        EMBER_CHECK(layer.has_attribute_binding(p.key()), "DataParallel: ", layer.type_name(), " ",
                    named.key().empty() ? "(the module itself)" : "'" + named.key() + "'", " reads its parameter '",
                    p.key(),
                    "' through no bound field, so a replica cannot be pointed at "
                    "the module's; call bind_attribute(\"",
                    p.key(),
                    "\", field) in its constructor "
                    "(Note [Tensor attributes])");
        const std::string full_name = named.key().empty() ? p.key() : named.key() + "." + p.key();
        bindings.push_back({&layer, p.key(), full_name});
      }
    }
    for (const Binding& b : bindings) b.layer->remove_parameter(b.name);  // one set of weights: the module's
    replicas_.push_back(std::move(replica));
    bindings_.push_back(std::move(bindings));
  }
}

std::shared_ptr<Module> DataParallelImpl::replica(size_t i) const {
  EMBER_CHECK(i < devices_.size(), "DataParallel: replica ", i, " of ", devices_.size());
  return i == 0 ? module_ : replicas_[i - 1];
}

void DataParallelImpl::point_replica_at_parameters(size_t i, const OrderedDict<Tensor>& params) {
  for (const Binding& b : bindings_[i - 1]) {
    const Tensor* p = params.find(b.full_name);
    EMBER_CHECK(p != nullptr, "DataParallel: the module lost its parameter '", b.full_name,
                "' after the replicas were made");
    // The same tensor on the same device (gradients accumulate into it directly); elsewhere a
    // differentiable copy, whose backward brings the gradient back to devices[0].
    b.layer->set_attribute(b.name, p->device() == devices_[i] ? *p : p->to(devices_[i]));
  }
}

void DataParallelImpl::copy_buffers_into_replica(size_t i) {
  const NoGradGuard no_grad;
  const OrderedDict<Tensor> from = module_->named_buffers();
  const OrderedDict<Tensor> to = replicas_[i - 1]->named_buffers();
  for (size_t k = 0; k < from.size(); ++k) {
    Tensor buffer = to.items()[k].value();  // a handle to the replica's buffer: copy_ writes into it
    buffer.copy_(from.items()[k].value());
  }
}

Tensor DataParallelImpl::forward(const Tensor& input) {
  EMBER_CHECK(input.defined(), "DataParallel: the input is undefined");
  const int64_t dim = dim_ < 0 ? dim_ + input.dim() : dim_;
  EMBER_CHECK(dim >= 0 && dim < input.dim(), "DataParallel: dim ", dim_, " is out of range for an input of shape ",
              shape_str(input.sizes()));
  if (devices_.size() == 1 || input.size(dim) <= 1) return (*module_)(input.to(devices_[0])).to(output_device_);

  // Scatter: as PyTorch, at most one chunk per device (a short batch uses fewer replicas).
  const TensorList chunks = input.chunk(static_cast<int64_t>(devices_.size()), dim);
  const size_t n = chunks.size();
  const OrderedDict<Tensor> params = module_->named_parameters();
  for (size_t i = 1; i < n; ++i) {
    replicas_[i - 1]->train(module_->is_training());
    copy_buffers_into_replica(i);
    point_replica_at_parameters(i, params);
  }

  std::vector<Tensor> outputs(n);
  std::vector<std::exception_ptr> errors(n);
  const CallerState caller;
  auto run = [&](size_t i) {
    try {
      const cuda::DeviceGuard device(devices_[i].is_cuda() ? devices_[i].index : -1);
      const Tensor x = chunks[i].to(devices_[i]);
      outputs[i] = i == 0 ? (*module_)(x) : (*replicas_[i - 1])(x);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (size_t i = 1; i < n; ++i) {
    threads.emplace_back([&, i] {
      GradMode::set_enabled(caller.grad);
      AnomalyMode::set_enabled(caller.anomaly);
      set_num_threads(caller.threads);
      const autocast::AutocastGuard cpu(kCPU, caller.dtype_cpu, caller.autocast_cpu);
      const autocast::AutocastGuard gpu(kCUDA, caller.dtype_cuda, caller.autocast_cuda);
      run(i);
    });
  }
  run(0);
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < n; ++i) {
    if (!errors[i]) continue;
    try {
      std::rethrow_exception(errors[i]);
    } catch (const std::exception& e) {
      throw Error(::ember::detail::concat("DataParallel: replica ", i, " on ", devices_[i], ": ", e.what()));
    }
  }

  // Gather onto the output device.
  TensorList gathered;
  for (const Tensor& out : outputs) {
    EMBER_CHECK(out.defined(), "DataParallel: a replica returned an undefined tensor");
    gathered.push_back(out.dim() == 0 ? out.to(output_device_).unsqueeze(0) : out.to(output_device_));
  }
  return cat(gathered, outputs[0].dim() == 0 ? 0 : dim);
}

}  // namespace ember::nn
