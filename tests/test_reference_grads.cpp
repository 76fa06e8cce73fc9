// Gradients against PyTorch's: tests/reference/grads.bin holds, per case, the inputs, the
// output, an upstream gradient and PyTorch's gradients (tools/gen_reference.py).
#include <functional>
#include <limits>

#include "helpers.h"

namespace ember {
namespace testing {
Tensor svd_invariants(const Tensor& a, bool full_matrices);  // test_linalg.cpp
Tensor qr_flat(const Tensor& a, const std::string& mode);    // test_linalg.cpp
}  // namespace testing
namespace {

namespace F = nn::functional;
using X = const std::vector<Tensor>&;

const std::map<std::string, std::function<Tensor(X)>>& cases() {
  static const auto* table = new std::map<std::string, std::function<Tensor(X)>>{
      {"cross_entropy", [](X x) { return F::cross_entropy(x[0], x[1]); }},
      {"cross_entropy_weight_ignore",
       [](X x) { return F::cross_entropy(x[0], x[1], F::CrossEntropyOptions().weight(x[2]).ignore_index(-100)); }},
      {"cross_entropy_smoothing",
       [](X x) { return F::cross_entropy(x[0], x[1], F::CrossEntropyOptions().weight(x[2]).label_smoothing(0.1)); }},
      {"cross_entropy_sum_4d",
       [](X x) { return F::cross_entropy(x[0], x[1], F::CrossEntropyOptions().reduction("sum")); }},
      {"cross_entropy_none",
       [](X x) {
         return F::cross_entropy(x[0], x[1], F::CrossEntropyOptions().reduction("none").label_smoothing(0.2));
       }},
      {"cross_entropy_probs",
       [](X x) { return F::cross_entropy(x[0], x[1], F::CrossEntropyOptions().label_smoothing(0.1)); }},
      {"nll_loss", [](X x) { return F::nll_loss(x[0], x[1]); }},
      {"mse_loss", [](X x) { return F::mse_loss(x[0], x[1]); }},
      {"bce_with_logits",
       [](X x) { return F::binary_cross_entropy_with_logits(x[0], x[1], F::BCEWithLogitsOptions().pos_weight(x[2])); }},
      {"layer_norm",
       [](X x) {
         return F::layer_norm(x[0], {4, 5}, x[1], x[2]);
       }},
      {"batch_norm_train", [](X x) { return F::batch_norm(x[0], {}, {}, x[1], x[2], true); }},
      {"batch_norm_eval", [](X x) { return F::batch_norm(x[0], x[1], x[2], x[3], x[4], false); }},
      {"matmul_broadcast", [](X x) { return matmul(x[0], x[1]); }},
      {"softmax", [](X x) { return x[0].softmax(1); }},
      {"conv2d_groups",
       [](X x) {
         return conv2d(x[0], x[1], x[2], {2, 2}, {1, 1}, {1, 1}, 2);
       }},
      {"max_pool2d",
       [](X x) {
         return max_pool2d(x[0], {3, 3}, {{2, 2}}, {1, 1});
       }},
      {"avg_pool2d",
       [](X x) {
         return avg_pool2d(x[0], {3, 3}, {{2, 2}}, {1, 1}, true);
       }},
      {"adaptive_avg_pool2d",
       [](X x) {
         return adaptive_avg_pool2d(x[0], {3, 2});
       }},
      {"gelu", [](X x) { return x[0].gelu(); }},
      {"logsumexp", [](X x) { return x[0].logsumexp({1}); }},
      {"var", [](X x) { return x[0].var({1}); }},
      {"amax_ties", [](X x) { return x[0].amax({1}); }},
      {"max_dim_ties", [](X x) { return std::get<0>(x[0].max(1)); }},
      {"maximum_ties", [](X x) { return maximum(x[0], x[1]); }},
      {"prod_zero", [](X x) { return x[0].prod(1); }},
      {"index_select_repeats",
       [](X x) {
         return x[0].index_select(0, tensor<int64_t>({4, 0, 4}).to(x[0].device()));
       }},
      {"cat",
       [](X x) {
         return cat({x[0], x[1]}, 1);
       }},
      {"norm", [](X x) { return x[0].norm(); }},
      {"l1_loss", [](X x) { return F::l1_loss(x[0], x[1]); }},
      {"smooth_l1_loss", [](X x) { return F::smooth_l1_loss(x[0], x[1], "mean", 0.5); }},
      {"smooth_l1_loss_sum", [](X x) { return F::smooth_l1_loss(x[0], x[1], "sum"); }},
      {"kl_div_batchmean", [](X x) { return F::kl_div(x[0], x[1], "batchmean"); }},
      {"kl_div_log_target", [](X x) { return F::kl_div(x[0], x[1], "sum", true); }},
      {"group_norm", [](X x) { return F::group_norm(x[0], 3, x[1], x[2]); }},
      {"conv2d_wide",
       [](X x) {
         return conv2d(x[0], x[1], x[2], {1, 1}, {1, 1});
       }},
      {"conv2d_pad2_nobias",
       [](X x) {
         return conv2d(x[0], x[1], {}, {1, 1}, {2, 2});
       }},
      {"conv_transpose2d",
       [](X x) {
         return conv_transpose2d(x[0], x[1], x[2], {2, 2}, {1, 1}, {1, 1}, 2);
       }},
      {"conv_transpose2d_dilation",
       [](X x) {
         return conv_transpose2d(x[0], x[1], {}, {2, 1}, {0, 1}, {0, 0}, 1, {1, 2});
       }},
      {"binary_cross_entropy",
       [](X x) { return F::binary_cross_entropy(x[0], x[1], F::BCELossOptions().weight(x[2])); }},
      {"binary_cross_entropy_none", [](X x) { return binary_cross_entropy(x[0], x[1], {}, "none"); }},
      {"interpolate_bilinear",
       [](X x) {
         return F::interpolate(x[0], F::InterpolateOptions().size(Shape{7, 3}).mode("bilinear"));
       }},
      {"interpolate_bilinear_align",
       [](X x) {
         return F::interpolate(x[0], F::InterpolateOptions().scale_factor(2.0).mode("bilinear").align_corners(true));
       }},
      {"interpolate_nearest",
       [](X x) {
         return F::interpolate(x[0], F::InterpolateOptions().size(Shape{5, 4}));
       }},
      {"leaky_relu", [](X x) { return x[0].leaky_relu(0.2); }},
      {"elu", [](X x) { return x[0].elu(0.7); }},
      {"index_long_repeats",
       [](X x) {
         return x[0].index({x[1], indexing::Slice(1, std::nullopt)});
       }},
      {"index_two_separated",
       [](X x) {
         return x[0].index({x[1], indexing::Slice(), x[2]});
       }},
      {"index_mask",
       [](X x) {
         return x[0].index({indexing::Slice(), x[1]});
       }},
      {"masked_select", [](X x) { return masked_select(x[0], x[1]); }},
      {"scatter", [](X x) { return x[0].scatter(0, x[1], x[2]); }},
      {"cumsum", [](X x) { return x[0].cumsum(1); }},
      {"sort_values", [](X x) { return std::get<0>(x[0].sort(0, true)); }},
      {"topk_values", [](X x) { return std::get<0>(x[0].topk(3)); }},
      {"einsum_three",
       [](X x) {
         return einsum("ab,bc,cd->da", {x[0], x[1], x[2]});
       }},
      {"einsum_bilinear",
       [](X x) {
         return einsum("bi,oij,bj->bo", {x[0], x[1], x[2]});
       }},
      {"flip",
       [](X x) {
         return x[0].flip({0, 2});
       }},
      {"roll",
       [](X x) {
         return x[0].roll({1, -5}, {0, 1});
       }},
      {"repeat_interleave", [](X x) { return x[0].repeat_interleave(2, 1); }},
      {"repeat_interleave_tensor", [](X x) { return x[0].repeat_interleave(x[1], 0); }},
      {"dot", [](X x) { return dot(x[0], x[1]); }},
      {"outer", [](X x) { return outer(x[0], x[1]); }},
      {"expm1", [](X x) { return x[0].expm1(); }},
      {"round", [](X x) { return x[0].round(); }},
      {"huber_loss", [](X x) { return nn::functional::huber_loss(x[0], x[1], "mean", 0.7); }},
      {"lerp_tensor", [](X x) { return lerp(x[0], x[1], x[2]); }},
      {"normalize", [](X x) { return nn::functional::normalize(x[0]); }},
      {"cosine_similarity", [](X x) { return nn::functional::cosine_similarity(x[0], x[1]); }},
      // the fourth sweep
      {"tan", [](X x) { return x[0].tan(); }},
      {"asin_acos_atan", [](X x) { return x[0].asin() + x[0].acos() * 2 + x[0].atan() * 3; }},
      {"hyperbolic", [](X x) { return x[0].sinh() + x[0].cosh() * 2 + x[0].asinh() * 3; }},
      {"acosh_atanh", [](X x) { return (x[0] + 1.5).acosh() + x[0].atanh() * 2; }},
      {"log2_log10_exp2", [](X x) { return x[0].log2() + x[0].log10() * 2 + x[0].exp2() * 3; }},
      {"atan2", [](X x) { return atan2(x[0], x[1]); }},
      {"remainder", [](X x) { return remainder(x[0], x[1]); }},
      {"fmod", [](X x) { return fmod(x[0], x[1]); }},
      {"remainder_scalar", [](X x) { return remainder(x[0], 1.5); }},
      {"diagonal", [](X x) { return diagonal(x[0], -1, 2, 1); }},
      {"diag_vector", [](X x) { return diag(x[0], 1); }},
      {"trace", [](X x) { return trace(x[0]); }},
      {"conv1d", [](X x) { return F::conv1d(x[0], x[1], x[2], 2, 1, 1, 2); }},
      {"max_pool1d", [](X x) { return F::max_pool1d(x[0], 3, 2, 1); }},
      {"avg_pool1d", [](X x) { return F::avg_pool1d(x[0], 3, 2, 1); }},
      {"pad_reflect", [](X x) { return F::pad(x[0], F::PadFuncOptions({3, 1, 2, 3}).mode("reflect")); }},
      {"pad_replicate", [](X x) { return F::pad(x[0], F::PadFuncOptions({2, 4, 3, 0}).mode("replicate")); }},
      {"pad_circular", [](X x) { return F::pad(x[0], F::PadFuncOptions({5, 1, 2, 4}).mode("circular")); }},
      {"pad_constant_crop", [](X x) { return F::pad(x[0], F::PadFuncOptions({-1, 2, 1, -2, 1, 0}).value(0.5)); }},
      {"prelu", [](X x) { return F::prelu(x[0], x[1]); }},
      {"instance_norm_affine", [](X x) { return F::instance_norm(x[0], {}, {}, x[1], x[2]); }},
      // the sixth sweep
      {"erfinv", [](X x) { return x[0].erfinv(); }},
      {"cumprod", [](X x) { return x[0].cumprod(1); }},
      {"cumprod_zeros", [](X x) { return cumprod(x[0], 1); }},
      {"median_dim", [](X x) { return std::get<0>(median(x[0], 1)); }},
      {"nanmedian_all", [](X x) { return nanmedian(x[0]); }},
      // torch::linalg
      {"linalg_solve", [](X x) { return linalg::solve(x[0], x[1]); }},
      {"linalg_solve_vector", [](X x) { return linalg::solve(x[0], x[1]); }},
      {"linalg_solve_right", [](X x) { return linalg::solve(x[0], x[1], /*left=*/false); }},
      {"linalg_inv", [](X x) { return linalg::inv(x[0]); }},
      {"linalg_det", [](X x) { return linalg::det(x[0]); }},
      {"linalg_logabsdet", [](X x) { return std::get<1>(linalg::slogdet(x[0])); }},
      {"linalg_cholesky",
       [](X x) {
         return linalg::cholesky(matmul(x[0], x[0].transpose(-2, -1)) + 2.0 * eye(3, -1, TensorOptions().dtype(x[0].dtype()).device(x[0].device())));
       }},
      {"linalg_cholesky_upper",
       [](X x) {
         return linalg::cholesky(matmul(x[0], x[0].transpose(-2, -1)) + 2.0 * eye(4, -1, TensorOptions().dtype(x[0].dtype()).device(x[0].device())), true);
       }},
      {"linalg_solve_triangular", [](X x) { return linalg::solve_triangular(x[0], x[1], /*upper=*/true); }},
      {"linalg_solve_triangular_right_unit",
       [](X x) { return linalg::solve_triangular(x[0], x[1], /*upper=*/false, /*left=*/false, true); }},
      {"linalg_eigh",
       [](X x) {
         auto [w, v] = linalg::eigh(x[0] + x[0].transpose(-2, -1));
         return cat({w, v.pow(2).reshape({-1})});
       }},
      {"linalg_eigvalsh_upper", [](X x) { return linalg::eigvalsh(x[0] + x[0].transpose(-2, -1), "U"); }},
      {"linalg_matrix_power", [](X x) { return linalg::matrix_power(x[0], -3); }},
      {"linalg_vector_norm", [](X x) { return linalg::vector_norm(x[0], 3.5, Shape{1}); }},
      {"linalg_matrix_norm",
       [](X x) { return linalg::matrix_norm(x[0], std::numeric_limits<double>::infinity()); }},
      {"linalg_svd", [](X x) { return testing::svd_invariants(x[0], false); }},
      {"linalg_svd_full_wide", [](X x) { return testing::svd_invariants(x[0], true); }},
      {"linalg_svdvals", [](X x) { return linalg::svdvals(x[0]); }},
      {"linalg_pinv", [](X x) { return linalg::pinv(x[0]); }},
      {"linalg_pinv_tall", [](X x) { return linalg::pinv(x[0]); }},
      {"linalg_pinv_hermitian",
       [](X x) { return linalg::pinv(x[0] + x[0].transpose(-2, -1), std::nullopt, std::nullopt, true); }},
      {"linalg_matrix_norm_2", [](X x) { return linalg::matrix_norm(x[0], 2); }},
      {"linalg_matrix_norm_nuc", [](X x) { return linalg::matrix_norm(x[0], "nuc"); }},
      {"linalg_det_singular", [](X x) { return linalg::det(x[0]); }},  // cofactors, from their definition
      {"linalg_lstsq", [](X x) { return std::get<0>(linalg::lstsq(x[0], x[1])); }},
      {"linalg_lstsq_wide", [](X x) { return std::get<0>(linalg::lstsq(x[0], x[1], std::nullopt, "gelsd")); }},
      {"linalg_qr", [](X x) { return testing::qr_flat(x[0], "reduced"); }},
      {"linalg_qr_wide", [](X x) { return testing::qr_flat(x[0], "reduced"); }},
      {"linalg_qr_complete_square", [](X x) { return testing::qr_flat(x[0], "complete"); }},
  };
  return *table;
}

std::vector<std::string> names() {
  std::vector<std::string> out;
  for (const auto& [key, t] : testing::reference_grads())
    if (key.size() > 5 && key.compare(key.size() - 5, 5, ".gout") == 0) out.push_back(key.substr(0, key.size() - 5));
  return out;
}

// Every case on the CPU and on CUDA (skipped, and reported so, without a GPU), in float64.
class ReferenceGradTest : public ::testing::TestWithParam<std::tuple<DeviceType, std::string>> {};

TEST_P(ReferenceGradTest, MatchesPyTorch) {
  const Device device(std::get<0>(GetParam()));
  const std::string name = std::get<1>(GetParam());
  if (device.is_cuda() && !cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto& ref = testing::reference_grads();
  auto it = cases().find(name);
  ASSERT_NE(it, cases().end()) << "no C++ case for " << name;
  const auto wrt = ref.at(name + ".wrt").to_vector<int64_t>();
  std::vector<Tensor> inputs;
  for (int i = 0; ref.count(name + ".in" + std::to_string(i)); ++i) {
    Tensor t = ref.at(name + ".in" + std::to_string(i)).to(device, /*non_blocking=*/false, /*copy=*/true);
    if (std::find(wrt.begin(), wrt.end(), i) != wrt.end()) t.set_requires_grad(true);
    inputs.push_back(t);
  }
  const Tensor out = it->second(inputs);
  EXPECT_EQ(out.device(), device) << name;
  EXPECT_TRUE(testing::all_close(out.cpu(), ref.at(name + ".out0"), 1e-10, 1e-12)) << name << " forward";
  out.backward(ref.at(name + ".gout").to(device));
  for (size_t k = 0; k < wrt.size(); ++k)
    EXPECT_TRUE(testing::all_close(inputs[static_cast<size_t>(wrt[k])].grad().cpu(),
                                   ref.at(name + ".grad" + std::to_string(k)), 1e-9, 1e-11))
        << name << " gradient of input " << wrt[k];
}

INSTANTIATE_TEST_SUITE_P(Autograd, ReferenceGradTest,
                         ::testing::Combine(::testing::Values(kCPU, kCUDA), ::testing::ValuesIn(names())),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) == kCPU ? "cpu_" : "cuda_") +
                                  std::get<1>(info.param);
                         });

