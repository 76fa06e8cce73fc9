// INT8 quantization: quantized tensors, observers, fake quantization and the dynamic quantized
// Linear against PyTorch (tests/reference/quant.bin, tools/gen_reference_quant.py), and the
// AVX2 int8 GEMM against the portable one and an int32 reference, exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <string>

#include "ember/tensor/cpu/cpu_backend.h"
#include "helpers.h"

namespace ember {
namespace {

using testing::all_close;
using testing::ref_tensor;
using testing::reference_quant;
namespace q = quantization;

const Tensor& R(const std::string& name) { return ref_tensor(reference_quant(), name); }

TEST(Quantize, PerTensorMatchesPyTorchToTheLastInteger) {
  const Tensor x = R("q.x");
  struct Case {
    const char* name;
    double scale;
    int64_t zero_point;
    QDType dtype;
  };
  for (const Case& c : {Case{"quint8", 0.25, 10, QDType::QUInt8}, Case{"qint8", 0.07, -3, QDType::QInt8},
                        Case{"qint32", 0.001, 5, QDType::QInt32}}) {
    SCOPED_TRACE(c.name);
    const QTensor qx = quantize_per_tensor(x, c.scale, c.zero_point, c.dtype);
    EXPECT_TRUE(all_close(qx.int_repr(), R(std::string("q.") + c.name + ".int"), 0, 0));  // ties to even
    EXPECT_TRUE(all_close(qx.dequantize(), R(std::string("q.") + c.name + ".deq"), 0, 0));
    EXPECT_EQ(qx.q_zero_point(), c.zero_point);
    EXPECT_FLOAT_EQ(qx.q_scale(), c.scale);
  }
}

TEST(Quantize, PerChannelMatchesPyTorch) {
  const Tensor w = R("q.w");
  const QTensor a =
      quantize_per_channel(w, tensor<double>({0.1, 0.02, 0.3}), tensor<int64_t>({0, 5, -2}), 0, QDType::QInt8);
  EXPECT_TRUE(all_close(a.int_repr(), R("q.per_channel0.int"), 0, 0));
  EXPECT_TRUE(all_close(a.dequantize(), R("q.per_channel0.deq"), 0, 0));
  EXPECT_EQ(a.qscheme(), QScheme::PerChannelAffine);
  EXPECT_EQ(a.q_per_channel_axis(), 0);
  const QTensor b = quantize_per_channel(w, tensor<double>({0.05, 0.01, 0.2, 0.03}),
                                         tensor<int64_t>({100, 120, 128, 140}), 1, QDType::QUInt8);
  EXPECT_TRUE(all_close(b.int_repr(), R("q.per_channel1.int"), 0, 0));
  EXPECT_TRUE(all_close(b.dequantize(), R("q.per_channel1.deq"), 0, 0));
  EXPECT_EQ(b.nbytes(), 24 + 4 * 4 + 4 * 4);  // the bytes, the scales and the zero points
}

TEST(Quantize, PrintsLikePyTorchAndRejectsBadParameters) {
  std::ostringstream s;
  s << quantize_per_tensor(tensor<float>({-1, 0, 1, 2}), 1.0, 2, QDType::QUInt8);
  EXPECT_EQ(s.str(),
            "tensor([-1.,  0.,  1.,  2.], size=(4,), dtype=quint8, quantization_scheme=per_tensor_affine, scale=1, "
            "zero_point=2)");
  const Tensor x = ones({2, 3});
  EXPECT_ERROR_CONTAINS(quantize_per_tensor(x, 0.0, 0, QDType::QUInt8), "scales must be positive and finite");
  EXPECT_ERROR_CONTAINS(quantize_per_tensor(x, 0.1, 300, QDType::QUInt8), "zero_point 300 is outside quint8");
  EXPECT_ERROR_CONTAINS(quantize_per_tensor(x.to(kFloat64), 0.1, 0, QDType::QInt8), "expects a float32 tensor");
  EXPECT_ERROR_CONTAINS(quantize_per_channel(x, ones({2}), zeros({2}), 1, QDType::QInt8), "expects 3 scales");
  EXPECT_ERROR_CONTAINS(quantize_per_channel(x, ones({2}), zeros({2}), 2, QDType::QInt8), "axis 2 is out of range");
  EXPECT_ERROR_CONTAINS(quantize_per_tensor(x, 0.1, 0, QDType::QInt8).q_per_channel_scales(), "use q_scale");
}

TEST(Observers, QParamsMatchPyTorch) {
  struct Case {
    const char* name;
    std::shared_ptr<q::ObserverImpl> observer;
  };
  using O = q::ObserverOptions;
  const std::vector<Case> cases = {
      {"minmax", std::make_shared<q::MinMaxObserverImpl>()},
      {"minmax_sym", std::make_shared<q::MinMaxObserverImpl>(
                         O().with_dtype(QDType::QInt8).with_qscheme(QScheme::PerTensorSymmetric))},
      {"minmax_sym_quint8", std::make_shared<q::MinMaxObserverImpl>(O().with_qscheme(QScheme::PerTensorSymmetric))},
      {"minmax_reduce", std::make_shared<q::MinMaxObserverImpl>(O().with_reduce_range(true))},
      {"moving", std::make_shared<q::MovingAverageMinMaxObserverImpl>()},
      {"moving_custom", std::make_shared<q::MovingAverageMinMaxObserverImpl>(q::default_activation_options())},
      {"per_channel_sym", std::make_shared<q::PerChannelMinMaxObserverImpl>(
                              O().with_dtype(QDType::QInt8).with_qscheme(QScheme::PerChannelSymmetric))},
      {"per_channel_affine1",
       std::make_shared<q::PerChannelMinMaxObserverImpl>(O().with_qscheme(QScheme::PerChannelAffine).with_ch_axis(1))},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto [s0, z0] = c.observer->calculate_qparams();  // nothing seen yet: (1, 0)
    EXPECT_EQ(s0.item<float>(), 1.0f);
    EXPECT_EQ(z0.item<int32_t>(), 0);
    for (int i = 0; i < 3; ++i) (*c.observer)(R("obs.batch" + std::to_string(i)));
    const std::string n = std::string("obs.") + c.name;
    EXPECT_TRUE(all_close(c.observer->min_val, R(n + ".min"), 0, 0));
    EXPECT_TRUE(all_close(c.observer->max_val, R(n + ".max"), 0, 0));
    auto [scale, zero_point] = c.observer->calculate_qparams();
    EXPECT_TRUE(all_close(scale, R(n + ".scale"), 0, 0));
    EXPECT_TRUE(all_close(zero_point, R(n + ".zero_point"), 0, 0));
  }
  // PyTorch's derived example (REFERENCE-pytorch.md §10): [-1, 3] -> s = 4/255, z = 64; symmetric s = 3/127.5.
  q::MinMaxObserver affine;
  affine(tensor<float>({-1, 3}));
  auto [s, z] = affine->calculate_qparams();
  EXPECT_FLOAT_EQ(s.item<float>(), 4.0f / 255);
  EXPECT_EQ(z.item<int32_t>(), 64);
}

TEST(FakeQuantize, ForwardAndStraightThroughGradientMatchPyTorch) {
  Tensor x = R("fq.x").clone().requires_grad_();
  Tensor out = fake_quantize_per_tensor_affine(x, 0.1, 3, 0, 127);
  EXPECT_TRUE(all_close(out, R("fq.out"), 0, 0));
  out.backward(R("fq.gout"));
  EXPECT_TRUE(all_close(x.grad(), R("fq.grad"), 0, 0));  // 0 where the clamp cut, gout elsewhere

  Tensor w = R("fq.pc.x").clone().requires_grad_();
  Tensor pc = fake_quantize_per_channel_affine(w, tensor<float>({0.05f, 0.1f, 0.02f}), tensor<int32_t>({0, -1, 2}), 0,
                                               -128, 127);
  EXPECT_TRUE(all_close(pc, R("fq.pc.out"), 0, 0));
  pc.sum().backward();
  EXPECT_TRUE(all_close(w.grad(), R("fq.pc.grad"), 0, 0));

  q::FakeQuantize module;  // PyTorch's default_fake_quant
  Tensor y;
  for (int i = 0; i < 3; ++i) y = module(R("obs.batch" + std::to_string(i)));
  EXPECT_TRUE(all_close(module->scale, R("fqm.scale"), 0, 0));
  EXPECT_TRUE(all_close(module->zero_point, R("fqm.zero_point"), 0, 0));
  EXPECT_TRUE(all_close(y, R("fqm.out"), 0, 0));
  EXPECT_ERROR_CONTAINS(fake_quantize_per_tensor_affine(x, 0.1, 300, 0, 255), "zero_point 300 is outside [0, 255]");
}

// inf and NaN (a diverging QAT run) were converted to integers unchecked on the CPU's scalar
// paths (undefined behaviour). Every path now saturates: +inf to quant_max, -inf and NaN to
// quant_min, as the vector path (vmaxps) and CUDA (fmaxf) already did. (PyTorch's CPU kernel
// leaves this to the hardware: x86 gives quant_min for +inf too.)
TEST(FakeQuantize, InfAndNanSaturateOnEveryPath) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = tensor<float>({nan, inf, -inf, 1e30f, 1.0f});
  const Tensor fq = fake_quantize_per_tensor_affine(x, 0.5, 0, -128, 127);
  EXPECT_EQ(fq.to_vector<float>(), (std::vector<float>{-64.0f, 63.5f, -64.0f, 63.5f, 1.0f}));
  // 17 values: two 8-wide vector blocks and a scalar tail, NaN in each.
  std::vector<float> v(17, 1.0f);
  for (size_t i : {size_t{3}, size_t{12}, size_t{16}}) v[i] = nan;
  v[5] = inf;
  const std::vector<int8_t> q =
      quantize_per_tensor(tensor<float>(v), 0.5, 0, QDType::QInt8).int_repr().to_vector<int8_t>();
  for (size_t i = 0; i < q.size(); ++i)
    EXPECT_EQ(q[i], i == 3 || i == 12 || i == 16 ? -128 : i == 5 ? 127 : 2) << "element " << i;
}

// An int32 reference: Σ_k (a - za) w, from the unpacked tensors.
Tensor int32_reference(const Tensor& a, int64_t za, const Tensor& w) {
  const int64_t M = a.size(0), K = a.size(1), N = w.size(0);
  std::vector<int32_t> out(static_cast<size_t>(M * N));
  const uint8_t* ap = a.data_ptr<uint8_t>();
  const int8_t* wp = w.data_ptr<int8_t>();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      int32_t acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += (static_cast<int32_t>(ap[m * K + k]) - za) * wp[n * K + k];
      out[m * N + n] = acc;
    }
  return tensor(out, Shape{M, N});
}

