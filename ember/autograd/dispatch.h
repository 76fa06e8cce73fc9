#pragma once
// The dispatch point. Note [The dispatch point]: every public op call, ember::add(a, b) or
// a.add(b), passes through dispatch::call before anything runs. That is where cross-cutting
// policy steps in: a Policy installed on the thread sees the op and its tensor arguments and
// may replace them (autocast casts them to float16 there), and sees the call end (a profiler
// times it there). With no policy installed the call costs one thread-local load.
//
//   a.add(b)                      Tensor::add             (generated from ops.def: autograd/ops.cpp)
//     -> ember::add(a, b)          the public op           (generated: autograd/ops.cpp)
//       -> dispatch::call          policies: before(call) ... after(call)
//         -> autograd::add        forward beside backward (autograd/functions_elementwise.cpp)
//           -> native::add        checks, broadcast, dtype (tensor/ops/elementwise.cpp)
//             -> backend(device)  the back end of the tensors' device type (tensor/backend.h)
//               -> binary kernel  CPU: tensor/cpu/elementwise.cpp, CUDA: cuda/elementwise.cu
//
// Ops without a gradient (comparisons, argmax, ...) go from dispatch::call straight to the
// native op. Native ops and kernels never call back up (Note [Native ops]): a composite's
// inner calls dispatch again only when the composite is written with public ops (matmul's
// differentiable form calls ember::mm), and a policy sees those with depth > 0.
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "ember/tensor/tensor.h"

namespace ember::dispatch {

// Every public op of ember/tensor/ops.def, named name + overload: OpId::add, OpId::add_scalar.
enum class OpId : uint16_t {
#define EMBER_OP_ID(name, overload, returns, params, args) name##overload,
#define EMBER_METHOD EMBER_OP_ID
#define EMBER_FUNCTION EMBER_OP_ID
#define EMBER_INPLACE EMBER_OP_ID
#define EMBER_NOGRAD_METHOD EMBER_OP_ID
#define EMBER_NOGRAD_FUNCTION EMBER_OP_ID
#define EMBER_UNARY(name, domain, params, args) name,
#include "ember/tensor/ops.def"
#undef EMBER_OP_ID
  kCount
};
const char* op_name(OpId op);  // "add", "add_scalar", ...

// One op call as a policy sees it.
struct Call {
  OpId op;
  int depth = 0;  // 0 for a call from user code; > 0 for an op called by another op or a policy
  // The op's tensor arguments in order (those of a tensor list too), except the self of an
  // in-place op. A policy may assign new tensors to them before the op runs.
  std::vector<Tensor*> inputs;
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual void before(Call& call) = 0;                  // before the op runs: may replace call.inputs
  virtual void after(const Call& call) { (void)call; }  // after it returned or threw
};

// Installs `policy` on this thread for the guard's lifetime. Guards nest; the innermost
// policy's before() runs last, nearest the op, and its after() first.
class PolicyGuard {
 public:
  explicit PolicyGuard(Policy& policy);
  ~PolicyGuard();
  PolicyGuard(const PolicyGuard&) = delete;
  PolicyGuard& operator=(const PolicyGuard&) = delete;

 private:
  Policy* policy_;
};

namespace detail {
// The number of policies installed on this thread (the fast path tests it) and their calls.
extern thread_local int installed_policies;
extern thread_local int op_depth;  // ops running on this thread, counted while policies are installed
void run_before(Call& call);
void run_after(const Call& call) noexcept;

// While an op runs: nested ops see a greater depth; at the end the policies see it finish.
class OpScope {
 public:
  explicit OpScope(const Call& call) : call_(call) { ++op_depth; }
  ~OpScope() {
    --op_depth;
    run_after(call_);
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  const Call& call_;
};

// An argument as the op receives it. Tensors are held by value so that a policy can replace
// them; everything else (and an in-place op's self, which the op must modify) by reference.
template <class A>
struct Slot {
  A&& value;
  void collect(std::vector<Tensor*>&) {}
  A&& get() { return std::forward<A>(value); }
};
template <>
struct Slot<const Tensor&> {
  Tensor value;
  void collect(std::vector<Tensor*>& inputs) { inputs.push_back(&value); }
  const Tensor& get() { return value; }
};
template <>
struct Slot<const TensorList&> {
  TensorList value;
  void collect(std::vector<Tensor*>& inputs) {
    for (Tensor& t : value) inputs.push_back(&t);
  }
  const TensorList& get() { return value; }
};

template <class Impl, class... Args>
decltype(auto) call_with_policies(OpId op, Impl& impl, Args&&... args) {
  std::tuple<Slot<Args&&>...> slots{Slot<Args&&>{std::forward<Args>(args)}...};
  Call call{op, op_depth, {}};
  std::apply([&call](auto&... slot) { (slot.collect(call.inputs), ...); }, slots);
  OpScope scope(call);  // ops that the policies or the op itself call are seen one deeper
  run_before(call);
  return std::apply([&impl](auto&... slot) -> decltype(auto) { return impl(slot.get()...); }, slots);
}
}  // namespace detail

// Runs impl(args...), through the policies installed on this thread.
template <class Impl, class... Args>
inline decltype(auto) call(OpId op, Impl&& impl, Args&&... args) {
  if (detail::installed_policies == 0) return impl(std::forward<Args>(args)...);
  return detail::call_with_policies(op, impl, std::forward<Args>(args)...);
}

}  // namespace ember::dispatch
