// The CUDA back end against the device's ceilings (run by tools/gpu_check.sh on a GPU machine).
// Each result is checked before it is timed; times come from CUDA events around 10 (GEMM,
// conv) or 20 (memory-bound) iterations after warm-up. Prints Markdown tables.
//   gpu_report            (all sections)
#include <cmath>
#include <cstdio>
#include <functional>

#include <ember/ember.h>

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
  memory_rows();
  conv_rows();
  return 0;
}