// The convolution cases again in float32 under each CPU algorithm (im2col + GEMM, the direct
// kernels) with each instruction set this CPU has: every pass against PyTorch's gradients.
TEST(ReferenceGrads, ConvolutionsInFloat32MatchPyTorchWithEveryCpuAlgorithm) {
  const auto& ref = testing::reference_grads();
  int checked = 0;
  testing::for_each_cpu_conv_algorithm([&](const std::string& setting) {
    for (const std::string& name : names()) {
      if (name.rfind("conv", 0) != 0) continue;
      const auto wrt = ref.at(name + ".wrt").to_vector<int64_t>();
      std::vector<Tensor> inputs;
      for (int i = 0; ref.count(name + ".in" + std::to_string(i)); ++i) {
        Tensor t = ref.at(name + ".in" + std::to_string(i)).to(kFloat32);
        if (std::find(wrt.begin(), wrt.end(), i) != wrt.end()) t.set_requires_grad(true);
        inputs.push_back(t);
      }
      const Tensor out = cases().at(name)(inputs);
      SCOPED_TRACE(name + ", " + setting);
      EXPECT_TRUE(testing::all_close(out, ref.at(name + ".out0").to(kFloat32), 1e-4, 1e-4));
      out.backward(ref.at(name + ".gout").to(kFloat32));
      for (size_t k = 0; k < wrt.size(); ++k)
        EXPECT_TRUE(testing::all_close(inputs[static_cast<size_t>(wrt[k])].grad(),
                                       ref.at(name + ".grad" + std::to_string(k)).to(kFloat32), 1e-4, 1e-4))
            << "gradient of input " << wrt[k];
      ++checked;
    }
  });
  EXPECT_GE(checked, 2 * 4);  // four convolution cases under at least two settings
}

}  // namespace
}  // namespace ember
