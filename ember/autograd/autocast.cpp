// Autocast: the state per thread and device type, the op lists, and the policy at the dispatch
// point that casts (Note [Autocast]).
#include "ember/autograd/autocast.h"

#include <array>
#include <map>
#include <memory>
#include <tuple>

#include "ember/autograd/functions.h"
#include "ember/autograd/grad_mode.h"

namespace ember::autocast {
namespace {

using dispatch::OpId;

struct State {
  bool enabled = false;
  bool cache_enabled = true;
  DType dtype;
};
DType default_dtype(DeviceType d) { return d == kCUDA ? kFloat16 : kBFloat16; }

struct ThreadState {
  std::array<State, 2> devices{State{false, true, kBFloat16}, State{false, true, kFloat16}};  // CPU, CUDA
  int guards = 0;                 // active AutocastGuards: the outermost ends the cache
  bool policy_installed = false;  // by the outermost *enabled* guard, so a disabled one costs nothing
  bool suspended = false;         // SuspendGuard: the backward pass
  // The low-precision casts of weights: (tensor, dtype, grad mode) -> the cast, valid while the
  // source tensor lives and keeps the version it had.
  struct Cached {
    std::weak_ptr<TensorImpl> source;
    uint64_t version;
    Tensor cast;
  };
  std::map<std::tuple<const TensorImpl*, DType, bool>, Cached> cache;
};
thread_local ThreadState state;

State& device_state(DeviceType d) { return state.devices[d == kCUDA ? 1 : 0]; }

std::array<CastPolicy, static_cast<size_t>(OpId::kCount)> make_policies() {
  std::array<CastPolicy, static_cast<size_t>(OpId::kCount)> p{};
  p.fill(CastPolicy::keep);
  for (OpId op : {OpId::matmul, OpId::mm, OpId::bmm, OpId::addmm, OpId::linear, OpId::conv2d, OpId::conv_transpose2d})
    p[static_cast<size_t>(op)] = CastPolicy::lower_precision;
  for (OpId op : {OpId::exp,
                  OpId::log,
                  OpId::log1p,
                  OpId::expm1,
                  OpId::log2,
                  OpId::log10,
                  OpId::tan,
                  OpId::asin,
                  OpId::acos,
                  OpId::sinh,
                  OpId::cosh,
                  OpId::erfinv,
                  OpId::pow,
                  OpId::pow_scalar,
                  OpId::pow_scalar_base,
                  OpId::reciprocal,
                  OpId::rsqrt,
                  OpId::softplus,
                  OpId::softmax,
                  OpId::log_softmax,
                  OpId::logsumexp,
                  OpId::native_layer_norm,
                  OpId::native_group_norm,
                  OpId::sum,
                  OpId::mean,
                  OpId::prod,
                  OpId::norm,
                  OpId::var,
                  OpId::std,
                  OpId::cumsum,
                  OpId::cumprod})
    p[static_cast<size_t>(op)] = CastPolicy::fp32;
  p[static_cast<size_t>(OpId::binary_cross_entropy)] = CastPolicy::refuse;
  return p;
}

bool weight_like(const Tensor& t) { return t.is_leaf() && t.requires_grad() && t.dtype() == kFloat32; }

Tensor lower(const Tensor& t, const State& s) {
  if (!s.cache_enabled || !weight_like(t)) return t.to(s.dtype);
  const auto key = std::make_tuple(t.impl().get(), s.dtype, GradMode::is_enabled());
  auto it = state.cache.find(key);
  if (it != state.cache.end() && it->second.source.lock() == t.impl() && it->second.version == t.version())
    return it->second.cast;
  Tensor cast = t.to(s.dtype);
  state.cache[key] = ThreadState::Cached{t.impl(), t.version(), cast};
  return cast;
}

class AutocastPolicy final : public dispatch::Policy {
 public:
  void before(dispatch::Call& call) override {
    if (call.depth > 0 || state.suspended) return;  // a composite's parts, the casts themselves
    const CastPolicy policy = policy_of(call.op);
    if (policy == CastPolicy::keep) return;
    for (Tensor* t : call.inputs) {
      if (!t->defined() || !t->is_floating_point() || t->dtype() == kFloat64) continue;
      const State& s = device_state(t->device().type);
      if (!s.enabled) continue;
      EMBER_CHECK(policy != CastPolicy::refuse, dispatch::op_name(call.op),
                  " (nn::BCELoss) is unsafe to autocast: a 16-bit probability near 0 or 1 rounds to it "
                  "and the loss saturates. Pass the logits to binary_cross_entropy_with_logits "
                  "(nn::BCEWithLogitsLoss), or compute the loss outside the autocast region in float32");
      if (policy == CastPolicy::lower_precision && t->dtype() != s.dtype)
        *t = lower(*t, s);
      else if (policy == CastPolicy::fp32 && t->dtype() != kFloat32)
        *t = t->to(kFloat32);
    }
  }
};

AutocastPolicy& policy() {
  thread_local AutocastPolicy instance;
  return instance;
}

}  // namespace

AutocastGuard::AutocastGuard(DeviceType device_type, std::optional<DType> dtype, bool enabled, bool cache_enabled)
    : device_type_(device_type) {
  const DType d = dtype.value_or(default_dtype(device_type));
  EMBER_CHECK(d == kFloat16 || d == kBFloat16, "autocast: the dtype must be float16 or bfloat16, got ", d);
  State& s = device_state(device_type);
  prev_enabled_ = s.enabled;
  prev_cache_enabled_ = s.cache_enabled;
  prev_dtype_ = s.dtype;
  s.enabled = enabled;
  s.cache_enabled = cache_enabled;
  s.dtype = d;
  ++state.guards;
  if (enabled && !state.policy_installed) {
    policy_.emplace(policy());
    state.policy_installed = true;
  }
}

AutocastGuard::~AutocastGuard() {
  State& s = device_state(device_type_);
  s.enabled = prev_enabled_;
  s.cache_enabled = prev_cache_enabled_;
  s.dtype = prev_dtype_;
  if (policy_) {
    policy_.reset();
    state.policy_installed = false;
  }
  if (--state.guards == 0) state.cache.clear();  // one cast per weight per outermost region, as in PyTorch
}

bool is_enabled(DeviceType device_type) { return device_state(device_type).enabled && !state.suspended; }
DType get_autocast_dtype(DeviceType device_type) {
  const State& s = device_state(device_type);
  return s.enabled ? s.dtype : default_dtype(device_type);
}
int64_t cached_casts() { return static_cast<int64_t>(state.cache.size()); }
void clear_cache() { state.cache.clear(); }

CastPolicy policy_of(dispatch::OpId op) {
  static const auto policies = make_policies();  // one table, built on first use
  const auto i = static_cast<size_t>(op);
  return i < policies.size() ? policies[i] : CastPolicy::keep;
}

SuspendGuard::SuspendGuard() : prev_(state.suspended) { state.suspended = true; }
SuspendGuard::~SuspendGuard() { state.suspended = prev_; }

}  // namespace ember::autocast
