// The public ops and Tensor's op methods, generated from ember/tensor/ops.def (Note [One
// declaration per op]): ember::name passes its arguments through the dispatch point to
// autograd::name (or, for an op without a gradient, to native::name); self.name(args) is
// ember::name(self, args).
#include "ember/autograd/dispatch.h"
#include "ember/autograd/functions.h"

namespace ember {

// ---- the public ops ----
#define EMBER_DISPATCH_TO(target, name, overload, returns, params, args)                                           \
  returns name params {                                                                                            \
    return dispatch::call(                                                                                         \
        dispatch::OpId::name##overload,                                                                            \
        [](auto&&... a) -> returns { return target::name(std::forward<decltype(a)>(a)...); }, EMBER_UNPAREN args); \
  }
#define EMBER_DIFFERENTIABLE(name, overload, returns, params, args) \
  EMBER_DISPATCH_TO(autograd, name, overload, returns, params, args)
#define EMBER_METHOD EMBER_DIFFERENTIABLE
#define EMBER_FUNCTION EMBER_DIFFERENTIABLE
#define EMBER_INPLACE EMBER_DIFFERENTIABLE
#define EMBER_NOGRAD(name, overload, returns, params, args) \
  EMBER_DISPATCH_TO(native, name, overload, returns, params, args)
#define EMBER_NOGRAD_METHOD EMBER_NOGRAD
#define EMBER_NOGRAD_FUNCTION EMBER_NOGRAD
#define EMBER_UNARY(name, domain, params, args) EMBER_DISPATCH_TO(autograd, name, , Tensor, params, args)
#include "ember/tensor/ops.def"
#undef EMBER_DIFFERENTIABLE
#undef EMBER_NOGRAD

// ---- the methods ----
#define EMBER_CONST_METHOD(name, overload, returns, params, args) \
  returns Tensor::name EMBER_DROP_SELF params const {             \
    const Tensor& self = *this;                                   \
    return ember::name args;                                      \
  }
#define EMBER_METHOD EMBER_CONST_METHOD
#define EMBER_NOGRAD_METHOD EMBER_CONST_METHOD
#define EMBER_UNARY(name, domain, params, args) EMBER_CONST_METHOD(name, , Tensor, params, args)
#define EMBER_INPLACE(name, overload, returns, params, args) \
  returns Tensor::name EMBER_DROP_SELF params {              \
    Tensor& self = *this;                                    \
    return ember::name args;                                 \
  }
#include "ember/tensor/ops.def"
#undef EMBER_DISPATCH_TO
#undef EMBER_CONST_METHOD

}  // namespace ember
