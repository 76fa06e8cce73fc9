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

#include <ember/ember.h>

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

  const auto t = ember::bench::interleaved_medians(
      {[&] { fp(x); }, [&] { int8.forward(x); }, [&] { native::int8_gemm(xq, packed, out, e, kFloat32); }}, 21);
  const double macs = static_cast<double>(batch) * static_cast<double>(in) * static_cast<double>(out);
  std::printf("| Linear %lld→%lld, batch %lld | %.3f ms | %.3f ms | %.2f | %.3f ms (%.0f GMAC/s) | %.2f | %.4f |\n",
              static_cast<long long>(in), static_cast<long long>(out), static_cast<long long>(batch), t[0] * 1e3,
              t[1] * 1e3, t[0] / t[1], t[2] * 1e3, macs / t[2] * 1e-9, t[0] / t[2], rel);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  set_num_threads(threads);
  std::printf("ember int8 report: %d thread(s)\n\n", threads);
  std::printf(
      "| work | float32 Linear | int8 dynamic Linear | speed-up | int8 GEMM alone | speed-up | relative error |\n"
      "|---|---|---|---|---|---|---|\n");
  for (auto [batch, in, out] :
       std::vector<std::array<int64_t, 3>>{{64, 1024, 1024}, {256, 1024, 1024}, {1, 1024, 1024}, {64, 4096, 1024}})
    linear_rows(batch, in, out);
  // Size: int8 weights are a quarter of float32's, plus one scale and zero point per row.
  manual_seed(0);
  nn::Linear fp(1024, 1024);
  q::DynamicQuantizedLinearImpl int8(*fp, true);
  auto bytes = [](const StateDict& s) {
    int64_t b = 0;
    for (const auto& item : s) b += item.value.numel() * static_cast<int64_t>(element_size(item.value.dtype()));
    return b;
  };
  std::printf("\nLinear 1024→1024 state: float32 %lld bytes, int8 %lld bytes (%.2fx smaller)\n",
              static_cast<long long>(bytes(fp->state_dict())), static_cast<long long>(bytes(int8.state_dict())),
              static_cast<double>(bytes(fp->state_dict())) / static_cast<double>(bytes(int8.state_dict())));
  return 0;
}