constexpr cpu::Int8Kernel kInt8Kernels[] = {cpu::Int8Kernel::Portable, cpu::Int8Kernel::Avx2,
                                            cpu::Int8Kernel::Avx512Vnni};

TEST(Int8Gemm, EqualsAnInt32ReferenceExactlyOnEveryShapeEdge) {
  manual_seed(11);
  // Rows not a multiple of 4, columns not of 16, depths not of 4; extreme values included.
  for (auto [M, N, K] :
       std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {5, 17, 7}, {4, 16, 4}, {9, 33, 130}, {64, 48, 256}}) {
    SCOPED_TRACE(::testing::Message() << M << "x" << N << "x" << K);
    Tensor a = randint(0, 128, {M, K}).to(kUInt8);  // 7-bit activations (Note [Int8 GEMM])
    Tensor w = randint(-128, 128, {N, K}).to(kInt8);
    if (K >= 2) {
      NoGradGuard g;
      a.select(0, 0).fill_(127);
      w.select(0, 0).fill_(-128);  // the worst pair sum: 2 * 127 * -128, still inside int16
    }
    const Tensor packed = native::int8_pack_weight(w);
    Int8Epilogue e;
    e.a_zero_point = 3;
    const Tensor expected = int32_reference(a, 3, w);
    EXPECT_TRUE(all_close(native::int8_gemm(a, packed, N, e, kInt32), expected, 0, 0));
    for (auto kernel : kInt8Kernels) {  // each kernel this CPU has, not only the fastest
      if (!cpu::int8_kernel_available(kernel)) continue;
      SCOPED_TRACE(cpu::int8_kernel_name(kernel));
      Tensor out = empty({M, N}, TensorOptions().dtype(kInt32));
      cpu::int8_gemm_with(kernel, a, packed, e, out);
      EXPECT_TRUE(all_close(out, expected, 0, 0));
    }
    // The float epilogue: s_a s_w[n] acc + bias[n].
    e.a_scale = 0.02;
    e.w_scale = rand({N}) + 0.01;
    e.bias = randn({N});
    const Tensor y = native::int8_gemm(a, packed, N, e, kFloat32);
    EXPECT_TRUE(all_close(y, expected.to(kFloat32) * (e.w_scale * 0.02f) + e.bias, 1e-5, 1e-5));
    // Every kernel rounds alike (one fused multiply-add each): the same floats, bit for bit.
    Tensor portable = empty({M, N});
    cpu::int8_gemm_with(cpu::Int8Kernel::Portable, a, packed, e, portable);
    for (auto kernel : kInt8Kernels) {
      if (!cpu::int8_kernel_available(kernel)) continue;
      Tensor out = empty({M, N});
      cpu::int8_gemm_with(kernel, a, packed, e, out);
      EXPECT_TRUE(all_close(out, portable, 0, 0)) << cpu::int8_kernel_name(kernel);
    }
  }
}

TEST(Int8Gemm, EveryKernelRequantizesAlikeAndVnniIsExactOnEightBitActivations) {
  manual_seed(12);
  const int64_t M = 13, N = 40, K = 77;
  Tensor a = randint(0, 128, {M, K}).to(kUInt8);
  const Tensor w = randint(-128, 128, {N, K}).to(kInt8);
  const Tensor packed = native::int8_pack_weight(w);
  Int8Epilogue e;  // the static chain's epilogue: requantized to uint8, fused ReLU, 7 bits out
  e.a_zero_point = 60;
  e.a_scale = 0.05;
  e.w_scale = rand({N}) * 0.01 + 0.001;
  e.bias = randn({N});
  e.out_scale = 0.3;
  e.out_zero_point = 20;
  e.out_quant_max = 127;
  e.relu = true;
  Tensor portable = empty({M, N}, TensorOptions().dtype(kUInt8));
  cpu::int8_gemm_with(cpu::Int8Kernel::Portable, a, packed, e, portable);
  EXPECT_GT(portable.to(kInt32).amax().item<int32_t>(), 100);  // the range is used, not all clamped
  for (auto kernel : kInt8Kernels) {
    if (!cpu::int8_kernel_available(kernel)) continue;
    SCOPED_TRACE(cpu::int8_kernel_name(kernel));
    Tensor out = empty({M, N}, TensorOptions().dtype(kUInt8));
    cpu::int8_gemm_with(kernel, a, packed, e, out);
    EXPECT_TRUE(all_close(out.to(kInt32), portable.to(kInt32), 0, 0));
  }
  // Full 8-bit activations: vpmaddubsw's int16 pair sum saturates (255 * 127 * 2 > 32767), as
  // fbgemm's does; vpdpbusd has no int16 step, so the VNNI kernel stays exact.
  if (cpu::int8_kernel_available(cpu::Int8Kernel::Avx512Vnni)) {
    NoGradGuard g;
    a = randint(0, 256, {M, K}).to(kUInt8);
    a.select(0, 0).fill_(255);
    Tensor w_max = w.clone();
    w_max.select(0, 0).fill_(127);
    Int8Epilogue raw;
    raw.a_zero_point = 0;
    Tensor out = empty({M, N}, TensorOptions().dtype(kInt32));
    cpu::int8_gemm_with(cpu::Int8Kernel::Avx512Vnni, a, native::int8_pack_weight(w_max), raw, out);
    EXPECT_TRUE(all_close(out, int32_reference(a, 0, w_max), 0, 0));
    EXPECT_EQ(out.select(0, 0).select(0, 0).item<int32_t>(), 255 * 127 * K);
  }
  EXPECT_ERROR_CONTAINS(cpu::int8_gemm_with(static_cast<cpu::Int8Kernel>(7), a, packed, e, portable),
                        "not available on this CPU");
}

