// The dispatch point's policies (Note [The dispatch point]).
#include "ember/autograd/dispatch.h"

#include <array>

namespace ember::dispatch {
namespace {
const char* const kOpNames[] = {
#define EMBER_OP_NAME(name, overload, returns, params, args) #name #overload,
#define EMBER_METHOD EMBER_OP_NAME
#define EMBER_FUNCTION EMBER_OP_NAME
#define EMBER_INPLACE EMBER_OP_NAME
#define EMBER_NOGRAD_METHOD EMBER_OP_NAME
#define EMBER_NOGRAD_FUNCTION EMBER_OP_NAME
#define EMBER_UNARY(name, domain, params, args) #name,
#include "ember/tensor/ops.def"
#undef EMBER_OP_NAME
};
static_assert(sizeof(kOpNames) / sizeof(kOpNames[0]) == static_cast<size_t>(OpId::kCount));

// The policies installed on this thread, outermost first. A handful at most: a fixed array.
constexpr int kMaxPolicies = 16;
thread_local std::array<Policy*, kMaxPolicies> installed;
}  // namespace

const char* op_name(OpId op) {
  const auto i = static_cast<size_t>(op);
  return i < static_cast<size_t>(OpId::kCount) ? kOpNames[i] : "unknown op";
}

namespace detail {
thread_local int installed_policies = 0;
thread_local int op_depth = 0;

void run_before(Call& call) {
  for (int i = 0; i < installed_policies; ++i) installed[static_cast<size_t>(i)]->before(call);
}
void run_after(const Call& call) noexcept {
  for (int i = installed_policies - 1; i >= 0; --i) installed[static_cast<size_t>(i)]->after(call);
}
}  // namespace detail

PolicyGuard::PolicyGuard(Policy& policy) : policy_(&policy) {
  EMBER_CHECK(detail::installed_policies < kMaxPolicies, "dispatch::PolicyGuard: more than ", kMaxPolicies,
              " policies installed on one thread");
  installed[static_cast<size_t>(detail::installed_policies++)] = policy_;
}

// Guards are scoped objects, so they end in the reverse order of their creation.
PolicyGuard::~PolicyGuard() { --detail::installed_policies; }

}  // namespace ember::dispatch
