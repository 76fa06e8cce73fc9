// Convolutions through cuDNN (opened lazily, cuda/lazy_library.h): forward, backward-data and
// backward-filter, with the algorithm chosen one of two ways (Note [cuDNN algorithms]):
//  - default: cuDNN's heuristic (cudnnGet*Algorithm_v7), its first choice whose workspace the
//    device can give;
//  - benchmark mode (backends::cudnn::set_benchmark(true), torch.backends.cudnn.benchmark):
//    cudnnFind*AlgorithmEx runs every candidate once on the real buffers and reports times;
//    the fastest is cached per (direction, shapes, strides, padding, dilation, groups, dtype,
//    math, device) and reused, so only the first step of a training run pays for the search.
// Workspaces come from the caching allocator, so they cost no cudaMalloc after the first step.
#include <cudnn.h>

#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "ember/cuda/caching_allocator.h"
#include "ember/cuda/check.h"
#include "ember/cuda/cuda.h"
#include "ember/cuda/cuda_backend.h"
#include "ember/cuda/internal.h"
#include "ember/cuda/lazy_library.h"
#include "ember/tensor/ops.h"

namespace ember::cuda {
namespace {

// The cuDNN functions ember calls, resolved on first use.
struct Cudnn {
  LazyLibrary library{{"libcudnn.so." + std::to_string(CUDNN_MAJOR), "libcudnn.so"}, "cuDNN"};
#define EMBER_CUDNN_FN(name) decltype(&::name) name = reinterpret_cast<decltype(&::name)>(library.symbol(#name))
  EMBER_CUDNN_FN(cudnnGetErrorString);
  EMBER_CUDNN_FN(cudnnCreate);
  EMBER_CUDNN_FN(cudnnSetStream);
  EMBER_CUDNN_FN(cudnnCreateTensorDescriptor);
  EMBER_CUDNN_FN(cudnnSetTensor4dDescriptor);
  EMBER_CUDNN_FN(cudnnDestroyTensorDescriptor);
  EMBER_CUDNN_FN(cudnnCreateFilterDescriptor);
  EMBER_CUDNN_FN(cudnnSetFilter4dDescriptor);
  EMBER_CUDNN_FN(cudnnDestroyFilterDescriptor);
  EMBER_CUDNN_FN(cudnnCreateConvolutionDescriptor);
  EMBER_CUDNN_FN(cudnnSetConvolution2dDescriptor);
  EMBER_CUDNN_FN(cudnnSetConvolutionGroupCount);
  EMBER_CUDNN_FN(cudnnSetConvolutionMathType);
  EMBER_CUDNN_FN(cudnnDestroyConvolutionDescriptor);
  EMBER_CUDNN_FN(cudnnGetConvolutionForwardAlgorithm_v7);
  EMBER_CUDNN_FN(cudnnFindConvolutionForwardAlgorithmEx);
  EMBER_CUDNN_FN(cudnnGetConvolutionForwardWorkspaceSize);
  EMBER_CUDNN_FN(cudnnConvolutionForward);
  EMBER_CUDNN_FN(cudnnGetConvolutionBackwardDataAlgorithm_v7);
  EMBER_CUDNN_FN(cudnnFindConvolutionBackwardDataAlgorithmEx);
  EMBER_CUDNN_FN(cudnnGetConvolutionBackwardDataWorkspaceSize);
  EMBER_CUDNN_FN(cudnnConvolutionBackwardData);
  EMBER_CUDNN_FN(cudnnGetConvolutionBackwardFilterAlgorithm_v7);
  EMBER_CUDNN_FN(cudnnFindConvolutionBackwardFilterAlgorithmEx);
  EMBER_CUDNN_FN(cudnnGetConvolutionBackwardFilterWorkspaceSize);
  EMBER_CUDNN_FN(cudnnConvolutionBackwardFilter);
  EMBER_CUDNN_FN(cudnnConvolutionBackwardBias);
  EMBER_CUDNN_FN(cudnnAddTensor);
#undef EMBER_CUDNN_FN
};
Cudnn& cudnn() {
  static Cudnn* api = new Cudnn();  // never destroyed: handles may be used until exit
  return *api;
}

#define EMBER_CUDNN_CHECK(statement)                                                                            \
  do {                                                                                                          \
    const cudnnStatus_t ember_status_ = (statement);                                                            \
    if (ember_status_ != CUDNN_STATUS_SUCCESS)                                                                  \
      throw ::ember::Error(::ember::detail::concat("cuDNN error: ", cudnn().cudnnGetErrorString(ember_status_), \
                                                   " in '", #statement, "' at ", __FILE__, ":", __LINE__));     \
  } while (0)

cudnnHandle_t handle_for(int device) {
  thread_local std::array<cudnnHandle_t, 64> handles{};
  if (!handles[device]) EMBER_CUDNN_CHECK(cudnn().cudnnCreate(&handles[device]));
  EMBER_CUDNN_CHECK(cudnn().cudnnSetStream(handles[device], stream_handle(device)));
  return handles[device];
}

cudnnDataType_t data_type(DType d) {
  switch (d) {
    case kFloat32:
      return CUDNN_DATA_FLOAT;
    case kFloat64:
      return CUDNN_DATA_DOUBLE;
    case kFloat16:
      return CUDNN_DATA_HALF;
    case kBFloat16:
      return CUDNN_DATA_BFLOAT16;
    default:
      throw Error(detail::concat("conv2d on CUDA: dtype ", d, " is not supported"));
  }
}

int dim_int(int64_t v) {
  EMBER_CHECK(v >= 0 && v <= INT32_MAX, "conv2d on CUDA: size ", v, " exceeds cuDNN's int range");
  return static_cast<int>(v);
}

// The descriptors of one convolution, destroyed with it.
struct ConvDescriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;

  ConvDescriptors(const Tensor& input, const Tensor& weight, const Shape& out, const Conv2dParams& p) {
    Cudnn& c = cudnn();
    const cudnnDataType_t type = data_type(input.dtype());
    EMBER_CUDNN_CHECK(c.cudnnCreateTensorDescriptor(&x));
    EMBER_CUDNN_CHECK(c.cudnnCreateTensorDescriptor(&y));
    EMBER_CUDNN_CHECK(c.cudnnCreateTensorDescriptor(&bias));
    EMBER_CUDNN_CHECK(c.cudnnCreateFilterDescriptor(&w));
    EMBER_CUDNN_CHECK(c.cudnnCreateConvolutionDescriptor(&conv));
    EMBER_CUDNN_CHECK(c.cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, type, dim_int(input.size(0)),
                                                   dim_int(input.size(1)), dim_int(input.size(2)),
                                                   dim_int(input.size(3))));
    EMBER_CUDNN_CHECK(c.cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, type, dim_int(out[0]), dim_int(out[1]),
                                                   dim_int(out[2]), dim_int(out[3])));
    EMBER_CUDNN_CHECK(c.cudnnSetTensor4dDescriptor(bias, CUDNN_TENSOR_NCHW, type, 1, dim_int(out[1]), 1, 1));
    EMBER_CUDNN_CHECK(c.cudnnSetFilter4dDescriptor(w, type, CUDNN_TENSOR_NCHW, dim_int(weight.size(0)),
                                                   dim_int(weight.size(1)), dim_int(weight.size(2)),
                                                   dim_int(weight.size(3))));
    // 16-bit data accumulates in float; float32 uses tensor cores (TF32) only when allowed.
    const cudnnDataType_t compute = input.dtype() == kFloat64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    EMBER_CUDNN_CHECK(c.cudnnSetConvolution2dDescriptor(
        conv, dim_int(p.padding[0]), dim_int(p.padding[1]), dim_int(p.stride[0]), dim_int(p.stride[1]),
        dim_int(p.dilation[0]), dim_int(p.dilation[1]), CUDNN_CROSS_CORRELATION, compute));
    EMBER_CUDNN_CHECK(c.cudnnSetConvolutionGroupCount(conv, dim_int(p.groups)));
    const bool tensor_ops = input.dtype() == kFloat16 || input.dtype() == kBFloat16 ||
                            (input.dtype() == kFloat32 && backends::cuda::allow_tf32());
    EMBER_CUDNN_CHECK(c.cudnnSetConvolutionMathType(conv, tensor_ops ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
  }
  ~ConvDescriptors() {
    Cudnn& c = cudnn();
    c.cudnnDestroyTensorDescriptor(x);
    c.cudnnDestroyTensorDescriptor(y);
    c.cudnnDestroyTensorDescriptor(bias);
    c.cudnnDestroyFilterDescriptor(w);
    c.cudnnDestroyConvolutionDescriptor(conv);
  }
  ConvDescriptors(const ConvDescriptors&) = delete;
  ConvDescriptors& operator=(const ConvDescriptors&) = delete;
};

// ---- the algorithm cache (benchmark mode) ----

enum class Direction { Forward, BackwardData, BackwardFilter };
using AlgoKey = std::tuple<int, Shape, Shape, Shape, std::array<int64_t, 7>, int, bool, int>;
struct AlgoChoice {
  int algo;
  size_t workspace;
};

AlgoKey key_of(Direction dir, const Tensor& input, const Tensor& weight, const Shape& out, const Conv2dParams& p) {
  return {static_cast<int>(dir),
          input.sizes(),
          weight.sizes(),
          out,
          {p.stride[0], p.stride[1], p.padding[0], p.padding[1], p.dilation[0], p.dilation[1], p.groups},
          static_cast<int>(input.dtype()),
          backends::cuda::allow_tf32(),
          input.device().index};
}

std::mutex cache_mutex;
std::map<AlgoKey, AlgoChoice>& algo_cache() {
  static std::map<AlgoKey, AlgoChoice> cache;
  return cache;
}
std::atomic<int64_t> benchmark_searches{0}, benchmark_hits{0};

Tensor workspace(size_t bytes, const Tensor& like) {
  return empty({static_cast<int64_t>(bytes)}, TensorOptions(kUInt8).device(like.device()));
}
void* ptr_or_null(const Tensor& t) { return t.numel() ? t.data_ptr() : nullptr; }

// The first (fastest, for a search) result that succeeded.
template <class Perf>
AlgoChoice first_usable(const Perf* results, int count, const char* what) {
  for (int i = 0; i < count; ++i)
    if (results[i].status == CUDNN_STATUS_SUCCESS) return {static_cast<int>(results[i].algo), results[i].memory};
  throw Error(detail::concat("conv2d on CUDA: cuDNN found no usable ", what, " algorithm"));
}

// The heuristic's first algorithm, in its order of promise, whose workspace the device can give
// (`size_of(algo, &bytes)` asks cuDNN): as in PyTorch, a memory-hungry favourite gives way to a
// leaner one instead of failing. The trial workspace goes back to the cache, where the call's own
// allocation of the same size then finds it.
template <class Perf, class SizeOf>
AlgoChoice first_affordable(const Perf* results, int count, const Tensor& like, const SizeOf& size_of,
                            const char* what) {
  for (int i = 0; i < count; ++i) {
    if (results[i].status != CUDNN_STATUS_SUCCESS) continue;
    AlgoChoice a{static_cast<int>(results[i].algo), 0};
    if (size_of(results[i].algo, &a.workspace) != CUDNN_STATUS_SUCCESS) continue;
    try {
      (void)workspace(a.workspace, like);
      return a;
    } catch (const OutOfMemoryError&) {
    }
  }
  throw Error(detail::concat("conv2d on CUDA: cuDNN found no usable ", what,
                             " algorithm whose workspace fits in the device's memory"));
}

// Chooses (or recalls) the algorithm for one direction. `find` runs cuDNN's search on real
// buffers with a workspace; `heuristic` asks cuDNN's heuristic.
template <class Find, class Heuristic>
AlgoChoice choose(Direction dir, const Tensor& input, const Tensor& weight, const Shape& out, const Conv2dParams& p,
                  const Find& find, const Heuristic& heuristic) {
  if (!backends::cudnn::benchmark()) return heuristic();
  const AlgoKey key = key_of(dir, input, weight, out, p);
  {
    std::lock_guard<std::mutex> lock(cache_mutex);
    auto it = algo_cache().find(key);
    if (it != algo_cache().end()) {
      ++benchmark_hits;
      return it->second;
    }
  }
  const AlgoChoice choice = find();
  ++benchmark_searches;
  std::lock_guard<std::mutex> lock(cache_mutex);
  algo_cache().emplace(key, choice);
  return choice;
}

// Room for cuDNN's search: 1 GiB, or less when memory is short (the search then skips the
// algorithms that need more). Returns the workspace and sets `bytes` to its size.
Tensor search_workspace(const Tensor& like, size_t& bytes) {
  for (bytes = size_t{1} << 30; bytes >= (size_t{16} << 20); bytes /= 4) {
    try {
      return workspace(bytes, like);
    } catch (const OutOfMemoryError&) {
    }
  }
  bytes = 0;
  return Tensor();
}

}  // namespace

}  // namespace ember::cuda

namespace ember::backends::cudnn {
BenchmarkStats benchmark_stats() {
  return {::ember::cuda::benchmark_searches.load(), ::ember::cuda::benchmark_hits.load()};
}
void clear_benchmark_cache() {
  std::lock_guard<std::mutex> lock(::ember::cuda::cache_mutex);
  ::ember::cuda::algo_cache().clear();
  ::ember::cuda::benchmark_searches = 0;
  ::ember::cuda::benchmark_hits = 0;
}
}  // namespace ember::backends::cudnn

namespace ember::cuda {

void check_conv2d_descriptors(const Tensor& input, const Tensor& weight, const Shape& out, const Conv2dParams& p) {
  ConvDescriptors d(input, weight, out, p);
}

void CudaBackend::conv2d(const Tensor& input_in, const Tensor& weight_in, const Tensor& bias, const Tensor& out,
                         const Conv2dParams& p) {
  DeviceGuard guard(out.device().index);
  if (out.numel() == 0) return;
  const Tensor input = native::contiguous(input_in), weight = native::contiguous(weight_in);
  Tensor y = out.is_contiguous() ? out : empty(out.sizes(), TensorOptions(out.dtype()).device(out.device()));
  ConvDescriptors d(input, weight, y.sizes(), p);
  Cudnn& c = cudnn();
  cudnnHandle_t h = handle_for(out.device().index);
  const AlgoChoice choice = choose(
      Direction::Forward, input, weight, y.sizes(), p,
      [&] {
        size_t bytes = 0;
        Tensor ws = search_workspace(out, bytes);
        cudnnConvolutionFwdAlgoPerf_t results[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        int n = 0;
        EMBER_CUDNN_CHECK(c.cudnnFindConvolutionForwardAlgorithmEx(
            h, d.x, input.data_ptr(), d.w, weight.data_ptr(), d.conv, d.y, y.data_ptr(),
            CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, results, bytes ? ws.data_ptr() : nullptr, bytes));
        return first_usable(results, n, "forward");
      },
      [&] {
        cudnnConvolutionFwdAlgoPerf_t results[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        int n = 0;
        EMBER_CUDNN_CHECK(c.cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y,
                                                                   CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, results));
        return first_affordable(
            results, n, out,
            [&](cudnnConvolutionFwdAlgo_t algo, size_t* bytes) {
              return c.cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y, algo, bytes);
            },
            "forward");
      });
  Tensor ws = workspace(choice.workspace, out);
  const double one_d = 1, zero_d = 0;
  const float one_f = 1, zero_f = 0;
  const bool dbl = input.dtype() == kFloat64;
  const void* one = dbl ? static_cast<const void*>(&one_d) : &one_f;
  const void* zero = dbl ? static_cast<const void*>(&zero_d) : &zero_f;
  EMBER_CUDNN_CHECK(c.cudnnConvolutionForward(h, one, d.x, input.data_ptr(), d.w, weight.data_ptr(), d.conv,
                                              static_cast<cudnnConvolutionFwdAlgo_t>(choice.algo), ptr_or_null(ws),
                                              choice.workspace, zero, d.y, y.data_ptr()));
  if (bias.defined()) {
    const Tensor b = native::contiguous(bias);
    EMBER_CUDNN_CHECK(c.cudnnAddTensor(h, one, d.bias, b.data_ptr(), one, d.y, y.data_ptr()));
  }
  if (!y.shares_storage(out)) {
    Tensor dst = out;
    native::copy_(dst, y);
  }
}

void CudaBackend::conv2d_backward(const Tensor& input_in, const Tensor& weight_in, const Tensor& grad_out_in,
                                  const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                                  const Conv2dParams& p) {
  DeviceGuard guard(input_in.device().index);
  const Tensor input = native::contiguous(input_in), weight = native::contiguous(weight_in);
  Tensor dy = native::contiguous(grad_out_in);
  // cuDNN takes the gradient of the whole output of this input and weight. conv_transpose2d
  // passes fewer rows or columns when its output_padding is a stride or more (the windows it
  // leaves out lie wholly in the padding): zeros stand for them, which add nothing.
  Shape whole = dy.sizes();
  for (int i = 0; i < 2; ++i)
    whole[2 + i] =
        (input.size(2 + i) + 2 * p.padding[i] - p.dilation[i] * (weight.size(2 + i) - 1) - 1) / p.stride[i] + 1;
  if (whole != dy.sizes()) {
    Tensor padded = zeros(whole, TensorOptions(dy.dtype()).device(dy.device()));
    Tensor corner = native::narrow(native::narrow(padded, 2, 0, dy.size(2)), 3, 0, dy.size(3));
    native::copy_(corner, dy);
    dy = padded;
  }
  ConvDescriptors d(input, weight, dy.sizes(), p);
  Cudnn& c = cudnn();
  cudnnHandle_t h = handle_for(input.device().index);
  const double one_d = 1, zero_d = 0;
  const float one_f = 1, zero_f = 0;
  const bool dbl = input.dtype() == kFloat64;
  const void* one = dbl ? static_cast<const void*>(&one_d) : &one_f;
  const void* zero = dbl ? static_cast<const void*>(&zero_d) : &zero_f;
  if (grad_input.defined() && grad_input.numel() > 0) {
    EMBER_CHECK(grad_input.is_contiguous(), "conv2d_backward on CUDA: grad_input must be contiguous");
    const AlgoChoice choice = choose(
        Direction::BackwardData, input, weight, dy.sizes(), p,
        [&] {
          size_t bytes = 0;
          Tensor ws = search_workspace(input, bytes);
          cudnnConvolutionBwdDataAlgoPerf_t results[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
          int n = 0;
          EMBER_CUDNN_CHECK(c.cudnnFindConvolutionBackwardDataAlgorithmEx(
              h, d.w, weight.data_ptr(), d.y, dy.data_ptr(), d.conv, d.x, grad_input.data_ptr(),
              CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, results, bytes ? ws.data_ptr() : nullptr, bytes));
          return first_usable(results, n, "backward-data");
        },
        [&] {
          cudnnConvolutionBwdDataAlgoPerf_t results[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
          int n = 0;
          EMBER_CUDNN_CHECK(c.cudnnGetConvolutionBackwardDataAlgorithm_v7(
              h, d.w, d.y, d.conv, d.x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, results));
          return first_affordable(
              results, n, input,
              [&](cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes) {
                return c.cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x, algo, bytes);
              },
              "backward-data");
        });
    Tensor ws = workspace(choice.workspace, input);
    EMBER_CUDNN_CHECK(c.cudnnConvolutionBackwardData(h, one, d.w, weight.data_ptr(), d.y, dy.data_ptr(), d.conv,
                                                     static_cast<cudnnConvolutionBwdDataAlgo_t>(choice.algo),
                                                     ptr_or_null(ws), choice.workspace, zero, d.x,
                                                     grad_input.data_ptr()));
  }
  if (grad_weight.defined() && grad_weight.numel() > 0) {
    EMBER_CHECK(grad_weight.is_contiguous(), "conv2d_backward on CUDA: grad_weight must be contiguous");
    const AlgoChoice choice = choose(
        Direction::BackwardFilter, input, weight, dy.sizes(), p,
        [&] {
          size_t bytes = 0;
          Tensor ws = search_workspace(input, bytes);
          cudnnConvolutionBwdFilterAlgoPerf_t results[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
          int n = 0;
          EMBER_CUDNN_CHECK(c.cudnnFindConvolutionBackwardFilterAlgorithmEx(
              h, d.x, input.data_ptr(), d.y, dy.data_ptr(), d.conv, d.w, grad_weight.data_ptr(),
              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, results, bytes ? ws.data_ptr() : nullptr, bytes));
          return first_usable(results, n, "backward-filter");
        },
        [&] {
          cudnnConvolutionBwdFilterAlgoPerf_t results[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
          int n = 0;
          EMBER_CUDNN_CHECK(c.cudnnGetConvolutionBackwardFilterAlgorithm_v7(
              h, d.x, d.y, d.conv, d.w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, results));
          return first_affordable(
              results, n, input,
              [&](cudnnConvolutionBwdFilterAlgo_t algo, size_t* bytes) {
                return c.cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.conv, d.w, algo, bytes);
              },
              "backward-filter");
        });
    Tensor ws = workspace(choice.workspace, input);
    EMBER_CUDNN_CHECK(c.cudnnConvolutionBackwardFilter(h, one, d.x, input.data_ptr(), d.y, dy.data_ptr(), d.conv,
                                                       static_cast<cudnnConvolutionBwdFilterAlgo_t>(choice.algo),
                                                       ptr_or_null(ws), choice.workspace, zero, d.w,
                                                       grad_weight.data_ptr()));
  }
  if (grad_bias.defined() && grad_bias.numel() > 0)
    EMBER_CUDNN_CHECK(c.cudnnConvolutionBackwardBias(h, one, d.y, dy.data_ptr(), zero, d.bias, grad_bias.data_ptr()));
}

}  // namespace ember::cuda
