// Google Benchmark micro benchmarks of single ops at several sizes, for tracking
// regressions (cmake --preset bench && build/bench/bench/micro_ops).
#include <benchmark/benchmark.h>

#include <ember/ember.h>

using namespace ember;

static void BM_Add(benchmark::State& state) {
  const Tensor a = rand({state.range(0)}), b = rand({state.range(0)});
  for (auto _ : state) benchmark::DoNotOptimize(a + b);
  state.SetBytesProcessed(state.iterations() * state.range(0) * 12);
}
BENCHMARK(BM_Add)->RangeMultiplier(8)->Range(1 << 10, 1 << 24);

static void BM_AddBroadcast(benchmark::State& state) {
  const Tensor a = rand({state.range(0), 512}), b = rand({512});
  for (auto _ : state) benchmark::DoNotOptimize(a + b);
  state.SetBytesProcessed(state.iterations() * state.range(0) * 512 * 8);
}
BENCHMARK(BM_AddBroadcast)->Arg(64)->Arg(4096);

// Unary ops with and without parameters in their functor (Note [Functor copies]): relu is the
// floor the others should reach; [64, 64, 14, 14] is the DCGAN discriminator's activation.
static void BM_Relu(benchmark::State& state) {
  const Tensor a = randn({state.range(0)});
  for (auto _ : state) benchmark::DoNotOptimize(relu(a));
  state.SetBytesProcessed(state.iterations() * state.range(0) * 8);
}
BENCHMARK(BM_Relu)->Arg(64 * 64 * 14 * 14);

static void BM_LeakyRelu(benchmark::State& state) {
  const Tensor a = randn({state.range(0)});
  for (auto _ : state) benchmark::DoNotOptimize(nn::functional::leaky_relu(a, 0.2));
  state.SetBytesProcessed(state.iterations() * state.range(0) * 8);
}
BENCHMARK(BM_LeakyRelu)->Arg(64 * 64 * 14 * 14);

static void BM_Clamp(benchmark::State& state) {
  const Tensor a = randn({state.range(0)});
  for (auto _ : state) benchmark::DoNotOptimize(a.clamp(-0.5, 0.5));
  state.SetBytesProcessed(state.iterations() * state.range(0) * 8);
}
BENCHMARK(BM_Clamp)->Arg(64 * 64 * 14 * 14);

// Unary ops that call a transcendental function: the float32 loops evaluate exp, expm1, tanh,
// log and log1p 8 at a time (tensor/cpu/vec_math.h); relu above is the memory-bound floor.
static void unary_bench(benchmark::State& state, Tensor (*op)(const Tensor&), DType dtype = kFloat32,
                        bool positive = false) {
  const Tensor a = (positive ? randn({state.range(0)}).abs() : randn({state.range(0)})).to(dtype);
  for (auto _ : state) benchmark::DoNotOptimize(op(a));
  state.SetBytesProcessed(state.iterations() * state.range(0) * 8);
}
BENCHMARK_CAPTURE(unary_bench, exp, [](const Tensor& x) { return exp(x); })->Arg(64 * 64 * 14 * 14);
BENCHMARK_CAPTURE(unary_bench, tanh, [](const Tensor& x) { return tanh(x); })->Arg(64 * 64 * 14 * 14);
BENCHMARK_CAPTURE(unary_bench, sigmoid, [](const Tensor& x) { return sigmoid(x); })->Arg(64 * 64 * 14 * 14);
BENCHMARK_CAPTURE(unary_bench, silu, [](const Tensor& x) { return silu(x); })->Arg(64 * 64 * 14 * 14);
BENCHMARK_CAPTURE(unary_bench, elu, [](const Tensor& x) { return elu(x); })->Arg(64 * 64 * 14 * 14);
BENCHMARK_CAPTURE(unary_bench, gelu_tanh, [](const Tensor& x) { return gelu(x, "tanh"); })->Arg(64 * 64 * 14 * 14);
BENCHMARK_CAPTURE(unary_bench, gelu, [](const Tensor& x) { return gelu(x); })->Arg(64 * 64 * 14 * 14);
BENCHMARK_CAPTURE(
    unary_bench, log, [](const Tensor& x) { return log(x); }, kFloat32, true)
    ->Arg(64 * 64 * 14 * 14);
