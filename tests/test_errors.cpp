// Bad input never crashes: each class of mistake throws ember::Error naming the op and
// the shapes, dtypes, dims or devices involved.
#include <limits>

#include "helpers.h"

namespace ember {
namespace {

TEST(Errors, ShapeMismatch) {
  EXPECT_ERROR_CONTAINS(matmul(ones({2, 3}), ones({4, 5})),
                        "matmul: shapes [2, 3] and [4, 5] cannot be multiplied (3 != 4)");
  EXPECT_ERROR_CONTAINS(mm(ones({2, 3}), ones({3})), "mm: expected 2-D tensors, but got shapes [2, 3] and [3]");
  EXPECT_ERROR_CONTAINS(bmm(ones({2, 2, 3}), ones({3, 3, 2})), "bmm: batch sizes differ");
  EXPECT_ERROR_CONTAINS(ones({2, 3}) + ones({4}),
                        "add: shapes [2, 3] and [4] cannot be broadcast (size 3 vs 4 at dimension 1)");
  EXPECT_ERROR_CONTAINS(ones({2, 3}).view({4}), "view: shape [4] is invalid for input of size 6");
  EXPECT_ERROR_CONTAINS(ones({2, 3}).reshape({-1, -1}), "only one dimension can be inferred");
  EXPECT_ERROR_CONTAINS(ones({2, 3}).expand({3, 3}),
                        "expand: the expanded size of the tensor (3) must match the existing size (2)");
  EXPECT_ERROR_CONTAINS(cat({ones({2, 3}), ones({2, 4})}, 0), "cat: sizes of tensors must match except in dimension 0");
  EXPECT_ERROR_CONTAINS(stack({ones({2}), ones({3})}), "stack: expects each tensor to be equal size");
  EXPECT_ERROR_CONTAINS(conv2d(ones({1, 3, 5, 5}), ones({4, 2, 3, 3})),
                        "conv2d: input of shape [1, 3, 5, 5] has 3 channels");
  EXPECT_ERROR_CONTAINS(conv2d(ones({1, 3, 2, 2}), ones({4, 3, 3, 3})), "is smaller than the kernel");
  EXPECT_ERROR_CONTAINS(max_pool2d(ones({1, 1, 2, 2}), {3, 3}, {{1, 1}}, {2, 2}), "pad should be at most half");
  EXPECT_ERROR_CONTAINS(gather(ones({2, 3}), 1, ones({2}, kInt64)),
                        "gather: index tensor must have the same number of dimensions");
  Tensor t = ones({2, 3});
  EXPECT_ERROR_CONTAINS(t.add_(ones({4, 2, 3})),
                        "add_: output with shape [2, 3] doesn't match the broadcast shape [4, 2, 3]");
  EXPECT_ERROR_CONTAINS(t.copy_(ones({3, 2})), "copy_: shapes [2, 3] and [3, 2] cannot be broadcast");
}

TEST(Errors, DimOutOfRange) {
  Tensor t = ones({2, 3});
  EXPECT_ERROR_CONTAINS(t.sum({2}), "sum: dimension out of range (expected to be in range of [-2, 1], but got 2)");
  EXPECT_ERROR_CONTAINS(t.transpose(0, -3), "transpose: dimension out of range");
  EXPECT_ERROR_CONTAINS(t.softmax(5), "softmax: dimension out of range");
  EXPECT_ERROR_CONTAINS(t.select(1, 3), "select: index 3 out of range for dimension 1 of size 3");
  EXPECT_ERROR_CONTAINS(t.narrow(1, 2, 2), "narrow: start (2) + length (2) exceeds dimension 1 of size 3");
  EXPECT_ERROR_CONTAINS(t.permute({0, 0}), "permute: repeated dim");
  EXPECT_ERROR_CONTAINS(t.sum({0, 0}), "sum: dim 0 appears multiple times");
  EXPECT_ERROR_CONTAINS(t.size(2), "size: dimension out of range");
}

TEST(Errors, NegativeSizesAndOverflow) {
  EXPECT_ERROR_CONTAINS(zeros({2, -1}), "empty: negative dimension -1 in shape [2, -1]");
  EXPECT_ERROR_CONTAINS(empty({1LL << 40, 1LL << 40}), "overflows int64");
  EXPECT_ERROR_CONTAINS(empty({1LL << 62}), "needs more bytes than can be addressed");
  EXPECT_ERROR_CONTAINS(ones({2}).expand({1LL << 40, 1LL << 40, 2}), "overflows int64");
  EXPECT_ERROR_CONTAINS(arange(0, 10, -1), "arange: upper bound and larger bound inconsistent with step sign");
  EXPECT_ERROR_CONTAINS(arange(0, 1, 0), "arange: step must be nonzero");
  EXPECT_ERROR_CONTAINS(linspace(0, 1, -1), "linspace: number of steps must be non-negative");
  EXPECT_ERROR_CONTAINS(randint(5, 5, {2}), "randint: expects low < high");
  EXPECT_ERROR_CONTAINS(split(ones({4}), -1), "split: split_size must be positive");
}

TEST(Errors, DTypes) {
  Tensor i = ones({3}, kInt64);
  EXPECT_ERROR_CONTAINS(i.add_(1.5), "add_: result type float32 can't be cast to the desired output type int64");
  EXPECT_ERROR_CONTAINS(i.div_(2), "div_: result type float32 can't be cast to the desired output type int64");
  EXPECT_ERROR_CONTAINS(ones({2}, kBool) - ones({2}, kBool),
                        "sub: subtraction, the `-` operator, with two bool tensors");
  EXPECT_ERROR_CONTAINS(-ones({2}, kBool), "neg: negation, the `-` operator, on a bool tensor");
  EXPECT_ERROR_CONTAINS(add(i, i, 0.5), "for integral input tensors, argument alpha must not be a floating point");
  EXPECT_ERROR_CONTAINS(mm(ones({2, 2}), ones({2, 2}, kFloat64)),
                        "mm: expected both operands to have the same dtype, but got float32 and float64");
  EXPECT_ERROR_CONTAINS(i.mean(), "mean: could not infer output dtype");
  EXPECT_ERROR_CONTAINS(i.var(), "var: input dtype must be a floating point dtype, got int64");
  EXPECT_ERROR_CONTAINS(where(ones({2}), ones({2}), ones({2})),
                        "where: expected condition to be a bool tensor, but got float32");
  EXPECT_ERROR_CONTAINS(ones({2}).index_select(0, ones({1})),
                        "index_select: expected an int64 or int32 index tensor, but got float32");
  EXPECT_ERROR_CONTAINS(ones({2}).data_ptr<double>(),
                        "data_ptr: expected a tensor of dtype float64 but it has dtype float32");
  EXPECT_ERROR_CONTAINS(ones({2}, kInt32).pow(-1), "integers to negative integer powers are not allowed");
  EXPECT_ERROR_CONTAINS(conv2d(ones({1, 1, 3, 3}, kInt64), ones({1, 1, 1, 1}, kInt64)),
                        "conv2d: expected a floating point input, got int64");
  EXPECT_ERROR_CONTAINS(ones({2}, kInt32).uniform_(), "uniform_: expects a floating point tensor, got int32");
  EXPECT_ERROR_CONTAINS(masked_fill(ones({2}, kInt32), ones({2}, kBool), 0.5),
                        "masked_fill: value cannot be converted to type int32");
}

TEST(Errors, IndicesOutOfRange) {
  EXPECT_ERROR_CONTAINS(ones({2, 3}).index_select(1, tensor<int64_t>({0, 3})),
                        "index_select: index 3 is out of bounds for dimension 1 with size 3");
  EXPECT_ERROR_CONTAINS(ones({2, 3}).gather(1, tensor<int64_t>({-1, 0}, Shape{2, 1})),
                        "gather: index -1 is out of bounds");
  EXPECT_ERROR_CONTAINS(embedding(ones({4, 2}), tensor<int64_t>({4})),
                        "index 4 is out of bounds for dimension 0 with size 4");
  EXPECT_ERROR_CONTAINS(one_hot(tensor<int64_t>({0, 5}), 3),
                        "one_hot: class values must be smaller than num_classes (3), got 5");
  // counting the classes of INT64_MAX overflowed (UBSan, found by the random-arguments test)
  EXPECT_ERROR_CONTAINS(one_hot(tensor<int64_t>({0, std::numeric_limits<int64_t>::max()})),
                        "one_hot: can not count 9223372036854775807 + 1 classes");
  Tensor x = zeros({3});
  EXPECT_ERROR_CONTAINS(x.scatter_add_(0, tensor<int64_t>({7}), ones({1})), "scatter_add: index 7 is out of bounds");
  EXPECT_EQ(x.sum().item<float>(), 0.0f);  // nothing was written
}

TEST(Errors, EmptyReductions) {
  EXPECT_ERROR_CONTAINS(zeros({0}).max(), "max: expected reduction dim to be specified for input.numel() == 0");
  EXPECT_ERROR_CONTAINS(zeros({0, 3}).amax({0}), "amax: expected reduction dim 0 to have non-zero size");
  EXPECT_ERROR_CONTAINS(zeros({0}).argmax(), "argmax: expected a non-empty tensor");
  EXPECT_ERROR_CONTAINS(ones({3}).item(), "item: a tensor with 3 elements (shape [3]) cannot be converted to a Scalar");
}

TEST(Errors, DevicesAndUndefined) {
  EXPECT_ERROR_CONTAINS(Device("gpu"), "Device: expected 'cpu', 'cuda' or 'cuda:N', got 'gpu'");
  EXPECT_EQ(Device("cuda:1").index, 1);
  EXPECT_ERROR_CONTAINS(Device(kCPU, 1), "the CPU device has only index 0");
  if (!cuda::is_available()) {
    // Without a GPU (or without CUDA) asking for CUDA memory is a clear error, not a crash.
    const std::string msg = testing::error_of([] { (void)ones({2}, Device(kCUDA)); });
    EXPECT_NE(msg.find("CUDA"), std::string::npos) << msg;
  }
  Tensor undefined;
  EXPECT_ERROR_CONTAINS(undefined.sizes(), "this tensor is undefined");
  EXPECT_ERROR_CONTAINS(ones({2}) + undefined, "add: the input tensor is undefined");
  EXPECT_ERROR_CONTAINS(cat({}), "cat: expected a non-empty list of tensors");
  EXPECT_ERROR_CONTAINS(clamp(ones({2}), std::nullopt, std::nullopt),
                        "clamp: at least one of 'min' or 'max' must not be None");
  EXPECT_ERROR_CONTAINS(gelu(ones({2}), "fast"), "gelu: approximate must be 'none' or 'tanh'");
  EXPECT_ERROR_CONTAINS(set_num_threads(0), "set_num_threads: expected a positive number of threads, got 0");
}

// Found by Errors.RandomArgumentsReturnOrThrowAnEmberError (test_random_arguments.cpp); each was
// a crash (a read past a 0-d tensor's empty size list, a null impl, a division by zero) or an
// undefined conversion before.
TEST(Errors, ZeroDimensionalTensorsHaveNoSizeToReadButGatherLikePyTorch) {
  const Tensor s = full({}, 5.0);
  EXPECT_ERROR_CONTAINS(s.size(0), "size: dimension 0 of a 0-d tensor (it has no dimensions)");
  EXPECT_ERROR_CONTAINS(s.stride(-1), "stride: dimension -1 of a 0-d tensor");
  EXPECT_ERROR_CONTAINS(s.unflatten(0, {1}), "unflatten: dimension 0 of a 0-d tensor");
  // PyTorch: torch.tensor(5.).gather(0, torch.tensor(0)) == 5; scatter_add of 2 gives 7.
  const Tensor i0 = full({}, 0, kInt64);
  EXPECT_EQ(s.gather(0, i0).item<float>(), 5.0f);
  EXPECT_EQ(s.gather(0, i0).dim(), 0);
  EXPECT_EQ(s.scatter_add(0, i0, full({}, 2.0)).item<float>(), 7.0f);
  const Tensor w = full({}, 3.0).requires_grad_();
  (w.gather(0, i0) * 4.0).backward();
  EXPECT_EQ(w.grad().item<float>(), 4.0f);
}

TEST(Errors, AnUndefinedTensorAnswersQueriesAndRefusesWork) {
  Tensor u;
  // As LibTorch's: no gradient, a leaf without grad_fn (code asks this of an optional bias).
  EXPECT_FALSE(u.requires_grad());
  EXPECT_FALSE(u.grad().defined());
  EXPECT_EQ(u.grad_fn(), nullptr);
  EXPECT_TRUE(u.is_leaf());
  EXPECT_FALSE(u.retains_grad());
  EXPECT_ERROR_CONTAINS(u.add_(ones({2})), "add: the input tensor is undefined");
  EXPECT_ERROR_CONTAINS(u.mul_(ones({2})), "mul: the input tensor is undefined");
  EXPECT_ERROR_CONTAINS(u.detach(), "detach: the tensor is undefined");
  EXPECT_ERROR_CONTAINS(u.mutable_grad(), "mutable_grad: the tensor is undefined");
}

TEST(Errors, ChunksNearInt64sLimitDoNotOverflow) {
  // chunk computed ceil(n / chunks) as (n + chunks - 1) / chunks: signed overflow (UBSan).
  const auto pieces = ones({3}).chunk(std::numeric_limits<int64_t>::max());
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[2].sizes(), (Shape{1}));
  // split_with_sizes summed the sizes before comparing them with the dimension: overflow.
  EXPECT_ERROR_CONTAINS(split_with_sizes(ones({3}), {2, std::numeric_limits<int64_t>::max()}),
                        "split_with_sizes: split sizes [2, 9223372036854775807] sum to more than dimension 0's size 3");
}

TEST(Errors, SizesNearInt64sLimitAreRefusedNotOverflowed) {
  // Each was a signed overflow (UBSan, the asan preset) computing a size from the arguments.
  EXPECT_ERROR_CONTAINS(
      conv2d(ones({1, 1, 3, 3}), ones({1, 1, 1, 1}), Tensor(), {1, 1}, {std::numeric_limits<int64_t>::max(), 0}),
      "conv2d: the arguments make a size beyond int64's range");
  EXPECT_ERROR_CONTAINS(conv2d(ones({1, 2, 3, 3}), zeros({0, 2, 1, 1}), Tensor(), {1, 1}, {0, 0}, {1, 1},
                               std::numeric_limits<int64_t>::max()),
                        "conv2d: the arguments make a size beyond int64's range");
  EXPECT_ERROR_CONTAINS(
      max_pool2d(ones({1, 1, 3, 3}), {std::numeric_limits<int64_t>::max(), 1}, Int2{1, 1}, {1, 0}, {2, 1}),
      "max_pool2d: the arguments make a size beyond int64's range");
  EXPECT_ERROR_CONTAINS(
      conv_transpose2d(ones({1, 1, 2, 2}), ones({1, 1, 1, 1}), Tensor(), {std::numeric_limits<int64_t>::max(), 1}),
      "conv_transpose2d: the arguments make a size beyond int64's range");
  // An empty tensor may have other dims whose product overflows: its strides saturate.
  const Tensor empty_wide = zeros({0, int64_t{1} << 62, 4});
  EXPECT_EQ(empty_wide.numel(), 0);
  EXPECT_EQ(empty_wide.stride(2), 1);
  EXPECT_EQ(empty_wide.stride(1), 4);
  // slice's (end - start + step - 1) / step and stride * step overflowed for a huge step.
  const Tensor every_huge = arange(0, 5).slice(0, 1, std::nullopt, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(every_huge.sizes(), (Shape{1}));
  EXPECT_EQ(every_huge.item<float>(), 1.0f);
  EXPECT_EQ(arange(0, 5).slice(0, 0, std::nullopt, 2).to_vector<float>(), (std::vector<float>{0, 2, 4}));
  // index_select into an empty output copied rows of 0 bytes from a null pointer.
  EXPECT_EQ(zeros({3, 0}).index_select(0, tensor<int64_t>({2})).sizes(), (Shape{1, 0}));
}

TEST(Errors, NoChannelsAndAbsurdScalesAreNotCrashes) {
  // batch_norm divided numel by C to count the values per channel: with C = 0, SIGFPE.
  // PyTorch returns the empty input's shape.
  const Tensor y = nn::functional::batch_norm(zeros({2, 0, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true);
  EXPECT_EQ(y.sizes(), (Shape{2, 0, 3}));
  EXPECT_ERROR_CONTAINS(nn::functional::batch_norm(zeros({1, 2}), Tensor(), Tensor(), Tensor(), Tensor(), true),
                        "expected more than 1 value per channel when training");
  // interpolate converted floor(2 * 1e300) to int64 (undefined) and built maps as long as it.
  using nn::functional::InterpolateOptions;
  EXPECT_ERROR_CONTAINS(nn::functional::interpolate(ones({1, 1, 2, 2}), InterpolateOptions().scale_factor(1e300)),
                        "interpolate: scale_factor 1e+300 makes an output dimension of 2e+300");
  EXPECT_ERROR_CONTAINS(nn::functional::interpolate(
                            ones({1, 1, 2, 2}), InterpolateOptions().size(Shape{int64_t{1} << 40, int64_t{1} << 40})),
                        "interpolate: the number of elements of shape [1, 1, 1099511627776, 1099511627776] overflows");
  // Pooling, as PyTorch: only the batch may be empty. A ceil_mode window over an empty plane
  // gave an output of -inf before.
  EXPECT_ERROR_CONTAINS(max_pool2d(zeros({1, 1, 0, 2}), {2, 2}, Int2{1, 1}, {1, 1}, {1, 1}, true),
                        "max_pool2d: input of shape (N, C, H, W) [1, 1, 0, 2] is empty in C, H or W");
  EXPECT_ERROR_CONTAINS(max_pool2d(zeros({0, 2, 2}), {2, 2}), "max_pool2d: input of shape (N, C, H, W) [1, 0, 2, 2]");
  EXPECT_ERROR_CONTAINS(avg_pool2d(zeros({1, 0, 2, 2}), {2, 2}),
                        "avg_pool2d: input of shape (N, C, H, W) [1, 0, 2, 2]");
  EXPECT_EQ(max_pool2d(zeros({0, 1, 2, 2}), {2, 2}).sizes(), (Shape{0, 1, 1, 1}));
  EXPECT_EQ(avg_pool2d(zeros({0, 1, 2, 2}), {2, 2}).sizes(), (Shape{0, 1, 1, 1}));
}

// The ops' native halves are public (tensor/ops.h) and check what the autograd nodes always get
// right: the backward kernels read a gradient element per output window, so one of another
// shape read past its end (conv2d_backward divided by zero groups first, SIGFPE); csr_linear
// read crow[0] of an empty crow for a negative out_features and took tensors of another device.
TEST(Errors, NativeBackwardOpsCheckTheGradientsShape) {
  const Tensor x = randn({1, 2, 4, 4}), w = randn({3, 2, 3, 3});
  EXPECT_ERROR_CONTAINS(
      native::conv2d_backward(x, w, randn({1, 3, 2, 2}), {1, 1}, {0, 0}, {1, 1}, 0, {true, true, true}),
      "conv2d_backward: groups must be positive, got 0");
  // A kernel with no taps: the direct kernels' tap list was empty and its last entry read
  // (UBSan, found by the random-arguments test at 30000 draws).
  const Tensor no_taps = randn({3, 2, 0, 3});
  EXPECT_ERROR_CONTAINS(conv2d(x, no_taps),
                        "conv2d: kernel size should be greater than zero, got weight of shape "
                        "[3, 2, 0, 3]");
  EXPECT_ERROR_CONTAINS(conv_transpose2d(randn({1, 3, 4, 4}), no_taps),
                        "conv_transpose2d: kernel size should be greater than zero");
  EXPECT_ERROR_CONTAINS(
      native::conv2d_backward(x, no_taps, randn({1, 3, 5, 2}), {1, 1}, {0, 0}, {1, 1}, 1, {true, true, true}),
      "conv2d_backward: kernel size should be greater than zero");
  EXPECT_ERROR_CONTAINS(
      native::conv2d_backward(x, w, randn({1, 4, 2, 2}), {1, 1}, {0, 0}, {1, 1}, 1, {true, true, true}),
      "conv2d_backward: expected a floating-point output gradient of shape [1, 3, 2, 2] (or fewer "
      "rows and columns) for input [1, 2, 4, 4] and weight [3, 2, 3, 3], got float32 [1, 4, 2, 2]");
  EXPECT_ERROR_CONTAINS(
      native::conv2d_backward(x, w, randn({1, 3, 3, 2}), {1, 1}, {0, 0}, {1, 1}, 1, {true, true, true}),
      "got float32 [1, 3, 3, 2]");
  const auto [gx, gw, gb] =
      native::conv2d_backward(x, w, ones({1, 3, 2, 2}), {1, 1}, {0, 0}, {1, 1}, 1, {true, true, true});
  EXPECT_EQ(gx.sizes(), x.sizes());
  EXPECT_EQ(gb.to_vector<float>(), (std::vector<float>{4, 4, 4}));
  EXPECT_ERROR_CONTAINS(
      native::avg_pool2d_backward(randn({1, 2, 3, 3}), {1, 2, 4, 4}, {2, 2}, std::nullopt, {0, 0}, false, true),
      "avg_pool2d_backward: expected a gradient of the pooled shape [1, 2, 2, 2]");
  EXPECT_ERROR_CONTAINS(native::adaptive_avg_pool2d_backward(randn({1, 1, 2, 2}), {2, 3, 4, 4}),
                        "adaptive_avg_pool2d_backward: expected a floating-point output gradient with the input's "
                        "samples and channels [2, 3] (input [2, 3, 4, 4]), got float32 [1, 1, 2, 2]");
  EXPECT_ERROR_CONTAINS(
      native::max_pool2d_backward(randn({1, 1, 2, 2}), zeros({1, 1, 2, 2}, TensorOptions(kInt64)), {1, 5, 4, 4}),
      "max_pool2d_backward: expected a floating-point output gradient with the input's samples");
  EXPECT_ERROR_CONTAINS(native::max_pool2d_backward(zeros({1, 1, 2, 2}, TensorOptions(kInt64)),
                                                    zeros({1, 1, 2, 2}, TensorOptions(kInt64)), {1, 1, 4, 4}),
                        "got int64 [1, 1, 2, 2]");
  const Tensor crow = zeros({1}, TensorOptions(kInt64)), col = zeros({0}, TensorOptions(kInt64)), values = zeros({0});
  EXPECT_ERROR_CONTAINS(native::csr_linear(randn({2, 3}), crow, col, values, Tensor(), -1),
                        "csr_linear: invalid out_features -1");
  EXPECT_ERROR_CONTAINS(
      native::csr_linear(randn({2, 3}), crow, col, values, Tensor(), std::numeric_limits<int64_t>::max()),
      "csr_linear: invalid out_features 9223372036854775807");
  EXPECT_EQ(native::csr_linear(randn({2, 3}), crow, col, values, Tensor(), 0).sizes(), (Shape{2, 0}));
}

}  // namespace
}  // namespace ember
