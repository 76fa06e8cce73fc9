#pragma once
// Factories (ember::zeros, ember::randn, ...) and the native ops: ember::native::add(a, b),
// ember::native::matmul(a, b), ... Note [Native ops]: a native op computes its result
// and records nothing. The public, differentiable ops (ember::add, Tensor::add, ...;
// autograd/functions.h) run the native op under a NoGradGuard and then record a tape
// Node when an input requires grad. Every function validates its arguments and throws an
// ember::Error naming the op and the offending shapes, dtypes or devices.
#include <array>
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "ember/tensor/tensor.h"

namespace ember {

// ---- factories (tensor/ops/factory.cpp) ----
Tensor empty(const Shape& sizes, TensorOptions options = {});
Tensor empty_strided(const Shape& sizes, const Shape& strides, TensorOptions options = {});
Tensor zeros(const Shape& sizes, TensorOptions options = {});
Tensor ones(const Shape& sizes, TensorOptions options = {});
Tensor full(const Shape& sizes, const Scalar& value, TensorOptions options = {});
Tensor scalar_tensor(const Scalar& value, TensorOptions options = {});
// arange infers int64 when start, end and step are all integers, float32 otherwise.
Tensor arange(const Scalar& end);
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = 1);
Tensor arange(const Scalar& end, TensorOptions options);
Tensor arange(const Scalar& start, const Scalar& end, TensorOptions options);
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, TensorOptions options);
Tensor linspace(double start, double end, int64_t steps, TensorOptions options = {});
Tensor eye(int64_t n, int64_t m = -1, TensorOptions options = {});
Tensor rand(const Shape& sizes, TensorOptions options = {});
Tensor randn(const Shape& sizes, TensorOptions options = {});
Tensor randint(int64_t low, int64_t high, const Shape& sizes, TensorOptions options = kInt64);
Tensor randperm(int64_t n, TensorOptions options = kInt64);
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, const Scalar& value);
Tensor rand_like(const Tensor& t);
Tensor randn_like(const Tensor& t);
// Wraps memory the caller owns (no copy, not counted by the allocator). `deleter`, if
// given, runs when the last tensor using the memory goes away.
Tensor from_blob(void* data, const Shape& sizes, TensorOptions options = {});
Tensor from_blob(void* data, const Shape& sizes, const Shape& strides, std::function<void(void*)> deleter = nullptr,
                 TensorOptions options = {});
// A tensor holding a copy of `values`; the dtype follows T, the shape defaults to 1-D.
template <class T>
Tensor tensor(const std::vector<T>& values, std::optional<Shape> sizes = std::nullopt);
template <class T>
Tensor tensor(std::initializer_list<T> values, std::optional<Shape> sizes = std::nullopt) {
  return tensor(std::vector<T>(values), std::move(sizes));
}

// Binary ops broadcast and promote types as PyTorch does (tensor/ops/elementwise.cpp).
DType result_type(const Tensor& a, const Tensor& b);
DType result_type(const Tensor& a, const Scalar& b);

// ---- threads (tensor/parallel.cpp) ----
void set_num_threads(int n);
int get_num_threads();

