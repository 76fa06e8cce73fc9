// x.index({...}) and x.index_put_({...}, v), LibTorch's forms of Python's x[...] (Note [Tensor
// indexing]); their values against PyTorch are in test_reference.cpp ("index_*"). Here: what is
// a view and what a copy, gradients by finite differences, the dtypes, and every refusal.
#include "helpers.h"

namespace ember {
namespace {

using namespace indexing;

Tensor counting(const Shape& shape) {  // 0, 1, 2, ... as float64
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return arange(n, kFloat64).view(shape);
}

TEST(Indexing, BasicEntriesMakeViewsOfTheSameStorage) {
  const Tensor x = counting({4, 5, 6});
  const Tensor v = x.index({Slice(1, 3), None, "...", Slice(None, None, 2)});
  EXPECT_EQ(v.sizes(), (Shape{2, 1, 5, 3}));
  EXPECT_TRUE(v.shares_storage(x));
  EXPECT_EQ(v.index({1, 0, 4, 2}).item<double>(), x.index({2, 4, 4}).item<double>());  // 2*30 + 4*6 + 4
  // Negative integers count from the end; Ellipsis names no dim when every dim is named.
  EXPECT_EQ(x.index({-1, -1, -1, Ellipsis}).item<double>(), 119.0);
  EXPECT_EQ(x.index({Ellipsis}).sizes(), x.sizes());
  EXPECT_EQ(x.index({}).sizes(), x.sizes());
  // Out-of-range Slice bounds clamp, as in Python.
  EXPECT_EQ(x.index({Slice(-100, 100)}).size(0), 4);
  EXPECT_EQ(x.index({Slice(3, 1)}).size(0), 0);
  // A 0-d tensor takes None and bools.
  const Tensor s = full({}, 7.0, kFloat64);
  EXPECT_EQ(s.index({None}).sizes(), (Shape{1}));
  EXPECT_EQ(s.index({false}).sizes(), (Shape{0}));
}

TEST(Indexing, TensorEntriesCopyAndAcceptInt32AndZeroDimIntegers) {
  const Tensor x = counting({5, 3});
  const Tensor i64 = tensor<int64_t>({4, 1, -5}), i32 = tensor<int32_t>({4, 1, -5});
  const Tensor picked = x.index({i64, 2});
  EXPECT_FALSE(picked.shares_storage(x));
  EXPECT_EQ(picked.to_vector<double>(), (std::vector<double>{14, 5, 2}));
  EXPECT_EQ(x.index({i32, 2}).to_vector<double>(), picked.to_vector<double>());
  // A 0-d integer tensor is an integer: a select, a view.
  const Tensor row = x.index({full({}, 3, kInt64)});
  EXPECT_TRUE(row.shares_storage(x));
  EXPECT_EQ(row.to_vector<double>(), (std::vector<double>{9, 10, 11}));
  // A uint8 mask is a mask, as a bool one.
  const Tensor mask = tensor<uint8_t>({1, 0, 1, 0, 0});
  EXPECT_TRUE(testing::all_close(x.index({mask}), x.index({tensor<int64_t>({0, 2})}), 0, 0));
  // Nothing selected: an empty result of the right shape.
  EXPECT_EQ(x.index({zeros({5}, kBool)}).sizes(), (Shape{0, 3}));
  EXPECT_EQ(x.index({Slice(), empty({0}, kInt64)}).sizes(), (Shape{5, 0}));
}

TEST(Indexing, GradientsMatchFiniteDifferences) {
  const Tensor i = tensor<int64_t>({2, 0, 2, -1}), j = tensor<int64_t>({1, 3});
  const Tensor mask = tensor<bool>({true, false, true, true});
  const auto r = autograd::gradcheck(
      [&](const std::vector<Tensor>& x) {
        return x[0].index({i, Slice(1, None), None}).sum(0) * 2.0 + x[0].index({Slice(None, 2), j}).sum() +
               x[0].index({Slice(), mask}).sum(1).unsqueeze(1) + masked_select(x[0], x[0] > 0.0).sum();
      },
      {randn({3, 4}, kFloat64)});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(Indexing, ScatterGradientsMatchFiniteDifferences) {
  const Tensor index = tensor<int64_t>({0, 2, 1, 0, 1, 2}).view({2, 3});
  const auto r =
      autograd::gradcheck([&](const std::vector<Tensor>& x) { return x[0].scatter(1, index, x[1]); },
                          {randn({2, 4}, kFloat64), randn({2, 5}, kFloat64)});  // src wider than index: its rest gets 0
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(Indexing, IndexPutWritesThroughViewsAndNonContiguousTensors) {
  Tensor x = zeros({3, 4}, kFloat64);
  x.index_put_({1}, 5.0);
  x.index_put_({Slice(), -1}, tensor<double>({1, 2, 3}));
  x.index_put_({tensor<int64_t>({0, 2}), 0}, tensor<double>({7, 8}));
  EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{7, 0, 0, 1, 5, 5, 5, 2, 8, 0, 0, 3}));
  const uint64_t version = x.version();
  x.index_put_({x > 4.0}, -1.0);
  EXPECT_GT(x.version(), version);  // saved tensors see the write
  EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{-1, 0, 0, 1, -1, -1, -1, 2, -1, 0, 0, 3}));
  // A transposed view is written in its own element order; the storage keeps the layout.
  Tensor base = zeros({2, 3}, kFloat64), t = base.t();
  t.index_put_({tensor<int64_t>({2, 0})}, tensor<double>({1, 2, 3, 4}).view({2, 2}));
  EXPECT_EQ(base.to_vector<double>(), (std::vector<double>{3, 0, 1, 4, 0, 2}));
  // Accumulate: repeated positions add; int32 and bool values cast to self's dtype.
  Tensor counts = zeros({4}, kInt32);
  counts.index_put_({tensor<int64_t>({1, 1, 3, 1})}, ones({4}, kInt32), /*accumulate=*/true);
  EXPECT_EQ(counts.to_vector<int32_t>(), (std::vector<int32_t>{0, 3, 0, 1}));
  // A value with leading dims of 1 fits, as in PyTorch.
  Tensor y = zeros({2, 3}, kFloat64);
  y.index_put_({0}, tensor<double>({1, 2, 3}).view({1, 1, 3}));
  y.index_put_({tensor<int64_t>({1})}, tensor<double>({4, 5, 6}).view({1, 1, 3}));
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{1, 2, 3, 4, 5, 6}));
}

