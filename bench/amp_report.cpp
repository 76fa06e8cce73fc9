// Mixed precision on the CPU: the small CNN's and a character GPT's training step in float32,
// under bfloat16 autocast, and under float16 autocast with a GradScaler, from the same weights.
// Reports the step time (interleaved medians), the activations' memory (what the tape holds at
// the end of the forward: bytes above the start, from the allocator's exact counters) and the
// step's peak above the start, and checks first that the three agree on the loss. Before that,
// the 16-bit GEMM (Note [16-bit GEMM]) against float32's (Note [float32 GEMM])
// and against the way ember computed 16-bit products before it (whole float32 copies of the
// operands, a float32 GEMM, a rounding pass), on the shapes of those training steps; on an
// AVX-512 CPU, also its AVX2 kernel beside it.
// And layer_norm and group_norm: the fused kernels against the composed forms they replaced, in
// float32 and bfloat16.
//   build/bench/bench/amp_report [threads]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>

#include "ember/tensor/cpu/cpu_backend.h"
#include "models.h"
#include "timing.h"

using namespace ember;
using bench::fmt;

namespace {

// The modes of the training steps, each from the same weights. float32 also with Eigen's GEMM in
// place of ember's (Note [float32 GEMM]); where bfloat16 products run on vdpbf16ps, bfloat16 also
// with that switched off.
struct Mode {
  const char* name;
  DType autocast;  // kFloat32: no autocast
  bool own_gemm = true, dot_product = true;
};
std::vector<Mode> modes() {
  std::vector<Mode> m = {{"float32", kFloat32},
                         {"float32, Eigen's GEMM", kFloat32, false},
                         {"bf16 autocast", kBFloat16},
                         {"fp16 autocast + GradScaler", kFloat16}};
  if (cpu::gemm16_kernel(kBFloat16) == cpu::Gemm16Kernel::Avx512Bf16)
    m.push_back({"bf16 autocast, no vdpbf16ps", kBFloat16, true, false});
  return m;
}

struct Workload {
  const char* name;
  std::function<std::shared_ptr<nn::Module>()> make;
  Tensor x, y;
  std::function<Tensor(nn::Module&, const Tensor&, const Tensor&)> loss;
};

struct Run {
  std::shared_ptr<nn::Module> model;
  std::unique_ptr<optim::SGD> opt;
  amp::GradScaler scaler;
  Mode mode;
  Run(std::shared_ptr<nn::Module> m, const Mode& mode_)
      : model(std::move(m)),
        opt(std::make_unique<optim::SGD>(model->parameters(), optim::SGDOptions(0.01).momentum(0.9))),
        scaler(amp::GradScalerOptions().enabled(mode_.autocast == kFloat16)),
        mode(mode_) {}
  // One step; returns (loss, bytes the tape held after the forward, peak above the start).
  std::tuple<double, int64_t, int64_t> step(const Workload& w) {
    opt->zero_grad();
    memory::reset_peak();
    const int64_t start = memory::stats().current_bytes;
    Tensor loss;
    backends::cpu::set_allow_bf16_dot_product(mode.dot_product);
    backends::cpu::set_own_float32_gemm(mode.own_gemm);
    {
      std::optional<autocast::AutocastGuard> guard;
      if (mode.autocast != kFloat32) guard.emplace(kCPU, mode.autocast);
      loss = w.loss(*model, w.x, w.y);
    }
    const int64_t held = memory::stats().current_bytes - start;
    scaler.scale(loss).backward();
    scaler.step(*opt);
    scaler.update();
    backends::cpu::set_allow_bf16_dot_product(true);
    backends::cpu::set_own_float32_gemm(true);
    return {loss.item<double>(), held, memory::stats().peak_bytes - start};
  }
};

void report(const Workload& w) {
  const std::vector<Mode> all = modes();
  const int count = static_cast<int>(all.size());
  std::vector<std::unique_ptr<Run>> runs;
  for (const Mode& mode : all) {
    manual_seed(1);
    runs.push_back(std::make_unique<Run>(w.make(), mode));
  }
  // The same weights and data: the losses of the first step agree to the precision's rounding.
  std::vector<double> loss(count);
  std::vector<int64_t> held(count), peak(count);
  for (int m = 0; m < count; ++m) std::tie(loss[m], held[m], peak[m]) = runs[m]->step(w);
  for (int m = 1; m < count; ++m)
    if (!(std::abs(loss[m] - loss[0]) <= 2e-2 * std::abs(loss[0]))) {
      std::printf("%s: %s loss %.5f differs from float32's %.5f\n", w.name, all[m].name, loss[m], loss[0]);
      std::exit(1);
    }
  std::vector<std::function<void()>> steps;
  for (int m = 0; m < count; ++m) steps.push_back([&, m] { runs[m]->step(w); });
  const auto t = bench::interleaved_medians(steps, 9);
  for (int m = 0; m < count; ++m)
    std::printf("| %s | %s | %.2f ms | %.2fx | %.1f MiB | %.2fx | %.1f MiB | %.2fx |\n", w.name, all[m].name,
                t[m] * 1e3, t[m] / t[0], held[m] / 1048576.0, static_cast<double>(held[m]) / held[0],
                peak[m] / 1048576.0, static_cast<double>(peak[m]) / peak[0]);
  std::fflush(stdout);
}

// a @ b as the 16-bit path was before the 16-bit GEMM: every operand widened to float32.
Tensor matmul_through_float32(const Tensor& a, const Tensor& b) {
  return matmul(a.to(kFloat32), b.to(kFloat32)).to(a.dtype());
}

void gemm_report() {
  struct Shape {
    const char* name;
    Tensor a, b;  // float32; transposed views where the training step has them
  };
  manual_seed(2);
  const Tensor w = randn({1024, 1024}), x = randn({256, 1024}), dy = randn({256, 1024});
  const Tensor q = randn({128, 128, 32}), k = randn({128, 128, 32});
  const Shape shapes[] = {
      {"Linear forward, x [256, 1024] @ w^T [1024, 1024]", x, w.t()},
      {"Linear weight gradient, dy^T [1024, 256] @ x [256, 1024]", dy.t(), x},
      {"attention scores, 128 x (q [128, 32] @ k^T [32, 128])", q, k.transpose(1, 2)},
      {"batch 1, x [1, 1024] @ w^T [1024, 1024]", x.narrow(0, 0, 1), w.t()},
  };
  // Where an AVX-512 kernel runs, the AVX2 one is timed beside it (held to AVX2 by set_max_isa),
  // and where bfloat16 runs on vdpbf16ps, the AVX-512 FMA kernel too (the dot product switched off).
  const bool wide = cpu::gemm16_kernel(kFloat16) == cpu::Gemm16Kernel::Avx512;
  const bool dot = cpu::gemm16_kernel(kBFloat16) == cpu::Gemm16Kernel::Avx512Bf16;
  auto held_to_avx2 = [](const std::function<void()>& f) {
    backends::cpu::set_max_isa(backends::cpu::Isa::avx2);
    f();
    backends::cpu::set_max_isa(backends::cpu::Isa::avx512);
  };
  auto without_dot = [](const std::function<void()>& f) {
    backends::cpu::set_allow_bf16_dot_product(false);
    f();
    backends::cpu::set_allow_bf16_dot_product(true);
  };
  std::printf(
      "| product | float32 | float32, Eigen's GEMM | bf16 through float32 copies | bf16 | fp16 | bf16 vs float32 | "
      "bf16 vs copies | "
      "bf16, AVX2 kernel | bf16 vs AVX2 kernel | bf16, FMA kernel (no vdpbf16ps) | bf16 vs FMA kernel | peak bytes, "
      "copies -> bf16 |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Shape& s : shapes) {
    const Tensor ab = s.a.to(kBFloat16), bb = s.b.to(kBFloat16);
    const Tensor ah = s.a.to(kFloat16), bh = s.b.to(kFloat16);
    // The same values: the 16-bit kernel agrees with the float32 copies to one rounding.
    const Tensor direct = matmul(ab, bb).to(kFloat32), copies = matmul_through_float32(ab, bb).to(kFloat32);
    if (!((direct - copies).abs() <= copies.abs() * 0.01 + 1e-3).all().item<bool>()) {
      std::printf("%s: the 16-bit GEMM differs from the float32 path\n", s.name);
      std::exit(1);
    }
    auto peak_of = [](const std::function<void()>& f) {
      const int64_t start = memory::stats().current_bytes;
      memory::reset_peak();
      f();
      return memory::stats().peak_bytes - start;
    };
    const int64_t peak_copies = peak_of([&] { matmul_through_float32(ab, bb); });
    const int64_t peak_direct = peak_of([&] { matmul(ab, bb); });
    std::vector<std::function<void()>> runs = {[&] { matmul(s.a, s.b); }, [&] { matmul_through_float32(ab, bb); },
                                               [&] { matmul(ab, bb); }, [&] { matmul(ah, bh); }};
    runs.push_back([&] {  // float32 with Eigen's GEMM (4)
      backends::cpu::set_own_float32_gemm(false);
      matmul(s.a, s.b);
      backends::cpu::set_own_float32_gemm(true);
    });
    if (wide) runs.push_back([&] { held_to_avx2([&] { matmul(ab, bb); }); });  // (5)
    if (dot) runs.push_back([&] { without_dot([&] { matmul(ab, bb); }); });    // (last)
    const auto t = bench::interleaved_medians(runs, 15);
    const double flops = 2.0 * static_cast<double>(matmul(s.a, s.b).numel()) * s.a.size(-1);
    char avx2[64] = "-", vs_avx2[32] = "-", fma[64] = "-", vs_fma[32] = "-";
    if (wide) {
      std::snprintf(avx2, sizeof avx2, "%.3f ms (%.0f GFLOP/s)", t[5] * 1e3, flops / t[5] * 1e-9);
      std::snprintf(vs_avx2, sizeof vs_avx2, "%.2fx", t[5] / t[2]);
    }
    if (dot) {
      const double f = t[runs.size() - 1];
      std::snprintf(fma, sizeof fma, "%.3f ms (%.0f GFLOP/s)", f * 1e3, flops / f * 1e-9);
      std::snprintf(vs_fma, sizeof vs_fma, "%.2fx", f / t[2]);
    }
    std::printf(
        "| %s | %.3f ms (%.0f GFLOP/s) | %.3f ms (%.0f GFLOP/s) | %.3f ms | %.3f ms (%.0f GFLOP/s) | %.3f ms | %.2fx | "
        "%.2fx | %s | %s | %s | "
        "%s "
        "| %.2f -> %.2f MiB |\n",
        s.name, t[0] * 1e3, flops / t[0] * 1e-9, t[4] * 1e3, flops / t[4] * 1e-9, t[1] * 1e3, t[2] * 1e3,
        flops / t[2] * 1e-9, t[3] * 1e3, t[0] / t[2], t[1] / t[2], avx2, vs_avx2, fma, vs_fma, peak_copies / 1048576.0,
        peak_direct / 1048576.0);
    std::fflush(stdout);
  }
  std::printf("\n(vs columns: how many times faster the bf16 kernel is; below 1, slower)\n\n");
}

// layer_norm, group_norm and batch_norm, fused (Note [Fused layer_norm]) against the forms they replaced:
// composed of ops in float32; for a 16-bit model (module->to(kBFloat16)), composed in float32 on
// a float32 copy of the input (d167a7d) and composed of 16-bit ops (before that: the mean and
// the centered values round too). Time (forward, forward + backward), what a forward with grad
// leaves allocated (the output and what backward keeps), and the largest error against float64
// on the same input.
Tensor layer_norm_composed(const Tensor& x, const Tensor& w, const Tensor& b) {
  const Tensor centered = x - x.mean({2}, true);
  return centered * rsqrt((centered * centered).mean({2}, true) + 1e-5) * w + b;
}
Tensor group_norm_composed(const Tensor& x, int64_t groups, const Tensor& w, const Tensor& b) {
  const Tensor grouped = x.reshape({x.size(0), groups, -1});
  const Tensor centered = grouped - grouped.mean({2}, true);
  const Tensor y = (centered * rsqrt((centered * centered).mean({2}, true) + 1e-5)).reshape(x.sizes());
  return y * w.reshape({1, -1, 1, 1}) + b.reshape({1, -1, 1, 1});
}

// batch_norm as it was composed before its kernel (training, with running statistics).
Tensor batch_norm_composed(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& running_mean,
                           Tensor& running_var) {
  Shape dims{0}, channel_shape(static_cast<size_t>(x.dim()), 1);
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  channel_shape[1] = x.size(1);
  const Tensor mean = x.mean(dims, true), centered = x - mean;
  const Tensor var = (centered * centered).mean(dims, true);
  {
    NoGradGuard no_grad;
    const double count = static_cast<double>(x.numel() / x.size(1));
    running_mean.mul_(0.9).add_(mean.reshape({-1}), 0.1);
    running_var.mul_(0.9).add_(var.reshape({-1}), 0.1 * count / (count - 1));
  }
  return (x - mean) * rsqrt(var + 1e-5) * w.reshape(channel_shape) + b.reshape(channel_shape);
}

struct NormRow {
  const char* name;
  DType dtype;
  std::function<Tensor(const Tensor&)> f;
};

void normalization_table(const char* title, const Tensor& x64, const std::vector<NormRow>& rows,
                         const std::function<Tensor(const Tensor&)>& exact) {
  std::printf(
      "| %s | forward | forward + backward | held after forward | largest error vs float64 on the same input "
      "|\n|---|---|---|---|---|\n",
      title);
  for (const NormRow& r : rows) {
    const Tensor x = x64.to(r.dtype);
    Tensor leaf = x.clone().requires_grad_();
    const Tensor dy = randn(x.sizes()).to(r.dtype);
    const double forward = bench::median_seconds([&] { (void)r.f(x); });
    const double both = bench::median_seconds([&] { r.f(leaf).backward(dy); }, 7);
    int64_t held = 0;
    {
      memory::empty_cache();
      const int64_t base = memory::stats().current_bytes;
      const Tensor y = r.f(leaf);
      held = memory::stats().current_bytes - base;
    }
    // against the float64 normalization of the same (rounded) input: the computation's error
    const double error = (r.f(x).to(kFloat64) - exact(x.to(kFloat64))).abs().max().item<double>();
    std::printf("| %s | %.2f ms | %.2f ms | %.1f MiB | %.3g |\n", r.name, forward * 1e3, both * 1e3,
                static_cast<double>(held) / (1 << 20), error);
  }
  std::printf("\n");
}

void normalization_report() {
  manual_seed(3);
  // rows with an offset larger than their spread, as activations often are
  const Tensor x64 = randn({64, 256, 1}, kFloat64) * 4 + randn({64, 256, 512}, kFloat64) * 0.1;
  const Tensor w = ones({512}), b = zeros({512}), w16 = w.to(kBFloat16), b16 = b.to(kBFloat16);
  normalization_table(
      "layer_norm [64, 256, 512]", x64,
      {{"float32, fused (ember)", kFloat32,
        [&](const Tensor& x) { return nn::functional::layer_norm(x, {512}, w, b); }},
       {"float32, composed of ops", kFloat32, [&](const Tensor& x) { return layer_norm_composed(x, w, b); }},
       {"bfloat16, fused (ember)", kBFloat16,
        [&](const Tensor& x) { return nn::functional::layer_norm(x, {512}, w16, b16); }},
       {"bfloat16, composed in float32 on a copy", kBFloat16,
        [&](const Tensor& x) { return layer_norm_composed(x.to(kFloat32), w, b).to(kBFloat16); }},
       {"bfloat16, composed of 16-bit ops", kBFloat16,
        [&](const Tensor& x) { return layer_norm_composed(x, w16, b16); }}},
      [](const Tensor& x) { return nn::functional::layer_norm(x, {512}); });
  // a CNN's activations: 32 samples of 64 channels of 32 x 32, in 16 groups
  const Tensor images = randn({32, 64, 1, 1}, kFloat64) * 4 + randn({32, 64, 32, 32}, kFloat64) * 0.1;
  const Tensor cw = ones({64}), cb = zeros({64}), cw16 = cw.to(kBFloat16), cb16 = cb.to(kBFloat16);
  normalization_table(
      "group_norm [32, 64, 32, 32], 16 groups", images,
      {{"float32, fused (ember)", kFloat32, [&](const Tensor& x) { return nn::functional::group_norm(x, 16, cw, cb); }},
       {"float32, composed of ops", kFloat32, [&](const Tensor& x) { return group_norm_composed(x, 16, cw, cb); }},
       {"bfloat16, fused (ember)", kBFloat16,
        [&](const Tensor& x) { return nn::functional::group_norm(x, 16, cw16, cb16); }},
       {"bfloat16, composed in float32 on a copy", kBFloat16,
        [&](const Tensor& x) { return group_norm_composed(x.to(kFloat32), 16, cw, cb).to(kBFloat16); }},
       {"bfloat16, composed of 16-bit ops", kBFloat16,
        [&](const Tensor& x) { return group_norm_composed(x, 16, cw16, cb16); }}},
      [](const Tensor& x) { return nn::functional::group_norm(x, 16); });
  // the same activations through a training BatchNorm2d(64): statistics over 32 x 32 x 32 values
  Tensor rm = zeros({64}), rv = ones({64});
  normalization_table(
      "batch_norm [32, 64, 32, 32], training", images,
      {{"float32, fused (ember)", kFloat32,
        [&](const Tensor& x) { return nn::functional::batch_norm(x, rm, rv, cw, cb, true); }},
       {"float32, composed of ops", kFloat32, [&](const Tensor& x) { return batch_norm_composed(x, cw, cb, rm, rv); }},
       {"bfloat16, fused (ember)", kBFloat16,
        [&](const Tensor& x) { return nn::functional::batch_norm(x, rm, rv, cw, cb, true); }},
       {"bfloat16, composed in float32 on a copy", kBFloat16,
        [&](const Tensor& x) { return batch_norm_composed(x.to(kFloat32), cw, cb, rm, rv).to(kBFloat16); }}},
      [](const Tensor& x) { return nn::functional::batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true); });
  // BatchNorm1d after a Linear: planes of one value, read across the channels
  const Tensor features = randn({1, 1024}, kFloat64) * 4 + randn({4096, 1024}, kFloat64) * 0.1;
  Tensor fm = zeros({1024}), fv = ones({1024});
  const Tensor fw = ones({1024}), fb = zeros({1024});
  normalization_table(
      "batch_norm [4096, 1024], training", features,
      {{"float32, fused (ember)", kFloat32,
        [&](const Tensor& x) { return nn::functional::batch_norm(x, fm, fv, fw, fb, true); }},
       {"float32, composed of ops", kFloat32, [&](const Tensor& x) { return batch_norm_composed(x, fw, fb, fm, fv); }},
       {"bfloat16, fused (ember)", kBFloat16,
        [&](const Tensor& x) { return nn::functional::batch_norm(x, fm, fv, fw, fb, true); }},
       {"bfloat16, composed in float32 on a copy", kBFloat16,
        [&](const Tensor& x) { return batch_norm_composed(x.to(kFloat32), fw, fb, fm, fv).to(kBFloat16); }}},
      [](const Tensor& x) { return nn::functional::batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true); });
}

}  // namespace

