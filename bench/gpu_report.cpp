// The CUDA back end against the device's ceilings (run by tools/gpu_check.sh on a GPU machine).
// Each result is checked before it is timed; times come from CUDA events around 10 (GEMM,
// conv) or 20 (memory-bound, training steps) iterations after warm-up. Prints one Markdown table.
//   gpu_report            (all sections)
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>

#include <ember/ember.h>

#include "models.h"

using namespace ember;

namespace {

const Device kGpu(kCUDA);

// Milliseconds per call of f, from events on the current stream.
double time_ms(const std::function<void()>& f, int iters) {
  for (int i = 0; i < 2; ++i) f();  // warm-up: cuBLAS/cuDNN setup, allocator, caches
  cuda::Event start, stop;
  start.record();
  for (int i = 0; i < iters; ++i) f();
  stop.record();
  stop.synchronize();
  return start.elapsed_ms(stop) / iters;
}

bool check(bool ok, const char* what) {
  if (!ok) std::printf("| %s | CHECK FAILED | | |\n", what);
  return ok;
}

// C = A B at n³ in dtype (TF32 when asked); 16 entries checked against float64 dot products.
void gemm_row(int64_t n, DType dtype, bool tf32, const char* label) {
  backends::cuda::set_allow_tf32(tf32);
  manual_seed(0);
  const Tensor a = randn({n, n}, kGpu).to(dtype), b = randn({n, n}, kGpu).to(dtype);
  Tensor c = a.matmul(b);
  const Tensor a64 = a.to(kFloat64).cpu(), b64 = b.to(kFloat64).cpu(), c64 = c.to(kFloat64).cpu();
  const double tol = dtype == kFloat32 && !tf32 ? 1e-4 : dtype == kBFloat16 ? 3e-2 : 1e-2;
  double worst = 0;
  for (int s = 0; s < 16; ++s) {
    const int64_t i = (s * 7919) % n, j = (s * 104729) % n;
    const double want = (a64[i] * b64.select(1, j)).sum().item<double>();
    worst = std::max(worst, std::abs(c64[i][j].item<double>() - want) / std::sqrt(static_cast<double>(n)));
  }
  if (!check(worst < tol, label)) return;
  const double ms = time_ms([&] { c = a.matmul(b); }, 10);
  std::printf("| %s | %lld³ | %.3f ms | %.1f TFLOP/s |\n", label, static_cast<long long>(n), ms,
              2.0 * n * n * n / (ms * 1e-3) / 1e12);
  backends::cuda::set_allow_tf32(false);
}

// Linear's forward, x [16384, 4096] @ wᵀ [4096, 4096] + b in bfloat16: the bias added by cuBLASLt's
// epilogue as the product is written, against a GEMM followed by a separate add.
void linear_rows() {
  manual_seed(0);
  const int64_t m = 16384, k = 4096, n = 4096;
  const Tensor x = randn({m, k}, kGpu).to(kBFloat16), w = (randn({n, k}, kGpu) * 0.02).to(kBFloat16),
               b = randn({n}, kGpu).to(kBFloat16);
  Tensor fused = linear(x, w, b), separate = x.matmul(w.t()) + b;
  const double gap = (fused.to(kFloat32) - separate.to(kFloat32)).abs().max().item<double>();
  if (!check(gap < 0.1, "Linear + bias")) return;
  const double flops = 2.0 * m * k * n;
  const double ms_fused = time_ms([&] { fused = linear(x, w, b); }, 10);
  const double ms_separate = time_ms([&] { separate = x.matmul(w.t()) + b; }, 10);
  std::printf("| Linear + bias, bfloat16 (epilogue) | 16384x4096x4096 | %.3f ms | %.1f TFLOP/s |\n", ms_fused,
              flops / (ms_fused * 1e-3) / 1e12);
  std::printf("| Linear + bias, bfloat16 (GEMM, then add) | 16384x4096x4096 | %.3f ms | %.1f TFLOP/s |\n", ms_separate,
              flops / (ms_separate * 1e-3) / 1e12);
}

// The int8 GEMM (cuBLASLt's int8 kernels, cuda/quant.cu) at 16384x4096x4096 against bfloat16's
// Linear above: its integers checked against the CPU's on a slice first, then the int32 GEMM
// alone and the dynamic quantized Linear (quantize, GEMM, dequantize epilogue) timed.
void int8_rows() {
  manual_seed(0);
  const int64_t m = 16384, k = 4096, n = 4096;
  const Tensor a = randint(0, 128, {m, k}, TensorOptions(kInt64).device(kGpu)).to(kUInt8);
  const Tensor w = randint(-128, 128, {n, k}, TensorOptions(kInt64).device(kGpu)).to(kInt8);
  const Tensor packed = native::int8_pack_weight(w);
  Int8Epilogue e;
  e.a_zero_point = 64;
  Tensor acc = native::int8_gemm(a, packed, n, e, kInt32);
  const Tensor rows_cpu = a.narrow(0, 0, 8).cpu(), w_cpu = w.narrow(0, 0, 64).cpu();
  const Tensor want = native::int8_gemm(rows_cpu, native::int8_pack_weight(w_cpu), 64, e, kInt32);
  if (!check(acc.narrow(0, 0, 8).narrow(1, 0, 64).cpu().eq(want).all().item<bool>(), "int8 GEMM")) return;
  const double macs = double(m) * k * n;
  const double ms = time_ms([&] { acc = native::int8_gemm(a, packed, n, e, kInt32); }, 10);
  std::printf("| int8 GEMM, int32 out (cuBLASLt) | 16384x4096x4096 | %.3f ms | %.1f TOP/s |\n", ms,
              2.0 * macs / (ms * 1e-3) / 1e12);
  nn::Linear fp(k, n);
  quantization::DynamicQuantizedLinearImpl q(*fp, /*per_channel=*/true);
  q.to(kGpu);
  const Tensor x = randn({m, k}, kGpu);
  Tensor y = q.forward(x);
  if (!check(std::isfinite(y.abs().max().item<double>()), "int8 dynamic Linear")) return;
  const double ms_q = time_ms([&] { y = q.forward(x); }, 10);
  std::printf("| int8 dynamic Linear, float32 in and out | 16384x4096x4096 | %.3f ms | %.1f TOP/s |\n", ms_q,
              2.0 * macs / (ms_q * 1e-3) / 1e12);
}

// The int8 convolution (cuda/quant.cu: im2col + cuBLASLt's int8 GEMM, uint8 out) on the 64 -> 64
// 3x3 layer of conv_rows at batch 256, against cuDNN's float32 forward of the same layer: its
// bytes checked against the CPU's on two images first.
void int8_conv_rows() {
  manual_seed(0);
  const int64_t n = 256, c = 64, hw = 56;
  const Tensor x = randint(0, 128, {n, c, hw, hw}, TensorOptions(kInt64).device(kGpu)).to(kUInt8);
  const Tensor w = randint(-128, 128, {c, c, 3, 3}, TensorOptions(kInt64).device(kGpu)).to(kInt8);
  Conv2dParams p;
  p.padding = {1, 1};
  Int8Epilogue e;
  e.a_zero_point = 64;
  e.a_scale = 0.02;
  e.w_scale = full({1}, 0.001, kGpu);
  e.out_scale = 0.05;
  e.out_quant_max = 127;
  const Tensor packed = native::int8_pack_conv_weight(w);
  Tensor y = native::int8_conv2d(x, packed, c, {3, 3}, p, e, kUInt8);
  Int8Epilogue e_cpu = e;
  e_cpu.w_scale = e.w_scale.cpu();
  const Tensor want =
      native::int8_conv2d(x.narrow(0, 0, 2).cpu(), native::int8_pack_conv_weight(w.cpu()), c, {3, 3}, p, e_cpu, kUInt8);
  if (!check(y.narrow(0, 0, 2).cpu().eq(want).all().item<bool>(), "int8 conv2d")) return;
  const double macs = double(n) * c * hw * hw * c * 9;
  const double ms = time_ms([&] { y = native::int8_conv2d(x, packed, c, {3, 3}, p, e, kUInt8); }, 10);
  const Tensor xf = randn({n, c, hw, hw}, kGpu), wf = randn({c, c, 3, 3}, kGpu) * 0.05;
  Tensor yf = conv2d(xf, wf, Tensor(), {1, 1}, {1, 1});
  const double ms_f = time_ms([&] { yf = conv2d(xf, wf, Tensor(), {1, 1}, {1, 1}); }, 10);
  std::printf("| int8 conv2d, uint8 out (im2col + cuBLASLt) | 256x64x56x56, 3x3 | %.3f ms | %.1f TOP/s |\n", ms,
              2.0 * macs / (ms * 1e-3) / 1e12);
  std::printf("| conv2d forward, float32 (cuDNN) | 256x64x56x56, 3x3 | %.3f ms | %.1f TFLOP/s (int8 %.2fx) |\n", ms_f,
              2.0 * macs / (ms_f * 1e-3) / 1e12, ms_f / ms);
}

void memory_rows() {
  const int64_t n = int64_t{256} << 20;  // 256 M floats, 1 GiB each
  const Tensor x = full({n}, 1.0f, kGpu), y = full({n}, 2.0f, kGpu);
  Tensor z = x + y;
  Tensor d = empty({n}, kGpu);
  d.copy_(x);
  const double bytes = 4.0 * n;
  if (!check(z.min().item<float>() == 3.0f && z.max().item<float>() == 3.0f, "add")) return;
  if (!check(std::abs(x.sum().item<double>() - n) / n < 1e-6, "sum")) return;
  const double copy = time_ms([&] { d.copy_(x); }, 20);
  const double add = time_ms([&] { z = x + y; }, 20);
  const double sum = time_ms([&] { (void)x.sum(); }, 20);
  std::printf("| device-to-device copy | 256 M float | %.3f ms | %.0f GB/s |\n", copy, 2 * bytes / copy / 1e6);
  std::printf("| add (x + y) | 256 M float | %.3f ms | %.0f GB/s (%.0f %% of copy) |\n", add, 3 * bytes / add / 1e6,
              100 * (3 * bytes / add) / (2 * bytes / copy));
  std::printf("| sum | 256 M float | %.3f ms | %.0f GB/s (%.0f %% of copy) |\n", sum, bytes / sum / 1e6,
              100 * (bytes / sum) / (2 * bytes / copy));
}

// What pinned memory buys a host-to-device copy (DataLoader(pin_memory) + to(device, true)):
// 256 MB from pageable memory (staged by the driver) and from page-locked memory (DMA).
void pinned_rows() {
  const int64_t n = int64_t{64} << 20;  // 256 MB of float
  const Tensor pageable = full({n}, 1.0f), pinned = pageable.pin_memory();
  Tensor d = pinned.to(kGpu, true);
  if (!check(d.sum().item<double>() == static_cast<double>(n) && pageable.to(kGpu).sum().item<double>() == n,
             "host-to-device copy"))
    return;
  const double bytes = 4.0 * n;
  const double slow = time_ms([&] { d = pageable.to(kGpu); }, 10);
  const double fast = time_ms([&] { d = pinned.to(kGpu, /*non_blocking=*/true); }, 10);
  std::printf("| host-to-device copy, pageable | 256 MB | %.3f ms | %.1f GB/s |\n", slow, bytes / slow / 1e6);
  std::printf("| host-to-device copy, pinned | 256 MB | %.3f ms | %.1f GB/s (%.1fx pageable) |\n", fast,
              bytes / fast / 1e6, slow / fast);
}

// conv2d 64→64, 3×3, padding 1, batch 64, 56×56, forward + backward, float32.
void conv_rows() {
  manual_seed(0);
  const Tensor x = randn({64, 64, 56, 56}, kGpu), w = randn({64, 64, 3, 3}, kGpu) * 0.05;
  const Tensor y_small = conv2d(x.narrow(0, 0, 2), w, Tensor(), {1, 1}, {1, 1}).cpu();
  const Tensor y_cpu = conv2d(x.narrow(0, 0, 2).cpu(), w.cpu(), Tensor(), {1, 1}, {1, 1});
  if (!check((y_small - y_cpu).abs().max().item<float>() < 1e-3f, "conv2d")) return;
  auto step = [&] {
    Tensor xi = x.detach(), wi = w.detach();
    xi.set_requires_grad(true);
    wi.set_requires_grad(true);
    conv2d(xi, wi, Tensor(), {1, 1}, {1, 1}).sum().backward();
  };
  const double flops = 3 * 2.0 * 64 * 64 * 56 * 56 * 64 * 9;  // forward, backward-data, backward-filter
  for (bool bench : {false, true}) {
    backends::cudnn::set_benchmark(bench);
    const double ms = time_ms(step, 10);
    std::printf("| conv2d fwd+bwd, %s | 64x64x56x56, 3x3 | %.3f ms | %.1f TFLOP/s |\n",
                bench ? "cudnn.benchmark" : "heuristic", ms, flops / (ms * 1e-3) / 1e12);
  }
  backends::cudnn::set_benchmark(false);
}

// train_mnist's models (the MLP 784-256-128-10 and the small CNN), one SGD step each (momentum
// 0.9: forward, cross-entropy, backward, step) at batch 128 on random data, on the CPU (all its
// cores) and on the GPU from the same initial weights. Checked: three steps give the same losses
// on both devices before either is timed.
void training_rows() {
  using namespace nn;
  for (const std::string kind : {"MLP", "CNN"}) {
    auto make = [&] {
      manual_seed(0);
      return kind == "MLP" ? Sequential(Flatten(), Linear(784, 256), ReLU(), Linear(256, 128), ReLU(), Linear(128, 10))
                           : bench::small_cnn();
    };
    Sequential on_cpu = make(), on_gpu = make();
    on_gpu->to(kGpu);
    manual_seed(1);
    const Tensor x = randn({128, 1, 28, 28}), y = randint(0, 10, {128});
    const Tensor x_gpu = x.to(kGpu), y_gpu = y.to(kGpu);
    optim::SGD sgd_cpu(on_cpu->parameters(), optim::SGDOptions(0.05).momentum(0.9));
    optim::SGD sgd_gpu(on_gpu->parameters(), optim::SGDOptions(0.05).momentum(0.9));
    auto step = [](Sequential& model, optim::SGD& sgd, const Tensor& xb, const Tensor& yb) {
      sgd.zero_grad();
      Tensor loss = functional::cross_entropy(model(xb), yb);
      loss.backward();
      sgd.step();
      return loss;
    };
    double worst = 0;
    for (int i = 0; i < 3; ++i) {
      const double a = step(on_cpu, sgd_cpu, x, y).item<double>(),
                   b = step(on_gpu, sgd_gpu, x_gpu, y_gpu).item<double>();
      worst = std::max(worst, std::abs(a - b) / std::abs(a));
    }
    const std::string label = kind + " training step";
    if (!check(worst < 1e-3, label.c_str())) continue;
    const double gpu = time_ms([&] { step(on_gpu, sgd_gpu, x_gpu, y_gpu); }, 20);
    const int cpu_iters = kind == "MLP" ? 20 : 5;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < cpu_iters; ++i) step(on_cpu, sgd_cpu, x, y);
    const double cpu =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / cpu_iters;
    std::printf("| %s, CPU (%d threads) | batch 128 | %.3f ms | |\n", label.c_str(), get_num_threads(), cpu);
    std::printf("| %s, GPU | batch 128 | %.3f ms | %.1fx the CPU |\n", label.c_str(), gpu, cpu / gpu);
  }
}

