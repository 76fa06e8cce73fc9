// Bad input never crashes: each class of mistake throws ember::Error naming the op and
// the shapes, dtypes, dims or devices involved.
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

}  // namespace
}  // namespace ember