TEST(DynamicQuantizedLinear, MatchesPyTorchWithinItsRounding) {
  nn::Linear lin(40, 12);
  StateDict state("key");
  state.insert("weight", R("dyn.state.weight"));
  state.insert("bias", R("dyn.state.bias"));
  lin->load_state_dict(state);
  const Tensor x = R("dyn.x");
  const Tensor y_float = lin(x).detach();
  for (bool per_channel : {false, true}) {
    const std::string n = per_channel ? "dyn.per_channel" : "dyn.per_tensor";
    SCOPED_TRACE(n);
    q::DynamicQuantizedLinearImpl qlin(*lin, per_channel);
    EXPECT_TRUE(all_close(qlin.weight, R(n + ".weight_int"), 0, 0));  // the int8 weight: exact
    EXPECT_TRUE(all_close(qlin.weight_scale, R(n + ".weight_scale"), 1e-7, 0));
    const Tensor y = qlin.forward(x);
    // Exactly the GEMM of the two quantized operands (activations quantized as fbgemm chooses).
    const auto qp =
        q::choose_quantization_params(x.amin().item<float>(), x.amax().item<float>(), 0, 255, qlin.reduce_range);
    const Tensor xq = quantize_per_tensor(x, qp.scale, qp.zero_point, QDType::QUInt8).dequantize();
    const Tensor exact =
        xq.to(kFloat64).matmul(qlin.weight_quantized().dequantize().to(kFloat64).t()) + qlin.bias.to(kFloat64);
    EXPECT_TRUE(all_close(y.to(kFloat64), exact, 1e-5, 1e-5));
    // PyTorch's (onednn, 7-bit activations too): the same integers, so equal to float rounding
    // (1.2e-7 measured; one activation step would be s_x s_w = 5e-5).
    EXPECT_TRUE(all_close(y, R(n + ".out"), 1e-6, 1e-6));
    EXPECT_LT((y - y_float).abs().amax().item<double>(), 0.05);  // and close to float32
  }
}

// An inf in the activations made an infinite scale and a NaN zero point, converted to an
// integer unchecked (undefined behaviour); the dynamic Linear now names the problem.
TEST(DynamicQuantizedLinear, AnInfiniteActivationIsAnErrorNotAnUndefinedZeroPoint) {
  EXPECT_ERROR_CONTAINS(q::choose_quantization_params(-std::numeric_limits<float>::infinity(), 1.0f, 0, 255, true),
                        "choose_quantization_params: the range [-inf, 1] is not finite");
  // qmax - qmin overflowed int64 for a range of int64's extremes; an empty range divided by 0.
  EXPECT_ERROR_CONTAINS(q::choose_quantization_params(0.0f, 1.0f, std::numeric_limits<int64_t>::min(),
                                                      std::numeric_limits<int64_t>::max(), false),
                        "is not a quantization range (qmin < qmax, both int32s)");
  EXPECT_ERROR_CONTAINS(q::choose_quantization_params(0.0f, 1.0f, 0, 1, true),
                        "choose_quantization_params: [0, 1] is not a quantization range once halved");
  nn::Linear lin(3, 2);
  q::DynamicQuantizedLinearImpl qlin(*lin, false);
  EXPECT_ERROR_CONTAINS(qlin.forward(tensor<float>({1.0f, std::numeric_limits<float>::infinity(), 0.0f}, Shape{1, 3})),
                        "is not finite");
}

