// The CUDA back end beyond the op-by-op parity of test_reference.cpp: devices, streams and
// events, the caching allocator on a real device, pinned memory, errors. Tests that need a GPU
// are reported as skipped on machines without one (CI); tools/gpu_check.sh runs them on one.
#include <chrono>
#include <cmath>
#include <functional>

#include "ember/cuda/caching_allocator.h"

#include "helpers.h"
#if EMBER_WITH_CUDA
#include "ember/cuda/cuda_backend.h"
#endif

namespace ember {
namespace {

#define REQUIRE_GPU() \
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device"

TEST(CudaRuntime, WithoutADeviceEverythingIsAClearError) {
  if (cuda::is_available()) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_EQ(cuda::device_count(), 0);
  EXPECT_FALSE(ones({2}).is_pinned());
  const std::string on_device = testing::error_of([] { (void)ones({2}, Device(kCUDA)); });
  EXPECT_NE(on_device.find("CUDA"), std::string::npos) << on_device;
  const std::string pinned = testing::error_of([] { (void)ones({2}).pin_memory(); });
  EXPECT_NE(pinned.find(cuda::built_with_cuda() ? "no CUDA device" : "built without CUDA"), std::string::npos)
      << pinned;
  EXPECT_ERROR_CONTAINS(empty({2}, TensorOptions().device(kCUDA).pinned_memory()),
                        "empty: pinned memory is host memory, but device cuda:0 was asked for");
  EXPECT_FALSE(testing::error_of([] { cuda::Stream::create(); }).empty());
  EXPECT_FALSE(testing::error_of([] { cuda::synchronize(); }).empty());
  // The switches exist in every build.
  backends::cuda::set_allow_tf32(true);
  EXPECT_TRUE(backends::cuda::allow_tf32());
  backends::cuda::set_allow_tf32(false);
  backends::cudnn::set_benchmark(false);
  EXPECT_FALSE(backends::cudnn::benchmark());
}

#if EMBER_WITH_CUDA
// Runs everywhere the libraries are installed, GPU or not: cuBLAS, cuBLASLt and cuDNN are
// loaded, every function ember calls is resolved, and the descriptors ember builds are handed
// to the libraries, which check names, attribute sizes, layouts and dimensions.
TEST(CudaLibraries, BindingsResolveAndDescriptorsAreAcceptedWithoutAGpu) {
  try {
    const Tensor a = randn({5, 7}), b = randn({7, 3}), bias = randn({3}), out = empty({5, 3});
    EXPECT_TRUE(cuda::check_bias_gemm_descriptors(a, b, bias, out));
    EXPECT_TRUE(cuda::check_bias_gemm_descriptors(randn({7, 5}).t(), b, bias, out));  // a column-major
    EXPECT_TRUE(cuda::check_bias_gemm_descriptors(a, randn({3, 7}).t(), bias, out));  // Linear's weight.t()
    for (DType d : {kFloat16, kBFloat16})
      EXPECT_TRUE(cuda::check_bias_gemm_descriptors(a.to(d), b.to(d), bias.to(d), out.to(d))) << d;
    EXPECT_FALSE(cuda::check_bias_gemm_descriptors(a.to(kFloat64), b.to(kFloat64), bias.to(kFloat64),
                                                   out.to(kFloat64)));               // no epilogue kernel: two passes
    EXPECT_FALSE(cuda::check_bias_gemm_descriptors(a, b, bias, empty({3, 5}).t()));  // a strided out
    EXPECT_FALSE(cuda::check_bias_gemm_descriptors(empty({5, 0}), empty({0, 3}), bias, out));

    Conv2dParams p;
    p.padding = {1, 1};
    p.dilation = {2, 1};
    p.groups = 2;
    for (DType d : {kFloat32, kFloat64, kFloat16, kBFloat16})
      EXPECT_NO_THROW(cuda::check_conv2d_descriptors(empty({2, 4, 8, 8}, d), empty({6, 2, 3, 3}, d), {2, 6, 6, 8}, p));
    p.stride = {0, 1};
    EXPECT_ERROR_CONTAINS(cuda::check_conv2d_descriptors(empty({2, 4, 8, 8}), empty({6, 2, 3, 3}), {2, 6, 6, 8}, p),
                          "cuDNN error: CUDNN_STATUS_BAD_PARAM");
  } catch (const Error& e) {
    if (std::string(e.what()).find("cannot load") == std::string::npos) throw;
    GTEST_SKIP() << e.what();
  }
}
#endif

TEST(CudaRuntime, DevicesStreamsAndEvents) {
  REQUIRE_GPU();
  const auto props = cuda::get_device_properties(0);
  EXPECT_FALSE(props.name.empty());
  EXPECT_GT(props.total_memory, 0);
  EXPECT_ERROR_CONTAINS(cuda::set_device(cuda::device_count()), "does not exist");
  cuda::Stream side = cuda::Stream::create();
  EXPECT_NE(side, cuda::current_stream());
  cuda::Event start, stop;
  {
    cuda::StreamGuard guard(side);
    EXPECT_EQ(cuda::current_stream(), side);
    start.record();
    Tensor x = randn({1024, 1024}, Device(kCUDA));
    for (int i = 0; i < 10; ++i) x = x.matmul(x) * 1e-3;
    stop.record();
  }
  EXPECT_EQ(cuda::current_stream(), cuda::Stream::default_stream());
  stop.synchronize();
  EXPECT_TRUE(stop.query());
  EXPECT_GT(start.elapsed_ms(stop), 0.0f);
}

TEST(CudaRuntime, SameSeedSameUniformNumbersOnBothDevices) {
  REQUIRE_GPU();
  manual_seed(7);
  const Tensor on_cpu = rand({1000});
  manual_seed(7);
  const Tensor on_gpu = rand({1000}, Device(kCUDA));
  EXPECT_EQ(on_gpu.cpu().to_vector<float>(), on_cpu.to_vector<float>());  // dropout masks agree across devices
}

TEST(CudaRuntime, SameSeedSameBernoulliAndDropoutMasksOnBothDevices) {
  REQUIRE_GPU();
  for (const DType dtype : {kFloat32, kFloat64, kBFloat16, kFloat16, kUInt8}) {
    manual_seed(11);
    const Tensor on_cpu = zeros({1001}, dtype).bernoulli_(0.3);
    manual_seed(11);
    const Tensor on_gpu = zeros({1001}, TensorOptions(dtype).device(kCUDA)).bernoulli_(0.3);
    EXPECT_TRUE(testing::all_close(on_gpu.cpu().to(kFloat64), on_cpu.to(kFloat64), 0, 0)) << dtype_name(dtype);
  }
  manual_seed(12);
  const Tensor mask_cpu = dropout_mask({37, 29}, 0.1, kBFloat16);
  manual_seed(12);
  const Tensor mask_gpu = dropout_mask({37, 29}, 0.1, TensorOptions(kBFloat16).device(kCUDA));
  EXPECT_TRUE(testing::all_close(mask_gpu.cpu(), mask_cpu, 0, 0));
}

TEST(CudaAllocator, SteadyTrainingLoopStopsCallingCudaMalloc) {
  REQUIRE_GPU();
  manual_seed(0);
  nn::Sequential model(nn::Linear(256, 512), nn::ReLU(), nn::Linear(512, 10));
  model->to(Device(kCUDA));
  optim::Adam opt(model->parameters(), optim::AdamOptions(1e-3));
  const Tensor x = randn({128, 256}, Device(kCUDA)), y = randint(0, 10, {128}).to(Device(kCUDA));
  int64_t after_first = -1;
  for (int step = 0; step < 20; ++step) {
    opt.zero_grad();
    nn::functional::cross_entropy(model(x), y).backward();
    opt.step();
    if (step == 0) after_first = memory::stats(Device(kCUDA)).system_allocs;
  }
  const MemoryStats s = memory::stats(Device(kCUDA));
  EXPECT_EQ(s.system_allocs, after_first);
  EXPECT_GE(s.reserved_bytes, s.current_bytes);
  EXPECT_GT(s.peak_bytes, 0);
}

TEST(CudaAllocator, WithCachingOffEveryStepCallsCudaMalloc) {
  REQUIRE_GPU();
  cuda::set_memory_caching(false);
  EXPECT_FALSE(cuda::memory_caching());
  const Tensor w = randn({256, 256}, Device(kCUDA));
  const int64_t before = memory::stats(Device(kCUDA)).system_allocs;
  for (int i = 0; i < 3; ++i) (void)(w.matmul(w) + 1).sum().item<float>();
  EXPECT_GE(memory::stats(Device(kCUDA)).system_allocs - before, 3 * 3);  // product, sum of it, result
  cuda::set_memory_caching(true);
  EXPECT_TRUE(cuda::memory_caching());
}

// A block used on a second stream is not handed out again until that stream's work is done.
TEST(CudaAllocator, RecordStreamKeepsABlockUntilTheOtherStreamIsDone) {
  REQUIRE_GPU();
  const cuda::Stream side = cuda::Stream::create();
  Tensor big = randn({4096, 4096}, Device(kCUDA));
  cuda::synchronize();
  void* address = nullptr;
  {
    Tensor t = full({1 << 20}, 1.0f, Device(kCUDA));  // allocated on the default stream
    address = t.data_ptr();
    cuda::StreamGuard guard(side);
    for (int i = 0; i < 8; ++i) big = big.matmul(big) * 1e-3;  // keep the side stream busy
    Tensor copy = t * 2;                                       // reads t on the side stream
    cuda::record_stream(t, side);
  }  // t freed while the side stream may still read it
  Tensor u = empty({1 << 20}, Device(kCUDA));
  if (!side.query()) EXPECT_NE(u.data_ptr(), address) << "reused while the side stream could still read it";
  side.synchronize();
}

TEST(CudaAllocator, OutOfMemoryIsADistinctErrorNamingTheSizes) {
  REQUIRE_GPU();
  try {
    (void)empty({int64_t{1} << 50}, TensorOptions(kUInt8).device(kCUDA));  // 1 PiB
    FAIL() << "expected OutOfMemoryError";
  } catch (const cuda::OutOfMemoryError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("CUDA out of memory on cuda:0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("tried to allocate"), std::string::npos) << msg;
    EXPECT_NE(msg.find("reserved"), std::string::npos) << msg;
  }
}

TEST(CudaMemory, PinnedNonBlockingCopiesAreAsynchronous) {
  REQUIRE_GPU();
  const Tensor host = ones({64 << 20}).pin_memory();  // 256 MB
  EXPECT_TRUE(host.is_pinned());
  EXPECT_TRUE(host.pin_memory().shares_storage(host));
  cuda::synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  Tensor dev = host.to(Device(kCUDA), /*non_blocking=*/true);
  const double enqueue = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  cuda::synchronize();
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(enqueue, total / 2) << "the copy should return before it completes";
  EXPECT_EQ(dev.sum().item<double>(), double(64 << 20));
  // The DataLoader pins its batches.
  auto ds = std::make_shared<data::TensorDataset>(arange(8, kFloat32).reshape({4, 2}), arange(4, kInt64));
  for (const data::Batch& b : data::DataLoader(ds, data::DataLoaderOptions().batch_size(2).pin_memory(true))) {
    EXPECT_TRUE(b.data.is_pinned());
    EXPECT_TRUE(b.target.is_pinned());
  }
}

// Events on two streams show a pinned copy running while a matmul runs: the point of
// pin_memory + non_blocking.
TEST(CudaMemory, PinnedCopyOverlapsAKernelOnAnotherStream) {
  REQUIRE_GPU();
  const Tensor host = ones({64 << 20}).pin_memory();
  Tensor a = randn({4096, 4096}, Device(kCUDA)) * 1e-2;
  cuda::synchronize();
  const cuda::Stream compute = cuda::Stream::create(), copy = cuda::Stream::create();
  cuda::Event origin, k0, k1, c0, c1;
  origin.record(compute);
  origin.wait(copy);
  {
    cuda::StreamGuard guard(compute);
    k0.record();
    for (int i = 0; i < 8; ++i) a = a.matmul(a);
    k1.record();
  }
  Tensor dev;
  {
    cuda::StreamGuard guard(copy);
    c0.record();
    dev = host.to(Device(kCUDA), /*non_blocking=*/true);
    c1.record();
  }
  cuda::synchronize();
  const float kernel_start = origin.elapsed_ms(k0), kernel_end = origin.elapsed_ms(k1);
  const float copy_start = origin.elapsed_ms(c0), copy_end = origin.elapsed_ms(c1);
  EXPECT_LT(copy_start, kernel_end) << "copy [" << copy_start << ", " << copy_end << "] ms, kernels [" << kernel_start
                                    << ", " << kernel_end << "] ms";
  EXPECT_LT(kernel_start, copy_end);
  EXPECT_EQ(dev.sum().item<double>(), double(64 << 20));
}

TEST(CudaErrors, MixedDevicesNameBoth) {
  REQUIRE_GPU();
  EXPECT_ERROR_CONTAINS(ones({2}) + ones({2}, Device(kCUDA)), "cuda:0");
  EXPECT_ERROR_CONTAINS(ones({2}, Device(kCUDA)).index_select(0, tensor<int64_t>({5}).cuda()),
                        "index_select: index 5 is out of bounds for dimension 0 with size 2");
  // A validated index is not checked again while unchanged; an in-place write makes it new.
  const Tensor src = ones({3}, Device(kCUDA));
  Tensor index = tensor<int64_t>({0, 2}).cuda();
  EXPECT_EQ(src.index_select(0, index).sum().item<float>(), 2.0f);
  EXPECT_EQ(src.index_select(0, index).sum().item<float>(), 2.0f);
  index.fill_(7);
  EXPECT_ERROR_CONTAINS(src.index_select(0, index), "index_select: index 7 is out of bounds");
  const Tensor checked = tensor<int64_t>({0, 2}).cuda();
  (void)ones({3}, Device(kCUDA)).index_select(0, checked);  // valid for a bound of 3, not of 2
  EXPECT_ERROR_CONTAINS(ones({2}, Device(kCUDA)).index_select(0, checked),
                        "index 2 is out of bounds for dimension 0 with size 2");
}

// The long-row schedules of Note [CUDA reduction schedules]: rows read as 16-byte vectors (dense,
// aligned) or as scalars (one element off), whole-tensor sums split over many blocks, column
// sums with a thread per column, and ties resolved to the first index across blocks.
TEST(CudaReduce, LongRowSchedulesMatchTheCpu) {
  REQUIRE_GPU();
  manual_seed(6);
  const Tensor x = randn({3, 100000}), xg = x.cuda();
  for (int64_t offset : {0, 1}) {
    const Tensor c = x.narrow(1, offset, 99999), g = xg.narrow(1, offset, 99999);
    EXPECT_TRUE(testing::all_close(g.sum({1}).cpu(), c.sum({1}), 1e-4, 1e-3)) << offset;
    EXPECT_TRUE(testing::all_close(g.amax({1}).cpu(), c.amax({1}), 0, 0)) << offset;
    EXPECT_TRUE(testing::all_close(g.argmin(1).cpu(), c.argmin(1), 0, 0)) << offset;
  }
  EXPECT_NEAR(xg.sum().item<double>(), x.sum().item<double>(), 5e-2);
  EXPECT_EQ(xg.argmax().item<int64_t>(), x.argmax().item<int64_t>());
  const Tensor columns = randn({64, 5000});
  EXPECT_TRUE(testing::all_close(columns.cuda().sum({0}).cpu(), columns.sum({0}), 1e-5, 1e-5));
  EXPECT_EQ(full({2, 50000}, 1.0f, Device(kCUDA)).argmax(1).sum().item<int64_t>(), 0);
  const Tensor halves = x.to(kFloat16);
  EXPECT_TRUE(testing::all_close(halves.cuda().amax({1}).cpu(), halves.amax({1}), 0, 0));
}

// A fused normalization (Note [Fused layer_norm]) on the GPU against the CPU: x, its weight and
// bias [C] of dtype dt, and an output gradient; run(x, w, b) gives (out, mean, rstd). The values,
// statistics and all three gradients, within dt's rounding.
void expect_normalization_matches_the_cpu(
    DType dt, const Shape& sizes, int64_t C,
    const std::function<TensorTriple(const Tensor&, const Tensor&, const Tensor&)>& run) {
  const double tol = dt == kBFloat16 ? 2e-2 : dt == kFloat16 ? 4e-3 : 1e-4;
  const Tensor x = (randn(sizes) * 2 + 3).to(dt), w = randn({C}).to(dt), b = randn({C}).to(dt);
  const Tensor dy = randn(sizes).to(dt);
  std::vector<Tensor> got[2];
  for (int on_gpu = 0; on_gpu < 2; ++on_gpu) {
    const Device device = on_gpu ? Device(kCUDA) : Device(kCPU);
    const Tensor xi = x.to(device).requires_grad_(), wi = w.to(device).requires_grad_(),
                 bi = b.to(device).requires_grad_();
    const auto [y, mean, rstd] = run(xi, wi, bi);
    y.backward(dy.to(device));
    got[on_gpu] = {y, mean, rstd, xi.grad(), wi.grad(), bi.grad()};
  }
  const char* names[] = {"out", "mean", "rstd", "dx", "dw", "db"};
  for (size_t i = 0; i < 6; ++i) {
    ASSERT_EQ(got[1][i].dtype(), got[0][i].dtype()) << names[i];
    EXPECT_TRUE(testing::all_close(got[1][i].cpu().to(kFloat64), got[0][i].to(kFloat64), tol, tol)) << names[i];
  }
}

// layer_norm: a block per row, the weight's and bias's gradients in 64 runs of rows; rows wider
// than a block, more rows than runs, and empty rows.
TEST(CudaLayerNorm, ValuesStatisticsAndGradientsMatchTheCpu) {
  REQUIRE_GPU();
  manual_seed(9);
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16})
    for (const Shape& sizes : std::vector<Shape>{{3, 1000}, {300, 37}, {2, 4, 8}}) {
      SCOPED_TRACE(detail::concat(dt, " ", shape_str(sizes)));
      const Shape normalized{sizes.back()};
      expect_normalization_matches_the_cpu(dt, sizes, sizes.back(),
                                           [&](const Tensor& x, const Tensor& w, const Tensor& b) {
                                             return native_layer_norm(x, normalized, w, b, 1e-5);
                                           });
    }
  const auto [out, mean, rstd] = native_layer_norm(randn({3, 0}).cuda(), {0}, Tensor(), Tensor(), 1e-5);
  EXPECT_EQ(out.sizes(), (Shape{3, 0}));
  EXPECT_TRUE(std::isnan(mean.cpu().view({-1}).to_vector<float>()[0]));
}

// group_norm: a block per group for the forward and the input's gradient, a block per sample's
// channel for the sums, a thread per channel for the weight's and bias's gradients.
TEST(CudaGroupNorm, ValuesStatisticsAndGradientsMatchTheCpu) {
  REQUIRE_GPU();
  manual_seed(10);
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16})
    for (const auto& [sizes, groups] :
         std::vector<std::pair<Shape, int64_t>>{{{3, 8, 1000}, 2}, {{40, 6, 5}, 3}, {{2, 4, 3, 3}, 4}}) {
      SCOPED_TRACE(detail::concat(dt, " ", shape_str(sizes), " in ", groups, " groups"));
      const int64_t g = groups;
      expect_normalization_matches_the_cpu(dt, sizes, sizes[1], [&](const Tensor& x, const Tensor& w, const Tensor& b) {
        return native_group_norm(x, w, b, g, 1e-5);
      });
    }
}

