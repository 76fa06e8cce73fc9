// What int8 buys (technique 8): ember's dynamic quantized Linear against its float32 Linear on the
// same weights, side by side in one run, with the int8 GEMM alone (activations already
// quantized) beside it, and what the compression costs in accuracy and bytes. Results are checked
// before anything is timed. Ratios are float32 time / int8 time (> 1: int8 faster).
//   build/bench/bench/quant_report [threads]
// The peer (LibTorch's quantized::linear_dynamic on its onednn engine) is in libtorch_peer's
// "quant" section.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include <ember/ember.h>

#include "ember/tensor/cpu/cpu_backend.h"

#include "models.h"
#include "timing.h"

namespace {

using namespace ember;
namespace q = ember::quantization;
using ember::bench::fmt;

void linear_rows(int64_t batch, int64_t in, int64_t out) {
  manual_seed(0);
  nn::Linear fp(in, out);
  q::DynamicQuantizedLinearImpl int8(*fp, /*per_channel=*/true);
  const Tensor x = randn({batch, in});
  NoGradGuard no_grad;
  const Tensor y_fp = fp(x), y_q = int8.forward(x);
  const double rel = ((y_q - y_fp).norm() / y_fp.norm()).item<double>();
  if (!(rel < 0.05)) {
    std::printf("int8 Linear %lldx%lld: relative error %g against float32\n", static_cast<long long>(in),
                static_cast<long long>(out), rel);
    std::exit(1);
  }
  // The GEMM alone: the activation quantized once, outside the timing.
  const auto qp = q::choose_quantization_params(x.amin().item<float>(), x.amax().item<float>(), 0, 255, true);
  const Tensor xq = quantize_per_tensor(x, qp.scale, qp.zero_point, QDType::QUInt8).int_repr();
  const Tensor packed = native::int8_pack_weight(int8.weight);
  Int8Epilogue e;
  e.a_zero_point = qp.zero_point;
  e.a_scale = qp.scale;
  e.w_scale = int8.weight_scale;
  e.bias = int8.bias;

  // Where the CPU has AVX-512 VNNI, the AVX2 kernel on the same operands beside it.
  const bool both =
      cpu::int8_gemm_kernel() != cpu::Int8Kernel::Avx2 && cpu::int8_kernel_available(cpu::Int8Kernel::Avx2);
  Tensor y_avx2 = empty({batch, out});
  std::vector<std::function<void()>> work = {[&] { fp(x); }, [&] { int8.forward(x); },
                                             [&] { native::int8_gemm(xq, packed, out, e, kFloat32); }};
  if (both) work.push_back([&] { cpu::int8_gemm_with(cpu::Int8Kernel::Avx2, xq, packed, e, y_avx2); });
  const auto t = ember::bench::interleaved_medians(work, 21);
  const double macs = static_cast<double>(batch) * static_cast<double>(in) * static_cast<double>(out);
  std::printf("| Linear %lld→%lld, batch %lld | %.3f ms | %.3f ms | %.2f | %.3f ms (%.0f GMAC/s) | %.2f | %.4f |",
              static_cast<long long>(in), static_cast<long long>(out), static_cast<long long>(batch), t[0] * 1e3,
              t[1] * 1e3, t[0] / t[1], t[2] * 1e3, macs / t[2] * 1e-9, t[0] / t[2], rel);
  if (both) std::printf(" %.3f ms (%.0f GMAC/s) | %.2f |", t[3] * 1e3, macs / t[3] * 1e-9, t[3] / t[2]);
  std::printf("\n");
  std::fflush(stdout);
}

// The MNIST CNN of train_mnist, float32 against its static int8 form (calibrated on random
// batches; accuracy is train_mnist's to report), layer by layer on a batch of 500.
void cnn_rows() {
  manual_seed(0);
  nn::Sequential fp = ember::bench::small_cnn();
  fp->eval();
  const Tensor x = randn({500, 1, 28, 28});
  NoGradGuard no_grad;
  const Tensor y_fp = fp(x);
  // A calibrated copy: prepare() hooks observers onto the layers it is given.
  nn::Sequential prepared = ember::bench::small_cnn();
  prepared->load_state_dict(fp->state_dict());
  prepared->eval();
  q::prepare(*prepared);
  for (int i = 0; i < 4; ++i) prepared(randn({500, 1, 28, 28}));
  nn::Sequential int8 = q::convert(*prepared);
  nn::Sequential mixed = q::convert(*prepared, q::ConvertOptions().keep_shallow_first_layer());
  const Tensor y_q = int8(x);
  const double agree = y_q.argmax(1).eq(y_fp.argmax(1)).to(kFloat32).mean().item<double>();
  if (!(agree > 0.9)) {
    std::printf("static int8 CNN: only %.3f of the predictions agree with float32\n", agree);
    std::exit(1);
  }
  std::printf("\n| MNIST CNN, batch 500 | float32 | static int8 | float32 / int8 |\n|---|---|---|---|\n");
  // Layer by layer: the int8 model has no separate ReLUs (fused) but a Quantize and a DeQuantize.
  auto layer_times = [](nn::Sequential& model, const Tensor& input) {
    std::vector<std::pair<std::string, double>> out;
    Tensor h = input;
    for (size_t i = 0; i < model->size(); ++i) {
      auto layer = (*model)[i];
      const Tensor in = h;
      out.emplace_back(layer->type_name(), ember::bench::median_seconds([&] { h = (*layer)(in); }, 7, 1));
    }
    return out;
  };
  const auto tf = layer_times(fp, x), tq = layer_times(int8, x);
  double total_f = 0, total_q = 0;
  for (const auto& [name, t] : tf) total_f += t;
  for (const auto& [name, t] : tq) total_q += t;
  const auto whole = ember::bench::interleaved_medians({[&] { fp(x); }, [&] { int8(x); }, [&] { mixed(x); }}, 7);
  std::printf("| whole forward | %.1f ms | %.1f ms | %.2f |\n", whole[0] * 1e3, whole[1] * 1e3, whole[0] / whole[1]);
  std::printf("| whole forward, first conv float32 (keep_shallow_first_layer) | %.1f ms | %.1f ms | %.2f |\n",
              whole[0] * 1e3, whole[2] * 1e3, whole[0] / whole[2]);
  std::printf("| sum of the layers | %.1f ms | %.1f ms | %.2f |\n", total_f * 1e3, total_q * 1e3, total_f / total_q);
  std::printf("\nper layer, float32: ");
  for (const auto& [name, t] : tf) std::printf("%s %.1f ms, ", name.c_str(), t * 1e3);
  std::printf("\nper layer, int8:    ");
  for (const auto& [name, t] : tq) std::printf("%s %.1f ms, ", name.c_str(), t * 1e3);
  std::printf("\nprediction agreement with float32 on random inputs: %.3f\n", agree);
}

// A CNN with BatchNorm after each layer (as examples/libtorch/mnist_cnn's), batch 500 in eval:
// its BatchNorms as layers of their own, folded into the layers before them
// (nn::utils::fuse_batch_norms, Note [Folding batch_norm]), and the folded model in static int8,
// which it needs (int8 has no BatchNorm).
nn::Sequential batch_norm_cnn() {
  using namespace nn;
  return Sequential(Conv2d(Conv2dOptions(1, 16, 3).padding(1)), BatchNorm2d(16), ReLU(), MaxPool2d(2),
                    Conv2d(Conv2dOptions(16, 32, 3).padding(1)), BatchNorm2d(32), ReLU(), MaxPool2d(2), Flatten(),
                    Linear(32 * 7 * 7, 128), BatchNorm1d(128), ReLU(), Linear(128, 10));
}

void batch_norm_rows() {
  manual_seed(0);
  nn::Sequential net = batch_norm_cnn();
  for (int i = 0; i < 4; ++i) net(randn({64, 1, 28, 28}) * 2 + 0.5);  // running statistics
  net->eval();
  const Tensor x = randn({500, 1, 28, 28});
  NoGradGuard no_grad;
  nn::Sequential folded = nn::utils::fuse_batch_norms(net);
  nn::Sequential prepared = batch_norm_cnn();
  prepared->load_state_dict(net->state_dict());
  prepared->eval();
  prepared = nn::utils::fuse_batch_norms(prepared);
  q::prepare(*prepared);
  for (int i = 0; i < 4; ++i) prepared(randn({500, 1, 28, 28}));
  nn::Sequential int8 = q::convert(*prepared);
  const Tensor y = net(x);
  const double folded_error = ((folded(x) - y).abs().max() / y.abs().max()).item<double>();
  const double agree = int8(x).argmax(1).eq(y.argmax(1)).to(kFloat32).mean().item<double>();
  const auto t = ember::bench::interleaved_medians({[&] { net(x); }, [&] { folded(x); }, [&] { int8(x); }}, 7);
  std::printf(
      "\n| CNN with BatchNorm, batch 500, eval | forward | vs BatchNorm layers | largest difference (of the "
      "largest output) | predictions agreeing |\n|---|---|---|---|---|\n");
  std::printf("| float32, BatchNorm layers | %.1f ms | 1.00 | - | - |\n", t[0] * 1e3);
  std::printf("| float32, folded (fuse_batch_norms) | %.1f ms | %.2fx faster | %.2g | - |\n", t[1] * 1e3, t[0] / t[1],
              folded_error);
  std::printf("| static int8, folded | %.1f ms | %.2fx faster | - | %.3f |\n", t[2] * 1e3, t[0] / t[2], agree);
}

// The int8 convolution's algorithms on the same operands (uint8 out, fused ReLU, 7 bits): the
// direct kernels (Note [Direct int8 convolution]) against im2col + the int8 GEMM, with each
// kernel the CPU has, and float32's convolution (its automatic choice) on the same shape. Every
// algorithm's bytes are checked equal to the portable im2col's first.
void int8_conv_rows() {
  using backends::cpu::ConvAlgorithm;
  using cpu::Int8Kernel;
  const bool vnni = cpu::int8_kernel_available(Int8Kernel::Avx512Vnni);
  std::printf("\n| int8 conv 3x3 pad 1, uint8 out | float32 conv | direct%s | im2col + GEMM%s | im2col / direct |%s\n",
              vnni ? ", VNNI" : ", AVX2", vnni ? ", VNNI" : ", AVX2",
              vnni ? " direct, AVX2 | im2col + GEMM, AVX2 | im2col / direct, AVX2 |" : "");
  std::printf("|---|---|---|---|---|%s\n", vnni ? "---|---|---|" : "");
  struct Shape4 {
    int64_t n, c, hw, o;
  };
  for (const Shape4 l :
       {Shape4{500, 1, 28, 32}, Shape4{500, 32, 14, 64}, Shape4{1, 32, 14, 64}, Shape4{32, 64, 56, 64}}) {
    manual_seed(0);
    const Tensor x = randint(0, 128, {l.n, l.c, l.hw, l.hw}).to(kUInt8);
    const Tensor w = randint(-128, 128, {l.o, l.c, 3, 3}).to(kInt8);
    const Tensor packed = native::int8_pack_conv_weight(w);
    Int8Epilogue e;
    e.a_zero_point = 37;
    e.a_scale = 0.05;
    e.w_scale = rand({l.o}) * 0.01 + 0.001;
    e.bias = randn({l.o});
    e.out_scale = 0.08;
    e.out_zero_point = 50;
    e.out_quant_max = 127;
    e.relu = true;
    Conv2dParams p;
    p.padding = {1, 1};
    const TensorOptions bytes = TensorOptions().dtype(kUInt8);
    Tensor expected = empty({l.n, l.o, l.hw, l.hw}, bytes);
    cpu::int8_conv2d_with(ConvAlgorithm::im2col_gemm, Int8Kernel::Portable, x, packed, {3, 3}, p, e, expected);
    std::vector<std::pair<ConvAlgorithm, Int8Kernel>> runs = {{ConvAlgorithm::direct, cpu::int8_gemm_kernel()},
                                                              {ConvAlgorithm::im2col_gemm, cpu::int8_gemm_kernel()}};
    if (vnni) {
      runs.push_back({ConvAlgorithm::direct, Int8Kernel::Avx2});
      runs.push_back({ConvAlgorithm::im2col_gemm, Int8Kernel::Avx2});
    }
    std::vector<Tensor> outs;
    for (const auto& [algorithm, kernel] : runs) {
      outs.push_back(empty({l.n, l.o, l.hw, l.hw}, bytes));
      cpu::int8_conv2d_with(algorithm, kernel, x, packed, {3, 3}, p, e, outs.back());
      if ((outs.back().to(kInt32) - expected.to(kInt32)).abs().amax().item<int32_t>() != 0) {
        std::printf("int8 conv: the %s kernel's bytes differ from the portable im2col's\n",
                    cpu::int8_kernel_name(kernel));
        std::exit(1);
      }
    }
    const Tensor xf = randn({l.n, l.c, l.hw, l.hw}), wf = randn({l.o, l.c, 3, 3}), bf = randn({l.o});
    NoGradGuard no_grad;
    std::vector<std::function<void()>> work = {[&] { conv2d(xf, wf, bf, 1, 1); }};
    for (size_t i = 0; i < runs.size(); ++i)
      work.push_back([&, i] {
        cpu::int8_conv2d_with(runs[i].first, runs[i].second, x, packed, {3, 3}, p, e, outs[i]);
      });
    const auto t = ember::bench::interleaved_medians(work, l.n == 1 ? 201 : 11);
    const double macs = static_cast<double>(l.n * l.o * l.hw * l.hw * l.c * 9);
    auto cell = [&](double seconds) {
      return fmt("%.3f ms", seconds * 1e3) + fmt(" (%.0f GMAC/s)", macs / seconds * 1e-9);
    };
    std::printf("| [%lld, %lld, %lld, %lld] -> %lld | %s | %s | %s | %.2f |", static_cast<long long>(l.n),
                static_cast<long long>(l.c), static_cast<long long>(l.hw), static_cast<long long>(l.hw),
                static_cast<long long>(l.o), cell(t[0]).c_str(), cell(t[1]).c_str(), cell(t[2]).c_str(), t[2] / t[1]);
    if (vnni) std::printf(" %s | %s | %.2f |", cell(t[3]).c_str(), cell(t[4]).c_str(), t[4] / t[3]);
    std::printf("\n");
    std::fflush(stdout);
  }
}

// Unstructured sparsity: the dense Linear against SparseLinear (CSR) on the same pruned weights,
// to find the crossover that prune::sparsify uses (kSparseLinearCrossover).
void csr_rows() {
  namespace prune = nn::utils::prune;
  std::printf("\n| Linear 1024→1024, batch 64 | dense | CSR | dense / CSR |\n|---|---|---|---|\n");
  for (double sparsity : {0.5, 0.7, 0.8, 0.9, 0.95, 0.99}) {
    manual_seed(0);
    nn::Linear lin(1024, 1024);
    prune::l1_unstructured(*lin, "weight", sparsity);
    prune::remove(*lin, "weight");
    prune::SparseLinearImpl sparse(*lin);
    const Tensor x = randn({64, 1024});
    NoGradGuard no_grad;
    const double err = (sparse.forward(x) - lin(x)).abs().amax().item<double>();
    if (!(err < 1e-3)) {
      std::printf("CSR Linear disagrees with the dense one by %g\n", err);
      std::exit(1);
    }
    const auto t = ember::bench::interleaved_medians({[&] { lin(x); }, [&] { sparse.forward(x); }}, 15);
    std::printf("| %.0f %% zeros | %.3f ms | %.3f ms | %.2f |\n", 100 * sparsity, t[0] * 1e3, t[1] * 1e3, t[0] / t[1]);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  set_num_threads(threads);
  std::printf("ember int8 report: %d thread(s), int8 GEMM kernel %s\n\n", threads,
              cpu::int8_kernel_name(cpu::int8_gemm_kernel()));
  std::printf(
      "| work | float32 Linear | int8 dynamic Linear | speed-up | int8 GEMM alone | speed-up | relative error |%s\n"
      "|---|---|---|---|---|---|---|%s\n",
      cpu::int8_gemm_kernel() == cpu::Int8Kernel::Avx2 ? "" : " AVX2 kernel alone | AVX2 / this |",
      cpu::int8_gemm_kernel() == cpu::Int8Kernel::Avx2 ? "" : "---|---|");
  for (auto [batch, in, out] :
       std::vector<std::array<int64_t, 3>>{{64, 1024, 1024}, {256, 1024, 1024}, {1, 1024, 1024}, {64, 4096, 1024}})
    linear_rows(batch, in, out);
  // Size: int8 weights are a quarter of float32's, plus one scale and zero point per row.
  manual_seed(0);
  nn::Linear fp(1024, 1024);
  q::DynamicQuantizedLinearImpl int8(*fp, true);
  auto bytes = [](const StateDict& s) {
    int64_t b = 0;
    for (const auto& item : s) b += item.value().numel() * static_cast<int64_t>(element_size(item.value().dtype()));
    return b;
  };
  std::printf("\nLinear 1024→1024 state: float32 %lld bytes, int8 %lld bytes (%.2fx smaller)\n",
              static_cast<long long>(bytes(fp->state_dict())), static_cast<long long>(bytes(int8.state_dict())),
              static_cast<double>(bytes(fp->state_dict())) / static_cast<double>(bytes(int8.state_dict())));
  cnn_rows();
  batch_norm_rows();
  int8_conv_rows();
  csr_rows();
  return 0;
}