TEST(DynamicQuantizedLinear, QuantizeDynamicSwapsLinearsAndRoundTripsItsState) {
  manual_seed(3);
  nn::Sequential net(nn::Linear(8, 16), nn::ReLU(), nn::Linear(16, 4));
  const Tensor x = randn({5, 8});
  const Tensor y_float = net(x).detach();
  auto model = q::quantize_dynamic(net.module());
  EXPECT_EQ(net->find_module("0")->type_name(), "DynamicQuantizedLinear");
  EXPECT_EQ(net->find_module("2")->type_name(), "DynamicQuantizedLinear");
  const Tensor y = net(x);
  EXPECT_LT((y - y_float).abs().amax().item<double>(), 0.05);
  EXPECT_FALSE(y.requires_grad());
  // The state (int8 weights, scales, zero points, bias) loads into another quantized model; the
  // packed weight follows the loaded values.
  nn::Sequential other(nn::Linear(8, 16), nn::ReLU(), nn::Linear(16, 4));
  q::quantize_dynamic(other.module());
  other(x);  // packs its own weights first
  other->load_state_dict(net->state_dict());
  EXPECT_TRUE(all_close(other(x), y, 0, 0));
  int64_t bytes = 0;
  for (const auto& item : net->state_dict())
    bytes += item.value().numel() * static_cast<int64_t>(element_size(item.value().dtype()));
  EXPECT_EQ(bytes, (8 * 16 + 16 * 4) + 4 * (16 + 4) + 2 * (4 + 4));  // int8 weights, float bias, scale + zero point
  // A root Linear is replaced by the result.
  auto root = q::quantize_dynamic(nn::Linear(3, 2).module());
  EXPECT_EQ(root->type_name(), "DynamicQuantizedLinear");
  EXPECT_ERROR_CONTAINS(q::quantize_dynamic(net.module(), {"Conv2d"}), "only Linear has one");
  EXPECT_ERROR_CONTAINS(net(randn({2, 3})), "expects input [..., 8]");
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

namespace q = quantization;
using testing::all_close;

TEST(Int8Conv2d, EqualsTheFloatConvolutionOfTheDequantizedOperands) {
  manual_seed(31);
  struct Case {
    int64_t n, c, h, w, o, k, stride, pad, dilation;
  };
  for (const Case& t :
       {Case{2, 3, 9, 8, 5, 3, 1, 1, 1}, Case{1, 1, 7, 7, 17, 3, 2, 0, 1}, Case{3, 4, 10, 9, 8, 2, 1, 2, 2}}) {
    SCOPED_TRACE(::testing::Message() << t.c << "->" << t.o << " k" << t.k << " s" << t.stride << " p" << t.pad);
    const Tensor x = randint(0, 128, {t.n, t.c, t.h, t.w}).to(kUInt8);
    const Tensor w = randint(-128, 128, {t.o, t.c, t.k, t.k}).to(kInt8);
    const Tensor packed = native::int8_pack_conv_weight(w);
    const Tensor w_scale = rand({t.o}) * 0.01 + 0.001, bias = randn({t.o});
    Int8Epilogue e;
    e.a_zero_point = 40;
    e.a_scale = 0.05;
    e.w_scale = w_scale;
    e.bias = bias;
    Conv2dParams p;
    p.stride = {t.stride, t.stride};
    p.padding = {t.pad, t.pad};
    p.dilation = {t.dilation, t.dilation};
    const Tensor y = native::int8_conv2d(x, packed, t.o, {t.k, t.k}, p, e, kFloat32);
    // The padding stands for 0.0: the zero point, not the integer 0.
    const Tensor xf = (x.to(kFloat64) - 40) * 0.05;
    const Tensor wf = w.to(kFloat64) * w_scale.to(kFloat64).view({t.o, 1, 1, 1});
    const Tensor expected =
        conv2d(xf, wf, bias.to(kFloat64), {t.stride, t.stride}, {t.pad, t.pad}, {t.dilation, t.dilation});
    EXPECT_TRUE(all_close(y.to(kFloat64), expected, 1e-5, 1e-4));
    // uint8 out: the same values requantized, clamped to the 7-bit range.
    e.out_scale = 0.1;
    e.out_zero_point = 60;
    e.out_quant_max = 127;
    const Tensor yq = native::int8_conv2d(x, packed, t.o, {t.k, t.k}, p, e, kUInt8);
    const Tensor requantized =
        quantize_per_tensor(expected.to(kFloat32), 0.1, 60, QDType::QUInt8).int_repr().to(kInt32).clamp(0, 127);
    EXPECT_LE((yq.to(kInt32) - requantized.to(kInt32)).abs().amax().item<int32_t>(), 1);  // float rounding at ties
  }
}

// The direct int8 kernels (int8_conv_direct.cpp, each vector kernel the CPU has) give the same
// bytes and floats as im2col with the portable GEMM, on every shape edge: channel counts that
// are not (1, 3, 5) and are (4, 8, 32) multiples of four (the regrouped and the shared weight),
// output channels around the tile blocks (1, 5, 8, 17, 64), flat spans shorter and longer than
// a tile with short last spans, padding 0 / shared / wider than the kernel reaches, dilation,
// 1x1 and 5x5 kernels, 1x1 and 2x2 outputs (a row's last vector would spill into the next
// channel's plane), one image (threads split the blocks) and several.
TEST(Int8Conv2d, DirectKernelsEqualIm2colOnEveryShapeEdge) {
  manual_seed(32);
  struct Case {
    int64_t n, c, h, w, o, kh, kw, pad_h, pad_w, dil;
  };
  using backends::cpu::ConvAlgorithm;
  int checked = 0;
  for (const Case& t :
       {Case{2, 3, 9, 8, 5, 3, 3, 1, 1, 1}, Case{1, 1, 28, 28, 32, 3, 3, 1, 1, 1},
        Case{3, 32, 14, 14, 64, 3, 3, 1, 1, 1}, Case{2, 4, 10, 9, 8, 2, 2, 2, 2, 2},
        Case{1, 8, 5, 7, 17, 5, 5, 2, 3, 1}, Case{2, 5, 6, 6, 1, 1, 1, 0, 0, 1}, Case{3, 8, 3, 3, 9, 3, 3, 0, 0, 1},
        Case{1, 4, 20, 33, 5, 3, 1, 0, 4, 1}, Case{4, 16, 7, 7, 16, 3, 3, 3, 3, 2}, Case{2, 4, 4, 4, 8, 3, 3, 0, 0, 1},
        Case{2, 4, 5, 12, 9, 3, 3, 0, 1, 1}}) {
    SCOPED_TRACE(::testing::Message() << "N " << t.n << " " << t.c << "->" << t.o << " " << t.h << "x" << t.w << " k"
                                      << t.kh << "x" << t.kw << " pad " << t.pad_h << "," << t.pad_w << " dil "
                                      << t.dil);
    const Tensor x = randint(0, 128, {t.n, t.c, t.h, t.w}).to(kUInt8);
    const Tensor w = randint(-128, 128, {t.o, t.c, t.kh, t.kw}).to(kInt8);
    const Tensor packed = native::int8_pack_conv_weight(w);
    Int8Epilogue e;
    e.a_zero_point = 37;
    e.a_scale = 0.05;
    e.w_scale = rand({t.o}) * 0.01 + 0.001;
    e.bias = randn({t.o});
    e.out_scale = 0.08;
    e.out_zero_point = 50;
    e.out_quant_max = 127;
    e.relu = true;
    Conv2dParams p;
    p.padding = {t.pad_h, t.pad_w};
    p.dilation = {t.dil, t.dil};
    const int64_t ho = t.h + 2 * t.pad_h - t.dil * (t.kh - 1), wo = t.w + 2 * t.pad_w - t.dil * (t.kw - 1);
    for (DType out_dtype : {kUInt8, kFloat32}) {
      const TensorOptions options = TensorOptions().dtype(out_dtype);
      Tensor expected = empty({t.n, t.o, ho, wo}, options);
      cpu::int8_conv2d_with(ConvAlgorithm::im2col_gemm, cpu::Int8Kernel::Portable, x, packed, {t.kh, t.kw}, p, e,
                            expected);
      if (out_dtype == kUInt8) {  // the range is used, not all clamped
        EXPECT_GT(expected.to(kInt32).amax().item<int32_t>(), 60);
        EXPECT_LT(expected.to(kInt32).amin().item<int32_t>(), 127);
      }
      for (auto kernel : {cpu::Int8Kernel::Avx2, cpu::Int8Kernel::Avx512Vnni}) {
        if (!cpu::int8_direct_applies(p, kernel)) continue;
        SCOPED_TRACE(cpu::int8_kernel_name(kernel));
        Tensor out = full({t.n, t.o, ho, wo}, 255, options);  // every element written
        cpu::int8_conv2d_with(ConvAlgorithm::direct, kernel, x, packed, {t.kh, t.kw}, p, e, out);
        EXPECT_TRUE(all_close(out.to(kFloat64), expected.to(kFloat64), 0, 0));
        ++checked;
      }
    }
  }
  if (cpu::int8_kernel_available(cpu::Int8Kernel::Avx2)) EXPECT_GE(checked, 22);
  // The vector epilogue's shortcuts (the ReLU as the lower clamp at the zero point, no clamp
  // below -2^31) against the portable one's arithmetic: with and without ReLU, a zero point inside
  // and above the 7-bit range, and scales that send values far past int32 on both sides.
  {
    const Tensor x = randint(0, 128, {2, 8, 6, 6}).to(kUInt8);
    const Tensor w = randint(-128, 128, {8, 8, 3, 3}).to(kInt8);
    const Tensor packed = native::int8_pack_conv_weight(w);
    Conv2dParams p;
    p.padding = {1, 1};
    for (bool relu : {false, true})
      for (double out_scale : {0.08, 1e-12})
        for (int64_t zero_point : {50, 200}) {
          Int8Epilogue e;
          e.a_zero_point = 37, e.a_scale = 0.05, e.w_scale = rand({8}) * 0.01 + 0.001, e.bias = randn({8}) * 5;
          e.out_scale = out_scale, e.out_zero_point = zero_point, e.out_quant_max = 127, e.relu = relu;
          Tensor expected = empty({2, 8, 6, 6}, TensorOptions().dtype(kUInt8));
          cpu::int8_conv2d_with(ConvAlgorithm::im2col_gemm, cpu::Int8Kernel::Portable, x, packed, {3, 3}, p, e,
                                expected);
          for (auto kernel : {cpu::Int8Kernel::Avx2, cpu::Int8Kernel::Avx512Vnni}) {
            if (!cpu::int8_direct_applies(p, kernel)) continue;
            Tensor out = empty({2, 8, 6, 6}, TensorOptions().dtype(kUInt8));
            cpu::int8_conv2d_with(ConvAlgorithm::direct, kernel, x, packed, {3, 3}, p, e, out);
            EXPECT_TRUE(all_close(out.to(kInt32), expected.to(kInt32), 0, 0))
                << cpu::int8_kernel_name(kernel) << " relu " << relu << " out_scale " << out_scale << " zero point "
                << zero_point;
          }
        }
  }
  EXPECT_ERROR_CONTAINS(native::int8_pack_conv_weight(zeros({8, 9}, TensorOptions().dtype(kInt8))),
                        "int8_pack_conv_weight: expects an int8 [O, C, kh, kw] weight, got int8 of shape [8, 9]");
  EXPECT_ERROR_CONTAINS(native::int8_pack_conv_weight(zeros({8, 1, 3, 3})), "got float32");
  // Bug: im2col checked the packed weight only in the GEMM, inside its parallel region over the
  // images, so a weight packed for 3 input channels given 2 ended the program (found by the random
  // arguments test at 3000 draws). Each path now refuses it before any thread starts.
  {
    const Tensor images = zeros({4, 2, 5, 5}, TensorOptions().dtype(kUInt8));
    const Tensor wrong = native::int8_pack_conv_weight(zeros({8, 3, 3, 3}, TensorOptions().dtype(kInt8)));
    Int8Epilogue e;
    e.w_scale = ones({8});
    for (auto kernel : {cpu::Int8Kernel::Portable, cpu::Int8Kernel::Avx2}) {
      if (!cpu::int8_kernel_available(kernel)) continue;
      Tensor out = empty({4, 8, 3, 3});
      const auto algorithm = kernel == cpu::Int8Kernel::Portable ? ConvAlgorithm::im2col_gemm : ConvAlgorithm::direct;
      EXPECT_ERROR_CONTAINS(cpu::int8_conv2d_with(algorithm, kernel, images, wrong, {3, 3}, Conv2dParams{}, e, out),
                            "int8_conv2d: the packed weight is not one of 8 rows of 18 (its header says 8 rows of 27");
    }
    EXPECT_ERROR_CONTAINS(native::int8_conv2d(images, wrong, 8, {3, 3}, Conv2dParams{}, e, kFloat32),
                          "the packed weight is not one of 8 rows of 18");
  }
  // Stride 2 and the portable kernel take im2col: direct does not apply, and says so when forced.
  Conv2dParams strided;
  strided.stride = {2, 2};
  EXPECT_FALSE(cpu::int8_direct_applies(strided, cpu::Int8Kernel::Avx2));
  EXPECT_FALSE(cpu::int8_direct_applies(Conv2dParams{}, cpu::Int8Kernel::Portable));
  const Tensor x = zeros({1, 1, 3, 3}, TensorOptions().dtype(kUInt8));
  Tensor out = empty({1, 1, 1, 1}, TensorOptions().dtype(kUInt8));
  Int8Epilogue e;
  e.w_scale = ones({1});
  EXPECT_ERROR_CONTAINS(cpu::int8_conv2d_direct(cpu::Int8Kernel::Portable, x,
                                                native::int8_pack_weight(zeros({1, 9}, TensorOptions().dtype(kInt8))),
                                                {3, 3}, Conv2dParams{}, e, out),
                        "the direct portable kernel does not apply");
}

// Beyond the chosen edges: random shapes (seeded; 1-40 input and 1-70 output channels, planes up
// to 20 x 20, kernels 1-5 per axis, padding up to past the kernel's reach, dilation 1-3), zero
// points and output ranges, with and without ReLU, uint8 or float32 out: every path this CPU has
// (the direct kernels, and im2col with each GEMM kernel) gives the portable im2col's bytes.
TEST(Int8Conv2d, RandomShapesEveryPathEqualsThePortableIm2col) {
  using backends::cpu::ConvAlgorithm;
  testing::SeededInts in(2034);
  int checked = 0;
  for (int draw = 0; draw < 120; ++draw) {
    const int64_t n = in(1, 3), c = in(0, 2) == 0 ? in(1, 40) : in(1, 9), o = in(0, 2) == 0 ? in(1, 70) : in(1, 9);
    const int64_t kh = in(1, 5), kw = in(1, 5), dil = in(1, 3);
    const int64_t pad_h = in(0, dil * (kh - 1) + 1), pad_w = in(0, dil * (kw - 1) + 1);
    const int64_t h = std::max<int64_t>(1, dil * (kh - 1) + 1 - 2 * pad_h) + in(0, 14);
    const int64_t w = std::max<int64_t>(1, dil * (kw - 1) + 1 - 2 * pad_w) + in(0, 14);
    const int64_t ho = h + 2 * pad_h - dil * (kh - 1), wo = w + 2 * pad_w - dil * (kw - 1);
    manual_seed(static_cast<uint64_t>(draw));
    const Tensor x = randint(0, 128, {n, c, h, w}).to(kUInt8);
    const Tensor weight = randint(-128, 128, {o, c, kh, kw}).to(kInt8);
    const Tensor packed = native::int8_pack_conv_weight(weight);
    Int8Epilogue e;
    e.a_zero_point = in(0, 127);
    e.a_scale = 0.05;
    e.w_scale = rand({o}) * 0.01 + 0.001;
    e.bias = randn({o});
    e.out_scale = in(0, 1) == 1 ? 0.08 : 1.5;
    e.out_zero_point = in(0, 127);
    e.out_quant_max = in(0, 1) == 1 ? 127 : 255;
    e.relu = in(0, 1) == 1;
    Conv2dParams p;
    p.padding = {pad_h, pad_w};
    p.dilation = {dil, dil};
    const DType out_dtype = in(0, 2) == 0 ? kFloat32 : kUInt8;
    SCOPED_TRACE(::testing::Message() << "draw " << draw << ": N " << n << " " << c << "->" << o << " " << h << "x" << w
                                      << " k" << kh << "x" << kw << " pad " << pad_h << "," << pad_w << " dil " << dil
                                      << " out " << out_dtype);
    const TensorOptions options = TensorOptions().dtype(out_dtype);
    Tensor expected = empty({n, o, ho, wo}, options);
    cpu::int8_conv2d_with(ConvAlgorithm::im2col_gemm, cpu::Int8Kernel::Portable, x, packed, {kh, kw}, p, e, expected);
    for (auto kernel : {cpu::Int8Kernel::Avx2, cpu::Int8Kernel::Avx512Vnni}) {
      if (!cpu::int8_kernel_available(kernel)) continue;
      SCOPED_TRACE(cpu::int8_kernel_name(kernel));
      for (ConvAlgorithm algorithm : {ConvAlgorithm::im2col_gemm, ConvAlgorithm::direct}) {
        if (algorithm == ConvAlgorithm::direct && !cpu::int8_direct_applies(p, kernel)) continue;
        Tensor out = full({n, o, ho, wo}, 255, options);  // every element written
        cpu::int8_conv2d_with(algorithm, kernel, x, packed, {kh, kw}, p, e, out);
        EXPECT_TRUE(all_close(out.to(kFloat64), expected.to(kFloat64), 0, 0))
            << (algorithm == ConvAlgorithm::direct ? "direct" : "im2col");
        ++checked;
      }
    }
  }
  if (cpu::int8_kernel_available(cpu::Int8Kernel::Avx2)) EXPECT_GE(checked, 240);
}

// Equal values, NaN equal to NaN (the float outputs of a NaN bias).
bool same_values(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to(kFloat64).to_vector<double>(), y = b.to(kFloat64).to_vector<double>();
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (!(x[i] == y[i] || (std::isnan(x[i]) && std::isnan(y[i])))) return false;
  return true;
}

// A NaN or infinite bias or weight scale (a diverged model, a bad checkpoint) reached the
// portable epilogue as a NaN converted to an integer, undefined behaviour; the direct
// convolution took NaN to out_quant_max and, without ReLU, a float NaN to -inf. Now every path
// gives the vector GEMM's answer: ReLU takes NaN to 0, requantization takes NaN to
// out_quant_min and +-inf to the range's ends, a float NaN without ReLU stays NaN.
TEST(Int8Gemm, NonFiniteBiasOrScaleGivesTheSameAnswerOnEveryPath) {
  using backends::cpu::ConvAlgorithm;
  manual_seed(14);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const int64_t M = 5, N = 20, K = 9;
  const Tensor a = randint(0, 128, {M, K}).to(kUInt8);
  const Tensor packed = native::int8_pack_weight(randint(-128, 128, {N, K}).to(kInt8));
  std::vector<float> bias(N, 0.5f), scale(N, 0.01f);
  bias[0] = nan, bias[1] = inf, bias[2] = -inf, bias[17] = nan;  // in the first panel and the second
  scale[3] = nan;
  for (bool relu : {false, true})
    for (DType out_dtype : {kFloat32, kUInt8}) {
      SCOPED_TRACE(::testing::Message() << "relu " << relu << ", " << out_dtype);
      Int8Epilogue e;
      e.a_zero_point = 10, e.a_scale = 0.05, e.w_scale = tensor<float>(scale), e.bias = tensor<float>(bias);
      e.out_scale = 0.1, e.out_zero_point = 20, e.out_quant_max = 127, e.relu = relu;
      const Tensor out = native::int8_gemm(a, packed, N, e, out_dtype);
      const std::vector<double> row = out.select(0, 1).to(kFloat64).to_vector<double>();
      for (int col : {0, 3, 17}) {
        if (out_dtype == kFloat32 && relu)
          EXPECT_EQ(row[col], 0.0) << col;
        else if (out_dtype == kFloat32)
          EXPECT_TRUE(std::isnan(row[col])) << col;
        else
          EXPECT_EQ(row[col], relu ? 20.0 : 0.0) << col;  // the zero point (0.0), or out_quant_min
      }
      EXPECT_EQ(row[1], out_dtype == kFloat32 ? inf : 127.0);
      EXPECT_EQ(row[2], out_dtype == kFloat32 ? (relu ? 0.0 : -inf) : (relu ? 20.0 : 0.0));
      for (auto kernel : kInt8Kernels) {
        if (!cpu::int8_kernel_available(kernel)) continue;
        Tensor other = empty({M, N}, TensorOptions().dtype(out_dtype));
        cpu::int8_gemm_with(kernel, a, packed, e, other);
        EXPECT_TRUE(same_values(other, out)) << cpu::int8_kernel_name(kernel);
      }
      // The convolution's paths: im2col + the portable GEMM, and the direct kernels.
      const int64_t O = 8;
      const Tensor x = randint(0, 128, {2, 4, 5, 5}).to(kUInt8);
      const Tensor wc = native::int8_pack_conv_weight(randint(-128, 128, {O, 4, 3, 3}).to(kInt8));
      e.w_scale = tensor<float>(std::vector<float>(scale.begin(), scale.begin() + O));
      e.bias = tensor<float>(std::vector<float>(bias.begin(), bias.begin() + O));
      Conv2dParams p;
      p.padding = {1, 1};
      Tensor expected = empty({2, O, 5, 5}, TensorOptions().dtype(out_dtype));
      cpu::int8_conv2d_with(ConvAlgorithm::im2col_gemm, cpu::Int8Kernel::Portable, x, wc, {3, 3}, p, e, expected);
      const double nan_channel = expected.select(1, 0).amax().item<double>();
      if (out_dtype == kUInt8) EXPECT_EQ(nan_channel, relu ? 20.0 : 0.0);
      for (auto kernel : {cpu::Int8Kernel::Avx2, cpu::Int8Kernel::Avx512Vnni}) {
        if (!cpu::int8_direct_applies(p, kernel)) continue;
        Tensor direct = empty({2, O, 5, 5}, TensorOptions().dtype(out_dtype));
        cpu::int8_conv2d_with(ConvAlgorithm::direct, kernel, x, wc, {3, 3}, p, e, direct);
        EXPECT_TRUE(same_values(direct, expected)) << cpu::int8_kernel_name(kernel);
      }
    }
}

// The int8 ops' arguments are checked before a kernel runs: another layer's packed weight, a
// scale or zero point outside its range, an output range that is not one.
TEST(Int8Gemm, RefusesAWeightOfAnotherShapeAndEpilogueNumbersOutOfRange) {
  const Tensor a = zeros({2, 8}, TensorOptions().dtype(kUInt8));
  const Tensor packed = native::int8_pack_weight(zeros({4, 8}, TensorOptions().dtype(kInt8)));
  Int8Epilogue e;
  e.w_scale = ones({1});
  EXPECT_ERROR_CONTAINS(native::int8_gemm(a, packed, 5, e, kInt32),
                        "int8_gemm: the packed weight is not one of 5 rows of 8 (its header says 4 rows of 8");
  EXPECT_ERROR_CONTAINS(native::int8_gemm(zeros({2, 7}, TensorOptions().dtype(kUInt8)), packed, 4, e, kInt32),
                        "not one of 4 rows of 7");
  EXPECT_ERROR_CONTAINS(native::int8_gemm(a, zeros({100}, TensorOptions().dtype(kInt8)), 4, e, kInt32),
                        "the packed weight is not one of 4 rows of 8");
  EXPECT_ERROR_CONTAINS(native::int8_gemm(a, packed, -1, e, kInt32), "int8_gemm: negative n -1");
  auto refused = [&](auto edit, const std::string& message) {
    Int8Epilogue bad = e;
    edit(bad);
    EXPECT_ERROR_CONTAINS(native::int8_gemm(a, packed, 4, bad, kUInt8), message);
  };
  refused([](Int8Epilogue& b) { b.a_zero_point = 256; }, "the input zero point 256 is not a uint8");
  refused([](Int8Epilogue& b) { b.a_scale = std::nan(""); }, "the input scale must be positive and finite, got nan");
  refused([](Int8Epilogue& b) { b.out_scale = 0; }, "the output scale must be positive and finite, got 0");
  refused([](Int8Epilogue& b) { b.out_scale = 1e-300; },
          "the output scale must be positive and finite");  // 0 as a float
  refused([](Int8Epilogue& b) { b.out_zero_point = -1; }, "the output zero point -1 is not a uint8");
  refused([](Int8Epilogue& b) { b.out_quant_min = 9, b.out_quant_max = 3; }, "the output range [9, 3]");
  Conv2dParams p;
  p.padding = {int64_t{1} << 62, 0};
  EXPECT_ERROR_CONTAINS(native::int8_conv2d(zeros({1, 1, 3, 3}, TensorOptions().dtype(kUInt8)),
                                            native::int8_pack_weight(zeros({1, 9}, TensorOptions().dtype(kInt8))), 1,
                                            {3, 3}, p, e, kFloat32),
                        "int8_conv2d: the arguments make a size beyond int64's range (2 * 4611686018427387904)");
}

nn::Sequential small_cnn() {
  return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 4, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
                        nn::Conv2d(4, 8, 3), nn::ReLU(), nn::Flatten(), nn::Linear(8 * 2 * 2, 16), nn::ReLU(),
                        nn::Dropout(0.1), nn::Linear(16, 3));
}