// batch_norm: a block per (channel, run of samples) for the sums, elementwise output and input
// gradient; planes of 1000 values, planes of one (BatchNorm1d) with more samples than the 32 runs;
// training (the running statistics moved on the device too) and eval.
TEST(CudaBatchNorm, ValuesStatisticsRunningStatisticsAndGradientsMatchTheCpu) {
  REQUIRE_GPU();
  manual_seed(11);
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16})
    for (const Shape& sizes : std::vector<Shape>{{3, 8, 1000}, {100, 6}, {2, 4, 3, 3}})
      for (bool training : {true, false}) {
        SCOPED_TRACE(detail::concat(dt, " ", shape_str(sizes), training ? " training" : " eval"));
        const int64_t C = sizes[1];
        const DType stats = dt == kFloat64 ? kFloat64 : kFloat32;
        const Tensor rm = randn({C}).to(stats), rv = (rand({C}) + 0.5).to(stats);
        std::vector<Tensor> moved;
        expect_normalization_matches_the_cpu(dt, sizes, C, [&](const Tensor& x, const Tensor& w, const Tensor& b) {
          const Tensor m = rm.to(x.device()), v = rv.to(x.device());
          auto result = native_batch_norm(x, w, b, m, v, training, 0.1, 1e-5);
          moved.push_back(m.cpu());
          moved.push_back(v.cpu());
          return result;
        });
        ASSERT_EQ(moved.size(), 4u);
        EXPECT_TRUE(testing::all_close(moved[2], moved[0], 1e-5, 1e-5)) << "running mean";
        EXPECT_TRUE(testing::all_close(moved[3], moved[1], 1e-5, 1e-5)) << "running var";
      }
}