BENCHMARK_CAPTURE(
    unary_bench, log1p, [](const Tensor& x) { return log1p(x); }, kFloat32, true)
    ->Arg(64 * 64 * 14 * 14);
BENCHMARK_CAPTURE(unary_bench, softplus, [](const Tensor& x) { return softplus(x); })->Arg(64 * 64 * 14 * 14);
// pow with the exponents that have a cheaper op (PyTorch's shortcuts): x^2 is square, x^0.5
// sqrt, x^-0.5 rsqrt, x^-1 reciprocal; x^2.5 is the general pow
BENCHMARK_CAPTURE(unary_bench, pow_2, [](const Tensor& x) { return pow(x, 2.0); })->Arg(64 * 64 * 14 * 14);
BENCHMARK_CAPTURE(
    unary_bench, pow_half, [](const Tensor& x) { return pow(x, 0.5); }, kFloat32, true)
    ->Arg(64 * 64 * 14 * 14);
BENCHMARK_CAPTURE(
    unary_bench, pow_2_5, [](const Tensor& x) { return pow(x, 2.5); }, kFloat32, true)
    ->Arg(64 * 64 * 14 * 14);
BENCHMARK_CAPTURE(
    unary_bench, tanh_bf16, [](const Tensor& x) { return tanh(x); }, kBFloat16)
    ->Arg(64 * 64 * 14 * 14);

// gelu's gradient: the fused gelu_backward against what GeluBackward composed before it
// (erf, exp and six elementwise passes).
static void BM_GeluBackward(benchmark::State& state) {
  const Tensor x = randn({state.range(0)}) * 3.0, d = randn({state.range(0)});
  for (auto _ : state) benchmark::DoNotOptimize(native::gelu_backward(d, x));
  state.SetBytesProcessed(state.iterations() * state.range(0) * 12);
}
BENCHMARK(BM_GeluBackward)->Arg(64 * 64 * 14 * 14);
static void BM_GeluBackwardComposed(benchmark::State& state) {
  const Tensor x = randn({state.range(0)}) * 3.0, d = randn({state.range(0)});
  for (auto _ : state) {
    const Tensor cdf = (1.0 + erf(x * 0.7071067811865476)) * 0.5;
    benchmark::DoNotOptimize(d * (cdf + x * (exp(x * x * -0.5) * 0.3989422804014327)));
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * 12);
}
BENCHMARK(BM_GeluBackwardComposed)->Arg(64 * 64 * 14 * 14);

// leaky_relu's gradient: the fused leaky_relu_backward against the where(x > 0, d, d * slope) it
// replaced, on the DCGAN discriminator's activation.
static void BM_LeakyReluBackward(benchmark::State& state) {
  const Tensor x = randn({state.range(0)}), d = randn({state.range(0)});
  for (auto _ : state) benchmark::DoNotOptimize(native::leaky_relu_backward(d, x, 0.2));
  state.SetBytesProcessed(state.iterations() * state.range(0) * 12);
}
BENCHMARK(BM_LeakyReluBackward)->Arg(64 * 64 * 14 * 14);
static void BM_LeakyReluBackwardComposed(benchmark::State& state) {
  const Tensor x = randn({state.range(0)}), d = randn({state.range(0)});
  for (auto _ : state) benchmark::DoNotOptimize(where(x > 0.0, d, d * 0.2));
  state.SetBytesProcessed(state.iterations() * state.range(0) * 12);
}
BENCHMARK(BM_LeakyReluBackwardComposed)->Arg(64 * 64 * 14 * 14);

// elu's gradient: the fused elu_backward against the where(x > 0, d, d * exp(x) * alpha) it
// replaced.
static void BM_EluBackward(benchmark::State& state) {
  const Tensor x = randn({state.range(0)}), d = randn({state.range(0)});
  for (auto _ : state) benchmark::DoNotOptimize(native::elu_backward(d, x, 1.0));
  state.SetBytesProcessed(state.iterations() * state.range(0) * 12);
}
BENCHMARK(BM_EluBackward)->Arg(64 * 64 * 14 * 14);
static void BM_EluBackwardComposed(benchmark::State& state) {
  const Tensor x = randn({state.range(0)}), d = randn({state.range(0)});
  for (auto _ : state) benchmark::DoNotOptimize(where(x > 0.0, d, d * exp(x) * 1.0));
  state.SetBytesProcessed(state.iterations() * state.range(0) * 12);
}
BENCHMARK(BM_EluBackwardComposed)->Arg(64 * 64 * 14 * 14);