double relative_error(const Tensor& a, const Tensor& b) { return ((a - b).norm() / b.norm()).item<double>(); }

TEST(StaticQuantization, PrepareCalibrateConvertKeepsTheOutputsOfACnn) {
  manual_seed(32);
  nn::Sequential net = small_cnn();
  net->eval();
  const Tensor x = randn({16, 1, 8, 8});
  const Tensor y_float = net(x).detach();
  EXPECT_ERROR_CONTAINS(q::convert(*net), "was not prepared");
  q::prepare(*net);
  EXPECT_ERROR_CONTAINS(q::convert(*net), "saw no data");
  for (int i = 0; i < 4; ++i) net(randn({16, 1, 8, 8}));  // calibration
  EXPECT_TRUE(all_close(net(x), y_float, 0, 0));          // observers only watch
  nn::Sequential int8 = q::convert(*net);
  // Quantize, ConvReLU2d, MaxPool, ConvReLU2d, Flatten, LinearReLU, Linear, DeQuantize (Dropout dropped).
  std::ostringstream printed;
  printed << *int8;
  EXPECT_NE(printed.str().find("QuantizedConvReLU2d(1, 4, kernel_size=(3, 3)"), std::string::npos) << printed.str();
  EXPECT_EQ(int8->size(), 8u);
  const Tensor y = int8(x);
  EXPECT_EQ(y.dtype(), kFloat32);
  EXPECT_LT(relative_error(y, y_float), 0.05);
  EXPECT_EQ(y.argmax(1).eq(y_float.argmax(1)).sum().item<int64_t>() >= 14, true);
  // The activations in between are uint8; a float input to an inner layer is a clear error.
  EXPECT_EQ((*int8)[0]->forward(x).dtype(), kUInt8);
  EXPECT_ERROR_CONTAINS((*int8)[1]->forward(x), "expects the uint8 activations of a converted model");
  // Weights stored as int8: a quarter of the float32 bytes, plus scales.
  int64_t bytes = 0;
  for (const auto& item : int8->state_dict()) {
    if (item.key().find(".weight") != std::string::npos && item.key().find("scale") == std::string::npos &&
        item.key().find("zero_point") == std::string::npos)
      EXPECT_EQ(item.value().dtype(), kInt8) << item.key();
    bytes += item.value().numel() * static_cast<int64_t>(element_size(item.value().dtype()));
  }
  EXPECT_LT(bytes, 4 * (4 * 9 + 8 * 36 + 32 * 16 + 16 * 3));
}