// 4000 additions into 6 targets, so that many threads hit one element at once; the bytes go
// through a compare-and-swap of their 32-bit word, which neighbouring targets share.
TEST(CudaIndexing, ScatterAddOnEveryDtypeMatchesTheCpu) {
  REQUIRE_GPU();
  manual_seed(5);
  const Tensor index = randint(0, 6, {4000}), values = randint(0, 3, {4000});
  for (DType d : {kBool, kUInt8, kInt8, kInt32, kInt64, kFloat16, kFloat32, kFloat64}) {
    const Tensor src = values.to(d);
    Tensor on_cpu = zeros({6}, d), on_gpu = zeros({6}, TensorOptions(d).device(kCUDA));
    on_cpu.scatter_add_(0, index, src);
    on_gpu.scatter_add_(0, index.cuda(), src.cuda());
    EXPECT_TRUE(testing::all_close(on_gpu.cpu(), on_cpu, 0, 0)) << d;
  }
}

// Max pooling's three records on the GPU (none, int64 positions, uint8 taps for autograd): the
// CPU's values, taps and gradients, on ties and NaNs, over padding, dilation and ceil_mode, and
// for a window with no tap inside the input (-inf, index -1, no gradient).
TEST(CudaPool, MaxPoolTapsAndGradientsMatchTheCpu) {
  REQUIRE_GPU();
  manual_seed(6);
  struct Case {
    Int2 kernel, stride, padding, dilation;
    bool ceil_mode;
  };
  for (const Case& c : {Case{{2, 2}, {2, 2}, {0, 0}, {1, 1}, false}, Case{{3, 3}, {2, 2}, {1, 1}, {1, 1}, true},
                        Case{{3, 2}, {1, 2}, {1, 0}, {2, 3}, false},
                        Case{{2, 2}, {2, 2}, {1, 1}, {13, 13}, true}})  // one window, all in the padding
    for (DType dt : {kFloat32, kBFloat16}) {
      SCOPED_TRACE(detail::concat("kernel ", c.kernel[0], "x", c.kernel[1], " ", dt));
      Tensor host = randint(-3, 3, {2, 3, 11, 12}).to(dt);
      host.view({-1}).narrow(0, 7, 1).fill_(std::nan(""));
      const Tensor dy_host = randn(max_pool2d(host, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode).sizes());
      std::vector<Tensor> grads;
      for (Device device : {Device(kCPU), Device(kCUDA)}) {
        const Tensor x = host.to(device).requires_grad_();
        const auto [values, taps] =
            native::max_pool2d_with_taps(x.detach(), c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode);
        const auto [with_indices, idx] =
            max_pool2d_with_indices(x.detach(), c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode);
        const auto [cpu_values, cpu_taps] =
            native::max_pool2d_with_taps(host, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode);
        EXPECT_EQ(taps.cpu().to_vector<uint8_t>(), cpu_taps.to_vector<uint8_t>());
        EXPECT_TRUE(testing::all_close(values.cpu(), cpu_values, 0, 0));
        EXPECT_EQ(idx.cpu().to_vector<int64_t>(),
                  std::get<1>(max_pool2d_with_indices(host, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode))
                      .to_vector<int64_t>());
        NoGradGuard no_grad;
        EXPECT_TRUE(testing::all_close(max_pool2d(x, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode).cpu(),
                                       values.cpu(), 0, 0));
      }
      for (Device device : {Device(kCPU), Device(kCUDA)}) {
        const Tensor x = host.to(device).requires_grad_();
        max_pool2d(x, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode).backward(dy_host.to(dt).to(device));
        grads.push_back(x.grad().cpu().to(kFloat32));
      }
      // Overlapping windows add on the GPU in atomics' order: equal up to float32's rounding.
      EXPECT_TRUE(testing::all_close(grads[1], grads[0], 1e-6, 1e-6));
    }
}

