// Embedding and EmbeddingBag with PyTorch's options (Note [Embedding options]) against PyTorch
// (tools/gen_reference_nn.py, "embed.*"): the output, the weight after max_norm's in-place
// renormalization, and the gradients of the weight and the per-sample weights. Then what the
// reference cannot show: the modules, from_pretrained, printing, the refusals.
#include <sstream>

#include "helpers.h"

namespace ember {
namespace {

namespace F = nn::functional;

F::EmbeddingFuncOptions embedding_options(const std::string& name) {
  if (name == "embedding_max_norm_freq_padding")
    return F::EmbeddingFuncOptions().padding_idx(2).max_norm(1.5).scale_grad_by_freq(true);
  if (name == "embedding_l1_max_norm") return F::EmbeddingFuncOptions().max_norm(1.0).norm_type(1.0);
  throw Error("no case " + name);
}

F::EmbeddingBagFuncOptions bag_options(const std::string& name) {
  if (name == "bag_sum_offsets_weights") return F::EmbeddingBagFuncOptions().mode(kSum);
  if (name == "bag_mean_2d_padding") return F::EmbeddingBagFuncOptions().mode(kMean).padding_idx(0);
  if (name == "bag_max_last_offset") return F::EmbeddingBagFuncOptions().mode(kMax).include_last_offset(true);
  if (name == "bag_max_padding") return F::EmbeddingBagFuncOptions().mode(kMax).padding_idx(2);
  if (name == "bag_mean_max_norm_freq")
    return F::EmbeddingBagFuncOptions().mode(kMean).max_norm(1.0).scale_grad_by_freq(true);
  throw Error("no case " + name);
}

class EmbeddingReference : public ::testing::TestWithParam<std::tuple<DeviceType, std::string>> {};

TEST_P(EmbeddingReference, MatchesPyTorch) {
  const Device device(std::get<0>(GetParam()));
  const std::string name = std::get<1>(GetParam()), base = "embed." + name + ".";
  if (device.is_cuda() && !cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto& ref = testing::reference_nn();
  const auto at = [&](const std::string& key) { return testing::ref_tensor(ref, base + key); };
  const auto optional = [&](const std::string& key) { return ref.count(base + key) ? at(key).to(device) : Tensor(); };
  const Tensor weight = at("weight").to(device, false, true).set_requires_grad(true);
  const Tensor input = at("input").to(device);
  Tensor psw = optional("psw");
  if (psw.defined()) psw.requires_grad_();
  const bool bag = name.rfind("bag_", 0) == 0;
  const Tensor out =
      bag ? F::embedding_bag(input, weight, bag_options(name).offsets(optional("offsets")).per_sample_weights(psw))
          : F::embedding(input, weight, embedding_options(name));
  const double tol = device.is_cuda() ? 1e-4 : 1e-5;
  EXPECT_TRUE(testing::all_close(out.cpu(), at("out"), tol, tol)) << name << " output";
  EXPECT_TRUE(testing::all_close(weight.detach().cpu(), at("weight_after"), tol, tol))
      << name << " the weight after max_norm";
  (out * at("gout").to(device)).sum().backward();
  EXPECT_TRUE(testing::all_close(weight.grad().cpu(), at("grad_weight"), tol, tol)) << name << " weight gradient";
  if (psw.defined())
    EXPECT_TRUE(testing::all_close(psw.grad().cpu(), at("grad_psw"), tol, tol)) << name << " per-sample weights";
}

INSTANTIATE_TEST_SUITE_P(NN, EmbeddingReference,
                         ::testing::Combine(::testing::Values(kCPU, kCUDA),
                                            ::testing::Values("embedding_max_norm_freq_padding",
                                                              "embedding_l1_max_norm", "bag_sum_offsets_weights",
                                                              "bag_mean_2d_padding", "bag_max_last_offset",
                                                              "bag_max_padding", "bag_mean_max_norm_freq")),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) == kCPU ? "cpu_" : "cuda_") +
                                  std::get<1>(info.param);
                         });

