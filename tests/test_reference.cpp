// Every op against PyTorch: inputs and outputs come from tests/reference/ops.bin,
// written by tools/gen_reference.py. Each case below applies the same op as the script.
#include <functional>
#include <limits>

#include "helpers.h"

namespace ember {
namespace {

using Inputs = std::vector<Tensor>;
using Outputs = std::vector<Tensor>;
using CaseFn = std::function<Outputs(const Inputs&)>;
namespace F = nn::functional;
using namespace indexing;

template <class F>
CaseFn one(F f) {
  return [f](const Inputs& in) { return Outputs{f(in)}; };
}
CaseFn unary_case(Tensor (*f)(const Tensor&)) {
  return [f](const Inputs& in) { return Outputs{f(in[0])}; };
}

// linalg.svd's outputs as the script stores them: U's first k columns and Vh's first k rows, each
// pair signed so that U's first row is positive, S, then (`count` 5) the projectors onto the extra
// columns of a full U and rows of a full Vh, which are unique where those bases are not.
Outputs svd_outputs(const Tensor& a, bool full_matrices, int count) {
  auto [u, s, vh] = linalg::svd(a, full_matrices);
  const int64_t k = s.size(-1);
  const Tensor sign = u.narrow(-2, 0, 1).narrow(-1, 0, k).sign();
  Outputs out{u.narrow(-1, 0, k) * sign, s, vh.narrow(-2, 0, k) * sign.transpose(-2, -1)};
  if (count == 5) {
    const Tensor rest_u = u.narrow(-1, k, u.size(-1) - k), rest_v = vh.narrow(-2, k, vh.size(-2) - k);
    out.push_back(matmul(rest_u, rest_u.transpose(-2, -1)));
    out.push_back(matmul(rest_v.transpose(-2, -1), rest_v));
  }
  return out;
}

Outputs lstsq_outputs(const Inputs& x, std::optional<double> rcond, std::optional<std::string> driver) {
  auto [solution, residuals, rank, singular_values] = linalg::lstsq(x[0], x[1], rcond, driver);
  return Outputs{solution, residuals, rank, singular_values};
}

Outputs qr_outputs(const Tensor& a, const std::string& mode) {
  auto [q, r] = linalg::qr(a, mode);
  return Outputs{q, r};
}

const std::map<std::string, CaseFn>& cases() {
  static auto* table = new std::map<std::string, CaseFn>{
      // elementwise
      {"add_bcast", one([](const Inputs& x) { return x[0] + x[1]; })},
      {"add_alpha", one([](const Inputs& x) { return add(x[0], x[1], 2.5); })},
      {"sub_bcast", one([](const Inputs& x) { return x[0] - x[1]; })},
      {"mul_bcast", one([](const Inputs& x) { return x[0] * x[1]; })},
      {"div_bcast", one([](const Inputs& x) { return x[0] / x[1]; })},
      {"add_noncontig", one([](const Inputs& x) { return x[0] + x[1].t(); })},
      {"mul_slice_scalar", one([](const Inputs& x) { return x[0].slice(0, 0, std::nullopt, 2).slice(1, 1, 4) * 3.0; })},
      {"pow_tensor", one([](const Inputs& x) { return x[0].pow(x[1]); })},
      {"pow_scalar", one([](const Inputs& x) { return x[0].pow(2.5); })},
      {"maximum", one([](const Inputs& x) { return maximum(x[0], x[1]); })},
      {"minimum", one([](const Inputs& x) { return minimum(x[0], x[1]); })},
      {"eq", one([](const Inputs& x) { return x[0] == x[1]; })},
      {"lt_bcast", one([](const Inputs& x) { return x[0] < x[1]; })},
      {"ge_scalar", one([](const Inputs& x) { return x[0] >= 0.1; })},
      {"where", one([](const Inputs& x) { return where(x[0], x[1], x[2]); })},
      {"masked_fill", one([](const Inputs& x) { return x[0].masked_fill(x[1], -7.5); })},
      {"clamp", one([](const Inputs& x) { return x[0].clamp(-0.5, 0.5); })},
      {"clamp_min", one([](const Inputs& x) { return x[0].clamp(0.2); })},
      // type promotion and casts
      {"promote_int_double", one([](const Inputs& x) { return x[0] + x[1]; })},
      {"promote_long_scalar_float", one([](const Inputs& x) { return x[0] + 2.5; })},
      {"promote_uint8_long", one([](const Inputs& x) { return x[0] + x[1]; })},
      {"promote_bool_int", one([](const Inputs& x) { return x[0] + x[1]; })},
      {"promote_int_div", one([](const Inputs& x) { return x[0] / x[1]; })},
      {"promote_half_zero_dim_double", one([](const Inputs& x) { return x[0] * x[1]; })},
      {"promote_int8_uint8_mul", one([](const Inputs& x) { return (x[0] * x[1]).to(kInt32); })},
      {"int_pow", one([](const Inputs& x) { return x[0].pow(x[1]); })},
      {"half_add", one([](const Inputs& x) { return x[0] + x[1]; })},
      {"bf16_mul", one([](const Inputs& x) { return x[0] * x[1]; })},
      {"cast_half", one([](const Inputs& x) { return x[0].to(kFloat16); })},
      {"cast_bf16", one([](const Inputs& x) { return x[0].to(kBFloat16); })},
      {"cast_double_float", one([](const Inputs& x) { return x[0].to(kFloat32); })},
      {"cast_float_int", one([](const Inputs& x) { return x[0].to(kInt32); })},
      {"cast_int_uint8", one([](const Inputs& x) { return x[0].to(kUInt8); })},
      {"cast_to_bool", one([](const Inputs& x) { return x[0].to(kBool); })},
      // reductions
      {"sum_all", one([](const Inputs& x) { return x[0].sum(); })},
      {"sum_dims_keepdim", one([](const Inputs& x) { return x[0].sum({0, 2}, true); })},
      {"sum_transposed", one([](const Inputs& x) { return x[0].t().sum({1}); })},
      {"sum_columns", one([](const Inputs& x) { return x[0].sum({0}); })},
      {"sum_int", one([](const Inputs& x) { return x[0].sum({1}); })},
      {"sum_bool", one([](const Inputs& x) { return x[0].sum(); })},
      {"mean_last", one([](const Inputs& x) { return x[0].mean({-1}); })},
      {"mean_double", one([](const Inputs& x) { return x[0].mean({0, 1}); })},
      {"prod_dim", one([](const Inputs& x) { return x[0].prod(1); })},
      {"max_dim", [](const Inputs& x) { auto [v, i] = x[0].max(1); return Outputs{v, i}; }},
      {"min_dim_keepdim", [](const Inputs& x) { auto [v, i] = x[0].min(0, true); return Outputs{v, i}; }},
      {"max_ties", [](const Inputs& x) { auto [v, i] = x[0].max(1); return Outputs{v, i}; }},
      {"amax_dims", one([](const Inputs& x) { return x[0].amax({0, 2}); })},
      {"argmax_dim", one([](const Inputs& x) { return x[0].argmax(1); })},
      {"argmax_all", one([](const Inputs& x) { return x[0].argmax(); })},
      {"argmin_dim", one([](const Inputs& x) { return x[0].argmin(0); })},
      {"var_dim", one([](const Inputs& x) { return x[0].var({1}); })},
      {"var_biased_all", one([](const Inputs& x) { return x[0].var({}, false); })},
      {"std_dim_keepdim", one([](const Inputs& x) { return x[0].std({0}, true, true); })},
      {"norm_2", one([](const Inputs& x) { return x[0].norm(); })},
      {"norm_1_dim", one([](const Inputs& x) { return x[0].norm(1, {1}); })},
      {"norm_inf_dim", one([](const Inputs& x) { return x[0].norm(std::numeric_limits<double>::infinity(), {0}); })},
      {"norm_3", one([](const Inputs& x) { return x[0].norm(3); })},
      {"logsumexp", one([](const Inputs& x) { return x[0].logsumexp({1}); })},
      {"logsumexp_keepdim", one([](const Inputs& x) { return x[0].logsumexp({0, 2}, true); })},
      {"sum_empty", one([](const Inputs& x) { return x[0].sum({0}); })},
      {"prod_empty", one([](const Inputs& x) { return x[0].prod(1); })},
      {"mean_empty", one([](const Inputs& x) { return x[0].mean(); })},
      {"all_any", [](const Inputs& x) { return Outputs{all(x[0], {1}), any(x[0], {0})}; }},
      // matmul
      {"mm", one([](const Inputs& x) { return mm(x[0], x[1]); })},
      {"mm_transposed", one([](const Inputs& x) { return x[0].t().matmul(x[1].t()); })},
      {"mm_double", one([](const Inputs& x) { return mm(x[0], x[1]); })},
      {"matmul_dot", one([](const Inputs& x) { return matmul(x[0], x[1]); })},
      {"matmul_mv", one([](const Inputs& x) { return matmul(x[0], x[1]); })},
      {"matmul_vm", one([](const Inputs& x) { return matmul(x[0], x[1]); })},
      {"matmul_batched_2d", one([](const Inputs& x) { return matmul(x[0], x[1]); })},
      {"matmul_broadcast", one([](const Inputs& x) { return matmul(x[0], x[1]); })},
      {"matmul_vec_batched", one([](const Inputs& x) { return matmul(x[0], x[1]); })},
      {"matmul_batched_vec", one([](const Inputs& x) { return matmul(x[0], x[1]); })},
      {"bmm", one([](const Inputs& x) { return bmm(x[0], x[1]); })},
      {"addmm", one([](const Inputs& x) { return addmm(x[0], x[1], x[2], 0.5, 2.0); })},
      {"linear", one([](const Inputs& x) { return linear(x[0], x[1], x[2]); })},
      {"addmm_bias_transposed", one([](const Inputs& x) { return addmm(x[0], x[1].t(), x[2]); })},
      {"linear_half", one([](const Inputs& x) { return linear(x[0], x[1], x[2]); })},
      {"matmul_int", one([](const Inputs& x) { return matmul(x[0], x[1]); })},
      {"matmul_half", one([](const Inputs& x) { return matmul(x[0], x[1]); })},
      // softmax
      {"softmax_last", one([](const Inputs& x) { return x[0].softmax(-1); })},
      {"softmax_dim0", one([](const Inputs& x) { return x[0].softmax(0); })},
      {"log_softmax_mid", one([](const Inputs& x) { return x[0].log_softmax(1); })},
      {"log_softmax_double", one([](const Inputs& x) { return x[0].log_softmax(1); })},
      // convolution and pooling
      {"conv2d_basic", one([](const Inputs& x) { return conv2d(x[0], x[1], x[2]); })},
      {"conv2d_stride_pad", one([](const Inputs& x) { return conv2d(x[0], x[1], x[2], {2, 1}, {1, 2}); })},
      {"conv2d_dilation", one([](const Inputs& x) { return conv2d(x[0], x[1], {}, {1, 1}, {1, 1}, {2, 2}); })},
      {"conv2d_groups", one([](const Inputs& x) { return conv2d(x[0], x[1], x[2], {1, 1}, {1, 1}, {1, 1}, 2); })},
      {"conv2d_1x1", one([](const Inputs& x) { return conv2d(x[0], x[1], x[2]); })},
      {"conv2d_double", one([](const Inputs& x) { return conv2d(x[0], x[1], {}, {1, 1}, {1, 1}); })},
      {"max_pool2d", [](const Inputs& x) { auto [v, i] = max_pool2d_with_indices(x[0], {3, 3}, {{2, 2}}, {1, 1}); return Outputs{v, i}; }},
      {"max_pool2d_ceil", [](const Inputs& x) { auto [v, i] = max_pool2d_with_indices(x[0], {3, 3}, {{2, 2}}, {0, 0}, {1, 1}, true); return Outputs{v, i}; }},
      {"max_pool2d_dilation", [](const Inputs& x) { auto [v, i] = max_pool2d_with_indices(x[0], {2, 2}, {{1, 1}}, {0, 0}, {2, 2}); return Outputs{v, i}; }},
      {"avg_pool2d", one([](const Inputs& x) { return avg_pool2d(x[0], {2, 2}); })},
      {"avg_pool2d_pad", one([](const Inputs& x) { return avg_pool2d(x[0], {3, 3}, {{2, 2}}, {1, 1}); })},
      {"avg_pool2d_pad_exclude", one([](const Inputs& x) { return avg_pool2d(x[0], {3, 3}, {{2, 2}}, {1, 1}, false, false); })},
      {"avg_pool2d_ceil", one([](const Inputs& x) { return avg_pool2d(x[0], {3, 3}, {{2, 2}}, {0, 0}, true); })},
      {"adaptive_avg_pool2d", one([](const Inputs& x) { return adaptive_avg_pool2d(x[0], {3, 2}); })},
      {"adaptive_avg_pool2d_global", one([](const Inputs& x) { return adaptive_avg_pool2d(x[0], {1, 1}); })},
      // indexing and joining
      {"index_select", one([](const Inputs& x) { return x[0].index_select(1, x[1]); })},
      {"gather", one([](const Inputs& x) { return x[0].gather(1, x[1]); })},
      {"scatter_add", one([](const Inputs& x) { return x[0].scatter_add(0, x[1], x[2]); })},
      {"embedding", one([](const Inputs& x) { return embedding(x[0], x[1]); })},
      {"one_hot", one([](const Inputs& x) { return one_hot(x[0], 5); })},
      {"tril", one([](const Inputs& x) { return x[0].tril(-1); })},
      {"triu", one([](const Inputs& x) { return x[0].triu(1); })},
      {"cat_promote", one([](const Inputs& x) { return cat({x[0], x[1]}, 1); })},
      {"stack", one([](const Inputs& x) { return stack({x[0], x[1]}, 1); })},
      // x.index({...}) and x.index_put_({...}, v): Python's x[...] (Note [Tensor indexing])
      {"index_basic", one([](const Inputs& x) { return x[0].index({Slice(1, 3), None, "...", Slice(None, None, 2)}); })},
      {"index_ints", one([](const Inputs& x) { return x[0].index({-1, Slice(), 2}); })},
      {"index_bools", one([](const Inputs& x) { return x[0].index({Ellipsis, None, true}); })},
      {"index_false", one([](const Inputs& x) { return x[0].index({false, 1}); })},
      {"index_long", one([](const Inputs& x) { return x[0].index({x[1]}); })},
      {"index_long_dim1", one([](const Inputs& x) { return x[0].index({Slice(), x[1]}); })},
      {"index_two_adjacent", one([](const Inputs& x) { return x[0].index({Slice(), x[1], x[2]}); })},
      {"index_two_separated", one([](const Inputs& x) { return x[0].index({x[1], Slice(), x[2]}); })},
      {"index_int_with_long", one([](const Inputs& x) { return x[0].index({0, Slice(), Slice(), x[1]}); })},
      {"index_mask_all", one([](const Inputs& x) { return x[0].index({x[0] > 0}); })},
      {"index_mask_leading", one([](const Inputs& x) { return x[0].index({x[1]}); })},
      {"index_mask_middle", one([](const Inputs& x) { return x[0].index({Slice(), x[1]}); })},
      {"index_put_slice", one([](const Inputs& x) { return x[0].clone().index_put_({Slice(1, None), 0}, x[1]); })},
      {"index_put_long", one([](const Inputs& x) { return x[0].clone().index_put_({x[1], Slice(1, 3)}, x[2]); })},
      {"index_put_mask_scalar", one([](const Inputs& x) { return x[0].clone().index_put_({x[0] < 0}, 0.5); })},
      {"index_put_broadcast", one([](const Inputs& x) { return x[0].clone().index_put_({Slice(), x[1]}, x[2]); })},
      {"index_put_accumulate", one([](const Inputs& x) { return x[0].clone().index_put_({x[1]}, x[2], true); })},
      {"index_put_transposed", one([](const Inputs& x) {
         Tensor y = x[0].clone(), yt = y.t();
         yt.index_put_({x[1]}, x[2]);
         return y;
       })},
      {"masked_select", one([](const Inputs& x) { return masked_select(x[0], x[1]); })},
      {"nonzero", one([](const Inputs& x) { return nonzero(x[0]); })},
      {"nonzero_bool_3d", one([](const Inputs& x) { return x[0].nonzero(); })},
      {"scatter", one([](const Inputs& x) { return x[0].scatter(0, x[1], x[2]); })},
      {"scatter_dim1", one([](const Inputs& x) { return x[0].scatter(1, x[1], x[2]); })},
      // scans and sorting
      {"cumsum", one([](const Inputs& x) { return x[0].cumsum(1); })},
      {"cumsum_dim0_3d", one([](const Inputs& x) { return x[0].cumsum(0); })},
      {"cumsum_int", one([](const Inputs& x) { return x[0].cumsum(1); })},
      {"cumsum_to_double", one([](const Inputs& x) { return x[0].cumsum(0, kFloat64); })},
      {"sort", [](const Inputs& x) { auto [v, i] = x[0].sort(); return Outputs{v, i}; }},
      {"sort_descending_dim0", [](const Inputs& x) { auto [v, i] = x[0].sort(0, true); return Outputs{v, i}; }},
      {"sort_nan", [](const Inputs& x) { auto [v, i] = x[0].sort(); return Outputs{v, i}; }},
      {"sort_nan_descending", [](const Inputs& x) { auto [v, i] = x[0].sort(-1, true); return Outputs{v, i}; }},
      {"sort_stable_ties", [](const Inputs& x) { auto [v, i] = x[0].sort(); return Outputs{v, i}; }},
      {"argsort_int", one([](const Inputs& x) { return x[0].argsort(1, true); })},
      {"topk", [](const Inputs& x) { auto [v, i] = x[0].topk(2); return Outputs{v, i}; }},
      {"einsum_matmul", one([](const Inputs& x) { return einsum("ij,jk->ik", {x[0], x[1]}); })},
      {"einsum_batched_transposed", one([](const Inputs& x) { return einsum("bik,bjk->bji", {x[0], x[1]}); })},
      {"einsum_attention", one([](const Inputs& x) { return einsum("bhqd,bhkd->bhqk", {x[0], x[1]}); })},
      {"einsum_implicit", one([](const Inputs& x) { return einsum("ij,jk", {x[0], x[1]}); })},
      {"einsum_dot_outer", one([](const Inputs& x) { return einsum("i,i,j->j", {x[0], x[1], x[2]}); })},
      {"einsum_outer", one([](const Inputs& x) { return einsum("i,j->ij", {x[0], x[1]}); })},
      {"einsum_sum_permute", one([](const Inputs& x) { return einsum("ijk->kj", {x[0]}); })},
      {"einsum_three", one([](const Inputs& x) { return einsum("ab,bc,cd->da", {x[0], x[1], x[2]}); })},
      {"einsum_bilinear", one([](const Inputs& x) { return einsum("bi,oij,bj->bo", {x[0], x[1], x[2]}); })},
      {"topk_smallest_dim0", [](const Inputs& x) { auto [v, i] = x[0].topk(3, 0, false); return Outputs{v, i}; }},
      // the LibTorch frontend's layers and losses
      {"leaky_relu_slope", one([](const Inputs& x) { return x[0].leaky_relu(0.2); })},
      {"elu_alpha", one([](const Inputs& x) { return x[0].elu(0.5); })},
      {"conv_transpose2d",
       one([](const Inputs& x) { return conv_transpose2d(x[0], x[1], x[2], {2, 2}, {1, 1}, {1, 1}); })},
      {"conv_transpose2d_groups_dilation",
       one([](const Inputs& x) { return conv_transpose2d(x[0], x[1], {}, {1, 2}, {1, 0}, {0, 0}, 2, {2, 2}); })},
      {"conv_transpose2d_unbatched", one([](const Inputs& x) { return conv_transpose2d(x[0], x[1], {}, {2, 2}); })},
      {"interpolate_nearest_size",
       one([](const Inputs& x) { return F::interpolate(x[0], F::InterpolateOptions().size(Shape{8, 4})); })},
      {"interpolate_nearest_scale",
       one([](const Inputs& x) { return F::interpolate(x[0], F::InterpolateOptions().scale_factor(2.5)); })},
      {"interpolate_nearest_double",
       one([](const Inputs& x) { return F::interpolate(x[0], F::InterpolateOptions().scale_factor(2.0)); })},
      {"interpolate_bilinear",
       one([](const Inputs& x) {
         return F::interpolate(x[0], F::InterpolateOptions().size(Shape{7, 9}).mode("bilinear").align_corners(false));
       })},
      {"interpolate_bilinear_align",
       one([](const Inputs& x) {
         return F::interpolate(x[0], F::InterpolateOptions().scale_factor(2.0).mode("bilinear").align_corners(true));
       })},
      {"interpolate_bilinear_scale",
       one([](const Inputs& x) {
         return F::interpolate(x[0], F::InterpolateOptions().scale_factor(std::vector<double>{1.7, 0.6}).mode("bilinear"));
       })},
      {"interpolate_bilinear_recompute",
       one([](const Inputs& x) {
         return F::interpolate(
             x[0], F::InterpolateOptions().scale_factor(1.7).mode("bilinear").recompute_scale_factor(true));
       })},
      {"binary_cross_entropy", one([](const Inputs& x) { return binary_cross_entropy(x[0], x[1]); })},
      {"binary_cross_entropy_weight_sum",
       one([](const Inputs& x) { return F::binary_cross_entropy(x[0], x[1], F::BCELossOptions().weight(x[2]).reduction("sum")); })},
      {"binary_cross_entropy_edges", one([](const Inputs& x) { return binary_cross_entropy(x[0], x[1], {}, "none"); })},
      // LibTorch's composites (autograd/composites.cpp), the rounding ops, their losses
      {"expm1_range", one([](const Inputs& x) { return x[0].expm1(); })},
      {"round_halves", one([](const Inputs& x) { return x[0].round(); })},
      {"round_halves64", one([](const Inputs& x) { return x[0].round(); })},
      {"floor_int", one([](const Inputs& x) { return x[0].floor(); })},
      {"flip", one([](const Inputs& x) { return x[0].flip({0, 2}); })},
      {"flip_int", one([](const Inputs& x) { return x[0].flip({-1}); })},
      {"roll_dims", one([](const Inputs& x) { return x[0].roll({1, -5}, {0, 1}); })},
      {"roll_flat", one([](const Inputs& x) { return x[0].roll(5); })},
      {"repeat_interleave_dim", one([](const Inputs& x) { return x[0].repeat_interleave(2, 1); })},
      {"repeat_interleave_flat", one([](const Inputs& x) { return x[0].repeat_interleave(3); })},
      {"repeat_interleave_tensor", one([](const Inputs& x) { return x[0].repeat_interleave(x[1], 0); })},
      {"repeat_interleave_counts", one([](const Inputs& x) { return repeat_interleave(x[0]); })},
      {"dot", one([](const Inputs& x) { return dot(x[0], x[1]); })},
      {"dot64", one([](const Inputs& x) { return x[0].dot(x[1]); })},
      {"outer", one([](const Inputs& x) { return outer(x[0], x[1]); })},
      {"isclose", one([](const Inputs& x) { return isclose(x[0], x[1]); })},
      {"isclose_nan_tol", one([](const Inputs& x) { return x[0].isclose(x[1], 1e-4, 1e-2, true); })},
      {"isclose_int", one([](const Inputs& x) { return isclose(x[0], x[1], 0.1, 0); })},
      {"isnan_isinf_isfinite",
       [](const Inputs& x) { return Outputs{isnan(x[0]), x[0].isinf(), isfinite(x[0])}; }},
      {"clamp_max", one([](const Inputs& x) { return x[0].clamp_max(0.3); })},
      {"huber_loss", one([](const Inputs& x) { return nn::HuberLoss()(x[0], x[1]); })},
      {"huber_loss_delta_sum",
       one([](const Inputs& x) { return F::huber_loss(x[0], x[1], F::HuberLossFuncOptions().reduction("sum").delta(0.5)); })},
      {"smooth_l1_loss_beta",
       one([](const Inputs& x) { return F::smooth_l1_loss(x[0], x[1], F::SmoothL1LossFuncOptions().beta(0.5).reduction("none")); })},
      {"kl_div_batchmean", one([](const Inputs& x) { return F::kl_div(x[0], x[1], F::KLDivFuncOptions().reduction(kBatchMean)); })},
      {"kl_div_log_target_sum",
       one([](const Inputs& x) { return nn::KLDivLoss(nn::KLDivLossOptions().reduction("sum").log_target(true))(x[0], x[1]); })},
      // the third sweep of LibTorch calls
      {"lerp_scalar", one([](const Inputs& x) { return lerp(x[0], x[1], 0.3); })},
      {"lerp_tensor", one([](const Inputs& x) { return x[0].lerp(x[1], x[2]); })},
      {"unbind", [](const Inputs& x) { return x[0].unbind(1); }},
      {"normalize", one([](const Inputs& x) { return F::normalize(x[0]); })},
      {"normalize_l1_dim0", one([](const Inputs& x) { return F::normalize(x[0], F::NormalizeFuncOptions().p(1).dim(0)); })},
      {"cosine_similarity", one([](const Inputs& x) { return F::cosine_similarity(x[0], x[1]); })},
      {"cosine_similarity_bcast",
       one([](const Inputs& x) { return F::cosine_similarity(x[0], x[1], F::CosineSimilarityFuncOptions().dim(-1)); })},
      // the fourth sweep (the new unary ops are in the EMBER_UNARY list below)
      {"unary_edges",
       [](const Inputs& x) {
         return Outputs{x[0].log2(),  x[0].log10(), x[0].exp2(),  x[0].asin(),
                        x[0].acosh(), x[0].atanh(), x[0].atan(), x[0].sinh()};
       }},
      {"int_log2", one([](const Inputs& x) { return log2(x[0]); })},
      {"atan2", one([](const Inputs& x) { return atan2(x[0], x[1]); })},
      {"atan2_quadrants", one([](const Inputs& x) { return x[0].atan2(x[1]); })},
      {"atan2_int", one([](const Inputs& x) { return atan2(x[0], x[1]); })},
      {"remainder", one([](const Inputs& x) { return remainder(x[0], x[1]); })},
      {"fmod", one([](const Inputs& x) { return fmod(x[0], x[1]); })},
      {"remainder_bcast64", one([](const Inputs& x) { return x[0].remainder(x[1]); })},
      {"remainder_int", one([](const Inputs& x) { return remainder(x[0], x[1]); })},
      {"fmod_int", one([](const Inputs& x) { return x[0].fmod(x[1]); })},
      {"remainder_int8", one([](const Inputs& x) { return remainder(x[0], x[1]); })},
      {"remainder_uint8", one([](const Inputs& x) { return remainder(x[0], 3); })},
      {"remainder_scalar", one([](const Inputs& x) { return x[0].remainder(-1.5); })},
      {"fmod_scalar", one([](const Inputs& x) { return fmod(x[0], 1.5); })},
      {"remainder_int_float_scalar", one([](const Inputs& x) { return remainder(x[0], 2.5); })},
      {"diagonal", one([](const Inputs& x) { return diagonal(x[0]); })},
      {"diagonal_offset",
       [](const Inputs& x) { return Outputs{x[0].diagonal(1), x[0].diagonal(-2), x[0].diagonal(5)}; }},
      {"diagonal_dims", one([](const Inputs& x) { return diagonal(x[0], 1, 2, 0); })},
      {"diag_vector", [](const Inputs& x) { return Outputs{diag(x[0]), x[0].diag(2), diag(x[0], -1)}; }},
      {"diag_matrix", [](const Inputs& x) { return Outputs{x[0].diag(), diag(x[0], -1)}; }},
      {"diag_inf", one([](const Inputs& x) { return diag(x[0]); })},
      {"trace", one([](const Inputs& x) { return trace(x[0]); })},
      {"trace_int", one([](const Inputs& x) { return x[0].trace(); })},
      {"var_mean",
       [](const Inputs& x) {
         auto [v, m] = var_mean(x[0], 1);
         return Outputs{v, m};
       }},
      {"std_mean_biased_keepdim",
       [](const Inputs& x) {
         auto [s, m] = std_mean(x[0], 0, false, true);
         return Outputs{s, m};
       }},
      {"var_mean_all",
       [](const Inputs& x) {
         auto [v, m] = var_mean(x[0]);
         return Outputs{v, m};
       }},
      {"conv1d", one([](const Inputs& x) { return F::conv1d(x[0], x[1], x[2], 2, 1, 1, 2); })},
      {"conv1d_dilation_unbatched", one([](const Inputs& x) { return conv1d(x[0], x[1], {}, 1, 0, 2); })},
      {"max_pool1d", one([](const Inputs& x) { return F::max_pool1d(x[0], F::MaxPool1dFuncOptions(3).stride(2).padding(1)); })},
      {"max_pool1d_ceil_dilation", one([](const Inputs& x) { return max_pool1d(x[0], 2, std::nullopt, 0, 2, true); })},
      {"avg_pool1d",
       one([](const Inputs& x) {
         return F::avg_pool1d(x[0], F::AvgPool1dFuncOptions(3).stride(2).padding(1).count_include_pad(false));
       })},
      {"avg_pool1d_default", one([](const Inputs& x) { return avg_pool1d(x[0], 2); })},
      {"pad_constant", one([](const Inputs& x) { return F::pad(x[0], F::PadFuncOptions({1, 2, 0, 1}).value(-1.5)); })},
      {"pad_constant_crop", one([](const Inputs& x) { return F::pad(x[0], F::PadFuncOptions({-1, 2, 1, -2, 1, 0})); })},
      {"pad_reflect",
       one([](const Inputs& x) { return F::pad(x[0], F::PadFuncOptions({3, 1, 2, 3}).mode(kReflect)); })},
      {"pad_replicate",
       one([](const Inputs& x) { return F::pad(x[0], F::PadFuncOptions({2, 4, 3, 0}).mode(kReplicate)); })},
      {"pad_circular",
       one([](const Inputs& x) { return F::pad(x[0], F::PadFuncOptions({5, 1, 2, 4}).mode(kCircular)); })},
      {"pad_reflect_1d", one([](const Inputs& x) { return F::pad(x[0], F::PadFuncOptions({5, 2}).mode("reflect")); })},
      {"pad_int", one([](const Inputs& x) { return F::pad(x[0], F::PadFuncOptions({1, 1}).value(7)); })},
      {"prelu", one([](const Inputs& x) { return F::prelu(x[0], x[1]); })},
      {"prelu_one", one([](const Inputs& x) { return F::prelu(x[0], x[1]); })},
      {"instance_norm", one([](const Inputs& x) { return F::instance_norm(x[0]); })},
      {"instance_norm_affine",
       one([](const Inputs& x) {
         return F::instance_norm(x[0], F::InstanceNormFuncOptions().weight(x[1]).bias(x[2]).eps(1e-3));
       })},
      {"instance_norm_running",
       [](const Inputs& x) {
         Tensor m = x[1].clone(), v = x[2].clone();
         return Outputs{F::instance_norm(x[0], m, v, {}, {}, true, 0.2), m, v};
       }},
      {"instance_norm_eval", one([](const Inputs& x) { return F::instance_norm(x[0], x[1], x[2], {}, {}, false); })},
      // the sixth sweep (unary_erfinv comes with the EMBER_UNARY list below)
      {"erfinv_edges", one([](const Inputs& x) { return x[0].erfinv(); })},
      {"erfinv_edges64", one([](const Inputs& x) { return erfinv(x[0]); })},
      {"cumprod", one([](const Inputs& x) { return x[0].cumprod(1); })},
      {"cumprod_zeros_last_dim", one([](const Inputs& x) { return cumprod(x[0], -1); })},
      {"cumprod_int", one([](const Inputs& x) { return x[0].cumprod(1); })},
      {"cumprod_int_to_double", one([](const Inputs& x) { return x[0].cumprod(0, kFloat64); })},
      {"cumprod64", one([](const Inputs& x) { return cumprod(x[0], 0); })},
      {"median_all", one([](const Inputs& x) { return x[0].median(); })},
      {"median_dim", [](const Inputs& x) { auto [v, i] = median(x[0], 1); return Outputs{v, i}; }},
      {"median_dim_keepdim", [](const Inputs& x) { auto [v, i] = x[0].median(1, true); return Outputs{v, i}; }},
      {"median_nan", [](const Inputs& x) { auto [v, i] = x[0].median(1); return Outputs{v, i}; }},
      {"median_all_nan", one([](const Inputs& x) { return median(x[0]); })},
      {"nanmedian_dim", [](const Inputs& x) { auto [v, i] = nanmedian(x[0], 1); return Outputs{v, i}; }},
      {"nanmedian_all", one([](const Inputs& x) { return x[0].nanmedian(); })},
      {"median_int", [](const Inputs& x) { auto [v, i] = x[0].median(0); return Outputs{v, i}; }},
      // torch::linalg (eigenvectors with their first row made positive, as the script does)
      {"linalg_solve", one([](const Inputs& x) { return linalg::solve(x[0], x[1]); })},
      {"linalg_solve64", one([](const Inputs& x) { return linalg::solve(x[0], x[1]); })},
      {"linalg_solve_broadcast", one([](const Inputs& x) { return linalg::solve(x[0], x[1]); })},
      {"linalg_solve_vector", one([](const Inputs& x) { return linalg::solve(x[0], x[1]); })},
      {"linalg_solve_right", one([](const Inputs& x) { return linalg::solve(x[0], x[1], /*left=*/false); })},
      {"linalg_inv", one([](const Inputs& x) { return linalg::inv(x[0]); })},
      {"linalg_inv64", one([](const Inputs& x) { return inverse(x[0]); })},
      {"linalg_det", one([](const Inputs& x) { return linalg::det(x[0]); })},
      {"linalg_det64", one([](const Inputs& x) { return det(x[0]); })},
      {"linalg_slogdet", [](const Inputs& x) { auto [s, l] = linalg::slogdet(x[0]); return Outputs{s, l}; }},
      {"logdet", one([](const Inputs& x) { return logdet(x[0]); })},
      {"linalg_cholesky", one([](const Inputs& x) { return linalg::cholesky(x[0]); })},
      {"linalg_cholesky_upper64", one([](const Inputs& x) { return linalg::cholesky(x[0], /*upper=*/true); })},
      {"linalg_cholesky_ex",
       [](const Inputs& x) {
         auto [l, info] = linalg::cholesky_ex(x[0]);
         return Outputs{l * (info == 0).unsqueeze(-1).unsqueeze(-1), info};
       }},
      {"linalg_solve_triangular_upper",
       one([](const Inputs& x) { return linalg::solve_triangular(x[0], x[1], /*upper=*/true); })},
      {"linalg_solve_triangular_lower_unit",
       one([](const Inputs& x) {
         return linalg::solve_triangular(x[0], x[1], /*upper=*/false, /*left=*/true, /*unitriangular=*/true);
       })},
      {"linalg_solve_triangular_right",
       one([](const Inputs& x) { return linalg::solve_triangular(x[0], x[1], /*upper=*/true, /*left=*/false); })},
      {"linalg_solve_triangular64",
       one([](const Inputs& x) { return linalg::solve_triangular(x[0], x[1], /*upper=*/false); })},
      {"linalg_eigh",
       [](const Inputs& x) {
         auto [w, v] = linalg::eigh(x[0]);
         return Outputs{w, v * v.narrow(-2, 0, 1).sign()};
       }},
      {"linalg_eigh_upper64",
       [](const Inputs& x) {
         auto [w, v] = linalg::eigh(x[0], "U");
         return Outputs{w, v * v.narrow(-2, 0, 1).sign()};
       }},
      {"linalg_eigvalsh", one([](const Inputs& x) { return linalg::eigvalsh(x[0]); })},
      {"linalg_matrix_power",
       [](const Inputs& x) {
         return Outputs{linalg::matrix_power(x[0], 3), linalg::matrix_power(x[0], 0), linalg::matrix_power(x[0], 1)};
       }},
      {"linalg_matrix_power_negative", one([](const Inputs& x) { return linalg::matrix_power(x[0], -2); })},
      {"linalg_vector_norm",
       [](const Inputs& x) {
         const double inf = std::numeric_limits<double>::infinity();
         using linalg::vector_norm;
         return Outputs{vector_norm(x[0]),
                        vector_norm(x[0], 1, Shape{1}),
                        vector_norm(x[0], inf, Shape{0}),
                        vector_norm(x[0], -inf, Shape{1}, /*keepdim=*/true),
                        vector_norm(x[0], 0, Shape{1}),
                        vector_norm(x[0], 3.5, Shape{0, 1}),
                        vector_norm(x[0].narrow(1, 0, 6), -1.5, Shape{1}),
                        vector_norm(x[0], 2, Shape{1}, false, kFloat64)};
       }},
      {"linalg_matrix_norm",
       [](const Inputs& x) {
         const double inf = std::numeric_limits<double>::infinity();
         using linalg::matrix_norm;
         return Outputs{matrix_norm(x[0]),
                        matrix_norm(x[0], 1),
                        matrix_norm(x[0], -1),
                        matrix_norm(x[0], inf),
                        matrix_norm(x[0], -inf, {-2, -1}, /*keepdim=*/true),
                        matrix_norm(x[0], "fro", {0, 2}),
                        matrix_norm(x[0], 1, {2, 0})};
       }},
      // the SVD half (singular vectors signed as the script signs them: U's first row positive)
      {"linalg_svd", [](const Inputs& x) { return svd_outputs(x[0], false, 3); }},
      {"linalg_svd_wide64", [](const Inputs& x) { return svd_outputs(x[0], false, 3); }},
      {"linalg_svd_full", [](const Inputs& x) { return svd_outputs(x[0], true, 5); }},
      {"linalg_svd_full_wide64", [](const Inputs& x) { return svd_outputs(x[0], true, 5); }},
      {"linalg_svdvals", one([](const Inputs& x) { return linalg::svdvals(x[0]); })},
      {"linalg_pinv",
       [](const Inputs& x) {
         using linalg::pinv;
         return Outputs{pinv(x[0]),
                        pinv(x[0].transpose(-2, -1)),
                        pinv(x[1]),
                        pinv(x[1], std::optional<double>(0.5)),  // atol
                        pinv(x[1], std::nullopt, /*rtol=*/0.2),
                        pinv(x[2], std::nullopt, std::nullopt, /*hermitian=*/true),
                        pinv(x[2].narrow(0, 0, 2).narrow(1, 0, 2).to(kFloat32), /*rcond=*/0.3)};
       }},
      {"linalg_matrix_rank",
       [](const Inputs& x) {
         using linalg::matrix_rank;
         return Outputs{matrix_rank(x[0]), matrix_rank(x[0], std::optional<double>(0.9)), matrix_rank(x[0], std::nullopt, 0.5),
                        matrix_rank(x[1], std::nullopt, std::nullopt, /*hermitian=*/true),
                        matrix_rank(x[0], /*tol=*/1.5)};
       }},
      {"linalg_matrix_norm_svd",
       [](const Inputs& x) {
         using linalg::matrix_norm;
         return Outputs{matrix_norm(x[0], 2),
                        matrix_norm(x[0], -2),
                        matrix_norm(x[0], "nuc"),
                        matrix_norm(x[0], 2, {0, 2}, /*keepdim=*/true),
                        matrix_norm(x[0], "nuc", {2, 1}),
                        linalg::norm(x[0][0], 2),
                        linalg::norm(x[0][0], "nuc")};
       }},
      {"linalg_lstsq_gelsd", [](const Inputs& x) { return lstsq_outputs(x, std::nullopt, "gelsd"); }},
      {"linalg_lstsq_default", [](const Inputs& x) { return lstsq_outputs(x, std::nullopt, std::nullopt); }},
      {"linalg_lstsq_vector_gels", [](const Inputs& x) { return lstsq_outputs(x, std::nullopt, "gels"); }},
      {"linalg_lstsq_rank_deficient", [](const Inputs& x) { return lstsq_outputs(x, std::nullopt, "gelsd"); }},
      {"linalg_lstsq_wide_gelss", [](const Inputs& x) { return lstsq_outputs(x, 0.1, "gelss"); }},
      {"linalg_lstsq_broadcast", [](const Inputs& x) { return lstsq_outputs(x, std::nullopt, "gelsy"); }},
      {"linalg_qr", [](const Inputs& x) { return qr_outputs(x[0], "reduced"); }},
      {"linalg_qr_wide64", [](const Inputs& x) { return qr_outputs(x[0], "reduced"); }},
      {"linalg_qr_complete", [](const Inputs& x) { return qr_outputs(x[0], "complete"); }},
      {"linalg_qr_complete_wide64", [](const Inputs& x) { return qr_outputs(x[0], "complete"); }},
      {"linalg_qr_r", [](const Inputs& x) { return qr_outputs(x[0], "r"); }},
      {"linalg_qr_zero_column", [](const Inputs& x) { return qr_outputs(x[0], "complete"); }},
      {"linalg_norm",
       [](const Inputs& x) {
         const double inf = std::numeric_limits<double>::infinity();
         return Outputs{linalg::norm(x[0]),
                        linalg::norm(x[0], inf),
                        linalg::norm(x[0][0], 1),
                        linalg::norm(x[0], "fro"),
                        linalg::norm(x[0], 3, Shape{1}),
                        linalg::norm(x[0], -1, Shape{1, 0}, /*keepdim=*/true)};
       }},
  };
  static bool unary_added = [] {
    // Every EMBER_UNARY op of ops.def (with its default parameters), and the other unary ops.
    const std::pair<const char*, Tensor (*)(const Tensor&)> unary[] = {
#define EMBER_UNARY(name, domain, params, args) {#name, [](const Tensor& x) { return ember::name(x); }},
#include "ember/tensor/ops.def"
        {"neg", [](const Tensor& x) { return neg(x); }},
        {"relu", [](const Tensor& x) { return relu(x); }},
        {"square", [](const Tensor& x) { return square(x); }}};
    for (const auto& [name, f] : unary) {
      (*table)[std::string("unary_") + name] = unary_case(f);
      (*table)[std::string("unary64_") + name] = unary_case(f);
    }
    for (const char* prefix : {"unary_", "unary64_"}) {
      (*table)[std::string(prefix) + "gelu"] = one([](const Inputs& x) { return gelu(x[0]); });
      (*table)[std::string(prefix) + "gelu_tanh"] = one([](const Inputs& x) { return gelu(x[0], "tanh"); });
    }
    return true;
  }();
  (void)unary_added;
  return *table;
}

// Case names present in the reference file.
std::vector<std::string> reference_cases() {
  std::vector<std::string> names;
  for (const auto& [key, t] : testing::reference()) {
    const auto dot = key.rfind(".in0");
    if (dot != std::string::npos && dot + 4 == key.size()) names.push_back(key.substr(0, dot));
  }
  return names;
}

// CUDA sums floats in float (the CPU in double), so its tolerances are wider.
double rtol_for(DType d, Device device) {
  const bool gpu = device.is_cuda();
  switch (d) {
    case kFloat64:
      return 1e-10;
    case kFloat32:
      return gpu ? 2e-4 : 2e-5;
    case kFloat16:
      return gpu ? 5e-3 : 2e-3;
    case kBFloat16:
      return gpu ? 2e-2 : 1e-2;
    default:
      return 0;
  }
}

// Every case runs on the CPU and on CUDA (skipped, and reported so, without a GPU).
class ReferenceTest : public ::testing::TestWithParam<std::tuple<DeviceType, std::string>> {};

TEST_P(ReferenceTest, MatchesPyTorch) {
  const Device device(std::get<0>(GetParam()));
  const std::string name = std::get<1>(GetParam());
  if (device.is_cuda() && !cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto& ref = testing::reference();
  auto it = cases().find(name);
  ASSERT_NE(it, cases().end()) << "no C++ case for reference case " << name;
  Inputs in;
  for (int i = 0; ref.count(name + ".in" + std::to_string(i)); ++i)
    in.push_back(ref.at(name + ".in" + std::to_string(i)).to(device));
  Outputs out = it->second(in);
  for (Tensor& t : out) {
    EXPECT_EQ(t.device(), device) << name;
    t = t.cpu();
  }
  int n_expected = 0;
  while (ref.count(name + ".out" + std::to_string(n_expected))) ++n_expected;
  ASSERT_EQ(static_cast<int>(out.size()), n_expected);
  for (int i = 0; i < n_expected; ++i) {
    const Tensor& expected = ref.at(name + ".out" + std::to_string(i));
    const double rtol = rtol_for(expected.dtype(), device);
    EXPECT_TRUE(testing::all_close(out[i], expected, rtol, rtol)) << name << " output " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, ReferenceTest,
                         ::testing::Combine(::testing::Values(kCPU, kCUDA), ::testing::ValuesIn(reference_cases())),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) == kCPU ? "cpu_" : "cuda_") +
                                  std::get<1>(info.param);
                         });

TEST(Reference, EveryCaseHasAReferenceEntry) {
  const auto names = reference_cases();
  for (const auto& [name, fn] : cases())
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name << " missing from ops.bin";
}

// The float32 convolution cases again under each CPU algorithm (im2col + GEMM, the direct
// kernels) with each instruction set this CPU has.
TEST(Reference, ConvolutionsMatchPyTorchWithEveryCpuAlgorithm) {
  const auto& ref = testing::reference();
  int checked = 0;
  testing::for_each_cpu_conv_algorithm([&](const std::string& setting) {
    for (const std::string& name : reference_cases()) {
      if (name.rfind("conv", 0) != 0 || ref.at(name + ".in0").dtype() != kFloat32) continue;
      Inputs in;
      for (int i = 0; ref.count(name + ".in" + std::to_string(i)); ++i)
        in.push_back(ref.at(name + ".in" + std::to_string(i)));
      SCOPED_TRACE(name + ", " + setting);
      EXPECT_TRUE(testing::all_close(cases().at(name)(in).at(0), ref.at(name + ".out0"), 2e-5, 2e-5));
      ++checked;
    }
  });
  EXPECT_GE(checked, 2 * 6);  // six float32 convolution cases under at least two settings
}

}  // namespace
}  // namespace ember