TEST(CudaConv, BenchmarkModeSearchesOncePerConfigurationAndAgreesWithTheHeuristic) {
  REQUIRE_GPU();
  manual_seed(1);
  const Tensor x = randn({8, 16, 20, 20}), w = randn({32, 16, 3, 3}) * 0.1, b = randn({32});
  const Tensor expected = conv2d(x, w, b, {1, 1}, {1, 1});
  const Tensor xg = x.cuda(), wg = w.cuda(), bg = b.cuda();
  backends::cudnn::clear_benchmark_cache();
  backends::cudnn::set_benchmark(false);
  EXPECT_TRUE(testing::all_close(conv2d(xg, wg, bg, {1, 1}, {1, 1}).cpu(), expected, 1e-4, 1e-4));
  EXPECT_EQ(backends::cudnn::benchmark_stats().searches, 0);
  backends::cudnn::set_benchmark(true);
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(testing::all_close(conv2d(xg, wg, bg, {1, 1}, {1, 1}).cpu(), expected, 1e-4, 1e-4));
  EXPECT_EQ(backends::cudnn::benchmark_stats().searches, 1);
  EXPECT_EQ(backends::cudnn::benchmark_stats().hits, 2);
  (void)conv2d(xg, wg, bg, {2, 2}, {1, 1});  // a new configuration: a new search
  EXPECT_EQ(backends::cudnn::benchmark_stats().searches, 2);
  // Gradients through cuDNN's backward-data and backward-filter against the CPU's.
  auto grads = [](const Tensor& xi, const Tensor& wi) {
    Tensor xr = xi.detach(), wr = wi.detach();
    xr.set_requires_grad(true);
    wr.set_requires_grad(true);
    conv2d(xr, wr, Tensor(), {1, 1}, {1, 1}).square().sum().backward();
    return std::make_pair(xr.grad().cpu(), wr.grad().cpu());
  };
  const auto [gx, gw] = grads(xg, wg);
  const auto [ex, ew] = grads(x, w);
  EXPECT_TRUE(testing::all_close(gx, ex, 1e-3, 1e-3));
  EXPECT_TRUE(testing::all_close(gw, ew, 1e-3, 1e-3));
  backends::cudnn::set_benchmark(false);
}