TEST(StaticQuantization, AShallowFirstLayerCanStayFloat) {
  manual_seed(36);
  nn::Sequential net = small_cnn();
  net->eval();
  const Tensor x = randn({16, 1, 8, 8});
  const Tensor y_float = net(x).detach();
  q::prepare(*net);
  for (int i = 0; i < 4; ++i) net(randn({16, 1, 8, 8}));
  // Depth 9 (1 channel, 3 x 3) is below 32: Conv2d and ReLU stay, Quantize follows them.
  nn::Sequential mixed = q::convert(*net, q::ConvertOptions().keep_shallow_first_layer(32));
  EXPECT_EQ((*mixed)[0]->type_name(), "Conv2d");
  EXPECT_EQ((*mixed)[1]->type_name(), "ReLU");
  EXPECT_EQ((*mixed)[2]->type_name(), "Quantize");
  EXPECT_EQ((*mixed)[3]->type_name(), "QuantizedMaxPool2d");
  EXPECT_LT(relative_error(mixed(x), y_float), 0.05);
  // Deeper than the threshold: everything int8, as before.
  EXPECT_EQ((*q::convert(*net, q::ConvertOptions().keep_shallow_first_layer(9)))[0]->type_name(), "Quantize");
}

TEST(StaticQuantization, HistogramCalibrationKeepsTheOutputsToo) {
  manual_seed(35);
  nn::Sequential net = small_cnn();
  net->eval();
  const Tensor x = randn({16, 1, 8, 8});
  const Tensor y_float = net(x).detach();
  q::prepare(*net, q::Calibration::Histogram);
  for (int i = 0; i < 4; ++i) net(randn({16, 1, 8, 8}));
  nn::Sequential int8 = q::convert(*net);
  EXPECT_LT(relative_error(int8(x), y_float), 0.06);
}