// What the caching allocator buys: the CNN's training step on the GPU with the cache (the
// default) and with every tensor its own cudaMalloc/cudaFree (cuda::set_memory_caching(false)).
void caching_rows() {
  manual_seed(0);
  nn::Sequential model = bench::small_cnn();
  model->to(kGpu);
  optim::SGD sgd(model->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  const Tensor x = randn({128, 1, 28, 28}, kGpu), y = randint(0, 10, {128}).to(kGpu);
  auto step = [&] {
    sgd.zero_grad();
    nn::functional::cross_entropy(model(x), y).backward();
    sgd.step();
  };
  for (bool caching : {true, false}) {
    cuda::set_memory_caching(caching);
    step();  // the cache's first fill is not a steady state
    const int64_t before = memory::stats(kGpu).system_allocs;
    const double ms = time_ms(step, 20);
    const double mallocs = static_cast<double>(memory::stats(kGpu).system_allocs - before) / 22;  // 2 warm-up
    std::printf("| CNN training step, GPU, caching allocator %s | batch 128 | %.3f ms | %.1f cudaMalloc per step |\n",
                caching ? "on" : "off", ms, mallocs);
  }
  cuda::set_memory_caching(true);
}

// Mixed precision on the GPU: the CNN (batch 128) and a character GPT (width 512, 8 layers,
// 8 heads, sequence 256, batch 16), one SGD step each in float32, TF32, float16 autocast with a
// GradScaler, and bfloat16 autocast, from the same weights (first losses checked to agree).
void amp_rows() {
  struct Case {
    std::string name;
    std::function<std::shared_ptr<nn::Module>()> make;
    Tensor x, y;
  };
  manual_seed(2);
  const std::vector<Case> cases = {
      {"CNN, batch 128", [] { return bench::small_cnn().ptr(); }, randn({128, 1, 28, 28}, kGpu),
       randint(0, 10, {128}).to(kGpu)},
      {"char GPT 8x512, seq 256, batch 16", [] { return bench::TinyGpt(65, 256, 512, 8, 8).ptr(); },
       randint(0, 65, {16, 256}).to(kGpu), randint(0, 65, {16, 256}).to(kGpu)}};
  const char* modes[] = {"float32", "TF32", "fp16 autocast + GradScaler", "bf16 autocast"};
  for (const Case& c : cases) {
    double fp32_ms = 0, first_loss = 0;
    for (int mode = 0; mode < 4; ++mode) {
      manual_seed(3);
      auto model = c.make();
      model->to(kGpu);
      optim::SGD sgd(model->parameters(), optim::SGDOptions(0.01).momentum(0.9));
      amp::GradScaler scaler(amp::GradScalerOptions().enabled(mode == 2));
      backends::cuda::set_allow_tf32(mode == 1);
      double loss_value = 0;
      auto step = [&] {
        sgd.zero_grad();
        Tensor loss;
        {
          autocast::AutocastGuard amp(kCUDA, mode == 3 ? kBFloat16 : kFloat16, mode >= 2);
          const Tensor out = (*model)(c.x);
          loss = nn::functional::cross_entropy(out.reshape({-1, out.size(-1)}), c.y.reshape({-1}));
        }
        scaler.scale(loss).backward();
        scaler.step(sgd);
        scaler.update();
        return loss;
      };
      loss_value = step().item<double>();
      if (mode == 0) first_loss = loss_value;
      const std::string label = std::string(modes[mode]) + " step, " + c.name;
      if (!check(std::abs(loss_value - first_loss) <= 2e-2 * std::abs(first_loss), label.c_str())) continue;
      const int64_t waits = cuda::device_to_host_waits();
      const double ms = time_ms(step, 10);
      const double waits_per_step = static_cast<double>(cuda::device_to_host_waits() - waits) / 12;  // 2 warm-up
      if (mode == 0) fp32_ms = ms;
      std::printf("| %s | | %.3f ms | %.2fx float32, %.1f host waits per step |\n", label.c_str(), ms, fp32_ms / ms,
                  waits_per_step);
    }
  }
  backends::cuda::set_allow_tf32(false);
}

// The small CNN's SGD step (momentum 0.9) on one GPU batch of 128, through `forward` (the model
// or a wrapper of it), in ms.
double cnn_step_ms(const std::vector<Tensor>& params, const std::function<Tensor(const Tensor&)>& forward) {
  optim::SGD sgd(params, optim::SGDOptions(0.05).momentum(0.9));
  manual_seed(1);
  const Tensor x = randn({128, 1, 28, 28}, kGpu), y = randint(0, 10, {128}).to(kGpu);
  return time_ms(
      [&] {
        sgd.zero_grad();
        nn::functional::cross_entropy(forward(x), y).backward();
        sgd.step();
      },
      20);
}

// DDP's overhead on one GPU: the CNN's training step plain and through DistributedDataParallel
// over a one-rank NCCL group (the bucketing, the hooks, the all-reduce launches and the stream
// waits; the all-reduce itself is a copy with one rank). Target: under 5 %.
void ddp_rows() {
  if (!distributed::is_nccl_available()) {
    std::printf("| DDP step overhead | built without NCCL | | |\n");
    return;
  }
  std::shared_ptr<distributed::ProcessGroup> pg;
  try {
    pg = distributed::init_process_group("nccl");
  } catch (const std::exception& e) {
    std::printf("| DDP step overhead | NCCL unavailable: %s | | |\n", e.what());
    return;
  }
  manual_seed(0);
  nn::Sequential plain = bench::small_cnn(), wrapped = bench::small_cnn();
  plain->to(kGpu);
  wrapped->to(kGpu);
  nn::DistributedDataParallel ddp(wrapped, pg);
  const double a = cnn_step_ms(plain->parameters(), [&](const Tensor& x) { return plain(x); });
  const double b = cnn_step_ms(ddp->parameters(), [&](const Tensor& x) { return ddp(x); });
  std::printf("| CNN training step, plain | batch 128 | %.3f ms | |\n", a);
  std::printf("| CNN training step, DDP over one-rank NCCL | batch 128 | %.3f ms | %.1f %% overhead |\n", b,
              100.0 * (b / a - 1.0));
}

// DataParallel on this machine's GPUs (two replicas on cuda:0 where there is one: then it
// measures the scatter, the threads and the gather, not a speed-up). The CNN's training step
// plain and through DataParallel, the same batch.
void data_parallel_rows() {
  std::vector<Device> devices;
  for (int i = 0; i < cuda::device_count(); ++i) devices.emplace_back(kCUDA, i);
  if (devices.size() == 1) devices.push_back(devices[0]);
  manual_seed(0);
  nn::Sequential plain = bench::small_cnn(), wrapped = bench::small_cnn();
  plain->to(kGpu);
  wrapped->to(kGpu);
  nn::DataParallel dp(
      wrapped, [] { return bench::small_cnn(); }, nn::DataParallelOptions().devices(devices));
  const double a = cnn_step_ms(plain->parameters(), [&](const Tensor& x) { return plain(x); });
  const double b = cnn_step_ms(dp->parameters(), [&](const Tensor& x) { return dp(x); });
  std::printf(
      "| CNN training step, DataParallel, %zu replicas on %d GPU(s) | batch 128 | %.3f ms | %.2fx the plain "
      "step (%.3f ms) |\n",
      devices.size(), cuda::device_count(), b, b / a, a);
}

}  // namespace

int main() {
  if (!cuda::is_available()) {
    std::printf("gpu_report: no CUDA device\n");
    return 1;
  }
  const auto props = cuda::get_device_properties();
  std::printf("device: %s (sm_%d%d, %d SMs, %.0f GiB)\n\n", props.name.c_str(), props.major, props.minor,
              props.multiprocessors, props.total_memory / double(1 << 30));
  std::printf("| ember | size | time | rate |\n|---|---|---|---|\n");
  for (int64_t n : {4096, 8192}) {
    gemm_row(n, kFloat32, false, "GEMM float32");
    gemm_row(n, kFloat32, true, "GEMM TF32");
    gemm_row(n, kFloat16, false, "GEMM float16");
    gemm_row(n, kBFloat16, false, "GEMM bfloat16");
  }
  linear_rows();
  int8_rows();
  int8_conv_rows();
  memory_rows();
  pinned_rows();
  conv_rows();
  training_rows();
  caching_rows();
  amp_rows();
  ddp_rows();
  data_parallel_rows();
  return 0;
}