// float16 and bfloat16 convolutions go to cuDNN as they are (float accumulation), forward and
// backward, against the CPU's float32 result from the same rounded inputs.
TEST(CudaConv, HalfPrecisionForwardAndBackwardMatchTheCpu) {
  REQUIRE_GPU();
  manual_seed(2);
  for (DType d : {kFloat16, kBFloat16}) {
    const Tensor x = randn({4, 8, 12, 12}).to(d), w = (randn({16, 8, 3, 3}) * 0.1).to(d);
    auto run = [&](Device device, DType compute) {
      Tensor xr = x.to(device).to(compute), wr = w.to(device).to(compute);
      xr.set_requires_grad(true);
      wr.set_requires_grad(true);
      const Tensor y = conv2d(xr, wr, Tensor(), {1, 1}, {1, 1});
      y.square().sum().backward();
      return std::vector<Tensor>{y.cpu().to(kFloat32), xr.grad().cpu().to(kFloat32), wr.grad().cpu().to(kFloat32)};
    };
    const auto gpu = run(Device(kCUDA), d), cpu = run(Device(kCPU), kFloat32);
    const double tol = d == kFloat16 ? 1e-2 : 5e-2;
    for (size_t i = 0; i < gpu.size(); ++i)
      EXPECT_TRUE(testing::all_close(gpu[i], cpu[i], tol, tol * cpu[i].abs().max().item<double>())) << d << " " << i;
  }
}