// Bug fixed: the int8 layers packed their weight and copied their scales into fields once, at
// convert, so a converted model that loaded another's state kept computing with its own.
TEST(StaticQuantization, AConvertedModelComputesWithTheStateItLoads) {
  auto converted = [](uint64_t seed, double input_range) {
    manual_seed(seed);
    nn::Sequential net(nn::Conv2d(nn::Conv2dOptions(1, 4, 3).padding(1)), nn::MaxPool2d(2), nn::ReLU(),
                       nn::Conv2d(4, 8, 3), nn::ReLU(), nn::Flatten(), nn::Linear(8 * 2 * 2, 3));
    net->eval();
    q::prepare(*net);
    for (int i = 0; i < 4; ++i) net(randn({16, 1, 8, 8}) * input_range);
    return q::convert(*net);
  };
  nn::Sequential a = converted(1, 1.0), b = converted(2, 3.0);
  // Quantize, QuantizedConv2d, QuantizedMaxPool2d, QuantizedReLU, QuantizedConvReLU2d, Flatten, QuantizedLinear,
  // DeQuantize
  ASSERT_EQ(b->size(), 8u);
  EXPECT_EQ((*b)[3]->type_name(), "QuantizedReLU");
  manual_seed(3);
  const Tensor x = randn({8, 1, 8, 8});
  const Tensor ya = a(x), yb = b(x);  // b has packed its weights and read its scales
  ASSERT_FALSE(all_close(ya, yb, 0, 0));
  b->load_state_dict(a->state_dict());
  EXPECT_TRUE(all_close(b(x), ya, 0, 0));
  std::ostringstream printed_a, printed_b;
  printed_a << *a;
  printed_b << *b;
  EXPECT_EQ(printed_b.str(), printed_a.str());
  // Loaded values are checked where they are used.
  StateDict state = a->state_dict();
  state["1.scale"] = zeros({1});
  b->load_state_dict(state);
  EXPECT_ERROR_CONTAINS(b(x), "QuantizedConv2d: the output scale must be positive and finite, got 0");
  EXPECT_ERROR_CONTAINS(b(x), "QuantizedConv2d: the output scale must be positive and finite, got 0");  // still
  state = a->state_dict();
  state["6.input_zero_point"] = full({1}, 200, TensorOptions().dtype(kInt32));
  b->load_state_dict(state);
  EXPECT_ERROR_CONTAINS(b(x), "QuantizedLinear: the input zero point 200 is outside [0, 127]");
  state = a->state_dict();
  state["0.scale"] = full({1}, std::numeric_limits<double>::infinity());
  b->load_state_dict(state);
  EXPECT_ERROR_CONTAINS(b(x), "Quantize: the output scale must be positive and finite, got inf");
  b->load_state_dict(a->state_dict());
  EXPECT_TRUE(all_close(b(x), ya, 0, 0));
}

TEST(StaticQuantization, LayersWithoutAnInt8FormAreNamed) {
  nn::Sequential net(nn::Linear(4, 4), nn::Tanh(), nn::Linear(4, 2));
  q::prepare(*net);
  net(randn({3, 4}));
  EXPECT_ERROR_CONTAINS(q::convert(*net), "(1) Tanh has no int8 form");
  EXPECT_ERROR_CONTAINS(q::prepare(*net), "is prepared already");
}

TEST(QuantizationAwareTraining, TrainsThroughFakeQuantizationAndConvertsToTheSameOutputs) {
  manual_seed(33);
  nn::Sequential net(nn::Linear(6, 32), nn::ReLU(), nn::Linear(32, 3));
  q::prepare_qat(*net);
  EXPECT_NE((*net)[0]->as<q::QatLinearImpl>(), nullptr);
  // A small regression: the loss goes down through the straight-through estimator.
  const Tensor x = randn({64, 6}), target = randn({64, 3});
  optim::Adam opt(net->parameters(), optim::AdamOptions(1e-2));
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    opt.zero_grad();
    Tensor loss = nn::functional::mse_loss(net(x), target);
    loss.backward();
    opt.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, 0.7 * first);
  net->eval();
  const Tensor y_qat = net(x).detach();
  nn::Sequential int8 = q::convert(*net);
  // The int8 model computes what training simulated, up to an activation step or so.
  EXPECT_LT(relative_error(int8(x), y_qat), 0.03);
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

