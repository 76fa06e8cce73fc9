#pragma once
// Note [Memory overlap]: an in-place op reads its inputs while it writes its destination, so
// it is wrong when one memory location is written twice (an expanded view: stride 0) or when an
// input is a *different* view of the destination's memory (x[1:] += x[:-1] reads elements the
// loop has already overwritten, in an order that depends on the kernel and its threads). Such
// ops are refused, as PyTorch refuses them. The very same view (a.add_(a)) is fine: each
// element is read before it is written. Layouts whose overlap would be costly to decide (not
// dense and not overlapping-free by construction) are let through, as in PyTorch.
#include "ember/tensor/tensor.h"

namespace ember {

enum class MemOverlap { No, Full, Partial, TooHard };

// Whether the tensor's elements cover a block of memory exactly once (in some dim order).
bool is_non_overlapping_and_dense(const Tensor& t);
// Yes (Partial) when two of t's elements share a location: a dim of stride 0 and size > 1.
MemOverlap internal_overlap(const Tensor& t);
// How a's and b's memory relate: No, Full (the same view), Partial, or TooHard to tell.
MemOverlap overlap(const Tensor& a, const Tensor& b);

// The checks of an in-place op writing `out`; an ember::Error names the op (`op` + `suffix`,
// e.g. "add" "_", so callers build no string unless the check fails) and the shapes.
void assert_no_internal_overlap(const Tensor& out, const char* op, const char* suffix = "");
void assert_no_partial_overlap(const Tensor& out, const Tensor& input, const char* op, const char* suffix = "");

}  // namespace ember