// output_padding of a stride or more (below the dilation): conv_transpose2d's forward and its
// weight gradient hand cuDNN a gradient smaller than the output cuDNN computes for the shapes;
// the back end pads it with zeros. Values and every gradient against the CPU, in float64.
TEST(CudaConv, TransposedConvolutionWithOutputPaddingBeyondTheStrideMatchesTheCpu) {
  REQUIRE_GPU();
  manual_seed(3);
  const Tensor x = randn({2, 4, 5, 6}, TensorOptions(kFloat64)), w = randn({4, 3, 3, 2}, TensorOptions(kFloat64));
  const Tensor b = randn({3}, TensorOptions(kFloat64));
  auto run = [&](Device device) {
    Tensor xr = x.to(device), wr = w.to(device), br = b.to(device);
    for (Tensor* t : {&xr, &wr, &br}) t->set_requires_grad(true);
    const Tensor y = conv_transpose2d(xr, wr, br, {1, 2}, {1, 0}, {1, 1}, 1, {2, 2});
    y.square().sum().backward();
    return std::vector<Tensor>{y.cpu(), xr.grad().cpu(), wr.grad().cpu(), br.grad().cpu()};
  };
  const auto gpu = run(Device(kCUDA)), cpu = run(Device(kCPU));
  for (size_t i = 0; i < gpu.size(); ++i) EXPECT_TRUE(testing::all_close(gpu[i], cpu[i], 1e-10, 1e-10)) << i;
}

TEST(CudaTraining, AStepMatchesTheCpu) {
  REQUIRE_GPU();
  auto run = [](Device device) {
    manual_seed(3);
    nn::Sequential model(nn::Linear(20, 32), nn::GELU(), nn::LayerNorm(nn::LayerNormOptions({32})), nn::Linear(32, 5));
    model->to(device);
    optim::AdamW opt(model->parameters(), optim::AdamWOptions(1e-2));
    manual_seed(4);
    const Tensor x = randn({64, 20}).to(device), y = randint(0, 5, {64}).to(device);
    for (int i = 0; i < 5; ++i) {
      opt.zero_grad();
      nn::functional::cross_entropy(model(x), y).backward();
      opt.step();
    }
    return model->parameters().front().cpu();
  };
  EXPECT_TRUE(testing::all_close(run(Device(kCUDA)), run(Device(kCPU)), 1e-4, 1e-5));
}

// The GradScaler's promise on a real GPU (test_grad_scaler.cpp proves it on a stand-in device):
// forward under float16 autocast, backward, unscale_, clipping, step and update with an overflow
// among them, and not one wait for the device in the scaler's part of the iteration.
TEST(CudaAmp, AScalerIterationNeverWaitsForTheDevice) {
  REQUIRE_GPU();
  manual_seed(5);
  nn::Sequential model(nn::Linear(32, 64), nn::ReLU(), nn::Linear(64, 10));
  model->to(kCUDA);
  optim::AdamW opt(model->parameters(), optim::AdamWOptions(1e-3));
  amp::GradScaler scaler(amp::GradScalerOptions().growth_interval(3));
  const Tensor x = randn({16, 32}).cuda(), y = randint(0, 10, {16}).cuda();
  for (int it = 0; it < 6; ++it) {
    opt.zero_grad();
    Tensor loss;
    {
      autocast::AutocastGuard amp(kCUDA);
      loss = nn::functional::cross_entropy(model(x), y);
    }
    scaler.scale(loss).backward();
    if (it == 2) {
      NoGradGuard no_grad;
      model->parameters()[0].mutable_grad().view({-1}).narrow(0, 0, 1).fill_(std::nan(""));
    }
    const int64_t waits = cuda::device_to_host_waits();
    scaler.unscale_(opt);
    scaler.step(opt);
    scaler.update();
    EXPECT_EQ(cuda::device_to_host_waits(), waits) << "iteration " << it;
  }
  EXPECT_EQ(scaler.skipped_steps(), 1);
  EXPECT_EQ(scaler.get_scale(), 65536.0);  // backed off at 2, grown after 3 to 5
}