TEST(Indexing, RepeatTilesAndItsGradientSumsTheCopies) {
  const Tensor x = tensor<double>({1, 2, 3}).view({1, 3});
  EXPECT_EQ(x.repeat({2, 2}).to_vector<double>(), (std::vector<double>{1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(x.repeat({2, 1, 1}).sizes(), (Shape{2, 1, 3}));  // a leading dim added
  EXPECT_EQ(x.repeat({0, 1}).sizes(), (Shape{0, 3}));
  EXPECT_EQ(full({}, 4.0).repeat({3}).to_vector<double>(), (std::vector<double>{4, 4, 4}));
  const auto r = autograd::gradcheck(
      [](const std::vector<Tensor>& t) {
        return t[0].repeat({3, 1, 2});
      },
      {randn({2, 3}, kFloat64)});
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_ERROR_CONTAINS(x.repeat({2}),
                        "repeat: the number of repeats (1) can not be smaller than the number of "
                        "dimensions of the tensor (2)");
  EXPECT_ERROR_CONTAINS(x.repeat({1, -1}), "repeat: repeats must be non-negative, got [1, -1]");
  EXPECT_ERROR_CONTAINS(x.repeat({1, int64_t{1} << 62}),
                        "repeat: 4611686018427387904 repeats of size 3 overflow int64");
}

TEST(Indexing, EqualComparesShapesAndValues) {
  const Tensor a = tensor<double>({1, 2, 3});
  EXPECT_TRUE(equal(a, a.clone()));
  EXPECT_FALSE(a.equal(tensor<double>({1, 2, 4})));
  EXPECT_FALSE(a.equal(a.view({1, 3})));
  EXPECT_FALSE(tensor<double>({NAN}).equal(tensor<double>({NAN})));
  EXPECT_TRUE(zeros({0, 2}).equal(zeros({0, 2})));
}

TEST(Indexing, NonzeroAndScatter) {
  EXPECT_EQ(nonzero(tensor<double>({0, 2, 0, -1})).to_vector<int64_t>(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(nonzero(zeros({2, 3})).sizes(), (Shape{0, 2}));
  EXPECT_EQ(nonzero(full({}, 3.0)).sizes(), (Shape{1, 0}));  // a 0-d tensor: one position of no dims
  EXPECT_EQ(nonzero(full({}, 0.0)).sizes(), (Shape{0, 0}));
  Tensor x = zeros({2, 3}, kFloat64);
  x.scatter_(1, tensor<int64_t>({2, 0}).view({2, 1}), tensor<double>({5, 6}).view({2, 1}));
  EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{0, 0, 5, 6, 0, 0}));
}

TEST(Indexing, BadIndicesAreRefusedByName) {
  const Tensor x = counting({3, 4});
  EXPECT_ERROR_CONTAINS(x.index({0, 1, 2}), "index: too many indices for a tensor of dimension 2 (3 given)");
  EXPECT_ERROR_CONTAINS(x.index({Ellipsis, "..."}), "index: an index can only have a single ellipsis");
  EXPECT_ERROR_CONTAINS(x.index({".."}), "the only string an index takes is \"...\" (Ellipsis), got \"..\"");
  EXPECT_ERROR_CONTAINS(x.index({3}), "index: index 3 is out of bounds for dimension 0 with size 3");
  EXPECT_ERROR_CONTAINS(x.index({Slice(), -5}), "index: index -5 is out of bounds for dimension 1 with size 4");
  EXPECT_ERROR_CONTAINS(x.index({Slice(None, None, 0)}), "index: a Slice's step must be positive, got 0");
  EXPECT_ERROR_CONTAINS(x.index({tensor<int64_t>({0, 3})}), "index: index 3 is out of bounds for dimension 0");
  EXPECT_ERROR_CONTAINS(x.index({Slice(), tensor<int64_t>({-5})}), "index -5 is out of bounds for dimension 1");
  EXPECT_ERROR_CONTAINS(x.index({tensor<double>({0.0})}),
                        "tensors used as indices must be int64, int32, bool or uint8");
  EXPECT_ERROR_CONTAINS(x.index({zeros({4}, kBool)}),
                        "the mask's shape [4] does not match the indexed tensor's [3, 4] at its dimension 0");
  EXPECT_ERROR_CONTAINS(x.index({tensor<int64_t>({0, 1}), tensor<int64_t>({0, 1, 2})}), "index");
  EXPECT_ERROR_CONTAINS(x.index({Tensor()}), "index: an index tensor is undefined");
  EXPECT_ERROR_CONTAINS(Tensor().index({0}), "index: the tensor is undefined");

  Tensor y = zeros({3, 4});
  EXPECT_ERROR_CONTAINS(y.index_put_({tensor<int64_t>({0, 1})}, ones({3})),
                        "index_put_: a value of shape [3] cannot be broadcast to the indexing result's shape [2, 4]");
  EXPECT_ERROR_CONTAINS(y.index_put_({0}, ones({5})),
                        "index_put_: a value of shape [5] cannot be broadcast to the indexing result's shape [4]");
  Tensor leaf = zeros({3}, TensorOptions(kFloat32).requires_grad(true));
  EXPECT_ERROR_CONTAINS(leaf.index_put_({0}, 1.0), "a leaf tensor that requires grad");
  const Tensor w = ones({1}, TensorOptions(kFloat32).requires_grad(true));
  EXPECT_ERROR_CONTAINS(y.index_put_({0, Slice(0, 1)}, w * 2.0), "index_put_: the value requires grad");
  EXPECT_ERROR_CONTAINS(y.copy_(w.expand({3, 4}) * 2.0), "copy_: the source requires grad");
  {
    NoGradGuard no_grad;  // without the tape, the write is plain data
    y.index_put_({0, Slice(0, 1)}, w * 2.0);
    EXPECT_EQ(y.index({0, 0}).item<float>(), 2.0f);
  }
  EXPECT_ERROR_CONTAINS(masked_select(x, ones({4})), "masked_select: expected a bool mask, got float32");
  EXPECT_ERROR_CONTAINS(masked_select(x, ones({5}, kBool)), "masked_select");
}

}  // namespace
}  // namespace ember
