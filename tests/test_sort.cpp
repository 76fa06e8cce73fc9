// cumsum, cumprod, sort, argsort and topk (tensor/ops/sort.cpp), median (a composite of sort) and
// erfinv; their values against PyTorch are in test_reference.cpp ("cumsum*", "cumprod*", "sort*",
// "topk*", "median*", "erfinv*"). Here: gradients by finite differences, the dtypes, long lines,
// empty and 0-d tensors, erfinv's accuracy past PyTorch's, and the refusals.
#include <cmath>
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

namespace ember {
namespace {

// cumprod's gradient through a zero (PyTorch's case split: before the first zero, at it, after
// it), by finite differences in float64 at inputs that hold exact zeros, one and two per line.
TEST(Cumprod, GradientThroughZerosMatchesFiniteDifferences) {
  const Tensor x = tensor<double>({1.5, 0.0, 2.0, -1.0, 0.0, 3.0, 0.5, 2.0, 0.0, 0.0, -2.0, 1.0}).view({3, 4});
  const auto r =
      autograd::gradcheck([](const std::vector<Tensor>& v) { return v[0].cumprod(1); }, {x.clone().requires_grad_()});
  EXPECT_TRUE(r.ok) << r.message;
  // Second derivatives are refused, not wrong: at a zero the formula's derivative is not the truth's.
  EXPECT_ERROR_CONTAINS(autograd::gradgradcheck([](const std::vector<Tensor>& v) { return v[0].cumprod(1); },
                                                {x.clone().requires_grad_()}),
                        "is not differentiable in ember yet");
  EXPECT_EQ(tensor<int64_t>({3, -2, 5}).cumprod(0).to_vector<int64_t>(), (std::vector<int64_t>{3, -6, -30}));
  EXPECT_EQ(tensor<int64_t>({1, 1, 0}).to(kBool).cumprod(0).dtype(), kInt64) << "cumsum's dtype rule";
  EXPECT_ERROR_CONTAINS(ones({2, 3}).cumprod(2), "cumprod");
}

// erf(erfinv(y)) == y to double's rounding, also in the tail where PyTorch 1.13's float64
// erfinv loses digits (1e-9 relative at 1 - 1e-9), which ops.bin therefore leaves out.
TEST(Erfinv, InvertsErfToRoundingAllTheWayToOne) {
  const std::vector<double> ys = {1e-300, 1e-8, 0.3, 0.5, 0.9, 0.9999, 1 - 1e-9, 1 - 1e-12, 1 - 1.1e-16};
  const Tensor x = tensor<double>(ys).erfinv();
  for (size_t i = 0; i < ys.size(); ++i) {
    const double xi = x[static_cast<int64_t>(i)].item<double>();
    if (ys[i] < 0.5)
      EXPECT_NEAR(std::erf(xi), ys[i], 4e-16 * ys[i]) << ys[i];
    else
      EXPECT_NEAR(std::erfc(xi), 1 - ys[i], 1e-14 * (1 - ys[i])) << ys[i];  // 1 - y is exact here
  }
  EXPECT_EQ(tensor<double>({-0.0}).erfinv().item<double>(), 0.0);
  EXPECT_TRUE(std::signbit(tensor<double>({-0.0}).erfinv().item<double>())) << "-0 stays -0";
  EXPECT_EQ(tensor<float>({-1.0f}).erfinv().item<float>(), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(tensor<float>({1.0001f}).erfinv().item<float>()));
  EXPECT_EQ(tensor<int64_t>({0}).erfinv().dtype(), kFloat32) << "integers promote, as erf's";
}

// median picks the lower middle value and reports where it is; with NaN it is NaN (the first),
// nanmedian leaves NaNs out; ties return one of the tied positions, whose value is the median.
TEST(Median, LowerMiddleIndicesNaNAndRefusals) {
  const Tensor x = tensor<float>({4, 1, 3, 2}).view({1, 4});
  auto [v, i] = x.median(1);
  EXPECT_EQ(v.item<float>(), 2.0f);
  EXPECT_EQ(i.item<int64_t>(), 3);
  auto [vk, ik] = x.median(-1, true);
  EXPECT_EQ(vk.sizes(), (Shape{1, 1}));
  const Tensor ties = tensor<float>({2, 1, 2, 2, 3});
  auto [tv, ti] = ties.median(0);
  EXPECT_EQ(tv.item<float>(), 2.0f);
  EXPECT_EQ(ties[ti.item<int64_t>()].item<float>(), 2.0f);
  EXPECT_EQ(std::get<0>(tensor<float>({5}).view({}).median(0)).item<float>(), 5.0f) << "a 0-d tensor is its own median";
  EXPECT_TRUE(std::isnan(empty({0}).median().item<float>())) << "PyTorch: the median of nothing is NaN";
  EXPECT_ERROR_CONTAINS(empty({0}, TensorOptions(kInt64)).median(), "median: the median of an empty int64 tensor");
  EXPECT_ERROR_CONTAINS(empty({2, 0}).median(1), "median: expected reduction dim 1 to have non-zero size");
  EXPECT_ERROR_CONTAINS(ones({2}).nanmedian(3), "nanmedian: dim 3 is out of range");
  // the gradient goes to the chosen element only
  const Tensor w = tensor<double>({0.5, -1.0, 2.0}).requires_grad_();
  w.median().backward();
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{1, 0, 0}));
}

}  // namespace
}  // namespace ember