// NCCL with one rank on this GPU (a lone process: no MPI needed): every collective, the stream
// ordering of wait(), and DDP on CUDA tensors. More ranks need more GPUs.
TEST(CudaNccl, OneRankGroupCollectivesAndDdp) {
  REQUIRE_GPU();
  if (!distributed::is_nccl_available()) GTEST_SKIP() << "built without NCCL";
  if (distributed::launch_environment().world_size != 1) GTEST_SKIP() << "run as one process";
  auto pg = distributed::init_process_group("nccl");
  ASSERT_EQ(pg->size(), 1);
  EXPECT_EQ(pg->backend_name(), "nccl");
  for (DType dtype : {kFloat32, kFloat16, kBFloat16, kInt64}) {
    Tensor t = arange(6, TensorOptions(dtype).device(kCUDA));
    pg->all_reduce(t, distributed::ReduceOp::MAX)->wait();
    EXPECT_TRUE(testing::all_close(t.cpu().to(kFloat64), arange(6, kFloat64), 0, 0)) << dtype;
  }
  Tensor x = full({4}, 3.0, kCUDA);
  pg->broadcast(x, 0)->wait();
  std::vector<Tensor> gathered{empty({4}, kCUDA)};
  pg->all_gather(gathered, x)->wait();
  EXPECT_TRUE(testing::all_close(gathered[0].cpu(), full({4}, 3.0), 0, 0));
  Tensor out = empty({4}, kCUDA);
  pg->reduce_scatter(out, {x}, distributed::ReduceOp::AVG)->wait();
  EXPECT_TRUE(testing::all_close(out.cpu(), full({4}, 3.0), 0, 0));
  pg->barrier()->wait();
  EXPECT_ERROR_CONTAINS(pg->all_reduce(ones({2})), "carries tensors on this rank's GPU");

  manual_seed(2);
  nn::Sequential model(nn::Linear(8, 16), nn::ReLU(), nn::Linear(16, 2));
  model->to(kCUDA);
  nn::DistributedDataParallel ddp(model, pg);
  const Tensor in = randn({4, 8}).cuda();
  ddp(in).sum().backward();
  const Tensor g = model->parameters()[0].grad().cpu();
  model->zero_grad();
  model(in).sum().backward();  // one rank: the average is the local gradient
  EXPECT_TRUE(testing::all_close(g, model->parameters()[0].grad().cpu(), 1e-6, 1e-7));
}

// Subgroups on NCCL (ncclCommSplit) with one rank: the member's group of one communicates on its
// own, the lists are checked as on MPI, and a 1 x 1 mesh is made of them.
TEST(CudaNccl, OneRankSubgroupsAndMesh) {
  REQUIRE_GPU();
  if (!distributed::is_nccl_available()) GTEST_SKIP() << "built without NCCL";
  if (distributed::launch_environment().world_size != 1) GTEST_SKIP() << "run as one process";
  auto pg = distributed::init_process_group("nccl");
  auto sub = pg->new_group({0});
  ASSERT_TRUE(sub);
  EXPECT_EQ(sub->size(), 1);
  EXPECT_EQ(sub->rank(), 0);
  EXPECT_EQ(sub->backend_name(), "nccl");
  Tensor t = arange(5, TensorOptions(kFloat32).device(kCUDA));
  sub->all_reduce(t, distributed::ReduceOp::SUM)->wait();
  pg->all_reduce(t, distributed::ReduceOp::SUM)->wait();  // the parent still works beside it
  EXPECT_TRUE(testing::all_close(t.cpu(), arange(5, kFloat32), 0, 0));
  EXPECT_ERROR_CONTAINS(pg->new_group({}), "empty");
  EXPECT_ERROR_CONTAINS(pg->new_group({1}), "new_group");
  const distributed::Mesh2D mesh = distributed::mesh_2d(*pg, 1);
  ASSERT_TRUE(mesh.row && mesh.column);
  EXPECT_EQ(mesh.row->size(), 1);
  EXPECT_EQ(mesh.column->size(), 1);
}

// ---- int8 on CUDA (cuda/quant.cu, cuBLASLt's int8 GEMM): the CPU's results, integers exactly ----

TEST(CudaQuant, QuantizeDequantizeAndFakeQuantizeMatchTheCpu) {
  REQUIRE_GPU();
  manual_seed(41);
  const Tensor x = randn({6, 5, 7}) * 3;
  const Device gpu(kCUDA);
  for (int64_t axis : {-1, 1}) {
    QuantParams p;
    p.axis = axis;
    p.scale = axis < 0 ? full({1}, 0.05) : rand({5}) * 0.1 + 0.01;
    p.zero_point = axis < 0 ? full({1}, 3, TensorOptions(kInt32)) : randint(-5, 5, {5}).to(kInt32);
    p.quant_min = -128;
    p.quant_max = 127;
    QuantParams pg = p;
    pg.scale = p.scale.to(gpu);
    pg.zero_point = p.zero_point.to(gpu);
    const Tensor q = native::quantize_affine(x, p, kInt8), qg = native::quantize_affine(x.to(gpu), pg, kInt8);
    EXPECT_TRUE(testing::all_close(qg.cpu(), q, 0, 0));
    EXPECT_TRUE(testing::all_close(native::dequantize_affine(qg, pg).cpu(), native::dequantize_affine(q, p), 0, 0));
    auto [f, m] = native::fake_quantize_affine(x, p);
    auto [fg, mg] = native::fake_quantize_affine(x.to(gpu), pg);
    EXPECT_TRUE(testing::all_close(fg.cpu(), f, 0, 0));
    EXPECT_TRUE(testing::all_close(mg.cpu(), m, 0, 0));
  }
}

TEST(CudaQuant, Int8GemmMatchesTheCpuOnEveryShapeEdge) {
  REQUIRE_GPU();
  manual_seed(42);
  const Device gpu(kCUDA);
  for (auto [M, N, K] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {5, 17, 7}, {64, 48, 256}, {33, 100, 130}}) {
    SCOPED_TRACE(::testing::Message() << M << "x" << N << "x" << K);
    const Tensor a = randint(0, 128, {M, K}).to(kUInt8), w = randint(-128, 128, {N, K}).to(kInt8);
    Int8Epilogue e;
    e.a_zero_point = 60;
    e.a_scale = 0.02;
    e.w_scale = rand({N}) + 0.01;
    e.bias = randn({N});
    e.out_scale = 0.3;
    e.out_zero_point = 10;
    e.out_quant_max = 127;
    Int8Epilogue eg = e;
    eg.w_scale = e.w_scale.to(gpu);
    eg.bias = e.bias.to(gpu);
    const Tensor pw = native::int8_pack_weight(w), pwg = native::int8_pack_weight(w.to(gpu));
    for (DType out : {kInt32, kFloat32, kUInt8})
      EXPECT_TRUE(testing::all_close(native::int8_gemm(a.to(gpu), pwg, N, eg, out).cpu(),
                                     native::int8_gemm(a, pw, N, e, out), 0, 0))
          << out;
  }
}

