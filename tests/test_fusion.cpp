// Folding an eval-mode BatchNorm into the Conv2d or Linear before it (Note [Folding batch_norm]):
// the fused layer's outputs against the two layers', in float64 to rounding and in float32; the
// Sequential pass; int8 quantization of a CNN with BatchNorm through it; and the errors.
#include "helpers.h"

namespace ember {
namespace {

namespace q = quantization;

// A BatchNorm whose running statistics and affine are not the defaults, from a few training
// batches of `shape` (offset and scaled, so that the fold has something to do).
template <class BN>
BN trained_batch_norm(int64_t features, const Shape& shape, bool affine = true) {
  BN bn(nn::BatchNormOptions(features).affine(affine).momentum(0.5));
  for (int i = 0; i < 3; ++i) bn(randn(shape) * 3 + 2);
  if (affine) {
    NoGradGuard no_grad;
    bn->weight.copy_(randn({features}));
    bn->bias.copy_(randn({features}));
  }
  bn->eval();
  return bn;
}

TEST(FuseBatchNorm, AConv2dWithItsBatchNormIsOneConv2dWithTheSameOutputs) {
  manual_seed(40);
  struct Case {
    nn::Conv2dOptions options;
    bool affine;
  };
  for (const Case& k : {Case{nn::Conv2dOptions(3, 6, 3).padding(1), true},
                        Case{nn::Conv2dOptions(4, 6, 3).stride(2).groups(2).bias(false), true},
                        Case{nn::Conv2dOptions(3, 5, 1), false}}) {
    SCOPED_TRACE(detail::concat(k.options.in_channels_, "->", k.options.out_channels_, " affine ", k.affine));
    nn::Conv2d conv(k.options);
    conv->eval();
    auto bn =
        trained_batch_norm<nn::BatchNorm2d>(k.options.out_channels_, {8, k.options.out_channels_, 5, 5}, k.affine);
    const Tensor x = randn({4, k.options.in_channels_, 7, 7});
    const Tensor before = bn(conv(x));
    const auto fused = nn::utils::fuse_conv_bn_eval(*conv, *bn);
    EXPECT_TRUE(fused->bias.defined());
    EXPECT_FALSE(fused->is_training());
    EXPECT_TRUE(testing::all_close(fused->forward(x), before, 1e-5, 1e-5));
    // in float64 the two differ by rounding only
    conv->to(kFloat64);
    bn->to(kFloat64);
    const Tensor x64 = x.to(kFloat64);
    EXPECT_TRUE(
        testing::all_close(nn::utils::fuse_conv_bn_eval(*conv, *bn)->forward(x64), bn(conv(x64)), 1e-12, 1e-12));
    EXPECT_EQ(nn::utils::fuse_conv_bn_eval(*conv, *bn)->weight.dtype(), kFloat64);
  }
}

TEST(FuseBatchNorm, ALinearWithItsBatchNorm1dIsOneLinear) {
  manual_seed(41);
  nn::Linear linear(5, 7);
  linear->eval();
  auto bn = trained_batch_norm<nn::BatchNorm1d>(7, {16, 7});
  const Tensor x = randn({9, 5});
  const Tensor before = bn(linear(x));
  const Tensor weight_before = linear->weight.clone(), mean_before = bn->running_mean.clone();
  const auto fused = nn::utils::fuse_linear_bn_eval(*linear, *bn);
  EXPECT_TRUE(testing::all_close(fused->forward(x), before, 1e-5, 1e-5));
  // the two layers are left as they were
  EXPECT_TRUE(testing::all_close(linear->weight, weight_before, 0, 0));
  EXPECT_TRUE(testing::all_close(bn->running_mean, mean_before, 0, 0));
  EXPECT_TRUE(testing::all_close(bn(linear(x)), before, 0, 0));
}

TEST(FuseBatchNorm, ASequentialFoldsEachPairAndKeepsTheOtherLayersAndNames) {
  manual_seed(42);
  nn::Sequential net(nn::Conv2d(nn::Conv2dOptions(2, 4, 3).padding(1)), nn::BatchNorm2d(4), nn::ReLU(),
                     nn::MaxPool2d(2), nn::Flatten(), nn::Linear(4 * 3 * 3, 8), nn::BatchNorm1d(8), nn::ReLU(),
                     nn::Linear(8, 3));
  for (int i = 0; i < 3; ++i) net(randn({16, 2, 6, 6}) * 2 + 1);  // running statistics
  net->eval();
  const Tensor x = randn({5, 2, 6, 6});
  const Tensor before = net(x);
  nn::Sequential fused = nn::utils::fuse_batch_norms(net);
  EXPECT_EQ(fused->named_children().keys(), (std::vector<std::string>{"0", "2", "3", "4", "5", "7", "8"}));
  EXPECT_EQ(fused->named_children()["2"], net->named_children()["2"]) << "the other layers are shared";
  EXPECT_TRUE(testing::all_close(fused(x), before, 1e-5, 1e-5));
  net->train();
  EXPECT_ERROR_CONTAINS(nn::utils::fuse_batch_norms(net), "fuse_batch_norms: the model must be in eval mode");
}

// Static int8 quantization has no BatchNorm: a CNN with one converts once it is folded, its
// Conv2d, folded BatchNorm and ReLU one int8 layer.
TEST(FuseBatchNorm, ACnnWithBatchNormQuantizesOnceFolded) {
  manual_seed(43);
  nn::Sequential net(nn::Conv2d(nn::Conv2dOptions(1, 4, 3).padding(1)), nn::BatchNorm2d(4), nn::ReLU(),
                     nn::MaxPool2d(2), nn::Flatten(), nn::Linear(4 * 4 * 4, 3));
  for (int i = 0; i < 3; ++i) net(randn({16, 1, 8, 8}));
  net->eval();
  const Tensor x = randn({16, 1, 8, 8});
  const Tensor y_float = net(x).detach();
  q::prepare(*net);
  net(x);
  EXPECT_ERROR_CONTAINS(q::convert(*net), "(1) BatchNorm2d has no int8 form");
  EXPECT_ERROR_CONTAINS(q::convert(*net), "fold it into the layer before it first (nn::utils::fuse_batch_norms)");
  manual_seed(43);
  nn::Sequential fresh(nn::Conv2d(nn::Conv2dOptions(1, 4, 3).padding(1)), nn::BatchNorm2d(4), nn::ReLU(),
                       nn::MaxPool2d(2), nn::Flatten(), nn::Linear(4 * 4 * 4, 3));
  for (int i = 0; i < 3; ++i) fresh(randn({16, 1, 8, 8}));
  fresh->eval();
  ASSERT_TRUE(testing::all_close(fresh(x), y_float, 0, 0));
  nn::Sequential folded = nn::utils::fuse_batch_norms(fresh);
  q::prepare(*folded);
  for (int i = 0; i < 4; ++i) folded(randn({16, 1, 8, 8}));
  nn::Sequential int8 = q::convert(*folded);
  std::ostringstream printed;
  printed << *int8;
  EXPECT_NE(printed.str().find("QuantizedConvReLU2d(1, 4"), std::string::npos) << printed.str();
  const Tensor y = int8(x);
  EXPECT_LT(((y - y_float).norm() / y_float.norm()).item<double>(), 0.05);
}

TEST(FuseBatchNorm, BadPairsAreNamed) {
  nn::Conv2d conv(3, 4, 3);
  nn::BatchNorm2d bn(4);
  EXPECT_ERROR_CONTAINS(nn::utils::fuse_conv_bn_eval(*conv, *bn),
                        "fuse_conv_bn_eval: Conv2d and BatchNorm2d must be in eval mode");
  conv->eval();
  bn->eval();
  nn::BatchNorm2d wider(5), untracked(nn::BatchNormOptions(4).track_running_stats(false));
  wider->eval();
  untracked->eval();
  EXPECT_ERROR_CONTAINS(nn::utils::fuse_conv_bn_eval(*conv, *wider),
                        "fuse_conv_bn_eval: BatchNorm2d of 5 features after Conv2d of 4 outputs");
  EXPECT_ERROR_CONTAINS(nn::utils::fuse_conv_bn_eval(*conv, *untracked), "keeps no running statistics");
  nn::BatchNorm1d one_d(4);
  one_d->eval();
  EXPECT_ERROR_CONTAINS(nn::utils::fuse_conv_bn_eval(*conv, *one_d),
                        "fuse_conv_bn_eval: a Conv2d folds a BatchNorm2d, got BatchNorm1d");
  nn::Linear linear(2, 4);
  linear->eval();
  EXPECT_ERROR_CONTAINS(nn::utils::fuse_linear_bn_eval(*linear, *bn),
                        "fuse_linear_bn_eval: a Linear folds a BatchNorm1d, got BatchNorm2d");
}

}  // namespace
}  // namespace ember