// A bag is the reduction of its rows: the module against the lookups it stands for, in float64
// so that the sums agree to rounding, and its gradient by finite differences.
TEST(EmbeddingBag, EachModeIsTheReductionOfItsRowsAndDifferentiable) {
  manual_seed(4);
  const Tensor input = tensor<int64_t>({4, 0, 4, 2, 7, 1, 3});
  const Tensor offsets = tensor<int64_t>({0, 3, 3});  // bags [4, 0, 4], [], [2, 7, 1, 3]
  for (const char* mode : {kSum, kMean, kMax}) {
    nn::EmbeddingBag bag(nn::EmbeddingBagOptions(8, 3).mode(mode));
    bag->to(kFloat64);
    const Tensor out = bag(input, offsets);
    ASSERT_EQ(out.sizes(), (Shape{3, 3})) << mode;
    const Tensor first = bag->weight.index_select(0, tensor<int64_t>({4, 0, 4}));
    const Tensor third = bag->weight.index_select(0, tensor<int64_t>({2, 7, 1, 3}));
    const auto reduce = [&](const Tensor& rows) {
      if (std::string(mode) == kSum) return rows.sum({0});
      if (std::string(mode) == kMean) return rows.mean({0});
      return std::get<0>(rows.max(0));
    };
    EXPECT_TRUE(testing::all_close(out[0], reduce(first), 1e-12, 1e-12)) << mode;
    EXPECT_TRUE(testing::all_close(out[1], zeros({3}, TensorOptions(kFloat64)), 0, 0)) << mode << ": an empty bag";
    EXPECT_TRUE(testing::all_close(out[2], reduce(third), 1e-12, 1e-12)) << mode;
    const Tensor w = bag->weight.detach().clone().requires_grad_();
    const auto r = autograd::gradcheck(
        [&](const std::vector<Tensor>& x) {
          return F::embedding_bag(input, x[0], F::EmbeddingBagFuncOptions().offsets(offsets).mode(mode));
        },
        {w});
    EXPECT_TRUE(r.ok) << mode << ": " << r.message;
  }
}

// Each row's gradient is divided by its own index's count in the batch (the documented rule, and
// PyTorch's CUDA kernel's). PyTorch 1.13's CPU embedding_bag divides row 3 here by index 1's count
// (pytorch/pytorch#190063, fixed upstream in 2026), so the reference generator builds this case
// from F.embedding's lookups.
TEST(EmbeddingBag, ScaleGradByFreqDividesEachRowByItsOwnCount) {
  const Tensor w = ones({4, 3}).requires_grad_();
  F::embedding_bag(tensor<int64_t>({1, 1, 3}), w,
                   F::EmbeddingBagFuncOptions().offsets(tensor<int64_t>({0})).mode(kSum).scale_grad_by_freq(true))
      .sum()
      .backward();
  EXPECT_EQ(w.grad().select(1, 0).to_vector<float>(), (std::vector<float>{0, 1, 0, 1}));
  const Tensor v = ones({4, 3}).requires_grad_();
  F::embedding(tensor<int64_t>({1, 1, 3, 1}).view({2, 2}), v, F::EmbeddingFuncOptions().scale_grad_by_freq(true))
      .sum()
      .backward();
  EXPECT_EQ(v.grad().select(1, 0).to_vector<float>(), (std::vector<float>{0, 1, 0, 1}));
}

TEST(Embedding, FromPretrainedSharesTheWeightAndFreezesIt) {
  const Tensor table = arange(12, kFloat32).reshape({4, 3});
  nn::Embedding frozen = nn::Embedding::from_pretrained(table);
  EXPECT_FALSE(frozen->weight.requires_grad());
  EXPECT_TRUE(frozen->weight.shares_storage(table)) << "PyTorch's _weight is the tensor itself";
  EXPECT_EQ(frozen(tensor<int64_t>({2}))[0].to_vector<float>(), (std::vector<float>{6, 7, 8}));
  nn::Embedding trained =
      nn::Embedding::from_pretrained(table.clone(), nn::EmbeddingFromPretrainedOptions().freeze(false).padding_idx(-1));
  EXPECT_TRUE(trained->weight.requires_grad());
  EXPECT_EQ(*trained->options.padding_idx(), 3) << "a negative padding_idx counts from the end";
  EXPECT_EQ(trained->weight[3].to_vector<float>(), (std::vector<float>{9, 10, 11})) << "a given weight is not zeroed";
  trained(tensor<int64_t>({3, 1})).sum().backward();
  EXPECT_EQ(trained->weight.grad()[3].abs().sum().item<float>(), 0.0f) << "the padding row learns nothing";
  EXPECT_EQ(trained->weight.grad()[1].sum().item<float>(), 3.0f);

  nn::EmbeddingBag bag = nn::EmbeddingBag::from_pretrained(table, nn::EmbeddingBagFromPretrainedOptions().mode(kSum));
  EXPECT_EQ(bag(tensor<int64_t>({0, 1}).view({1, 2}))[0].to_vector<float>(), (std::vector<float>{3, 5, 7}));

  std::ostringstream printed;
  printed << *nn::Embedding(nn::EmbeddingOptions(10, 4).padding_idx(1).max_norm(2.0).scale_grad_by_freq(true)) << " "
          << *nn::EmbeddingBag(nn::EmbeddingBagOptions(5, 2).mode(kMax).include_last_offset(true));
  EXPECT_EQ(printed.str(),
            "Embedding(10, 4, padding_idx=1, max_norm=2, scale_grad_by_freq=True) "
            "EmbeddingBag(5, 2, mode='max', include_last_offset=True)");
}