TEST(CudaQuant, Int8ConvolutionMatchesTheCpuOnEveryShape) {
  REQUIRE_GPU();
  manual_seed(44);
  const Device gpu(kCUDA);
  struct Case {
    int64_t N, C, H, W, O;
    std::array<int64_t, 2> kernel, stride, padding, dilation;
  };
  for (const Case& c :
       {Case{2, 1, 8, 8, 4, {3, 3}, {1, 1}, {1, 1}, {1, 1}},  // a first layer: K = 9, padded to 12
        Case{3, 5, 9, 7, 6, {3, 2}, {2, 1}, {1, 0}, {1, 2}},  // strides, dilation, odd sizes
        Case{2, 16, 14, 14, 32, {3, 3}, {1, 1}, {0, 0}, {1, 1}}, Case{1, 8, 5, 6, 3, {1, 1}, {2, 2}, {0, 0}, {1, 1}}})
    for (bool per_channel : {true, false}) {
      SCOPED_TRACE(detail::concat(c.C, "->", c.O, " kernel ", c.kernel[0], "x", c.kernel[1], " stride ", c.stride[0],
                                  per_channel ? " per channel" : " per tensor"));
      const Tensor x = randint(0, 128, {c.N, c.C, c.H, c.W}).to(kUInt8);
      const Tensor w = randint(-128, 128, {c.O, c.C, c.kernel[0], c.kernel[1]}).to(kInt8);
      Conv2dParams p;
      p.stride = c.stride;
      p.padding = c.padding;
      p.dilation = c.dilation;
      Int8Epilogue e;
      e.a_zero_point = 37;  // pads with 37: the input's 0.0
      e.a_scale = 0.02;
      e.w_scale = per_channel ? rand({c.O}) * 0.01 + 0.001 : full({1}, 0.004);
      e.bias = randn({c.O});
      e.out_scale = 0.25;
      e.out_zero_point = 12;
      e.out_quant_max = 127;
      e.relu = per_channel;
      Int8Epilogue eg = e;
      eg.w_scale = e.w_scale.to(gpu);
      eg.bias = e.bias.to(gpu);
      const Tensor pw = native::int8_pack_conv_weight(w), pwg = native::int8_pack_conv_weight(w.to(gpu));
      for (DType out : {kUInt8, kFloat32}) {
        const Tensor expected = native::int8_conv2d(x, pw, c.O, c.kernel, p, e, out);
        const Tensor got = native::int8_conv2d(x.to(gpu), pwg, c.O, c.kernel, p, eg, out);
        ASSERT_EQ(got.sizes(), expected.sizes());
        EXPECT_TRUE(testing::all_close(got.cpu(), expected, 0, 0)) << out;
      }
      EXPECT_ERROR_CONTAINS(native::int8_conv2d(x.to(gpu), pw, c.O, c.kernel, p, eg, kUInt8),
                            "int8_conv2d: expected all tensors to be on the same device, but found cuda:0 and cpu");
    }
}

TEST(CudaQuant, AStaticInt8CnnRunsOnTheGpu) {
  REQUIRE_GPU();
  manual_seed(45);
  nn::Sequential net(nn::Conv2d(nn::Conv2dOptions(1, 8, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
                     nn::Conv2d(8, 16, 3), nn::ReLU(), nn::MaxPool2d(2), nn::Flatten(), nn::Linear(16 * 3 * 3, 10));
  net->eval();
  quantization::prepare(*net);
  for (int i = 0; i < 4; ++i) net(randn({32, 1, 16, 16}));
  nn::Sequential on_cpu = quantization::convert(*net), on_gpu = quantization::convert(*net);
  const Tensor x = randn({20, 1, 16, 16});
  const Tensor expected = on_cpu(x);
  on_gpu(x);  // packed for the CPU first: to() must make it pack again for the GPU
  on_gpu->to(Device(kCUDA));
  EXPECT_TRUE(testing::all_close(on_gpu(x.to(Device(kCUDA))).cpu(), expected, 0, 0));
  // uint8 max pooling on its own, against the CPU's
  const Tensor q = randint(0, 256, {2, 3, 9, 10}).to(kUInt8);
  EXPECT_TRUE(testing::all_close(max_pool2d(q.to(Device(kCUDA)), {3, 3}, Int2{2, 2}, {1, 1}).cpu(),
                                 max_pool2d(q, {3, 3}, Int2{2, 2}, {1, 1}), 0, 0));
}

TEST(CudaQuant, ADynamicQuantizedLinearRunsOnTheGpu) {
  REQUIRE_GPU();
  manual_seed(43);
  nn::Linear lin(64, 32);
  quantization::DynamicQuantizedLinearImpl cpu_layer(*lin, true), gpu_layer(*lin, true);
  gpu_layer.to(Device(kCUDA));
  const Tensor x = randn({9, 64});
  EXPECT_TRUE(testing::all_close(gpu_layer.forward(x.to(Device(kCUDA))).cpu(), cpu_layer.forward(x), 0, 0));
}

}  // namespace
}  // namespace ember