int main(int argc, char** argv) {
  set_num_threads(argc > 1 ? std::atoi(argv[1]) : 2);
  std::printf(
      "ember mixed precision on the CPU, %d threads, 16-bit GEMM kernels: bfloat16 %s, float16 %s (16-bit\n"
      "operands read directly, accumulated in float32; the other kernels compute through float32); float32 GEMM: "
      "%s\n\n",
      get_num_threads(), cpu::gemm16_kernel_name(cpu::gemm16_kernel(kBFloat16)),
      cpu::gemm16_kernel_name(cpu::gemm16_kernel(kFloat16)), cpu::gemm32_kernel_name(cpu::gemm32_kernel()));
  gemm_report();
  normalization_report();
  std::printf(
      "| workload | mode | step | vs float32 | activations held after forward | vs float32 | step peak | vs "
      "float32 |\n|---|---|---|---|---|---|---|---|\n");
  manual_seed(0);
  Workload cnn{"small CNN, batch 128", [] { return bench::small_cnn().ptr(); }, randn({128, 1, 28, 28}),
               randint(0, 10, {128}),
               [](nn::Module& m, const Tensor& x, const Tensor& y) { return nn::functional::cross_entropy(m(x), y); }};
  report(cnn);
  Workload gpt{"char GPT 4x256, 8 heads, batch 16 x 128", [] { return bench::TinyGpt(65, 128, 256, 4, 8).ptr(); },
               randint(0, 65, {16, 128}), randint(0, 65, {16, 128}),
               [](nn::Module& m, const Tensor& x, const Tensor& y) {
                 const Tensor logits = m(x);
                 return nn::functional::cross_entropy(logits.reshape({-1, logits.size(2)}), y.reshape({-1}));
               }};
  report(gpt);
  return 0;
}
