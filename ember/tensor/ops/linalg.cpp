// matmul and friends with PyTorch's shape rules, all ending in one batched GEMM call.
#include <limits>

#include "ember/tensor/ops/internal.h"

namespace ember::native {
namespace {

void check_gemm_operands(const Tensor& a, const Tensor& b, const char* op) {
  ops::check_defined(a, op);
  ops::check_defined(b, op);
  ops::check_same_device({&a, &b}, op);
  EMBER_CHECK(a.dtype() == b.dtype(), op, ": expected both operands to have the same dtype, but got ", a.dtype(),
              " and ", b.dtype());
  EMBER_CHECK(a.dtype() != kBool, op, ": not implemented for dtype bool");
}

[[noreturn]] void shape_mismatch(const char* op, const Tensor& a, const Tensor& b, int64_t ka, int64_t kb) {
  throw Error(detail::concat(op, ": shapes ", shape_str(a.sizes()), " and ", shape_str(b.sizes()),
                             " cannot be multiplied (", ka, " != ", kb, ")"));
}

// out[B, M, N] = a[B, M, K] @ b[B, K, N] (+ beta * out when beta != 0)
void batched_gemm(const Tensor& a, const Tensor& b, const Tensor& out, double alpha, double beta) {
  if (out.numel() == 0) return;
  backend(a.device()).gemm(a, b, out, alpha, beta);
}

Tensor mm_impl(const Tensor& a, const Tensor& b) {
  Tensor out = ops::empty_on({a.size(0), b.size(1)}, a.dtype(), a.device());
  batched_gemm(native::unsqueeze(a, 0), native::unsqueeze(b, 0), native::unsqueeze(out, 0), 1, 0);
  return out;
}

}  // namespace

Tensor mm(const Tensor& a, const Tensor& b) {
  check_gemm_operands(a, b, "mm");
  EMBER_CHECK(a.dim() == 2 && b.dim() == 2, "mm: expected 2-D tensors, but got shapes ", shape_str(a.sizes()), " and ",
              shape_str(b.sizes()));
  if (a.size(1) != b.size(0)) shape_mismatch("mm", a, b, a.size(1), b.size(0));
  return mm_impl(a, b);
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  check_gemm_operands(a, b, "bmm");
  EMBER_CHECK(a.dim() == 3 && b.dim() == 3, "bmm: expected 3-D tensors, but got shapes ", shape_str(a.sizes()), " and ",
              shape_str(b.sizes()));
  EMBER_CHECK(a.size(0) == b.size(0), "bmm: batch sizes differ: ", shape_str(a.sizes()), " and ", shape_str(b.sizes()));
  if (a.size(2) != b.size(1)) shape_mismatch("bmm", a, b, a.size(2), b.size(1));
  Tensor out = ops::empty_on({a.size(0), a.size(1), b.size(2)}, a.dtype(), a.device());
  batched_gemm(a, b, out, 1, 0);
  return out;
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_gemm_operands(a, b, "matmul");
  const int64_t da = a.dim(), db = b.dim();
  EMBER_CHECK(da > 0 && db > 0, "matmul: both arguments need to be at least 1-D, but got shapes ", shape_str(a.sizes()),
              " and ", shape_str(b.sizes()));
  const int64_t ka = a.size(-1), kb = db == 1 ? b.size(0) : b.size(-2);
  if (ka != kb) shape_mismatch("matmul", a, b, ka, kb);
  if (da == 1 && db == 1) return reshape(mm_impl(unsqueeze(a, 0), unsqueeze(b, 1)), {});  // dot
  if (da == 2 && db == 1) return squeeze(mm_impl(a, unsqueeze(b, 1)), 1);                 // mv
  if (da == 1 && db == 2) return squeeze(mm_impl(unsqueeze(a, 0), b), 0);
  if (da == 2 && db == 2) return mm_impl(a, b);
  if (da >= 3 && db <= 2) {
    // [..., M, K] @ [K, N]: fold the batch into M, one large GEMM.
    Shape out_shape(a.sizes().begin(), a.sizes().end() - 1);
    const Tensor b2 = db == 1 ? native::unsqueeze(b, 1) : b;
    if (db == 2) out_shape.push_back(b.size(1));
    return reshape(mm_impl(reshape(a, fold_leading(a.sizes())), b2), out_shape);
  }
  // General batched case: broadcast the batch dims, then one strided batched GEMM.
  const Tensor a3 = da == 1 ? native::unsqueeze(a, 0) : a;
  const Tensor b3 = db == 1 ? native::unsqueeze(b, 1) : b;
  const Shape batch_a(a3.sizes().begin(), a3.sizes().end() - 2), batch_b(b3.sizes().begin(), b3.sizes().end() - 2);
  const Shape batch = broadcast_shapes(batch_a, batch_b, "matmul");
  const int64_t M = a3.size(-2), N = b3.size(-1);
  int64_t B = 1;
  for (int64_t s : batch) B *= s;
  Shape sa = batch, sb = batch;
  sa.insert(sa.end(), {M, ka});
  sb.insert(sb.end(), {ka, N});
  Shape out_shape = batch;
  out_shape.insert(out_shape.end(), {M, N});
  Tensor out = ops::empty_on(out_shape, a.dtype(), a.device());
  batched_gemm(reshape(expand(a3, sa), {B, M, ka}), reshape(expand(b3, sb), {B, ka, N}), view(out, {B, M, N}), 1, 0);
  if (da == 1) out = native::squeeze(out, -2);
  if (db == 1) out = native::squeeze(out, -1);
  return out;
}

Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  check_gemm_operands(a, b, "addmm");
  ops::check_defined(bias, "addmm", "bias");
  ops::check_same_device({&bias, &a}, "addmm");
  EMBER_CHECK(a.dim() == 2 && b.dim() == 2, "addmm: expected 2-D matrices, but got shapes ", shape_str(a.sizes()),
              " and ", shape_str(b.sizes()));
  if (a.size(1) != b.size(0)) shape_mismatch("addmm", a, b, a.size(1), b.size(0));
  EMBER_CHECK(bias.dtype() == a.dtype(), "addmm: bias dtype ", bias.dtype(), " differs from the matrices' ", a.dtype());
  const Shape shape{a.size(0), b.size(1)};
  EMBER_CHECK(broadcast_shapes(bias.sizes(), shape, "addmm") == shape, "addmm: bias of shape ", shape_str(bias.sizes()),
              " cannot be broadcast to ", shape_str(shape));
  Tensor out = ops::empty_on(shape, a.dtype(), a.device());
  const double be = beta.to_double();
  if (be == 1 && alpha.to_double() == 1 && bias.dim() == 1 && bias.size(0) == shape[1] && out.numel() > 0) {
    // Linear's case: the back end may add the bias inside the GEMM (CUDA: cuBLASLt's epilogue).
    backend(a.device()).gemm_bias(a, b, bias, out);
    return out;
  }
  if (be != 0) native::copy_(out, bias);
  batched_gemm(native::unsqueeze(a, 0), native::unsqueeze(b, 0), native::unsqueeze(out, 0), alpha.to_double(), be);
  return out;
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_gemm_operands(x, weight, "linear");
  EMBER_CHECK(weight.dim() == 2, "linear: weight must be 2-D [out_features, in_features], got ",
              shape_str(weight.sizes()));
  EMBER_CHECK(x.dim() >= 1, "linear: input must be at least 1-D");
  if (x.size(-1) != weight.size(1)) shape_mismatch("linear", x, native::t(weight), x.size(-1), weight.size(1));
  Shape out_shape(x.sizes().begin(), x.sizes().end() - 1);
  out_shape.push_back(weight.size(0));
  const Tensor x2 = native::reshape(x, fold_leading(x.sizes()));
  if (!bias.defined()) return reshape(mm_impl(x2, t(weight)), out_shape);
  EMBER_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), "linear: bias must have shape [", weight.size(0),
              "], got ", shape_str(bias.sizes()));
  return reshape(addmm(bias, x2, t(weight)), out_shape);
}

