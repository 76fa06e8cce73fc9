// Every differentiable op against float64 central finite differences, with broadcasting
// and non-contiguous inputs (views taken inside the function under test).
#include <limits>
#include <random>

#include "helpers.h"

namespace ember {
namespace testing {
Tensor svd_invariants(const Tensor& a, bool full_matrices);  // test_linalg.cpp
Tensor qr_flat(const Tensor& a, const std::string& mode);    // test_linalg.cpp
}  // namespace testing
namespace {

using autograd::gradcheck;
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

struct Case {
  std::string name;
  Fn f;
  std::vector<Shape> shapes;
  bool positive = false;  // inputs drawn in [0.5, 1.5) (log, sqrt, pow, div)
};

std::vector<Case> cases() {
  using X = const std::vector<Tensor>&;
  return {
      {"add_broadcast", [](X x) { return x[0] + x[1]; }, {{3, 1, 4}, {2, 4}}},
      {"add_alpha", [](X x) { return add(x[0], x[1], 2.5); }, {{2, 3}, {3}}},
      {"sub_noncontig", [](X x) { return x[0] - x[1].t(); }, {{4, 3}, {3, 4}}},
      {"mul_broadcast", [](X x) { return x[0] * x[1]; }, {{2, 3, 4}, {3, 1}}},
      {"div", [](X x) { return x[0] / x[1]; }, {{3, 4}, {4}}, true},
      {"pow_tensor", [](X x) { return x[0].pow(x[1]); }, {{3, 4}, {4}}, true},
      {"pow_scalar", [](X x) { return x[0].pow(2.5); }, {{5}}, true},
      {"scalar_ops", [](X x) { return (2.0 - x[0]) * 3.0 / 4.0 + 1.0; }, {{5}}},
      {"rdiv", [](X x) { return 2.0 / x[0]; }, {{5}}, true},
      {"maximum", [](X x) { return maximum(x[0], x[1]); }, {{3, 4}, {4}}},
      {"minimum", [](X x) { return minimum(x[0], x[1]); }, {{3, 1}, {1, 4}}},
      {"where", [](X x) { return where(x[0] > 0.0, x[0], x[1]); }, {{3, 4}, {4}}},
      {"masked_fill", [](X x) { return x[0].masked_fill(x[0] > 0.5, 2.0); }, {{3, 4}}},
      {"clamp", [](X x) { return x[0].clamp(-0.5, 0.5); }, {{10}}},
      {"neg_abs", [](X x) { return x[0].neg().abs(); }, {{6}}},
      {"exp", [](X x) { return x[0].exp(); }, {{2, 3}}},
      {"log", [](X x) { return x[0].log(); }, {{2, 3}}, true},
      {"log1p", [](X x) { return x[0].log1p(); }, {{2, 3}}, true},
      {"sqrt", [](X x) { return x[0].sqrt(); }, {{2, 3}}, true},
      {"rsqrt", [](X x) { return x[0].rsqrt(); }, {{2, 3}}, true},
      {"sin_cos", [](X x) { return x[0].sin() * x[0].cos(); }, {{2, 3}}},
      {"tanh", [](X x) { return x[0].tanh(); }, {{2, 3}}},
      {"sigmoid", [](X x) { return x[0].sigmoid(); }, {{2, 3}}},
      {"relu", [](X x) { return x[0].relu(); }, {{2, 3}}},
      {"gelu", [](X x) { return x[0].gelu(); }, {{2, 3}}},
      {"gelu_tanh", [](X x) { return x[0].gelu("tanh"); }, {{2, 3}}},
      {"silu", [](X x) { return x[0].silu(); }, {{2, 3}}},
      {"square", [](X x) { return x[0].square(); }, {{2, 3}}},
      {"reciprocal", [](X x) { return x[0].reciprocal(); }, {{2, 3}}, true},
      {"erf", [](X x) { return erf(x[0]); }, {{2, 3}}},
      {"sum_all", [](X x) { return x[0].sum(); }, {{3, 4}}},
      {"sum_dims",
       [](X x) {
         return x[0].sum({0, 2}, true);
       },
       {{2, 3, 4}}},
      {"sum_noncontig", [](X x) { return x[0].t().sum({1}); }, {{5, 6}}},
      {"mean", [](X x) { return x[0].mean({-1}); }, {{3, 4, 5}}},
      {"prod", [](X x) { return x[0].prod(1); }, {{3, 4}}},
      {"amax", [](X x) { return x[0].amax({1}); }, {{4, 6}}},
      {"amin_all", [](X x) { return x[0].amin(); }, {{4, 6}}},
      {"max_dim", [](X x) { return std::get<0>(x[0].max(1)); }, {{4, 6}}},
      {"min_dim_keepdim", [](X x) { return std::get<0>(x[0].min(0, true)); }, {{4, 6}}},
      {"var", [](X x) { return x[0].var({1}); }, {{4, 6}}},
      {"std_biased", [](X x) { return x[0].std({}, false); }, {{4, 6}}},
      {"norm_2", [](X x) { return x[0].norm(); }, {{4, 6}}},
      {"norm_1", [](X x) { return x[0].norm(1, {1}); }, {{4, 6}}},
      {"norm_3", [](X x) { return x[0].norm(3); }, {{4, 6}}},
      {"logsumexp", [](X x) { return x[0].logsumexp({1}); }, {{4, 6}}},
      {"mm", [](X x) { return mm(x[0], x[1]); }, {{5, 7}, {7, 3}}},
      {"mm_transposed", [](X x) { return x[0].t().matmul(x[1].t()); }, {{7, 5}, {3, 7}}},
      {"matmul_dot", [](X x) { return matmul(x[0], x[1]); }, {{6}, {6}}},
      {"matmul_mv", [](X x) { return matmul(x[0], x[1]); }, {{3, 6}, {6}}},
      {"matmul_vm", [](X x) { return matmul(x[0], x[1]); }, {{6}, {6, 4}}},
      {"matmul_batched_2d", [](X x) { return matmul(x[0], x[1]); }, {{2, 3, 4}, {4, 5}}},
      {"matmul_broadcast", [](X x) { return matmul(x[0], x[1]); }, {{2, 1, 4, 5}, {3, 5, 6}}},
      {"bmm", [](X x) { return bmm(x[0], x[1]); }, {{3, 4, 5}, {3, 5, 2}}},
      {"addmm", [](X x) { return addmm(x[0], x[1], x[2], 0.5, 2.0); }, {{3}, {2, 4}, {4, 3}}},
      {"linear", [](X x) { return linear(x[0], x[1], x[2]); }, {{2, 3, 5}, {4, 5}, {4}}},
      {"views",
       [](X x) {
         return x[0].view({4, 6}).t().reshape({2, 12}).unsqueeze(1).squeeze();
       },
       {{2, 3, 4}}},
      {"permute_flatten",
       [](X x) {
         return x[0].permute({2, 0, 1}).flatten(1).unflatten(1, {3, 2});
       },
       {{2, 3, 4}}},
      {"slice_select_narrow",
       [](X x) { return x[0].slice(1, 1, 5, 2).select(1, 1) + x[0].narrow(1, 0, 2).sum({1}); },
       {{3, 6}}},
      {"expand",
       [](X x) {
         return x[0].expand({3, 4, 5}) * 2.0;
       },
       {{4, 1}}},
      {"movedim", [](X x) { return x[0].movedim(0, 2); }, {{2, 3, 4}}},
      {"clone_contiguous", [](X x) { return x[0].t().contiguous().clone(); }, {{3, 4}}},
      {"cat",
       [](X x) {
         return cat({x[0], x[1]}, 1);
       },
       {{2, 3}, {2, 2}}},
      {"stack",
       [](X x) {
         return stack({x[0], x[1]}, 1);
       },
       {{2, 3}, {2, 3}}},
      {"split_chunk",
       [](X x) {
         auto p = x[0].split(2, 1);
         auto c = x[0].chunk(2, 0);
         return p[1].sum() * c[0].sum() + p[2].sum();
       },
       {{4, 5}}},
      {"index_select_repeats",
       [](X x) {
         return x[0].index_select(1, tensor<int64_t>({4, 0, 4, 2}));
       },
       {{3, 5}}},
      {"gather",
       [](X x) {
         return x[0].gather(1, tensor<int64_t>({0, 4, 1, 1, 3, 2}, Shape{3, 2}));
       },
       {{3, 5}}},
      {"scatter_add",
       [](X x) {
         return x[0].scatter_add(0, tensor<int64_t>({0, 1, 2, 0, 2, 2, 1, 0}, Shape{2, 4}), x[1]);
       },
       {{3, 4}, {2, 4}}},
      {"embedding",
       [](X x) {
         return embedding(x[0], tensor<int64_t>({1, 9, 0, 1}, Shape{2, 2}));
       },
       {{10, 3}}},
      {"tril_triu", [](X x) { return x[0].tril(-1) + x[0].triu(1) * 2.0; }, {{4, 5}}},
      {"softmax", [](X x) { return x[0].softmax(-1); }, {{4, 7}}},
      {"softmax_dim0", [](X x) { return x[0].softmax(0); }, {{3, 4, 5}}},
      {"log_softmax", [](X x) { return x[0].log_softmax(1); }, {{3, 4, 5}}},
      {"layer_norm",
       [](X x) {
         return nn::functional::layer_norm(x[0], {4, 5});
       },
       {{3, 4, 5}}},
      {"layer_norm_affine",
       [](X x) { return nn::functional::layer_norm(x[0], {5}, x[1], x[2]); },
       {{2, 3, 5}, {5}, {5}}},
      {"layer_norm_weight_only", [](X x) { return nn::functional::layer_norm(x[0], {6}, x[1]) * x[0]; }, {{4, 6}, {6}}},
      {"group_norm", [](X x) { return nn::functional::group_norm(x[0], 2, x[1], x[2]); }, {{2, 4, 3}, {4}, {4}}},
      {"group_norm_one_channel_per_group",
       [](X x) { return nn::functional::group_norm(x[0], 3) * x[0]; },
       {{2, 3, 2, 2}}},
      {"batch_norm_training",
       [](X x) { return nn::functional::batch_norm(x[0], Tensor(), Tensor(), x[1], x[2], true) * x[0]; },
       {{3, 2, 2, 2}, {2}, {2}}},
      {"batch_norm_one_value_planes",
       [](X x) { return nn::functional::batch_norm(x[0], Tensor(), Tensor(), x[1], Tensor(), true); },
       {{5, 3}, {3}}},
      {"batch_norm_eval",
       [](X x) {
         return nn::functional::batch_norm(x[0], tensor<double>({0.5, -1}), tensor<double>({2, 0.25}), x[1], x[2]) *
                x[0];
       },
       {{3, 2, 4}, {2}, {2}}},
      {"max_pool2d",
       [](X x) {
         return max_pool2d(x[0], {3, 3}, {{2, 2}}, {1, 1});
       },
       {{2, 3, 7, 7}}},
      {"conv2d", [](X x) { return conv2d(x[0], x[1], x[2]); }, {{2, 3, 6, 5}, {4, 3, 3, 2}, {4}}},
      {"conv2d_stride_pad",
       [](X x) {
         return conv2d(x[0], x[1], x[2], {2, 1}, {1, 2});
       },
       {{2, 3, 7, 6}, {2, 3, 3, 3}, {2}}},
      {"conv2d_dilation",
       [](X x) {
         return conv2d(x[0], x[1], {}, {1, 1}, {1, 1}, {2, 2});
       },
       {{1, 2, 7, 7}, {3, 2, 3, 3}}},
      {"conv2d_groups",
       [](X x) {
         return conv2d(x[0], x[1], x[2], {1, 1}, {1, 1}, {1, 1}, 2);
       },
       {{2, 4, 5, 5}, {6, 2, 3, 3}, {6}}},
      {"conv2d_1x1", [](X x) { return conv2d(x[0], x[1], x[2]); }, {{3, 4, 3, 3}, {2, 4, 1, 1}, {2}}},
      {"conv2d_unbatched", [](X x) { return conv2d(x[0], x[1]); }, {{2, 5, 5}, {3, 2, 3, 3}}},
      {"avg_pool2d",
       [](X x) {
         return avg_pool2d(x[0], {2, 2});
       },
       {{2, 3, 6, 6}}},
      {"avg_pool2d_pad",
       [](X x) {
         return avg_pool2d(x[0], {3, 3}, {{2, 2}}, {1, 1});
       },
       {{1, 2, 7, 7}}},
      {"avg_pool2d_exclude_pad_ceil",
       [](X x) {
         return avg_pool2d(x[0], {3, 3}, {{2, 2}}, {1, 1}, true, false);
       },
       {{1, 2, 8, 8}}},
      {"adaptive_avg_pool2d",
       [](X x) {
         return adaptive_avg_pool2d(x[0], {3, 2});
       },
       {{2, 3, 5, 7}}},
      {"adaptive_avg_pool2d_global",
       [](X x) {
         return adaptive_avg_pool2d(x[0], {1, 1});
       },
       {{2, 3, 4, 4}}},
      {"conv_transpose2d",
       [](X x) {
         return conv_transpose2d(x[0], x[1], x[2], {2, 2}, {1, 1}, {1, 1});
       },
       {{2, 3, 4, 3}, {3, 2, 3, 3}, {2}}},
      {"conv_transpose2d_groups_dilation",
       [](X x) {
         return conv_transpose2d(x[0], x[1], x[2], {1, 2}, {1, 0}, {0, 1}, 2, {2, 1});
       },
       {{1, 4, 4, 3}, {4, 1, 2, 3}, {2}}},
      {"conv_transpose2d_output_padding_beyond_stride",  // allowed below the dilation: the
       [](X x) {                                         // gradient is smaller than conv2d's output
         return conv_transpose2d(x[0], x[1], x[2], {1, 1}, {1, 0}, {1, 1}, 1, {2, 2});
       },
       {{1, 2, 3, 3}, {2, 1, 2, 2}, {1}}},
      {"conv_transpose2d_unbatched", [](X x) { return conv_transpose2d(x[0], x[1]); }, {{2, 3, 3}, {2, 3, 2, 2}}},
      {"binary_cross_entropy",  // probabilities and targets through a sigmoid; the weight has no gradient
       [](X x) {
         return binary_cross_entropy(x[0].sigmoid(), x[1].sigmoid(), tensor<double>({0.5, 1.0, 1.5, 2.0}), "sum");
       },
       {{3, 4}, {3, 4}}},
      {"interpolate_bilinear",
       [](X x) {
         namespace F = nn::functional;
         return F::interpolate(x[0], F::InterpolateOptions().size(Shape{5, 7}).mode("bilinear"));
       },
       {{1, 2, 3, 4}}},
      {"interpolate_bilinear_align",
       [](X x) {
         namespace F = nn::functional;
         return F::interpolate(x[0], F::InterpolateOptions().scale_factor(1.5).mode("bilinear").align_corners(true));
       },
       {{1, 2, 3, 4}}},
      {"interpolate_nearest",
       [](X x) {
         namespace F = nn::functional;
         return F::interpolate(x[0], F::InterpolateOptions().size(Shape{5, 3}));
       },
       {{2, 1, 3, 4}}},
      {"cumprod", [](X x) { return x[0].cumprod(1); }, {{3, 5}}},
      {"cumprod_last_dim_of_3d", [](X x) { return cumprod(x[0], -1); }, {{2, 3, 4}}},
      {"median_dim", [](X x) { return std::get<0>(x[0].median(0, true)); }, {{5, 3}}},
      // torch::linalg (each input made well-posed inside the function: SPD, symmetric)
      {"linalg_solve", [](X x) { return linalg::solve(x[0] + 3.0 * eye(3, -1, kFloat64), x[1]); }, {{3, 3}, {2, 3, 2}}},
      {"linalg_solve_vector",
       [](X x) { return linalg::solve(x[0] + 3.0 * eye(3, -1, kFloat64), x[1]); },
       {{2, 3, 3}, {2, 3}}},
      {"linalg_solve_right",
       [](X x) { return linalg::solve(x[0] + 3.0 * eye(3, -1, kFloat64), x[1], /*left=*/false); },
       {{2, 3, 3}, {4, 3}}},
      {"linalg_inv", [](X x) { return linalg::inv(x[0].t() + 3.0 * eye(4, -1, kFloat64)); }, {{4, 4}}},
      {"linalg_det", [](X x) { return linalg::det(x[0]); }, {{2, 3, 3}}},
      {"linalg_slogdet", [](X x) { return std::get<1>(linalg::slogdet(x[0])); }, {{2, 3, 3}}},
      {"linalg_cholesky",
       [](X x) { return linalg::cholesky(matmul(x[0], x[0].transpose(-2, -1)) + 2.0 * eye(3, -1, kFloat64)); },
       {{2, 3, 3}}},
      {"linalg_cholesky_upper",
       [](X x) { return linalg::cholesky(matmul(x[0], x[0].t()) + 2.0 * eye(4, -1, kFloat64), true); },
       {{4, 4}}},
      {"linalg_solve_triangular",
       [](X x) { return linalg::solve_triangular(x[0] + 3.0 * eye(3, -1, kFloat64), x[1], /*upper=*/true); },
       {{3, 3}, {3, 2}}},
      {"linalg_solve_triangular_right_unit",
       [](X x) {
         return linalg::solve_triangular(x[0], x[1], /*upper=*/false, /*left=*/false, /*unitriangular=*/true);
       },
       {{2, 3, 3}, {4, 3}}},
      {"linalg_eigh",
       [](X x) {
         auto [w, v] = linalg::eigh(x[0] + x[0].t());
         return cat({w, (v * v).reshape({-1})});  // squares: the vectors' signs are arbitrary
       },
       {{4, 4}}},
      {"linalg_eigvalsh_upper", [](X x) { return linalg::eigvalsh(x[0] + x[0].transpose(-2, -1), "U"); }, {{2, 3, 3}}},
      {"linalg_matrix_power",
       [](X x) { return linalg::matrix_power(x[0] + 3.0 * eye(3, -1, kFloat64), -3); },
       {{3, 3}}},
      {"linalg_vector_norm", [](X x) { return linalg::vector_norm(x[0], 3.5, Shape{1}); }, {{3, 4}}},
      {"linalg_matrix_norm", [](X x) { return linalg::matrix_norm(x[0], -1.0); }, {{2, 3, 4}}},
      // the SVD half (functions of the singular vectors independent of their signs)
      {"linalg_svd", [](X x) { return testing::svd_invariants(x[0], false); }, {{2, 4, 3}}},
      {"linalg_svd_full_wide", [](X x) { return testing::svd_invariants(x[0].t(), true); }, {{5, 3}}},
      {"linalg_svdvals", [](X x) { return linalg::svdvals(x[0]); }, {{3, 4}}},
      {"linalg_pinv", [](X x) { return linalg::pinv(x[0]); }, {{2, 3, 4}}},
      {"linalg_pinv_tall", [](X x) { return linalg::pinv(x[0].t()); }, {{3, 5}}},
      {"linalg_pinv_hermitian",
       [](X x) { return linalg::pinv(x[0] + x[0].t(), std::nullopt, std::nullopt, /*hermitian=*/true); },
       {{4, 4}}},
      {"linalg_matrix_norm_2",
       [](X x) {
         return linalg::matrix_norm(x[0], 2, {0, 2});
       },
       {{3, 2, 4}}},
      {"linalg_matrix_norm_nuc", [](X x) { return linalg::matrix_norm(x[0], "nuc"); }, {{4, 3}}},
      {"linalg_lstsq", [](X x) { return std::get<0>(linalg::lstsq(x[0], x[1])); }, {{2, 5, 3}, {1, 5, 2}}},
      {"linalg_lstsq_wide_vector", [](X x) { return std::get<0>(linalg::lstsq(x[0].t(), x[1])); }, {{5, 3}, {3}}},
      // QR: Q and R flattened into one output (their signs are fixed by the Householder convention)
      {"linalg_qr", [](X x) { return testing::qr_flat(x[0], "reduced"); }, {{2, 5, 3}}},
      {"linalg_qr_wide", [](X x) { return testing::qr_flat(x[0], "reduced"); }, {{3, 5}}},
      {"linalg_qr_complete_wide", [](X x) { return testing::qr_flat(x[0], "complete"); }, {{2, 3, 4}}},
  };
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class GradcheckTest : public ::testing::TestWithParam<Case> {};

TEST_P(GradcheckTest, AnalyticMatchesFiniteDifferences) {
  const Case& c = GetParam();
  manual_seed(42);
  std::vector<Tensor> inputs;
  for (const Shape& s : c.shapes) inputs.push_back(c.positive ? rand(s, kFloat64) + 0.5 : randn(s, kFloat64));
  const auto r = gradcheck(c.f, inputs);
  EXPECT_TRUE(r.ok) << c.name << ": " << r.message;
}

INSTANTIATE_TEST_SUITE_P(Ops, GradcheckTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

std::vector<std::pair<std::string, Tensor (*)(const Tensor&)>> unary_ops();

// Second derivatives through a create_graph backward (Note [Double backward]), for the same
// cases: each either matches finite differences of its first derivative, or — for the ops whose
// backward formula is a fused kernel not yet written with differentiable ops — refuses with an
// error naming the op. Never a silently wrong value.
bool double_backward_planned(const std::string& name) {
  for (const char* prefix :
       {"prod", "max_dim", "min_dim", "index_select", "gather", "scatter_add", "embedding", "max_pool", "conv2d",
        "avg_pool", "adaptive", "conv_transpose2d", "interpolate", "cumprod", "median"})
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}

class GradgradcheckTest : public ::testing::TestWithParam<Case> {};

TEST_P(GradgradcheckTest, SecondDerivativesMatchFiniteDifferencesOrRefuse) {
  const Case& c = GetParam();
  manual_seed(43);
  std::vector<Tensor> inputs;
  for (const Shape& s : c.shapes) inputs.push_back(c.positive ? rand(s, kFloat64) + 0.5 : randn(s, kFloat64));
  if (double_backward_planned(c.name)) {
    EXPECT_ERROR_CONTAINS(autograd::gradgradcheck(c.f, inputs), "is not differentiable in ember yet");
    return;
  }
  const auto r = autograd::gradgradcheck(c.f, inputs);
  EXPECT_TRUE(r.ok) << c.name << ": " << r.message;
}

INSTANTIATE_TEST_SUITE_P(Ops, GradgradcheckTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(Gradgradcheck, EveryUnaryOpBothSidesOfZero) {
  manual_seed(8);
  const Tensor positive = rand({2, 3}, kFloat64) + 0.5;
  for (const auto& [name, f] : unary_ops()) {
    for (const Tensor& x : {positive, -positive}) {
      const Tensor y = f(x);
      if (!(y.abs() < std::numeric_limits<double>::infinity()).all().item<bool>()) continue;
      const auto r = autograd::gradgradcheck([f = f](const std::vector<Tensor>& v) { return f(v[0]); }, {x});
      EXPECT_TRUE(r.ok) << name << " at " << x << ": " << r.message;
    }
  }
}

// Every EMBER_UNARY op of ember/tensor/ops.def, on both sides of zero: [0.5, 1.5) and
// [-1.5, -0.5), and on [-0.5, -0.25) ∪ [0.25, 0.5) and [2, 3) for the ops whose domain is
// narrower (asin, atanh, erfinv; acosh), each range where the op is finite there. An op added to the
// list is checked here with no line of its own (Note [One declaration per op]).
std::vector<std::pair<std::string, Tensor (*)(const Tensor&)>> unary_ops() {
  return {
#define EMBER_UNARY(name, domain, params, args) {#name, [](const Tensor& x) { return ember::name(x); }},
#include "ember/tensor/ops.def"
  };
}

class UnaryGradcheckTest : public ::testing::TestWithParam<std::pair<std::string, Tensor (*)(const Tensor&)>> {};

TEST_P(UnaryGradcheckTest, BothSidesOfZero) {
  const auto& [name, f] = GetParam();
  manual_seed(7);
  const Tensor positive = rand({2, 3}, kFloat64) + 0.5;
  const Tensor small = (positive - 0.5) * 0.25 + 0.25;  // [0.25, 0.5)
  int checked = 0;
  for (const Tensor& x : {positive, -positive, cat({small, -small}), positive + 1.5}) {
    const Tensor y = f(x);
    if (!(y.abs() < std::numeric_limits<double>::infinity()).all().item<bool>())
      continue;  // outside the op's domain (log, sqrt, asin, ...)
    const auto r = gradcheck([f = f](const std::vector<Tensor>& v) { return f(v[0]); }, {x});
    EXPECT_TRUE(r.ok) << name << " at " << x << ": " << r.message;
    ++checked;
  }
  const bool narrow = name == "asin" || name == "acos" || name == "atanh" || name == "acosh" || name == "erfinv";
  EXPECT_GE(checked, narrow ? 1 : 2) << name << ": finite on too few of the ranges";
}

INSTANTIATE_TEST_SUITE_P(Ops, UnaryGradcheckTest, ::testing::ValuesIn(unary_ops()),
                         [](const auto& info) { return info.param.first; });

TEST(Gradcheck, CatchesAWrongGradient) {
  // A function whose "gradient" is wrong on purpose: detach hides half of it from the tape.
  const auto r =
      autograd::gradcheck([](const std::vector<Tensor>& x) { return x[0] * x[0].detach(); }, {randn({3}, kFloat64)});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("gradient mismatch for input 0"), std::string::npos) << r.message;
}

TEST(Gradcheck, ProdWithZeros) {
  // One zero in a row: only the zero gets a gradient (the product of the others).
  const auto r = autograd::gradcheck([](const std::vector<Tensor>& x) { return x[0].prod(1); },
                                     {tensor<double>({2.0, 0.0, 3.0, 0.0, 0.0, 1.5, 4.0, 5.0, 6.0}, Shape{3, 3})});
  EXPECT_TRUE(r.ok) << r.message;
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

// Random compositions (seeded): an input of a random shape (rank 0-3, sizes 1-4), taken through
// a random view inside the function (transpose, every other element, a broadcast of a size-1
// dim, a narrow), then one op: a binary op against a second input whose shape broadcasts (dims
// dropped or set to 1), a reduction over a random dim subset, matmul against a random-rank
// operand, softmax, cat, or an index op with random indices. Each against float64 finite
// differences: the backward formulas on the shapes the fixed cases do not list.
TEST(Gradcheck, RandomShapesViewsAndOpsMatchFiniteDifferences) {
  using X = const std::vector<Tensor>&;
  testing::SeededInts in(2033);
  for (int draw = 0; draw < 200; ++draw) {
    Shape sizes(static_cast<size_t>(in(0, 3)));
    for (auto& v : sizes) v = in(1, 4);
    const int64_t rank = static_cast<int64_t>(sizes.size());
    // the view, applied inside f to the first input
    const int64_t view = in(0, 4), d0 = rank > 0 ? in(0, rank - 1) : 0, d1 = rank > 0 ? in(0, rank - 1) : 0;
    Shape leaf = sizes;
    if (view == 2 && rank > 0) leaf[static_cast<size_t>(d0)] = 2 * sizes[static_cast<size_t>(d0)];  // sliced back
    if (view == 3 && rank > 0) leaf[static_cast<size_t>(d0)] = 1;                                   // expanded back
    if (view == 4 && rank > 0) leaf[static_cast<size_t>(d0)] = sizes[static_cast<size_t>(d0)] + 1;  // narrowed back
    auto viewed = [=](const Tensor& t) {
      if (rank == 0) return t;
      switch (view) {
        case 1:
          return t.transpose(d0, d1);
        case 2:
          return t.slice(d0, 1, std::nullopt, 2);
        case 3:
          return t.expand(sizes);
        case 4:
          return t.narrow(d0, 1, sizes[static_cast<size_t>(d0)]);
        default:
          return t;
      }
    };
    const Shape shape = viewed(zeros(leaf)).sizes();  // after the view (a transpose swaps two sizes)
    manual_seed(static_cast<uint64_t>(draw));
    std::vector<Tensor> inputs{randn(leaf, kFloat64)};
    std::function<Tensor(X)> f;
    std::string what;
    switch (in(0, 6)) {
      case 0: {  // binary, broadcast
        Shape other = shape;
        while (!other.empty() && in(0, 3) == 0) other.erase(other.begin());
        for (auto& v : other)
          if (in(0, 2) == 0) v = 1;
        inputs.push_back(rand(other, kFloat64) + 0.5);  // positive: div and pow stay smooth
        const int64_t op = in(0, 5);
        what = detail::concat("binary op ", op, " with ", shape_str(other));
        f = [=](X t) {
          const Tensor a = viewed(t[0]), b = t[1];
          switch (op) {
            case 0:
              return a + b;
            case 1:
              return a - b * 2.0;
            case 2:
              return a * b;
            case 3:
              return a / b;
            case 4:
              return b.pow(a);
            default:
              return maximum(a, b * 0.1);
          }
        };
        break;
      }
      case 1: {  // a reduction over random dims
        Shape dims;
        for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
          if (in(0, 1) == 1) dims.push_back(in(0, 1) == 1 ? d - static_cast<int64_t>(shape.size()) : d);
        const bool keepdim = in(0, 1) == 1;
        const int64_t op = in(0, 5);
        what = detail::concat("reduction ", op, " over ", shape_str(dims), keepdim ? " keepdim" : "");
        f = [=](X t) {
          const Tensor a = viewed(t[0]);
          switch (op) {
            case 0:
              return a.sum(dims, keepdim);
            case 1:
              return a.mean(dims, keepdim);
            case 2:
              return (a * 0.1 + 1.0).prod(dims, keepdim);
            case 3:
              return a.logsumexp(dims, keepdim);
            case 4:
              return a.norm(2, dims, keepdim);
            default:
              return a.amax(dims, keepdim);
          }
        };
        break;
      }
      case 2: {  // matmul against an operand of random rank
        if (shape.empty()) continue;
        const int64_t K = shape.back();
        Shape other = in(0, 1) == 1 ? Shape{K} : Shape{K, in(1, 3)};
        if (other.size() == 2 && shape.size() >= 2 && in(0, 2) == 0) other.insert(other.begin(), 1);
        inputs.push_back(randn(other, kFloat64));
        what = detail::concat("matmul with ", shape_str(other));
        f = [=](X t) { return matmul(viewed(t[0]), t[1]); };
        break;
      }
      case 3: {  // softmax / log_softmax along a random dim
        if (shape.empty()) continue;
        const int64_t dim = in(0, static_cast<int64_t>(shape.size()) - 1), log = in(0, 1);
        what = detail::concat(log ? "log_softmax" : "softmax", " along ", dim);
        f = [=](X t) { return log ? viewed(t[0]).log_softmax(dim) : viewed(t[0]).softmax(dim); };
        break;
      }
      case 4: {  // cat with a second input along a random dim
        if (shape.empty()) continue;
        const int64_t dim = in(0, static_cast<int64_t>(shape.size()) - 1);
        Shape other = shape;
        other[static_cast<size_t>(dim)] = in(1, 3);
        inputs.push_back(randn(other, kFloat64));
        what = detail::concat("cat along ", dim, " with ", shape_str(other));
        f = [=](X t) { return cat({t[1], viewed(t[0])}, dim); };
        break;
      }
      case 5: {  // gather / index_select with random indices (repeats included)
        if (shape.empty()) continue;
        const int64_t dim = in(0, static_cast<int64_t>(shape.size()) - 1), size = shape[static_cast<size_t>(dim)];
        const bool use_gather = in(0, 1) == 1;
        Shape index_shape = use_gather ? shape : Shape{in(1, 5)};
        if (use_gather) index_shape[static_cast<size_t>(dim)] = in(1, 4);
        const Tensor index = randint(0, size, index_shape);
        what = detail::concat(use_gather ? "gather" : "index_select", " along ", dim);
        f = [=](X t) { return use_gather ? viewed(t[0]).gather(dim, index) : viewed(t[0]).index_select(dim, index); };
        break;
      }
      default: {  // scatter_add of a second input into the viewed first
        if (shape.empty()) continue;
        const int64_t dim = in(0, static_cast<int64_t>(shape.size()) - 1);
        Shape src_shape = shape;
        src_shape[static_cast<size_t>(dim)] = in(1, 4);
        const Tensor index = randint(0, shape[static_cast<size_t>(dim)], src_shape);
        inputs.push_back(randn(src_shape, kFloat64));
        what = detail::concat("scatter_add along ", dim);
        f = [=](X t) { return viewed(t[0]).scatter_add(dim, index, t[1]); };
      }
    }
    SCOPED_TRACE(detail::concat("draw ", draw, ": leaf ", shape_str(leaf), " view ", view, " (", d0, ", ", d1, ") -> ",
                                shape_str(shape), ", ", what));
    const auto r = gradcheck(f, inputs);
    EXPECT_TRUE(r.ok) << r.message;
  }
}

}  // namespace
}  // namespace ember