// where and masked_fill on attention's shapes: a causal [128, 128] mask broadcast over scores
// [16, 8, 128, 128] (the GPT step's masked_fill forward), and where(mask, 0, d), its backward.
static void BM_MaskedFillCausal(benchmark::State& state) {
  const Tensor scores = randn({16, 8, 128, 128});
  const Tensor future = triu(ones({128, 128}, TensorOptions(kBool)), 1);
  for (auto _ : state) benchmark::DoNotOptimize(scores.masked_fill(future, -1e30));
  state.SetBytesProcessed(state.iterations() * scores.numel() * 8);
}
BENCHMARK(BM_MaskedFillCausal);
static void BM_WhereTensors(benchmark::State& state) {
  const Tensor a = randn({state.range(0)}), b = randn({state.range(0)}), c = randn({state.range(0)}) > 0.0;
  for (auto _ : state) benchmark::DoNotOptimize(where(c, a, b));
  state.SetBytesProcessed(state.iterations() * state.range(0) * 13);
}
BENCHMARK(BM_WhereTensors)->Arg(64 * 64 * 14 * 14);

// bool on either side of an elementwise op: a comparison writing a mask, and a mask widened to
// float32 (a bool's widening is what GCC 12 does not vectorize; see `where`).
static void BM_CompareToMask(benchmark::State& state) {
  const Tensor x = randn({state.range(0)});
  for (auto _ : state) benchmark::DoNotOptimize(x > 0.0);
  state.SetBytesProcessed(state.iterations() * state.range(0) * 5);
}
BENCHMARK(BM_CompareToMask)->Arg(64 * 64 * 14 * 14);
static void BM_MaskToFloat(benchmark::State& state) {
  const Tensor m = randn({state.range(0)}) > 0.0;
  for (auto _ : state) benchmark::DoNotOptimize(m.to(kFloat32));
  state.SetBytesProcessed(state.iterations() * state.range(0) * 5);
}
BENCHMARK(BM_MaskToFloat)->Arg(64 * 64 * 14 * 14);
static void BM_MaskToBFloat16(benchmark::State& state) {
  const Tensor m = randn({state.range(0)}) > 0.0;
  for (auto _ : state) benchmark::DoNotOptimize(m.to(kBFloat16));
  state.SetBytesProcessed(state.iterations() * state.range(0) * 3);
}
BENCHMARK(BM_MaskToBFloat16)->Arg(64 * 64 * 14 * 14);
static void BM_SumOfMask(benchmark::State& state) {
  const Tensor m = randn({state.range(0)}) > 0.0;
  for (auto _ : state) benchmark::DoNotOptimize(m.sum());
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_SumOfMask)->Arg(64 * 64 * 14 * 14);

// Random draws: Philox4x32-10 blocks (tensor/generator.h), then the words made into values;
// dropout draws a uniform mask, compares, widens and scales it, then multiplies.
static void BM_Rand(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(rand({state.range(0)}));
  state.SetBytesProcessed(state.iterations() * state.range(0) * 4);
}
BENCHMARK(BM_Rand)->Arg(64 * 64 * 14 * 14);
static void BM_RandFloat64(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(rand({state.range(0)}, kFloat64));
  state.SetBytesProcessed(state.iterations() * state.range(0) * 8);
}
BENCHMARK(BM_RandFloat64)->Arg(64 * 64 * 14 * 14);
static void BM_Randn(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(randn({state.range(0)}));
  state.SetBytesProcessed(state.iterations() * state.range(0) * 4);
}
BENCHMARK(BM_Randn)->Arg(64 * 64 * 14 * 14);
static void BM_Dropout(benchmark::State& state) {
  const Tensor x = randn({state.range(0)});
  for (auto _ : state) benchmark::DoNotOptimize(nn::functional::dropout(x, 0.1, true));
  state.SetBytesProcessed(state.iterations() * state.range(0) * 8);
}
BENCHMARK(BM_Dropout)->Arg(64 * 64 * 14 * 14);