TEST(EmbeddingBag, RefusesWhatPyTorchRefuses) {
  const Tensor w = randn({5, 2});
  const Tensor idx = tensor<int64_t>({0, 1, 2});
  using O = F::EmbeddingBagFuncOptions;
  EXPECT_ERROR_CONTAINS(F::embedding_bag(idx, w), "embedding_bag: a 1-D input needs offsets");
  EXPECT_ERROR_CONTAINS(F::embedding_bag(idx.view({1, 3}), w, O().offsets(tensor<int64_t>({0}))),
                        "offsets must be undefined when the input is 2-D");
  EXPECT_ERROR_CONTAINS(F::embedding_bag(idx, w, O().offsets(tensor<int64_t>({1}))), "offsets[0] has to be 0, got 1");
  EXPECT_ERROR_CONTAINS(F::embedding_bag(idx, w, O().offsets(tensor<int64_t>({0, 2, 1}))),
                        "offsets must be non-decreasing and at most 3 (the number of indices), got 2 then 1");
  EXPECT_ERROR_CONTAINS(F::embedding_bag(idx, w, O().offsets(tensor<int64_t>({0, 9}))), "got 0 then 9");
  EXPECT_ERROR_CONTAINS(F::embedding_bag(idx, w, O().offsets(tensor<int64_t>({0})).mode("median")),
                        "mode must be \"sum\", \"mean\" or \"max\", got \"median\"");
  EXPECT_ERROR_CONTAINS(F::embedding_bag(idx, w, O().offsets(tensor<int64_t>({0})).per_sample_weights(ones({3}))),
                        "per_sample_weights are only supported for mode \"sum\"");
  EXPECT_ERROR_CONTAINS(
      F::embedding_bag(idx, w, O().offsets(tensor<int64_t>({0})).mode(kSum).per_sample_weights(ones({2}))),
      "per_sample_weights must be float32 [3]");
  EXPECT_ERROR_CONTAINS(F::embedding_bag(tensor<int64_t>({0, 7}), w, O().offsets(tensor<int64_t>({0}))),
                        "index");  // out of range, from the lookup
  EXPECT_ERROR_CONTAINS(F::embedding_bag(idx.to(kFloat32), w),
                        "embedding_bag: expects int64 or int32 indices, got float32");
  EXPECT_ERROR_CONTAINS(F::embedding(idx, w, F::EmbeddingFuncOptions().sparse(true)),
                        "sparse gradients are not in ember");
  EXPECT_ERROR_CONTAINS(F::embedding(idx, w, F::EmbeddingFuncOptions().padding_idx(5)),
                        "embedding: padding_idx 5 is out of range for 5 embeddings");
  EXPECT_ERROR_CONTAINS(F::embedding(idx, w, F::EmbeddingFuncOptions().max_norm(-1.0)), "max_norm must be >= 0");
  EXPECT_ERROR_CONTAINS(nn::Embedding(nn::EmbeddingOptions(5, 2)._weight(randn({5, 3}))),
                        "Embedding: _weight must be a floating [5, 2], got float32 [5, 3]");
  EXPECT_ERROR_CONTAINS(nn::EmbeddingBag(nn::EmbeddingBagOptions(5, 2).mode("min")), "mode must be");
  EXPECT_ERROR_CONTAINS(F::embedding_bag(idx, w.view({10})),
                        "expects a floating weight [num_embeddings, embedding_dim]");
}

}  // namespace
}  // namespace ember