TEST(QuantizedSafetensors, RoundTripsAndRefusesInconsistentFiles) {
  manual_seed(34);
  const std::string path = ::testing::TempDir() + "ember_quantized.safetensors";
  const QTensor a = quantize_per_tensor(randn({3, 4}), 0.05, 7, QDType::QUInt8);
  const QTensor b =
      quantize_per_channel(randn({2, 5}), tensor<double>({0.1, 0.02}), tensor<int64_t>({0, -3}), 0, QDType::QInt8);
  OrderedDict<QTensor> tensors("quantized tensor");
  tensors.insert("a", a);
  tensors.insert("layer.weight", b);
  io::save_quantized(tensors, path);
  const OrderedDict<QTensor> back = io::load_quantized(path);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_TRUE(testing::all_close(back["a"].int_repr(), a.int_repr(), 0, 0));
  EXPECT_EQ(back["a"].q_scale(), a.q_scale());
  EXPECT_EQ(back["a"].q_zero_point(), 7);
  EXPECT_EQ(back["layer.weight"].dtype(), QDType::QInt8);
  EXPECT_EQ(back["layer.weight"].q_per_channel_axis(), 0);
  EXPECT_EQ(back["layer.weight"].q_per_channel_scales().dtype(), kFloat64);  // kept as given
  EXPECT_TRUE(testing::all_close(back["layer.weight"].dequantize(), b.dequantize(), 0, 0));
  // Any safetensors reader sees three plain tensors per quantized one.
  EXPECT_EQ(load(path).size(), 6u);

  auto write = [&](OrderedDict<Tensor> parts, std::map<std::string, std::string> meta) {
    io::write_safetensors(path, parts, meta);
  };
  OrderedDict<Tensor> parts("tensor");
  parts.insert("q", a.int_repr());
  parts.insert("q.scale", full({1}, 0.05));
  write(parts, {{"q.qdtype", "quint8"}, {"q.axis", "-1"}});
  EXPECT_ERROR_CONTAINS(io::load_quantized(path), "'.scale' and '.zero_point' must all be present");
  parts.insert("q.zero_point", full({1}, 7, TensorOptions().dtype(kInt32)));
  write(parts, {{"q.qdtype", "qint9"}, {"q.axis", "-1"}});
  EXPECT_ERROR_CONTAINS(io::load_quantized(path), "unknown quantized dtype 'qint9'");
  write(parts, {{"q.qdtype", "quint8"}, {"q.axis", "x"}});
  EXPECT_ERROR_CONTAINS(io::load_quantized(path), "the axis 'x' is not an integer");
  write(parts, {{"q.qdtype", "quint8"}, {"q.axis", "5"}});
  EXPECT_ERROR_CONTAINS(io::load_quantized(path), "axis 5 is out of range");
  write(parts, {{"q.qdtype", "qint8"}, {"q.axis", "-1"}});
  EXPECT_ERROR_CONTAINS(io::load_quantized(path), "a qint8 tensor stores int8, got uint8");
  parts.insert_or_assign("q.scale", full({1}, -1.0));
  write(parts, {{"q.qdtype", "quint8"}, {"q.axis", "-1"}});
  EXPECT_ERROR_CONTAINS(io::load_quantized(path), "scales must be positive");
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

namespace q = quantization;
using testing::all_close;
const Tensor& RQ(const std::string& name) { return testing::ref_tensor(testing::reference_quant(), name); }

TEST(Observers, HistogramObserverMatchesPyTorch) {
  using O = q::ObserverOptions;
  const std::vector<std::pair<std::string, O>> cases = {
      {"affine", O()},
      {"sym", O().with_dtype(QDType::QInt8).with_qscheme(QScheme::PerTensorSymmetric)},
      {"reduce", O().with_reduce_range(true)}};
  for (const auto& [name, options] : cases) {
    SCOPED_TRACE(name);
    q::HistogramObserverImpl observer(options);
    for (int i = 0; i < 3; ++i) {
      observer(RQ("hist.batch" + std::to_string(i)));
      // The first batch's histogram spans int(min) .. int(max), as PyTorch 1.13's histc call does.
      if (i == 0) EXPECT_TRUE(all_close(observer.histogram, RQ("hist." + name + ".histogram0"), 0, 0));
    }
    EXPECT_TRUE(all_close(observer.min_val, RQ("hist." + name + ".min"), 0, 0));
    EXPECT_TRUE(all_close(observer.max_val, RQ("hist." + name + ".max"), 0, 0));
    // Later batches are merged through the upsampled old histogram: equal to rounding.
    EXPECT_TRUE(all_close(observer.histogram, RQ("hist." + name + ".histogram"), 1e-6, 1e-4));
    auto [scale, zero_point] = observer.calculate_qparams();
    EXPECT_TRUE(all_close(scale, RQ("hist." + name + ".scale"), 1e-6, 0));
    EXPECT_TRUE(all_close(zero_point, RQ("hist." + name + ".zero_point"), 0, 0));
  }
  EXPECT_ERROR_CONTAINS(q::HistogramObserverImpl(O().with_qscheme(QScheme::PerChannelAffine)),
                        "per tensor schemes only");
  // bins * upsample_rate overflowed int64 in the second batch (UBSan, found by the
  // random-arguments test at 30000 draws): refused at construction, as many finer bins as
  // PyTorch could hold in one tensor
  EXPECT_ERROR_CONTAINS(q::HistogramObserverImpl(O(), 16, std::numeric_limits<int64_t>::max()),
                        "HistogramObserver: bins * upsample_rate must be at most 2^30, got 16 * 9223372036854775807");
  EXPECT_NO_THROW(q::HistogramObserverImpl(O(), 16, (int64_t{1} << 30) / 16));
}

// An inf or NaN in calibration data: MinMaxObserver's qparams converted a NaN zero point to an
// integer (undefined) and HistogramObserver binned with an infinite range (undefined too);
// both refuse now, as PyTorch's histc does, and keep what they had seen.
TEST(Observers, NonFiniteRangesAreRefusedNotConverted) {
  const float inf = std::numeric_limits<float>::infinity();
  q::MinMaxObserverImpl minmax;
  minmax.forward(tensor<float>({1.0f, -inf}));
  EXPECT_ERROR_CONTAINS(minmax.calculate_qparams(),
                        "MinMaxObserver: the observed range [-inf, 1] is not finite, so it has no scale");
  q::HistogramObserverImpl histogram;
  histogram.forward(tensor<float>({-1.0f, 2.0f}));
  EXPECT_ERROR_CONTAINS(histogram.forward(tensor<float>({0.5f, inf})),
                        "HistogramObserver: the batch holds inf, so the range of its histogram is not finite");
  EXPECT_ERROR_CONTAINS(histogram.forward(tensor<float>({std::nanf("")})), "the batch holds nan");
  EXPECT_EQ(histogram.max_val.item<float>(), 2.0f);
  // A range far wider than the old one: PyTorch would make bins * 1e36 finer bins.
  EXPECT_ERROR_CONTAINS(histogram.forward(tensor<float>({1e38f})), "too many finer bins to combine them");
  EXPECT_EQ(histogram.max_val.item<float>(), 2.0f);
  EXPECT_EQ(histogram.calculate_qparams().first.numel(), 1);
}

// A quantization range of one value, or a finite range whose width overflows float32: the scale
// was (max - min) / 0 or inf, and the zero point a NaN converted to int32 (UBSan, found by the
// random-arguments test). PyTorch's observers also require quant_min < quant_max.
TEST(Observers, DegenerateRangesAreRefused) {
  EXPECT_ERROR_CONTAINS(q::MinMaxObserverImpl(q::ObserverOptions().with_range(0, 0)),
                        "quant_min must be less than quant_max, got [0, 0]");
  EXPECT_ERROR_CONTAINS(q::MinMaxObserverImpl(q::ObserverOptions().with_range(0, 1).with_reduce_range(true)),
                        "the range [0, 1] is a single value once halved by reduce_range");
  q::MinMaxObserverImpl wide;
  wide.forward(tensor<float>({-3e38f, 3e38f}));
  EXPECT_ERROR_CONTAINS(wide.calculate_qparams(), "the observed range [-3e+38, 3e+38] is too wide for a float32 scale");
  q::MinMaxObserverImpl narrow(q::ObserverOptions().with_range(0, 1));  // one step still has a scale
  narrow.forward(tensor<float>({-1.0f, 1.0f}));
  EXPECT_FLOAT_EQ(narrow.calculate_qparams().first.item<float>(), 2.0f);
  // qint32's range: quant_max as a float32 is 2^31, and the zero point of an all-negative range,
  // clamped to it, was converted to int32 out of range (UBSan, found by the random-arguments test
  // at 30000 draws). It is quant_max, the image of 0.
  q::MinMaxObserverImpl int32_range(q::ObserverOptions().with_dtype(QDType::QInt32));
  int32_range.forward(tensor<float>({-1024.0f, -512.0f}));
  const auto [scale, zero_point] = int32_range.calculate_qparams();
  EXPECT_EQ(scale.item<float>(), 1024.0f / 4294967296.0f);  // (0 - min) / (qmax - qmin), in float32
  EXPECT_EQ(zero_point.item<int64_t>(), std::numeric_limits<int32_t>::max());
}

}  // namespace
}  // namespace ember