static void BM_SumRows(benchmark::State& state) {
  const Tensor a = rand({state.range(0), 1024});
  for (auto _ : state) benchmark::DoNotOptimize(a.sum({1}));
  state.SetBytesProcessed(state.iterations() * state.range(0) * 1024 * 4);
}
BENCHMARK(BM_SumRows)->Arg(16)->Arg(4096);

static void BM_SumColumns(benchmark::State& state) {
  const Tensor a = rand({state.range(0), 1024});
  for (auto _ : state) benchmark::DoNotOptimize(a.sum({0}));
  state.SetBytesProcessed(state.iterations() * state.range(0) * 1024 * 4);
}
BENCHMARK(BM_SumColumns)->Arg(16)->Arg(4096);

static void BM_Matmul(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Tensor a = randn({n, n}), b = randn({n, n});
  for (auto _ : state) benchmark::DoNotOptimize(matmul(a, b));
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_Matmul)->Arg(64)->Arg(256)->Arg(1024)->Unit(benchmark::kMillisecond);

// Products whose N is not a whole number of the tiles' panels, [M, K] x [K, N]: a convolution's
// 7 x 7 outputs (N = 49: the weights against the receptive fields, and the data gradient), the
// character GPT's head (N = 65 letters), the same sizes rounded to whole tiles, a 10-class head
// (N = 10: Eigen's before, now the transposed product); and the DCGAN's per-sample im2col
// products in their layouts (the 4th argument: 1, a is a transpose, w^T dy; 2, b is, dy col^T),
// which run one per thread (OMP_NUM_THREADS=1 times them as they run there).
static void BM_MatmulShapes(benchmark::State& state) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2), layout = state.range(3);
  const Tensor a = layout == 1 ? randn({K, M}).t() : randn({M, K});
  const Tensor b = layout == 2 ? randn({N, K}).t() : randn({K, N});
  for (auto _ : state) benchmark::DoNotOptimize(matmul(a, b));
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * M * N * K, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_MatmulShapes)
    ->Args({128, 49, 1024, 0})
    ->Args({126, 48, 1024, 0})
    ->Args({1024, 49, 128, 0})
    ->Args({1024, 65, 256, 0})
    ->Args({1024, 64, 256, 0})
    ->Args({1024, 49, 128, 1})
    ->Args({128, 1024, 49, 2})
    ->Args({64, 196, 16, 0})
    ->Args({64, 16, 196, 2})
    ->Args({128, 10, 128, 0})
    ->Args({1024, 10, 64, 0})
    ->Unit(benchmark::kMicrosecond);

// Attention's scores: many small products, one per head (16 sequences x 8 heads); float32, or
// bfloat16 (Arg 1).
static void BM_AttentionScores(benchmark::State& state) {
  const DType dtype = state.range(0) ? kBFloat16 : kFloat32;
  const Tensor q = randn({128, 128, 32}).to(dtype), k = randn({128, 128, 32}).to(dtype);
  for (auto _ : state) benchmark::DoNotOptimize(matmul(q, k.transpose(1, 2)));
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * 128 * 128 * 128 * 32, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_AttentionScores)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

static void BM_Softmax(benchmark::State& state) {
  const Tensor a = randn({state.range(0), 1024});
  for (auto _ : state) benchmark::DoNotOptimize(a.softmax(1));
}
BENCHMARK(BM_Softmax)->Arg(64)->Arg(4096)->Unit(benchmark::kMicrosecond);

// Autocast's attention probabilities: [16 x 8 heads x 128, 128] in bfloat16.
static void BM_SoftmaxBFloat16(benchmark::State& state) {
  const Tensor a = randn({16 * 8 * 128, 128}).to(kBFloat16);
  for (auto _ : state) benchmark::DoNotOptimize(a.softmax(1));
}
BENCHMARK(BM_SoftmaxBFloat16)->Unit(benchmark::kMicrosecond);

static void BM_Conv2d(benchmark::State& state) {
  const Tensor x = randn({8, 32, 28, 28}), w = randn({32, 32, 3, 3});
  for (auto _ : state) benchmark::DoNotOptimize(conv2d(x, w, {}, {1, 1}, {1, 1}));
}
BENCHMARK(BM_Conv2d)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
