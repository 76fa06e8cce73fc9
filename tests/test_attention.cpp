// nn::functional::scaled_dot_product_attention: PyTorch's values and gradients (float64, from
// tools/gen_reference_nn.py), finite differences, and the autocast op it is: 16-bit inside, so
// the attention weights it saves for backward are 16-bit, by an exact byte count.
#include <cmath>

#include "helpers.h"

namespace ember {
namespace {

using nn::functional::AttentionOptions;
using nn::functional::scaled_dot_product_attention;

const Tensor& nn_ref(const std::string& name) { return testing::ref_tensor(testing::reference_nn(), name); }

TEST(Attention, MatchesPyTorchValuesAndGradients) {
  struct Case {
    const char* name;
    bool is_causal;
    std::optional<double> scale;
  };
  for (const Case& c : {Case{"plain", false, {}}, Case{"causal_scale", true, 0.3}, Case{"bool_mask", false, {}},
                        Case{"float_mask", false, {}}, Case{"broadcast", false, {}}}) {
    SCOPED_TRACE(c.name);
    const std::string at = std::string("sdpa.") + c.name;
    std::vector<Tensor> qkv;
    for (int i = 0; i < 3; ++i) qkv.push_back(nn_ref(at + ".in" + std::to_string(i)).clone().requires_grad_(true));
    const Tensor mask = nn_ref(at + ".in3");
    AttentionOptions o;
    o.is_causal(c.is_causal).scale(c.scale);
    if (mask.numel() > 0) o.attn_mask(mask);
    const Tensor out = scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], o);
    EXPECT_TRUE(testing::all_close(out, nn_ref(at + ".out0"), 1e-12, 1e-12));
    out.backward(nn_ref(at + ".gout"));
    for (int i = 0; i < 3; ++i)
      EXPECT_TRUE(testing::all_close(qkv[i].grad(), nn_ref(at + ".grad" + std::to_string(i)), 1e-11, 1e-12)) << i;
  }
}

TEST(Attention, GradientsMatchFiniteDifferences) {
  manual_seed(5);
  const Tensor mask = randn({3, 4}, kFloat64);
  const auto r = autograd::gradcheck(
      [&](const std::vector<Tensor>& x) {
        return scaled_dot_product_attention(x[0], x[1], x[2], AttentionOptions().attn_mask(mask).scale(0.7)) +
               scaled_dot_product_attention(x[0], x[1], x[1], AttentionOptions().is_causal(true));
      },
      {randn({2, 3, 2}, kFloat64), randn({2, 4, 2}, kFloat64), randn({2, 4, 2}, kFloat64)});
  EXPECT_TRUE(r.ok) << r.message;
}

// Query i attends to keys j <= i: the first query sees only the first value.
TEST(Attention, CausalFirstQueryReturnsTheFirstValue) {
  const Tensor q = randn({1, 4, 3}), k = randn({1, 4, 3}), v = randn({1, 4, 5});
  const Tensor out = scaled_dot_product_attention(q, k, v, AttentionOptions().is_causal(true));
  EXPECT_TRUE(testing::all_close(out.narrow(1, 0, 1), v.narrow(1, 0, 1), 1e-6, 1e-6));
}

// Under autocast the inputs are cast once and the softmax stays 16-bit: the tape holds the
// 16-bit weights once (shared with the second matmul), where the op-by-op composite (the float32
// list's softmax) holds them in float32 and again as the matmul's 16-bit cast: 4 bytes more per
// weight, exactly.
TEST(Attention, UnderAutocastItIsOneLowPrecisionOpAndSavesSixteenBitWeights) {
  const int64_t B = 2, H = 2, T = 16, D = 8;
  manual_seed(6);
  Tensor q = randn({B, H, T, D}).requires_grad_(true), k = randn({B, H, T, D}).requires_grad_(true),
         v = randn({B, H, T, D}).requires_grad_(true);
  auto composite = [&] {
    const Tensor future = triu(ones({T, T}, TensorOptions(kBool)), 1);
    const Tensor scores = matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(D)));
    return matmul(softmax(scores.masked_fill(future, -INFINITY), -1), v);
  };
  auto fused = [&] { return scaled_dot_product_attention(q, k, v, AttentionOptions().is_causal(true)); };
  auto held_after_forward = [](const std::function<Tensor()>& f, Tensor* out) {
    const int64_t start = memory::stats().current_bytes;
    *out = f();
    return memory::stats().current_bytes - start;
  };
  for (DType dtype : {kBFloat16, kFloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor a, b;
    int64_t held_composite = 0, held_fused = 0;
    {
      const autocast::AutocastGuard guard(kCPU, dtype);
      held_composite = held_after_forward(composite, &a);
    }
    {
      const autocast::AutocastGuard guard(kCPU, dtype);
      held_fused = held_after_forward(fused, &b);
    }
    EXPECT_EQ(a.dtype(), dtype);
    EXPECT_EQ(b.dtype(), dtype);
    EXPECT_EQ(held_composite - held_fused, 4 * B * H * T * T);
    EXPECT_TRUE(testing::all_close(b.to(kFloat32), a.to(kFloat32), 2e-2, 2e-2));
    // float32 parameters still get float32 gradients, close to the float32 op's.
    b.to(kFloat32).sum().backward();
    for (const Tensor* t : {&q, &k, &v}) EXPECT_EQ(t->grad().dtype(), kFloat32);
    const Tensor g16 = v.grad().clone();
    for (Tensor* t : {&q, &k, &v}) t->mutable_grad().zero_();
    fused().sum().backward();
    EXPECT_TRUE(testing::all_close(g16, v.grad(), 3e-2, 3e-2));
    for (Tensor* t : {&q, &k, &v}) t->mutable_grad() = Tensor();
  }
  // Without autocast it is the float32 composite, bit for bit.
  EXPECT_TRUE((fused() == composite()).all().item<bool>());
}

TEST(Attention, BadInputsNameTheOpAndTheShapes) {
  const Tensor q = randn({2, 4, 3}), k = randn({2, 5, 3}), v = randn({2, 5, 6});
  EXPECT_ERROR_CONTAINS(scaled_dot_product_attention(q, randn({2, 5, 4}), v),
                        "scaled_dot_product_attention: expected query [..., L, E], key [..., S, E] and value [..., S, "
                        "Ev], got [2, 4, 3], [2, 5, 4], [2, 5, 6]");
  EXPECT_ERROR_CONTAINS(scaled_dot_product_attention(q, k, randn({2, 4, 6})), "got [2, 4, 3], [2, 5, 3], [2, 4, 6]");
  EXPECT_ERROR_CONTAINS(scaled_dot_product_attention(randn({3}), k, v), "need at least 2 dims");
  EXPECT_ERROR_CONTAINS(
      scaled_dot_product_attention(q, k, v, AttentionOptions().is_causal(true).attn_mask(ones({4, 5}, kBool))),
      "pass attn_mask or is_causal, not both");
  EXPECT_ERROR_CONTAINS(scaled_dot_product_attention(q, k, v, AttentionOptions().attn_mask(ones({4, 5}, kInt64))),
                        "attn_mask must be bool or floating, got int64");
  EXPECT_ERROR_CONTAINS(scaled_dot_product_attention(q, k, v, AttentionOptions().dropout_p(1.5)),
                        "dropout_p must be in [0, 1], got 1.5");
  EXPECT_ERROR_CONTAINS(scaled_dot_product_attention(q.to(kInt64), k, v), "must be floating, got int64");
  EXPECT_ERROR_CONTAINS(scaled_dot_product_attention(q, Tensor(), v), "must be defined");
}

}  // namespace
}  // namespace ember
