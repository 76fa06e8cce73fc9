// cumsum, sort, argsort and topk (tensor/ops/sort.cpp); their values against PyTorch are in
// test_reference.cpp ("cumsum*", "sort*", "topk*"). Here: gradients by finite differences, the
// dtypes, long lines, empty and 0-d tensors, and the refusals.
#include <limits>

#include "helpers.h"

namespace ember {
namespace {

TEST(Sort, GradientsMatchFiniteDifferences) {
  const auto r = autograd::gradcheck(
      [](const std::vector<Tensor>& x) {
        return x[0].cumsum(0) + std::get<0>(x[0].sort(1)) * 2.0 + std::get<0>(x[0].topk(2, 1, false)).sum(1, true);
      },
      {randn({4, 5}, kFloat64)});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(Sort, SixteenBitAndIntegerDtypesAndLongLines) {
  const Tensor x = randn({3, 2000}, kFloat64);  // longer than one CUDA block sorts
  auto [v, i] = x.sort(1);
  const Tensor d = v.slice(1, 1) - v.slice(1, 0, -1);
  EXPECT_TRUE(d.ge(0.0).all().item<bool>());
  EXPECT_TRUE(testing::all_close(x.gather(1, i), v, 0, 0));  // the indices point at the values
  // bfloat16 keys compare as the float32 they widen to; the values come back unrounded.
  const Tensor h = x.to(kBFloat16);
  auto [hv, hi] = h.sort(1, true);
  EXPECT_TRUE(testing::all_close(h.gather(1, hi), hv, 0, 0));
  EXPECT_TRUE((hv.slice(1, 0, -1).to(kFloat32) >= hv.slice(1, 1).to(kFloat32)).all().item<bool>());
  // Integer and bool cumsums add up in int64; float16 in float16 (accumulated wider).
  EXPECT_EQ(tensor<uint8_t>({200, 100}).cumsum(0).dtype(), kInt64);
  EXPECT_EQ(tensor<uint8_t>({200, 100}).cumsum(0).to_vector<int64_t>(), (std::vector<int64_t>{200, 300}));
  EXPECT_EQ(tensor<bool>({true, false, true}).cumsum(0).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 2}));
  EXPECT_EQ(full({4}, 0.5).to(kFloat16).cumsum(0).dtype(), kFloat16);
  // int64 sums wrap, as PyTorch's do (found by UBSan on the random arguments)
  const int64_t big = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(tensor<int64_t>({big, 1}).cumsum(0).to_vector<int64_t>(),
            (std::vector<int64_t>{big, std::numeric_limits<int64_t>::min()}));
  EXPECT_EQ(tensor<int64_t>({3, 1, 2}).argsort().to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 0}));
}

TEST(Sort, TopkIsTheHeadOfTheStableSortWithTiesAndNaN) {
  // Few distinct values (many ties) and NaNs, along an inner dim and an outer one.
  Tensor x = randint(0, 5, {6, 40, 3}).to(kFloat32);
  x.index_put_({x == 4.0}, NAN);
  for (int64_t dim : {1, 0, 2})
    for (bool largest : {true, false}) {
      const int64_t k = std::min<int64_t>(x.size(dim), 4);
      auto [tv, ti] = x.topk(k, dim, largest);
      auto [sv, si] = x.sort(dim, largest);
      EXPECT_TRUE(testing::all_close(tv, sv.narrow(dim, 0, k), 0, 0)) << dim << largest;
      EXPECT_EQ(ti.to_vector<int64_t>(), si.narrow(dim, 0, k).contiguous().to_vector<int64_t>()) << dim << largest;
    }
}

TEST(Sort, EmptyAndZeroDimTensors) {
  auto [v, i] = zeros({2, 0}).sort(1);
  EXPECT_EQ(v.sizes(), (Shape{2, 0}));
  EXPECT_EQ(i.dtype(), kInt64);
  EXPECT_EQ(zeros({0, 3}).cumsum(1).sizes(), (Shape{0, 3}));
  EXPECT_EQ(std::get<0>(zeros({3, 4}).topk(0)).sizes(), (Shape{3, 0}));
  const Tensor s = full({}, 2.5);
  EXPECT_EQ(s.cumsum(0).item<float>(), 2.5f);
  EXPECT_EQ(std::get<1>(s.sort()).sizes(), Shape{});
  EXPECT_EQ(std::get<0>(s.topk(1)).item<float>(), 2.5f);
}

TEST(Sort, BadArgumentsAreRefusedByName) {
  const Tensor x = zeros({3, 4});
  EXPECT_ERROR_CONTAINS(x.topk(5),
                        "topk: k (5) must be in [0, 4], the size of dimension 1 of the input of shape [3, 4]");
  EXPECT_ERROR_CONTAINS(x.topk(-1, 0), "topk: k (-1) must be in [0, 3]");
  EXPECT_ERROR_CONTAINS(x.sort(2), "sort: dimension out of range");
  EXPECT_ERROR_CONTAINS(x.cumsum(-3), "cumsum: dimension out of range");
  EXPECT_ERROR_CONTAINS(x.cumsum(0, kBool), "cumsum: cannot accumulate in bool");
  EXPECT_ERROR_CONTAINS(Tensor().argsort(), "sort: the input tensor is undefined");
}

}  // namespace
}  // namespace ember