namespace native {

// ---- views (tensor/views.cpp): share storage with self ----
Tensor view(const Tensor& self, const Shape& shape);
Tensor reshape(const Tensor& self, const Shape& shape);
Tensor transpose(const Tensor& self, int64_t dim0, int64_t dim1);
Tensor t(const Tensor& self);
Tensor permute(const Tensor& self, const Shape& dims);
Tensor movedim(const Tensor& self, int64_t source, int64_t destination);
Tensor slice(const Tensor& self, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step);
Tensor narrow(const Tensor& self, int64_t dim, int64_t start, int64_t length);
Tensor select(const Tensor& self, int64_t dim, int64_t index);
Tensor expand(const Tensor& self, const Shape& shape);
Tensor squeeze(const Tensor& self);
Tensor squeeze(const Tensor& self, int64_t dim);
Tensor unsqueeze(const Tensor& self, int64_t dim);
Tensor flatten(const Tensor& self, int64_t start_dim, int64_t end_dim);
Tensor unflatten(const Tensor& self, int64_t dim, const Shape& sizes);
Tensor as_strided(const Tensor& self, const Shape& sizes, const Shape& strides, std::optional<int64_t> storage_offset);

// ---- copies (tensor/tensor.cpp) ----
Tensor to(const Tensor& self, Device device, DType dtype, bool non_blocking, bool copy);
Tensor clone(const Tensor& self);
Tensor& copy_(Tensor& self, const Tensor& src);

// ---- elementwise (tensor/ops/elementwise.cpp) ----
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);  // true division: integers give float32
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& a);
// Fused backward formulas from the op's output y: grad * (1 - y^2), grad * y (1 - y), y > 0 ? grad : 0.
Tensor tanh_backward(const Tensor& grad, const Tensor& out);
Tensor sigmoid_backward(const Tensor& grad, const Tensor& out);
Tensor relu_backward(const Tensor& grad, const Tensor& out);
// Scalar forms (a Scalar takes part in promotion like a 0-d tensor of lower priority).
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor mul(const Tensor& a, const Scalar& b);
Tensor div(const Tensor& a, const Scalar& b);
Tensor pow(const Tensor& a, const Scalar& b);
Tensor pow(const Scalar& a, const Tensor& b);
Tensor eq(const Tensor& a, const Scalar& b);
Tensor ne(const Tensor& a, const Scalar& b);
Tensor lt(const Tensor& a, const Scalar& b);
Tensor le(const Tensor& a, const Scalar& b);
Tensor gt(const Tensor& a, const Scalar& b);
Tensor ge(const Tensor& a, const Scalar& b);
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& condition, const Tensor& a, const Scalar& b);
Tensor where(const Tensor& condition, const Scalar& a, const Tensor& b);
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value);
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor square(const Tensor& x);
Tensor relu(const Tensor& x);
// Floating ops: integer and bool inputs compute in float32.
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor silu(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor erf(const Tensor& x);
// In place: out = self op other, cast to self's dtype (the result type must cast safely,
// as in PyTorch: a float result cannot go into an integer tensor).
Tensor& add_(Tensor& self, const Tensor& other, const Scalar& alpha = 1);
Tensor& sub_(Tensor& self, const Tensor& other, const Scalar& alpha = 1);
Tensor& mul_(Tensor& self, const Tensor& other);
Tensor& div_(Tensor& self, const Tensor& other);

// ---- reductions (tensor/ops/reduce.cpp). Empty `dims` means all dims. ----
Tensor sum(const Tensor& x, const Shape& dims = {}, bool keepdim = false, std::optional<DType> dtype = std::nullopt);
Tensor mean(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor prod(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor amax(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);  // values, indices
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor var(const Tensor& x, const Shape& dims = {}, bool unbiased = true, bool keepdim = false);
Tensor std(const Tensor& x, const Shape& dims = {}, bool unbiased = true, bool keepdim = false);
Tensor norm(const Tensor& x, double p = 2.0, const Shape& dims = {}, bool keepdim = false);  // p = 1, 2 or inf
Tensor logsumexp(const Tensor& x, const Shape& dims, bool keepdim = false);
Tensor all(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor any(const Tensor& x, const Shape& dims = {}, bool keepdim = false);

// ---- linear algebra (tensor/ops/linalg.cpp) ----
Tensor matmul(const Tensor& a, const Tensor& b);  // PyTorch's rules for 1-D, 2-D and batched
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
// beta * bias + alpha * (a @ b), bias broadcast to [M, N]
Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, const Scalar& beta = 1, const Scalar& alpha = 1);
// x @ weight^T + bias, the Linear layer's op (weight [out, in]; bias [out] or undefined)
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});

// ---- convolution and pooling, NCHW (tensor/ops/conv_pool.cpp) ----
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
              std::array<int64_t, 2> stride = {1, 1}, std::array<int64_t, 2> padding = {0, 0},
              std::array<int64_t, 2> dilation = {1, 1}, int64_t groups = 1);
// stride defaults to the kernel size (an empty optional), as in PyTorch.
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, std::array<int64_t, 2> kernel,
                                                   std::optional<std::array<int64_t, 2>> stride = std::nullopt,
                                                   std::array<int64_t, 2> padding = {0, 0},
                                                   std::array<int64_t, 2> dilation = {1, 1}, bool ceil_mode = false);
Tensor max_pool2d(const Tensor& x, std::array<int64_t, 2> kernel,
                  std::optional<std::array<int64_t, 2>> stride = std::nullopt, std::array<int64_t, 2> padding = {0, 0},
                  std::array<int64_t, 2> dilation = {1, 1}, bool ceil_mode = false);
Tensor avg_pool2d(const Tensor& x, std::array<int64_t, 2> kernel,
                  std::optional<std::array<int64_t, 2>> stride = std::nullopt, std::array<int64_t, 2> padding = {0, 0},
                  bool ceil_mode = false, bool count_include_pad = true);
Tensor adaptive_avg_pool2d(const Tensor& x, std::array<int64_t, 2> output_size);
// Backward of the above: gradients w.r.t. (input, weight, bias) for those `wanted`.
std::tuple<Tensor, Tensor, Tensor> conv2d_backward(const Tensor& input, const Tensor& weight, const Tensor& grad_out,
                                                   std::array<int64_t, 2> stride, std::array<int64_t, 2> padding,
                                                   std::array<int64_t, 2> dilation, int64_t groups,
                                                   std::array<bool, 3> wanted);
Tensor avg_pool2d_backward(const Tensor& grad_out, const Shape& input_sizes, std::array<int64_t, 2> kernel,
                           std::optional<std::array<int64_t, 2>> stride, std::array<int64_t, 2> padding, bool ceil_mode,
                           bool count_include_pad);
Tensor adaptive_avg_pool2d_backward(const Tensor& grad_out, const Shape& input_sizes);
// Routes each window's gradient to the input position max_pool2d recorded in `indices`.
Tensor max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const Shape& input_sizes);

// ---- softmax (tensor/ops/softmax.cpp) ----
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

// ---- indexing (tensor/ops/indexing.cpp) ----
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor& scatter_add_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor embedding(const Tensor& weight, const Tensor& indices);    // weight [V, D], any int indices
Tensor one_hot(const Tensor& indices, int64_t num_classes = -1);  // int64 out, like PyTorch
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);

// ---- joining and splitting (tensor/ops/join.cpp) ----
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split_with_sizes(const Tensor& x, const Shape& sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);

}  // namespace native
}  // namespace ember