Tensor csr_linear(const Tensor& x, const Tensor& crow, const Tensor& col, const Tensor& values, const Tensor& bias,
                  int64_t out_features) {
  ops::check_defined(x, "csr_linear");
  EMBER_CHECK(x.dtype() == kFloat32 && x.is_cpu() && x.dim() >= 1,
              "csr_linear: expects a float32 CPU input of at least 1 dimension, got ", x.dtype(), " on ", x.device());
  EMBER_CHECK(out_features >= 0 && out_features < std::numeric_limits<int64_t>::max(),
              "csr_linear: invalid out_features ", out_features);
  EMBER_CHECK(crow.defined() && crow.dtype() == kInt64 && crow.dim() == 1 && crow.numel() == out_features + 1,
              "csr_linear: crow must be int64 [", out_features + 1, "]");
  EMBER_CHECK(col.defined() && values.defined() && col.dtype() == kInt64 && values.dtype() == kFloat32 &&
                  col.dim() == 1 && values.dim() == 1 && col.numel() == values.numel(),
              "csr_linear: col (int64) and values (float32) must be 1-D and of one length");
  EMBER_CHECK(!bias.defined() || (bias.dtype() == kFloat32 && bias.numel() == out_features),
              "csr_linear: the bias must be float32 [", out_features, "]");
  ops::check_same_device({&x, &crow, &col, &values, &bias}, "csr_linear");
  const int64_t in_features = x.size(-1);
  const std::vector<int64_t> rows = crow.to_vector<int64_t>();
  EMBER_CHECK(rows.front() == 0 && rows.back() == col.numel(), "csr_linear: crow must run from 0 to nnz (", col.numel(),
              ")");
  for (size_t i = 1; i < rows.size(); ++i)
    EMBER_CHECK(rows[i] >= rows[i - 1], "csr_linear: crow must not decrease (row ", i - 1, ")");
  for (int64_t c : col.to_vector<int64_t>())
    EMBER_CHECK(c >= 0 && c < in_features, "csr_linear: column ", c, " is out of range for ", in_features,
                " input features");
  Shape out_shape(x.sizes().begin(), x.sizes().end() - 1);
  out_shape.push_back(out_features);
  const Tensor x2 = contiguous(reshape(x, fold_leading(x.sizes())));
  Tensor out = ops::empty_on({x2.size(0), out_features}, kFloat32, x.device());
  if (out.numel() > 0)
    backend(x.device())
        .csr_linear(x2, contiguous(crow), contiguous(col), contiguous(values), bias.defined() ? contiguous(bias) : bias,
                    out);
  return reshape(out, out_shape);
}

}  // namespace ember::native
