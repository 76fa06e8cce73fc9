// The LibTorch frontend's layers beyond their reference values (tests/test_nn_layers.cpp and
// test_reference*.cpp compare them with PyTorch): what they refuse, and the behaviours a fixed
// input cannot show (channel-wise dropout, output_size, binding a function as a module).
#include "helpers.h"

namespace ember {
namespace {

namespace F = nn::functional;
using testing::all_close;

TEST(ConvTranspose2d, IsTheAdjointOfConv2d) {
  // <conv2d(x, w), y> == <x, conv_transpose2d(y, w)> for the same weight and settings.
  manual_seed(3);
  const Tensor x = randn({2, 4, 9, 8}, kFloat64), w = randn({6, 2, 3, 2}, kFloat64);
  const Tensor y = randn(conv2d(x, w, {}, {2, 1}, {1, 1}, {1, 2}, 2).sizes(), kFloat64);
  const double lhs = (conv2d(x, w, {}, {2, 1}, {1, 1}, {1, 2}, 2) * y).sum().item<double>();
  const Tensor xt = conv_transpose2d(y, w, {}, {2, 1}, {1, 1}, {0, 0}, 2, {1, 2});
  ASSERT_EQ(xt.sizes(), x.sizes());
  EXPECT_NEAR(lhs, (x * xt).sum().item<double>(), 1e-10 * std::abs(lhs));
}

TEST(ConvTranspose2d, OutputSizePicksTheOutputPadding) {
  nn::ConvTranspose2d up(nn::ConvTranspose2dOptions(3, 2, 3).stride(2).padding(1));
  const Tensor x = randn({1, 3, 4, 4});
  EXPECT_EQ(up(x).sizes(), (Shape{1, 2, 7, 7}));
  EXPECT_EQ(up->forward(x, {8, 7}).sizes(), (Shape{1, 2, 8, 7}));
  EXPECT_TRUE(all_close(up->forward(x, {7, 7}), up(x), 0, 0));
  EXPECT_ERROR_CONTAINS(up->forward(x, {9, 7}), "valid sizes range from 7 to 8 in dim 0");
  std::ostringstream os;
  os << *up;
  EXPECT_EQ(os.str(), "ConvTranspose2d(3, 2, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1))");
}

TEST(ConvTranspose2d, RefusesBadArguments) {
  const Tensor x = randn({1, 4, 5, 5});
  EXPECT_ERROR_CONTAINS(conv_transpose2d(x, randn({3, 2, 3, 3})), "has 4 channels, but weight of shape [3, 2, 3, 3]");
  EXPECT_ERROR_CONTAINS(conv_transpose2d(x, randn({4, 2, 3, 3}), {}, {2, 2}, {0, 0}, {2, 0}),
                        "output_padding [2, 0] must be smaller than either stride [2, 2] or dilation [1, 1]");
  EXPECT_ERROR_CONTAINS(conv_transpose2d(x, randn({4, 2, 3, 3}), randn({3})), "bias must have shape [2]");
  EXPECT_ERROR_CONTAINS(conv_transpose2d(x, randn({4, 2, 3, 3}), {}, {1, 1}, {0, 0}, {0, 0}, 3),
                        "in_channels (4) must be divisible by groups (3)");
  EXPECT_ERROR_CONTAINS(conv_transpose2d(randn({1, 4, 1, 1}), randn({4, 2, 1, 1}), {}, {1, 1}, {1, 1}),
                        "gives an empty output");
  EXPECT_ERROR_CONTAINS(conv_transpose2d(x.to(kFloat64), randn({4, 2, 3, 3})), "must share a dtype");
  EXPECT_ERROR_CONTAINS(nn::ConvTranspose2d(nn::ConvTranspose2dOptions(4, 3, 3).groups(2)),
                        "must be divisible by groups (2)");
}

TEST(ConvTranspose2d, SixteenBitInputsComputeInFloat32OnTheCpu) {
  manual_seed(4);
  const Tensor x = randn({2, 3, 4, 4}), w = randn({3, 2, 3, 3}), b = randn({2});
  const Tensor ref = conv_transpose2d(x, w, b, {2, 2});
  const Tensor half = conv_transpose2d(x.to(kBFloat16), w.to(kBFloat16), b.to(kBFloat16), {2, 2});
  EXPECT_EQ(half.dtype(), kBFloat16);
  EXPECT_TRUE(all_close(half.to(kFloat32), ref, 3e-2, 3e-2));
}

TEST(Dropout2d, ZeroesWholeChannelsAndScalesTheRest) {
  manual_seed(5);
  nn::Dropout2d drop(0.5);
  const Tensor x = ones({16, 8, 3, 3});
  const Tensor y = drop(x);
  // Each (sample, channel) plane is all 0 or all 2.
  const Tensor plane_min = y.amin({2, 3}), plane_max = y.amax({2, 3});
  EXPECT_TRUE(all_close(plane_min, plane_max, 0, 0));
  EXPECT_TRUE((plane_max.eq(0.0) | plane_max.eq(2.0)).all().item<bool>());
  const double kept = plane_max.ne(0.0).to(kFloat32).mean().item<double>();
  EXPECT_GT(kept, 0.3);
  EXPECT_LT(kept, 0.7);
  drop->eval();
  EXPECT_TRUE(drop(x).is_same(x));
  // Unbatched [C, H, W]: one draw per channel.
  const Tensor u = F::dropout2d(ones({64, 2, 2}), 0.25, true);
  EXPECT_TRUE(all_close(u.amin({1, 2}), u.amax({1, 2}), 0, 0));
  EXPECT_ERROR_CONTAINS(F::dropout2d(ones({4, 5}), 0.5, true), "expected a 4-D [N, C, H, W] or 3-D [C, H, W] input");
  EXPECT_ERROR_CONTAINS(nn::Dropout2d(1.5), "Dropout2d: p must be in [0, 1], got 1.5");
}

TEST(Functional, WrapsAFunctionWithBoundArguments) {
  nn::Sequential model(nn::Functional(relu), nn::Functional(leaky_relu, 0.5),
                       nn::Functional([](Tensor x) { return x * 2.0; }));
  const Tensor x = tensor<float>({-2.0f, 3.0f});
  EXPECT_TRUE(all_close(model(x), tensor<float>({0.0f, 6.0f}), 0, 0));
  nn::Functional slope(leaky_relu, 0.5);
  EXPECT_TRUE(all_close(slope(x), tensor<float>({-1.0f, 3.0f}), 0, 0));
  EXPECT_ERROR_CONTAINS(nn::Functional(nn::FunctionalImpl::Function()), "Functional: the function is empty");
}

TEST(BinaryCrossEntropy, FiniteAtZeroAndOneAndRefusedUnderAutocast) {
  // A saturated sigmoid (exactly 0 or 1 in float32): the loss is clamped at 100 and the gradient
  // stays finite, where log(1 - x) composed by hand would give inf and NaN.
  Tensor x = tensor<float>({0.0f, 1.0f}).set_requires_grad(true);
  const Tensor loss = binary_cross_entropy(x, tensor<float>({1.0f, 0.0f}), {}, "sum");
  EXPECT_FLOAT_EQ(loss.item<float>(), 200.0f);
  loss.backward();
  EXPECT_TRUE((x.grad().abs() < std::numeric_limits<float>::infinity()).all().item<bool>());
  nn::BCELoss bce;
  EXPECT_ERROR_CONTAINS(bce(tensor<float>({1.5f}), tensor<float>({1.0f})),
                        "every input must be a probability in [0, 1], got values in [1.5, 1.5]");
  EXPECT_ERROR_CONTAINS(bce(tensor<float>({0.5f, 0.5f}), tensor<float>({1.0f})),
                        "the target of shape [1] must have the input's shape [2]");
  EXPECT_ERROR_CONTAINS(bce(tensor<float>({0.5f}), tensor<double>({1.0})), "of one floating dtype");
  EXPECT_ERROR_CONTAINS(binary_cross_entropy(tensor<float>({0.5f}), tensor<float>({1.0f}), {}, "average"),
                        "reduction must be 'mean', 'sum' or 'none', got 'average'");
  autocast::AutocastGuard autocast(kCPU, kBFloat16);
  EXPECT_ERROR_CONTAINS(bce(tensor<float>({0.5f}), tensor<float>({1.0f})),
                        "binary_cross_entropy (nn::BCELoss) is unsafe");
}

TEST(Interpolate, RefusesWhatItCannotDo) {
  const Tensor x = randn({1, 2, 3, 3});
  EXPECT_ERROR_CONTAINS(F::interpolate(x, F::InterpolateOptions()), "give exactly one of size and scale_factor");
  EXPECT_ERROR_CONTAINS(nn::Upsample(), "Upsample: give exactly one of size and scale_factor");
  EXPECT_ERROR_CONTAINS(F::interpolate(x, F::InterpolateOptions().scale_factor(2.0).mode("bicubic")),
                        "mode 'bicubic' is not supported");
  EXPECT_ERROR_CONTAINS(F::interpolate(x, F::InterpolateOptions().scale_factor(2.0).align_corners(true)),
                        "align_corners only applies to the linear modes");
  EXPECT_ERROR_CONTAINS(F::interpolate(randn({2, 3}), F::InterpolateOptions().scale_factor(2.0)),
                        "expected a 4-D [N, C, H, W] input, got [2, 3]");
  EXPECT_ERROR_CONTAINS(F::interpolate(x, F::InterpolateOptions().scale_factor(-1.0)), "must be positive");
  EXPECT_ERROR_CONTAINS(F::interpolate(x, F::InterpolateOptions().scale_factor(0.1)), "must both be non-empty");
  // Upsampling by 2 with nearest repeats each pixel into a 2 x 2 block.
  const Tensor y =
      nn::Upsample(nn::UpsampleOptions().scale_factor(2.0))(tensor<float>({1.0f, 2.0f, 3.0f, 4.0f}, Shape{1, 1, 2, 2}));
  EXPECT_TRUE(all_close(y, tensor<float>({1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}, Shape{1, 1, 4, 4}), 0, 0));
}

TEST(Activations, ModulesPrintAsPyTorch) {
  std::ostringstream os;
  os << *nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.2)) << " " << *nn::ELU() << " " << *nn::LogSoftmax(1)
     << " " << *nn::Softplus() << " " << *nn::Dropout2d(0.25);
  EXPECT_EQ(os.str(),
            "LeakyReLU(negative_slope=0.2) ELU(alpha=1) LogSoftmax(dim=1) Softplus(beta=1, threshold=20) "
            "Dropout2d(p=0.25)");
}

}  // namespace
}  // namespace ember
