// Op semantics beyond the reference file: large tensors (the parallel schedules) against
// naive oracles, NaN propagation, in-place behaviour and integer wrap-around.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>

#include "helpers.h"

namespace ember {
namespace {

using testing::all_close;

// The naive oracles (DESIGN habit 7): plain loops in double.
std::vector<double> naive_matmul(const Tensor& a, const Tensor& b) {
  const auto A = a.to(kFloat64).to_vector<double>(), B = b.to(kFloat64).to_vector<double>();
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  std::vector<double> C(static_cast<size_t>(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) C[i * N + j] += A[i * K + k] * B[k * N + j];
  return C;
}

Tensor naive_conv2d(const Tensor& x, const Tensor& w, int64_t stride, int64_t pad) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), O = w.size(0), kH = w.size(2),
                kW = w.size(3);
  const int64_t Ho = (H + 2 * pad - kH) / stride + 1, Wo = (W + 2 * pad - kW) / stride + 1;
  const auto X = x.to(kFloat64).to_vector<double>(), Wt = w.to(kFloat64).to_vector<double>();
  std::vector<double> Y(static_cast<size_t>(N * O * Ho * Wo), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          double s = 0;
          for (int64_t c = 0; c < C; ++c)
            for (int64_t i = 0; i < kH; ++i)
              for (int64_t j = 0; j < kW; ++j) {
                const int64_t h = oh * stride - pad + i, ww = ow * stride - pad + j;
                if (h >= 0 && h < H && ww >= 0 && ww < W)
                  s += X[((n * C + c) * H + h) * W + ww] * Wt[((o * C + c) * kH + i) * kW + j];
              }
          Y[((n * O + o) * Ho + oh) * Wo + ow] = s;
        }
  return tensor(Y, Shape{N, O, Ho, Wo});
}

TEST(LargeOps, SumSchedulesMatchDoubleLoop) {
  manual_seed(1);
  const Tensor x = randn({1000, 300});
  const auto v = x.to_vector<float>();
  double total = 0;
  std::vector<double> cols(300, 0.0), rows(1000, 0.0);
  for (int64_t i = 0; i < 1000; ++i)
    for (int64_t j = 0; j < 300; ++j) {
      total += v[i * 300 + j];
      cols[j] += v[i * 300 + j];
      rows[i] += v[i * 300 + j];
    }
  EXPECT_NEAR(x.sum().item<double>(), total, 1e-3);                           // split-row schedule
  EXPECT_TRUE(all_close(x.sum({0}), tensor(cols).to(kFloat32), 1e-5, 1e-4));  // column sweep
  EXPECT_TRUE(all_close(x.sum({1}), tensor(rows).to(kFloat32), 1e-5, 1e-4));  // row schedule
  EXPECT_TRUE(all_close(x.t().sum({0}), tensor(rows).to(kFloat32), 1e-5, 1e-4));
  // One thread gives the same answers.
  set_num_threads(1);
  EXPECT_NEAR(x.sum().item<double>(), total, 1e-3);
  EXPECT_TRUE(all_close(x.sum({0}), tensor(cols).to(kFloat32), 1e-5, 1e-4));
  set_num_threads(2);
}

// Reductions over random shapes, views and dims (seeded): rank 0-4, sizes 1-5 and now and then
// one of 64-300 (the vector schedules), contiguous, permuted, sliced every other element or
// expanded, dims any subset in either sign (none: all), keepdim or not; float32 and float64
// against loops in double over the same values, gathered by moving the reduced dims last.
TEST(Reductions, RandomShapesViewsAndDimsMatchALoop) {
  testing::SeededInts in(2029);
  for (int draw = 0; draw < 200; ++draw) {
    const int64_t rank = in(0, 4);
    Shape sizes(static_cast<size_t>(rank));
    for (auto& v : sizes) v = in(0, 5) == 0 ? in(64, 300) / rank : in(1, 5);
    manual_seed(static_cast<uint64_t>(draw));
    Tensor x = randn(sizes, kFloat64);
    const int64_t view = in(0, 3);
    if (view == 1 && rank >= 2) {  // a permutation
      Shape perm(static_cast<size_t>(rank));
      for (int64_t d = 0; d < rank; ++d) perm[d] = d;
      std::shuffle(perm.begin(), perm.end(), in.rng);
      x = randn(sizes, kFloat64).permute(perm);
    } else if (view == 2 && rank >= 1) {  // every other element of a wider tensor
      Shape wide = sizes;
      wide[0] = 2 * sizes[0];
      x = randn(wide, kFloat64).slice(0, 0, std::nullopt, 2);
    } else if (view == 3 && rank >= 1) {  // an expanded dim
      Shape one = x.sizes();
      one[0] = 1;
      x = randn(one, kFloat64).expand(x.sizes());
    }
    // The dims to reduce: a random subset, each dim once, written negative half the time.
    Shape dims;
    std::vector<bool> reduced(static_cast<size_t>(x.dim()), false);
    for (int64_t d = 0; d < x.dim(); ++d)
      if (in(0, 1) == 1) dims.push_back(in(0, 1) == 1 ? d - x.dim() : d), reduced[d] = true;
    if (dims.empty()) std::fill(reduced.begin(), reduced.end(), true);
    const bool keepdim = in(0, 1) == 1;
    // The reference layout: kept dims first, reduced dims last, so each output is one row.
    Shape perm, out_sizes;
    int64_t inner = 1;
    for (int64_t d = 0; d < x.dim(); ++d)
      if (!reduced[d]) {
        perm.push_back(d), out_sizes.push_back(x.size(d));
      } else if (keepdim) {
        out_sizes.push_back(1);
      }
    for (int64_t d = 0; d < x.dim(); ++d)
      if (reduced[d]) perm.push_back(d), inner *= x.size(d);
    const std::vector<double> v = x.permute(perm).contiguous().to_vector<double>();
    const int64_t outer = static_cast<int64_t>(v.size()) / inner;
    std::vector<double> sum(outer, 0), prod(outer, 1), amax(outer, -INFINITY), amin(outer, INFINITY), var(outer, 0),
        norm2(outer, 0), lse(outer, 0), abs_sum(outer, 0), top(outer, 0);
    for (int64_t r = 0; r < outer; ++r) {
      const double* row = v.data() + r * inner;
      for (int64_t i = 0; i < inner; ++i) {
        sum[r] += row[i], prod[r] *= 1 + row[i] / 16, norm2[r] += row[i] * row[i];
        amax[r] = std::max(amax[r], row[i]), amin[r] = std::min(amin[r], row[i]);
        abs_sum[r] += std::abs(row[i]), top[r] = std::max(top[r], std::abs(row[i]));
      }
      for (int64_t i = 0; i < inner; ++i) {
        var[r] += (row[i] - sum[r] / inner) * (row[i] - sum[r] / inner);
        lse[r] += std::exp(row[i] - amax[r]);
      }
      var[r] = inner > 1 ? var[r] / (inner - 1) : NAN;
      norm2[r] = std::sqrt(norm2[r]), lse[r] = amax[r] + std::log(lse[r]);
    }
    SCOPED_TRACE(detail::concat("draw ", draw, ": ", shape_str(x.sizes()), " strides ", shape_str(x.strides()),
                                " dims ", shape_str(dims), keepdim ? " keepdim" : ""));
    for (DType dt : {kFloat64, kFloat32}) {
      SCOPED_TRACE(dtype_name(dt));
      const Tensor xt = x.to(dt);
      // The classic bounds, u the dtype's unit roundoff, n the values per output (the inputs'
      // own rounding to float32 included): a sum within (n + 1) u sum |x|, a product of n
      // factors within 3 n u of itself, a norm within (n + 2) u, and so on.
      const double u = dt == kFloat64 ? 0x1p-53 : 0x1p-24, n = double(inner);
      auto close = [&](const Tensor& got, const std::vector<double>& want, const std::function<double(int64_t)>& bound,
                       const char* op) {
        const auto g = got.to(kFloat64).contiguous().to_vector<double>();
        ASSERT_EQ(got.sizes(), out_sizes) << op;
        for (int64_t r = 0; r < outer; ++r)
          if (!(std::isnan(g[r]) && std::isnan(want[r])))
            ASSERT_LE(std::abs(g[r] - want[r]), bound(r) + 1e-300)
                << op << " output " << r << ": " << g[r] << " against " << want[r];
      };
      close(
          xt.sum(dims, keepdim), sum, [&](int64_t r) { return (n + 1) * u * abs_sum[r]; }, "sum");
      std::vector<double> mean = sum;
      for (double& m : mean) m /= n;
      close(
          xt.mean(dims, keepdim), mean, [&](int64_t r) { return (n + 2) * u * abs_sum[r] / n; }, "mean");
      close((1 + xt / 16).prod(dims, keepdim), prod,
            [&](int64_t r) {  // (a float32 product past 2^+-100 may have overflowed or underflowed on the way)
              const bool in_range = dt == kFloat64 || (prod[r] > 0x1p-100 && prod[r] < 0x1p100);
              return in_range ? 3 * (n + 1) * u * prod[r] : INFINITY;
            },
            "prod");
      close(
          xt.amax(dims, keepdim), amax, [&](int64_t r) { return u * std::abs(amax[r]); }, "amax");
      close(
          xt.amin(dims, keepdim), amin, [&](int64_t r) { return u * std::abs(amin[r]); }, "amin");
      close(
          xt.var(dims, true, keepdim), var,
          [&](int64_t r) { return 4 * (n + 3) * u * norm2[r] * norm2[r] / std::max(n - 1, 1.0); }, "var");
      close(
          xt.norm(2, dims, keepdim), norm2, [&](int64_t r) { return (n + 2) * u * norm2[r]; }, "norm");
      close(
          xt.logsumexp(dims, keepdim), lse, [&](int64_t r) { return (n + 3) * u * (1 + top[r]); }, "logsumexp");
    }
  }
}

// Binary elementwise ops over random broadcasting shapes, views and dtype pairs (seeded): each
// operand contiguous, transposed or every other element of a wider tensor, with up to three
// dims, some of them 1 or missing (broadcast), and one draw in three a long dim (the vector
// loops); the result's dtype is promote_types' and its values a loop's in double over the
// broadcast operands, rounded once to that dtype (integers wrapped).
TEST(Elementwise, RandomBroadcastsViewsAndDtypesMatchALoop) {
  testing::SeededInts in(2030);
  static const DType dtypes[] = {kFloat32, kFloat64, kBFloat16, kFloat16, kInt64, kInt32, kUInt8};
  auto operand = [&](Shape sizes, DType dt) {
    // drop leading dims (not all: a 0-dim operand takes part in promotion as a scalar does) or
    // set some to 1: still broadcasts against `sizes`
    while (sizes.size() > 1 && in(0, 3) == 0) sizes.erase(sizes.begin());
    for (auto& v : sizes)
      if (in(0, 3) == 0) v = 1;
    Tensor t = is_floating(dt) ? randn(sizes, kFloat64) : randint(0, 10, sizes).to(kFloat64);
    switch (in(0, 3)) {
      case 1:
        if (t.dim() >= 2) t = t.transpose(0, 1).contiguous().transpose(0, 1);
        break;
      case 2:
        if (t.dim() >= 1) {
          Shape wide = t.sizes();
          wide[0] *= 2;
          t = (is_floating(dt) ? randn(wide, kFloat64) : randint(0, 10, wide).to(kFloat64))
                  .slice(0, 0, std::nullopt, 2);
        }
        break;
      default:
        break;
    }
    return t.to(dt);  // values exact in every dtype: small integers, or floats rounded to dt first
  };
  for (int draw = 0; draw < 200; ++draw) {
    Shape sizes(static_cast<size_t>(in(1, 3)));
    for (auto& v : sizes) v = in(1, 4);
    if (in(0, 2) == 0) sizes[static_cast<size_t>(in(0, static_cast<int64_t>(sizes.size()) - 1))] = in(33, 130);
    const DType da = dtypes[in(0, 6)], db = dtypes[in(0, 6)];
    manual_seed(static_cast<uint64_t>(draw));
    const Tensor a = operand(sizes, da), b = operand(sizes, db);
    const DType result = promote_types(da, db);
    SCOPED_TRACE(detail::concat("draw ", draw, ": ", shape_str(a.sizes()), " ", da, " strides ", shape_str(a.strides()),
                                " and ", shape_str(b.sizes()), " ", db, " strides ", shape_str(b.strides())));
    // The broadcast operands as doubles, element by element of the output.
    const Tensor a64 = a.to(kFloat64), b64 = b.to(kFloat64);
    const Shape out_sizes = (a64 + b64).sizes();
    const auto av = a64.expand(out_sizes).contiguous().to_vector<double>();
    const auto bv = b64.expand(out_sizes).contiguous().to_vector<double>();
    auto check = [&](const Tensor& got, DType dt, const std::function<double(double, double)>& f, const char* op) {
      ASSERT_EQ(got.dtype(), dt) << op;
      ASSERT_EQ(got.sizes(), out_sizes) << op;
      std::vector<double> want(av.size());
      for (size_t i = 0; i < av.size(); ++i) want[i] = f(av[i], bv[i]);
      // the exact result rounded once to dt, integers wrapped as dt's arithmetic does
      if (dt == kUInt8 || dt == kInt32)
        for (double& w : want)
          w = dt == kUInt8 ? double(static_cast<uint8_t>(static_cast<int64_t>(w)))
                           : double(static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>(w))));
      const Tensor expected = tensor(want, out_sizes).to(dt).to(kFloat64);
      const double tol = dt == kBFloat16 ? 8e-3 : dt == kFloat16 ? 1e-3 : dt == kFloat32 ? 1e-6 : 0;
      EXPECT_TRUE(testing::all_close(got.to(kFloat64), expected, tol, tol)) << op;
    };
    check(
        a + b, result, [](double x, double y) { return x + y; }, "add");
    check(
        a - b * 2, result, [](double x, double y) { return x - y * 2; }, "sub");
    check(
        a * b, result, [](double x, double y) { return x * y; }, "mul");
    check(
        maximum(a, b), result, [](double x, double y) { return std::max(x, y); }, "maximum");
    check(
        minimum(a, b), result, [](double x, double y) { return std::min(x, y); }, "minimum");
    check(
        a.lt(b), kBool, [](double x, double y) { return double(x < y); }, "lt");
    check(
        a.eq(b), kBool, [](double x, double y) { return double(x == y); }, "eq");
    if (is_floating(result))
      check(
          a / b, result, [](double x, double y) { return x / y; }, "div");
    check(
        where(a.gt(0), a, b), result, [](double x, double y) { return x > 0 ? x : y; }, "where");
  }
}

// matmul over random operand ranks (1-D to 4-D, batch dims broadcast), sizes (some past the
// kernels' register blocks), views (transposed matrices, every other batch) and dtypes (float32,
// float64; bfloat16 and float16, accumulated in float32 and rounded once), seeded, against a
// loop in double, within the result's rounding and the classic bound of the sum's.
TEST(Matmul, RandomRanksBroadcastsViewsAndDtypesMatchALoop) {
  testing::SeededInts in(2031);
  static const DType dtypes[] = {kFloat32, kFloat64, kBFloat16, kFloat16};
  for (int draw = 0; draw < 150; ++draw) {
    const int64_t M = in(0, 3) == 0 ? in(17, 70) : in(1, 5), K = in(0, 3) == 0 ? in(17, 90) : in(1, 6),
                  N = in(0, 3) == 0 ? in(17, 70) : in(1, 5);
    const int64_t rank_a = in(1, 4), rank_b = in(1, 4);
    Shape batch(static_cast<size_t>(std::max<int64_t>(std::max(rank_a, rank_b) - 2, 0)));
    for (auto& v : batch) v = in(1, 3);
    auto shape_of = [&](int64_t rank, Shape last) {  // batch dims from the right, some of them 1
      Shape s;
      for (int64_t i = static_cast<int64_t>(batch.size()) - (rank - 2); i < static_cast<int64_t>(batch.size()); ++i)
        s.push_back(in(0, 2) == 0 ? 1 : batch[static_cast<size_t>(i)]);
      for (int64_t v : last) s.push_back(v);
      return s;
    };
    const Shape sa = rank_a == 1 ? Shape{K} : shape_of(rank_a, {M, K});
    const Shape sb = rank_b == 1 ? Shape{K} : shape_of(rank_b, {K, N});
    const DType dt = dtypes[in(0, 3)];
    manual_seed(static_cast<uint64_t>(draw));
    auto make = [&](const Shape& s) {
      Tensor t = randn(s, kFloat64).to(dt);  // values exact in dt
      if (t.dim() >= 2 && in(0, 1) == 1) t = t.transpose(-1, -2).contiguous().transpose(-1, -2);
      if (t.dim() >= 3 && in(0, 2) == 0) {  // every other matrix of a batch twice as long
        Shape wide = t.sizes();
        wide[0] *= 2;
        t = randn(wide, kFloat64).to(dt).slice(0, 0, std::nullopt, 2);
      }
      return t;
    };
    const Tensor a = make(sa), b = make(sb);
    SCOPED_TRACE(detail::concat("draw ", draw, ": ", shape_str(a.sizes()), " strides ", shape_str(a.strides()), " @ ",
                                shape_str(b.sizes()), " strides ", shape_str(b.strides()), " ", dt));
    // The reference: both operands as batches of matrices in double, broadcast, then squeezed as
    // matmul squeezes a 1-D operand's dim.
    Tensor a64 = a.to(kFloat64), b64 = b.to(kFloat64);
    if (rank_a == 1) a64 = a64.unsqueeze(0);
    if (rank_b == 1) b64 = b64.unsqueeze(1);
    Shape out_batch(static_cast<size_t>(std::max(a64.dim(), b64.dim()) - 2), 1);  // the batch dims broadcast
    for (const Tensor* t : {&a64, &b64})
      for (int64_t d = 0; d < t->dim() - 2; ++d) {
        int64_t& o = out_batch[out_batch.size() - static_cast<size_t>(t->dim() - 2) + static_cast<size_t>(d)];
        o = std::max(o, t->size(d));
      }
    Shape full_a = out_batch, full_b = out_batch;
    full_a.push_back(a64.size(-2)), full_a.push_back(K), full_b.push_back(K), full_b.push_back(b64.size(-1));
    const auto av = a64.expand(full_a).contiguous().to_vector<double>();
    const auto bv = b64.expand(full_b).contiguous().to_vector<double>();
    const int64_t rows = a64.size(-2), cols = b64.size(-1), batches = checked_numel(out_batch, "test");
    std::vector<double> want(static_cast<size_t>(batches * rows * cols)), scale(want.size());
    for (int64_t p = 0; p < batches; ++p)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
          double acc = 0, mag = 0;
          for (int64_t k = 0; k < K; ++k) {
            const double t =
                av[static_cast<size_t>((p * rows + i) * K + k)] * bv[static_cast<size_t>((p * K + k) * cols + j)];
            acc += t, mag += std::abs(t);
          }
          want[static_cast<size_t>((p * rows + i) * cols + j)] = acc;
          scale[static_cast<size_t>((p * rows + i) * cols + j)] = mag;
        }
    Shape out_sizes = out_batch;
    if (rank_a != 1) out_sizes.push_back(rows);
    if (rank_b != 1) out_sizes.push_back(cols);
    const Tensor got = matmul(a, b);
    ASSERT_EQ(got.dtype(), dt);
    ASSERT_EQ(got.sizes(), out_sizes);
    const auto gv = got.to(kFloat64).contiguous().to_vector<double>();
    const double rounding = dt == kBFloat16 ? 0x1p-8 : dt == kFloat16 ? 0x1p-11 : dt == kFloat32 ? 0x1p-24 : 0x1p-53;
    // the classic bound on a sum's rounding, (K + 1) u sum |terms|, in float32 for 16-bit types
    const double accumulation = double(K + 1) * (dt == kFloat64 ? 0x1p-53 : 0x1p-24);
    const double subnormal = dt == kFloat16 ? 0x1p-25 : 1e-300;  // half of float16's subnormal step
    for (size_t i = 0; i < gv.size(); ++i)
      ASSERT_LE(std::abs(gv[i] - want[i]), rounding * std::abs(want[i]) + accumulation * scale[i] + subnormal)
          << "element " << i << ": " << gv[i] << " against " << want[i];
  }
}

// softmax, log_softmax and layer_norm over random shapes, views and dims (seeded): rank 1-4,
// sizes 1-5 and one draw in three a long dim (the vector rows), permuted or every other element,
// the dim either sign; float32, float64, bfloat16 and float16 (which accumulate in float32)
// against loops in double over the rows, within the result's rounding (and, for layer_norm, the
// input's rounding in float32 times the row's condition); and in float64, on the
// smaller draws, gradcheck of each.
TEST(Normalizations, RandomShapesViewsAndDimsMatchALoop) {
  testing::SeededInts in(2032);
  static const DType dtypes[] = {kFloat32, kFloat64, kBFloat16, kFloat16};
  for (int draw = 0; draw < 150; ++draw) {
    Shape sizes(static_cast<size_t>(in(1, 4)));
    for (auto& v : sizes) v = in(1, 5);
    if (in(0, 2) == 0) sizes[static_cast<size_t>(in(0, static_cast<int64_t>(sizes.size()) - 1))] = in(33, 300);
    const DType dt = dtypes[in(0, 3)];
    manual_seed(static_cast<uint64_t>(draw));
    Tensor x = (randn(sizes, kFloat64) * 3).to(dt);
    if (x.dim() >= 2 && in(0, 2) == 0) x = x.transpose(0, x.dim() - 1);
    if (in(0, 3) == 0) {
      Shape wide = x.sizes();
      wide[0] *= 2;
      x = (randn(wide, kFloat64) * 3).to(dt).slice(0, 0, std::nullopt, 2);
    }
    const int64_t dim = in(0, x.dim() - 1), signed_dim = in(0, 1) == 1 ? dim - x.dim() : dim;
    const int64_t trailing = in(1, x.dim());  // layer_norm's normalized dims
    SCOPED_TRACE(detail::concat("draw ", draw, ": ", shape_str(x.sizes()), " strides ", shape_str(x.strides()), " ", dt,
                                " dim ", signed_dim, ", layer_norm over the last ", trailing));
    const double rounding = dt == kBFloat16 ? 0x1p-8 : dt == kFloat16 ? 0x1p-11 : dt == kFloat32 ? 0x1p-24 : 0x1p-53;
    // softmax rows: `dim` moved last
    const Tensor moved = x.to(kFloat64).movedim(dim, -1).contiguous();
    const auto v = moved.to_vector<double>();
    const int64_t len = x.size(dim), rows = static_cast<int64_t>(v.size()) / len;
    // the result's rounding, and a sum of `len` terms in the computing type (float32 for 16 bits)
    const double compute = dt == kFloat64 ? 0x1p-53 : 0x1p-24, tol = 2 * rounding + double(len + 4) * compute;
    std::vector<double> soft(v.size()), logsoft(v.size());
    for (int64_t r = 0; r < rows; ++r) {
      const double* row = v.data() + r * len;
      const double top = *std::max_element(row, row + len);
      double total = 0;
      for (int64_t i = 0; i < len; ++i) total += std::exp(row[i] - top);
      for (int64_t i = 0; i < len; ++i) {
        soft[r * len + i] = std::exp(row[i] - top) / total;
        logsoft[r * len + i] = row[i] - top - std::log(total);
      }
    }
    auto compare = [&](const Tensor& got, const std::vector<double>& want, const char* op) {
      ASSERT_EQ(got.dtype(), dt) << op;
      const auto g = got.to(kFloat64).movedim(dim, -1).contiguous().to_vector<double>();
      for (size_t i = 0; i < g.size(); ++i)
        ASSERT_LE(std::abs(g[i] - want[i]), tol * (2 + std::abs(want[i]))) << op << " element " << i;
    };
    compare(x.softmax(signed_dim), soft, "softmax");
    compare(x.log_softmax(signed_dim), logsoft, "log_softmax");
    // layer_norm over the last `trailing` dims, with weight and bias half the time
    const Shape normalized(x.sizes().end() - trailing, x.sizes().end());
    const Tensor weight = in(0, 1) == 1 ? randn(normalized, kFloat64).to(dt) : Tensor();
    const Tensor bias = weight.defined() ? randn(normalized, kFloat64).to(dt) : Tensor();
    const auto xv = x.to(kFloat64).contiguous().to_vector<double>();
    const int64_t width = checked_numel(normalized, "test"), groups = static_cast<int64_t>(xv.size()) / width;
    const auto wv = weight.defined() ? weight.to(kFloat64).to_vector<double>() : std::vector<double>();
    const auto bv = bias.defined() ? bias.to(kFloat64).to_vector<double>() : std::vector<double>();
    // Normalizing divides by the spread: an input's rounding (float32's, in which 16-bit inputs
    // are computed) grows by |x| / sqrt(var + eps), the row's condition, which the bound allows.
    std::vector<double> normed(xv.size()), allowed(xv.size());
    for (int64_t g = 0; g < groups; ++g) {
      const double* row = xv.data() + g * width;
      double mean = 0, var = 0, top = 0;
      for (int64_t i = 0; i < width; ++i) mean += row[i] / width, top = std::max(top, std::abs(row[i]));
      for (int64_t i = 0; i < width; ++i) var += (row[i] - mean) * (row[i] - mean) / width;
      const double condition = top / std::sqrt(var + 1e-5);
      for (int64_t i = 0; i < width; ++i) {
        const double y = (row[i] - mean) / std::sqrt(var + 1e-5), w = weight.defined() ? std::abs(wv[i]) : 1.0;
        normed[g * width + i] = weight.defined() ? y * wv[i] + bv[i] : y;
        allowed[g * width + i] =
            2 * rounding * std::abs(normed[g * width + i]) + 16 * compute * (condition + double(width)) * (1 + w);
      }
    }
    const Tensor ln = nn::functional::layer_norm(x, normalized, weight, bias);
    ASSERT_EQ(ln.dtype(), dt);
    const auto lv = ln.to(kFloat64).contiguous().to_vector<double>();
    for (size_t i = 0; i < lv.size(); ++i)
      ASSERT_LE(std::abs(lv[i] - normed[i]), allowed[i]) << "layer_norm element " << i;
    if (dt == kFloat64 && x.numel() <= 64) {
      using X = const std::vector<Tensor>&;
      const autograd::GradcheckResult soft_check =
          autograd::gradcheck([&](X t) { return t[0].softmax(signed_dim); }, {x});
      EXPECT_TRUE(soft_check.ok) << soft_check.message;
      const autograd::GradcheckResult log_check =
          autograd::gradcheck([&](X t) { return t[0].log_softmax(signed_dim); }, {x});
      EXPECT_TRUE(log_check.ok) << log_check.message;
      std::vector<Tensor> args{x};
      if (weight.defined()) args.push_back(weight), args.push_back(bias);
      const autograd::GradcheckResult ln_check = autograd::gradcheck(
          [&](X t) {
            return nn::functional::layer_norm(t[0], normalized, t.size() > 1 ? t[1] : Tensor(),
                                              t.size() > 1 ? t[2] : Tensor());
          },
          args);
      EXPECT_TRUE(ln_check.ok) << ln_check.message;
    }
  }
}

TEST(LargeOps, ExtremesAndArgs) {
  Tensor x = arange(300000, kFloat32).view({1, -1});
  x.select(1, 123457).fill_(1e9);
  EXPECT_EQ(x.max().item<float>(), 1e9f);
  EXPECT_EQ(x.argmax().item<int64_t>(), 123457);
  EXPECT_EQ(std::get<1>(x.max(1)).item<int64_t>(), 123457);
  Tensor m = randn({500, 400});
  const auto [vals, idx] = m.min(0);
  EXPECT_TRUE(all_close(vals, m.gather(0, idx.unsqueeze(0)).squeeze(0), 0, 0));
  EXPECT_TRUE(all_close(vals, m.amin({0}), 0, 0));
}

TEST(LargeOps, ElementwiseBroadcastAndStrides) {
  manual_seed(2);
  const Tensor a = randn({400, 500}), b = randn({500});
  const Tensor out = a + b;
  const auto av = a.to_vector<float>(), bv = b.to_vector<float>(), ov = out.to_vector<float>();
  for (size_t i = 0; i < av.size(); i += 997) EXPECT_EQ(ov[i], av[i] + bv[i % 500]);
  // A transposed operand takes the strided path; the result is the same.
  const Tensor at = a.t().contiguous().t();
  EXPECT_TRUE(all_close(at + b, out, 0, 0));
  EXPECT_TRUE(all_close(a.t() * 2.0, (a * 2.0).t(), 0, 0));
}

TEST(LargeOps, MatmulMatchesNaive) {
  manual_seed(3);
  const Tensor a = randn({130, 70}), b = randn({70, 90});
  EXPECT_TRUE(all_close(mm(a, b), tensor(naive_matmul(a, b), Shape{130, 90}).to(kFloat32), 1e-4, 1e-4));
  // Transposed operands are mapped, not copied, and give the same result.
  const Tensor at = a.t().contiguous(), bt = b.t().contiguous();
  EXPECT_TRUE(all_close(mm(at.t(), bt.t()), mm(a, b), 1e-5, 1e-5));
  // Many small products run one per thread.
  const Tensor ba = randn({64, 5, 6}), bb = randn({64, 6, 4});
  const Tensor out = bmm(ba, bb);
  for (int64_t i = 0; i < 64; i += 9) EXPECT_TRUE(all_close(out[i], mm(ba[i], bb[i]), 1e-6, 1e-6));
  // A column of a matrix (stride != 1 in both dims) is copied first; still right.
  const Tensor strided = randn({8, 6, 5}).select(2, 1);  // [8, 6], strides [30, 5]
  EXPECT_TRUE(all_close(mm(strided, bb[0]), mm(strided.contiguous(), bb[0]), 1e-6, 1e-6));
}

TEST(LargeOps, ConvBatchParallelMatchesNaive) {
  manual_seed(4);
  const Tensor x = randn({4, 3, 11, 9}), w = randn({5, 3, 3, 3});
  const Tensor y = conv2d(x, w, {}, {2, 2}, {1, 1});
  EXPECT_TRUE(all_close(y, naive_conv2d(x, w, 2, 1).to(kFloat32), 1e-4, 1e-4));
  // One sample at a time (the serial schedule) agrees with the batch.
  for (int64_t n = 0; n < 4; ++n)
    EXPECT_TRUE(all_close(conv2d(x.narrow(0, n, 1), w, {}, {2, 2}, {1, 1}), y.narrow(0, n, 1), 1e-5, 1e-5));
  // 3-D input (no batch dim) works like PyTorch.
  EXPECT_EQ(conv2d(x[0], w).sizes(), (Shape{5, 9, 7}));
}

TEST(LargeOps, SoftmaxRowsSumToOne) {
  manual_seed(5);
  const Tensor x = randn({100, 1000}) * 20.0;
  const Tensor s = x.softmax(1);
  EXPECT_TRUE(all_close(s.sum({1}), ones({100}), 1e-5, 1e-5));
  EXPECT_TRUE(all_close(x.log_softmax(1).exp(), s, 1e-4, 1e-6));
  // Large logits do not overflow (the max is subtracted first).
  const Tensor big = tensor({1000.0f, 1000.0f});
  EXPECT_TRUE(all_close(big.softmax(0), tensor({0.5f, 0.5f}), 0, 0));
}

TEST(Semantics, NaNPropagates) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = tensor({1.0f, nan, 3.0f});
  EXPECT_TRUE(std::isnan(x.max().item<float>()));
  EXPECT_TRUE(std::isnan(x.min().item<float>()));
  EXPECT_EQ(x.argmax().item<int64_t>(), 1);
  EXPECT_TRUE(std::isnan(maximum(x, ones({3})).to_vector<float>()[1]));
  EXPECT_TRUE(std::isnan(relu(x).to_vector<float>()[1]));
  EXPECT_TRUE(std::isnan(x.clamp(0, 2).to_vector<float>()[1]));
  EXPECT_TRUE(std::isnan(x.sum().item<float>()));
  EXPECT_EQ((x == x).to_vector<uint8_t>(), (std::vector<uint8_t>{1, 0, 1}));
}

// The vector path of a contiguous float max/min (eight lanes and a NaN flag): equal to a plain
// loop for every length around the vector width, and a NaN anywhere (body or tail) wins.
TEST(Semantics, FloatMaxMinVectorPathMatchesALoopAndPropagatesNaN) {
  manual_seed(4);
  for (int64_t n : {1, 7, 8, 9, 16, 17, 100, 300000}) {
    const Tensor x = randn({n});
    const std::vector<float> v = x.to_vector<float>();
    EXPECT_EQ(x.amax().item<float>(), *std::max_element(v.begin(), v.end())) << n;
    EXPECT_EQ(x.amin().item<float>(), *std::min_element(v.begin(), v.end())) << n;
    for (int64_t at : {int64_t{0}, n / 2, n - 1}) {
      Tensor y = x.clone();
      y.narrow(0, at, 1).fill_(std::numeric_limits<float>::quiet_NaN());
      EXPECT_TRUE(std::isnan(y.amax().item<float>())) << n << " " << at;
      EXPECT_TRUE(std::isnan(y.amin().item<float>())) << n << " " << at;
    }
  }
}

TEST(Semantics, InPlace) {
  Tensor a = ones({2, 3});
  a.add_(tensor({1.0, 2.0, 3.0}));  // float64 operand, result cast back to float32
  EXPECT_EQ(a.dtype(), kFloat32);
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{2, 3, 4, 2, 3, 4}));
  a.select(1, 0).mul_(10);  // through a view
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{20, 3, 4, 20, 3, 4}));
  Tensor i = ones({3}, kInt64);
  i += 2;
  i *= i;
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{9, 9, 9}));
  Tensor f = zeros({2, 2});
  f.copy_(tensor<int32_t>({5, 6}));  // broadcast + cast
  EXPECT_EQ(f.to_vector<float>(), (std::vector<float>{5, 6, 5, 6}));
  Tensor z = ones({4});
  z.zero_();
  EXPECT_EQ(z.sum().item<float>(), 0.0f);
  Tensor c = tensor({-2.0f, 0.5f, 2.0f});
  c.clamp_(-1, 1);
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{-1, 0.5f, 1}));
  Tensor r = tensor({-1.0f, 2.0f});
  r.relu_();
  EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{0, 2}));
}

TEST(Semantics, IntegerWrapAndDivision) {
  const Tensor big = tensor<int32_t>({std::numeric_limits<int32_t>::max()});
  EXPECT_EQ((big + 1).to_vector<int32_t>()[0], std::numeric_limits<int32_t>::min());  // wraps like PyTorch
  EXPECT_EQ((tensor<uint8_t>({250}) + tensor<uint8_t>({10})).to_vector<uint8_t>()[0], 4);
  const Tensor q = tensor<int64_t>({7}) / tensor<int64_t>({2});
  EXPECT_EQ(q.dtype(), kFloat32);
  EXPECT_EQ(q.item<float>(), 3.5f);
  EXPECT_EQ((tensor<int64_t>({3}) * 2.5).dtype(), kFloat32);
  EXPECT_EQ(tensor<int64_t>({1, 2, 3}).sum().dtype(), kInt64);
  EXPECT_EQ(tensor({true, true}).sum().item<int64_t>(), 2);
}

// Integer and bool sums (a mask's count: `(pred == target).sum()`) are exact int64 in every layout:
// one long row split over threads, contiguous rows, strided rows. The split row's partial sums
// were once combined through the element type: a mask of 300001 values counted 2.
TEST(Semantics, IntegerAndMaskSumsAreExactInEveryLayout) {
  manual_seed(3);
  const Tensor x = randn({300001});
  const Tensor mask = x > 0.3;
  const auto v = x.to_vector<float>();
  int64_t count = 0;
  for (float e : v) count += e > 0.3f;
  EXPECT_EQ(mask.sum().dtype(), kInt64);
  EXPECT_EQ(mask.sum().item<int64_t>(), count);
  const Tensor ints = (x * 1000).to(kInt32);
  const auto iv = ints.to_vector<int32_t>();
  int64_t total = 0;
  for (int32_t e : iv) total += e;
  EXPECT_EQ(ints.sum().item<int64_t>(), total);
  EXPECT_EQ((x * 50).to(kInt8).sum().item<int64_t>(), (x * 50).to(kInt8).to(kInt64).sum().item<int64_t>());
  EXPECT_EQ(full({1000}, 255, kUInt8).sum().item<int64_t>(), 255000);  // int64, not uint8, accumulates
  // Each thread's partial sum beyond int32's range, and a product's.
  EXPECT_EQ(full({300000}, 1 << 30, kInt32).sum().item<int64_t>(), int64_t{300000} << 30);
  Tensor twos = ones({300001}, kInt8);
  twos.narrow(0, 0, 8).fill_(2);  // the first thread's partial product is 256, beyond int8
  EXPECT_EQ(twos.prod().item<int64_t>(), 256);
  // Rows: [3, 1000] over dim 1 (contiguous rows), and its transpose over dim 0 (strided).
  const Tensor m2 = mask.narrow(0, 0, 3000).reshape({3, 1000});
  const Tensor by_row = m2.sum({1}), by_column_of_t = m2.t().sum({0});
  for (int64_t r = 0; r < 3; ++r) {
    int64_t c = 0;
    for (int64_t j = 0; j < 1000; ++j) c += v[static_cast<size_t>(r * 1000 + j)] > 0.3f;
    EXPECT_EQ(by_row.to_vector<int64_t>()[static_cast<size_t>(r)], c);
    EXPECT_EQ(by_column_of_t.to_vector<int64_t>()[static_cast<size_t>(r)], c);
  }
}

// Unary and binary integer arithmetic at the ends of the range wraps modulo 2^bits as PyTorch's
// does, without signed overflow in C++ (UBSan, the asan preset, checks the kernels do it unsigned).
TEST(Semantics, IntegerExtremesWrapInEveryArithmeticOp) {
  constexpr int64_t lo64 = std::numeric_limits<int64_t>::min(), hi64 = std::numeric_limits<int64_t>::max();
  constexpr int32_t lo32 = std::numeric_limits<int32_t>::min(), hi32 = std::numeric_limits<int32_t>::max();
  const Tensor a64 = tensor<int64_t>({lo64, hi64, -3});
  EXPECT_EQ(a64.neg().to_vector<int64_t>(), (std::vector<int64_t>{lo64, lo64 + 1, 3}));
  EXPECT_EQ(a64.abs().to_vector<int64_t>(), (std::vector<int64_t>{lo64, hi64, 3}));
  EXPECT_EQ(a64.square().to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 9}));
  EXPECT_EQ((a64 * hi64).to_vector<int64_t>(), (std::vector<int64_t>{lo64, 1, lo64 + 3}));
  EXPECT_EQ((a64 - a64.neg()).to_vector<int64_t>(), (std::vector<int64_t>{0, -2, -6}));
  EXPECT_EQ(a64.pow(3).to_vector<int64_t>(), (std::vector<int64_t>{0, hi64, -27}));
  EXPECT_EQ(a64.sum().item<int64_t>(), -4);
  const Tensor a32 = tensor<int32_t>({lo32, hi32, -3});
  EXPECT_EQ(a32.neg().to_vector<int32_t>(), (std::vector<int32_t>{lo32, lo32 + 1, 3}));
  EXPECT_EQ(a32.abs().to_vector<int32_t>(), (std::vector<int32_t>{lo32, hi32, 3}));
  EXPECT_EQ(a32.square().to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 9}));
  EXPECT_EQ(tensor<int8_t>({-128, 127}).neg().to_vector<int8_t>(), (std::vector<int8_t>{-128, -127}));
  EXPECT_EQ(tensor<int8_t>({-128, 127}).square().to_vector<int8_t>(), (std::vector<int8_t>{0, 1}));
  // GEMM: 2 * INT64_MAX + 2 * INT64_MAX = 4 * (2^63 - 1) = -4 mod 2^64 (the products ran in
  // Eigen's signed type, UBSan); 6 * INT32_MAX = -6 mod 2^32; a negative integer alpha.
  EXPECT_EQ(tensor<int64_t>({hi64, 2}, Shape{1, 2}).matmul(tensor<int64_t>({2, hi64}, Shape{2, 1})).item<int64_t>(),
            -4);
  EXPECT_EQ(tensor<int32_t>({hi32, 3}, Shape{1, 2}).matmul(tensor<int32_t>({3, hi32}, Shape{2, 1})).item<int32_t>(),
            -6);
  EXPECT_EQ(addmm(tensor<int64_t>({5}, Shape{1, 1}), tensor<int64_t>({3}, Shape{1, 1}),
                  tensor<int64_t>({4}, Shape{1, 1}), 1, -2)
                .item<int64_t>(),
            -19);
}

TEST(Semantics, ScalarOperatorsAndComparisons) {
  const Tensor x = tensor({1.0f, 2.0f, 4.0f});
  EXPECT_EQ((2.0 - x).to_vector<float>(), (std::vector<float>{1, 0, -2}));
  EXPECT_EQ((8.0 / x).to_vector<float>(), (std::vector<float>{8, 4, 2}));
  EXPECT_EQ((x > 1.5).dtype(), kBool);
  EXPECT_EQ((x > 1.5).to_vector<uint8_t>(), (std::vector<uint8_t>{0, 1, 1}));
  EXPECT_EQ(logical_not(x > 1.5).to_vector<uint8_t>(), (std::vector<uint8_t>{1, 0, 0}));
  EXPECT_EQ(pow(2.0, x).to_vector<float>(), (std::vector<float>{2, 4, 16}));
  EXPECT_EQ(x.pow(2).to_vector<float>(), (std::vector<float>{1, 4, 16}));
}

TEST(Semantics, ViewsOfZeroDimAndEmpty) {
  const Tensor s = scalar_tensor(5.0);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.unsqueeze(0).sizes(), (Shape{1}));
  EXPECT_EQ(s.sum().item<float>(), 5.0f);
  EXPECT_EQ(s.softmax(0).item<float>(), 1.0f);
  const Tensor e = zeros({0, 4});
  EXPECT_EQ((e + 1).sizes(), (Shape{0, 4}));
  EXPECT_EQ(e.sum({1}).sizes(), (Shape{0}));
  EXPECT_EQ(e.sum().item<float>(), 0.0f);
  EXPECT_EQ(mm(zeros({2, 0}), zeros({0, 3})).sum().item<float>(), 0.0f);  // K = 0: zeros
  EXPECT_TRUE(std::isinf(zeros({0}).logsumexp({0}).item<float>()));
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

// The tiled (and, for 4-byte types, 8x8 register) transpose against index arithmetic.
// A mask widened to another dtype (a contiguous bool run reads its bytes, vectorized): 0 and 1 in
// every dtype, over a run that is not a multiple of a vector, and through a strided mask.
TEST(Copy, BoolMasksWidenToZeroAndOneInEveryDtype) {
  std::vector<double> want;
  for (int i = 0; i < 301; ++i) want.push_back(i % 3 == 0 ? 1.0 : 0.0);
  const Tensor m = tensor(want) > 0.5;
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16, kInt32, kInt64, kInt8, kUInt8}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor w = m.to(dt);
    EXPECT_EQ(w.dtype(), dt);
    EXPECT_EQ(w.to(kFloat64).to_vector<double>(), want);
    const std::vector<double> every_other = m.slice(0, 0, 301, 2).to(dt).to(kFloat64).to_vector<double>();
    for (size_t i = 0; i < every_other.size(); ++i) EXPECT_EQ(every_other[i], want[2 * i]);
  }
}

TEST(Copy, TransposingCopiesMatchIndexMath) {
  for (const Shape& shape : {Shape{37, 53}, Shape{64, 48}, Shape{3, 33, 17}, Shape{2, 160, 96}}) {
    for (DType d : {kFloat32, kInt32, kFloat64, kFloat16}) {
      const Tensor x = arange(checked_numel(shape, "test"), kInt64).view(shape).to(d);
      const int64_t n = x.dim();
      const Tensor t = x.transpose(n - 1, n - 2).contiguous();
      ASSERT_TRUE(t.is_contiguous());
      const auto v = t.to(kFloat64).to_vector<double>();
      const int64_t R = shape[n - 2], C = shape[n - 1], B = x.numel() / (R * C);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t r = 0; r < R; ++r) {
            const double expected = static_cast<double>(b * R * C + r * C + c);
            const double got = v[static_cast<size_t>((b * C + c) * R + r)];
            if (d == kFloat16 && expected > 2048) continue;  // not exactly representable
            ASSERT_EQ(got, expected) << shape_str(shape) << " " << d << " at " << b << "," << c << "," << r;
          }
    }
  }
  // A transposing copy that also converts the dtype.
  const Tensor a = randn({40, 24});
  EXPECT_TRUE(testing::all_close(a.t().to(kFloat64).contiguous(), a.to(kFloat64).t().contiguous(), 0, 0));
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

// The branch-free max-pool kernel: ties go to the first position, a NaN wins, windows that
// overhang the padding see only real taps; backward routes each gradient to that position.
TEST(Pooling, MaxPoolTiesNaNAndEdges) {
  const Tensor x = tensor<float>({1, 3, 3, 0,    //
                                  2, 3, NAN, 1,  //
                                  5, 5, 4, 4,    //
                                  5, 5, 4, 6},
                                 Shape{1, 1, 4, 4});
  auto [y, idx] = max_pool2d_with_indices(x, {2, 2});
  const auto values = y.to_vector<float>();
  EXPECT_EQ(values[0], 3.0f);
  EXPECT_TRUE(std::isnan(values[1]));
  EXPECT_EQ(values[2], 5.0f);
  EXPECT_EQ(values[3], 6.0f);
  EXPECT_EQ(idx.to_vector<int64_t>(), (std::vector<int64_t>{1, 6, 8, 15}));
  // 3x3 windows, stride 2, padding 1 on a 4x4 input: every window overhangs the padding.
  const Tensor ramp = arange(16, kFloat32).reshape({1, 1, 4, 4});
  EXPECT_EQ(std::get<1>(max_pool2d_with_indices(ramp, {3, 3}, {{2, 2}}, {1, 1})).to_vector<int64_t>(),
            (std::vector<int64_t>{5, 7, 13, 15}));
  // All equal: the first real tap of each window.
  Tensor flat = ones({1, 1, 4, 4}).requires_grad_();
  auto [y3, idx3] = max_pool2d_with_indices(flat, {3, 3}, {{2, 2}}, {1, 1});
  EXPECT_EQ(idx3.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 4, 5}));
  y3.sum().backward();
  EXPECT_EQ(flat.grad().reshape({-1}).to_vector<float>(),
            (std::vector<float>{1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_ERROR_CONTAINS(native::max_pool2d_backward(ones({1, 1, 1, 1}), full({1, 1, 1, 1}, 99, kInt64), {1, 1, 2, 2}),
                        "index 99 is outside a plane of 4 elements");
  // A one-tap window may have any dilation: INT64_MAX's made the window's tap bounds overflow
  // (UBSan, found by the random-arguments test). Each output is its input, gradients included.
  const int64_t huge = std::numeric_limits<int64_t>::max();
  Tensor r = ramp.clone().requires_grad_();
  auto [y1, idx1] = max_pool2d_with_indices(r, {1, 1}, {{1, 1}}, {0, 0}, {huge, huge});
  EXPECT_EQ(y1.to_vector<float>(), ramp.to_vector<float>());
  EXPECT_EQ(idx1.to_vector<int64_t>(), arange(16, kInt64).to_vector<int64_t>());
  y1.sum().backward();
  EXPECT_EQ(r.grad().to_vector<float>(), ones({16}).to_vector<float>());
}

// Dilation can place every tap of a window in the padding (PyTorch allows it with ceil_mode):
// PyTorch gives -inf and an index outside the window (here 16, outside the plane too, which its
// backward then writes through); ember records no index, -1, which both backward forms skip, as
// PyTorch's CPU backward skips a -1 index. And kernels, paddings and dilations near INT64_MAX are
// valid arguments whose window arithmetic overflowed (UBSan, found by the random-arguments test).
TEST(Pooling, WindowsOnlyInThePaddingAndKernelsNearInt64Max) {
  const Tensor ramp = arange(9, kFloat32).reshape({1, 1, 3, 3});
  for (bool indices : {true, false}) {  // autograd's int64 positions, then its uint8 taps
    SCOPED_TRACE(indices ? "indices" : "taps");
    Tensor x = ramp.clone().requires_grad_();
    Tensor y;
    if (indices) {
      Tensor idx;
      std::tie(y, idx) = max_pool2d_with_indices(x, {2, 2}, {{2, 2}}, {1, 1}, {5, 5}, true);
      EXPECT_EQ(idx.to_vector<int64_t>(), (std::vector<int64_t>{-1}));
    } else {
      y = max_pool2d(x, {2, 2}, {{2, 2}}, {1, 1}, {5, 5}, true);
    }
    EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{-INFINITY}));
    y.backward(ones({1, 1, 1, 1}));
    EXPECT_EQ(x.grad().to_vector<float>(), zeros({9}).to_vector<float>());
  }
  EXPECT_EQ(
      native::max_pool2d_backward(ones({1, 1, 1, 1}), full({1, 1, 1, 1}, -1, kInt64), {1, 1, 2, 2}).to_vector<float>(),
      zeros({4}).to_vector<float>());
  EXPECT_ERROR_CONTAINS(native::max_pool2d_backward(ones({1, 1, 1, 1}), full({1, 1, 1, 1}, -2, kInt64), {1, 1, 2, 2}),
                        "index -2 is outside a plane of 4 elements");
  // A window 2^62 rows tall, half of it padding, over a 1x8 input: the maximum of each column
  // (2^62 x 1 taps: the int64 positions' path).
  const int64_t big = int64_t{1} << 62;
  Tensor row = arange(8, kFloat32).reshape({1, 1, 1, 8}).requires_grad_();
  auto [top, at] = max_pool2d_with_indices(row, {big, 1}, std::nullopt, {big / 2, 0});
  EXPECT_EQ(top.to_vector<float>(), row.to_vector<float>());
  EXPECT_EQ(at.to_vector<int64_t>(), arange(8, kInt64).to_vector<int64_t>());
  max_pool2d(row, {big, 1}, std::nullopt, {big / 2, 0}).sum().backward();
  EXPECT_EQ(row.grad().to_vector<float>(), ones({8}).to_vector<float>());
  // Averages: a kernel of INT64_MAX - 1 rows over 3 (padding 2^62 - 2, stride 2^62, ceil_mode)
  // gives two windows, the second starting at row 2, whose end start + kernel overflowed.
  const int64_t max = std::numeric_limits<int64_t>::max();
  Tensor col = tensor<float>({3, 6, 9}, Shape{1, 1, 3, 1}).requires_grad_();
  const Tensor mean = avg_pool2d(col, {max - 1, 1}, {{big, 1}}, {big - 2, 0}, true, /*count_include_pad=*/false);
  EXPECT_EQ(mean.to_vector<float>(), (std::vector<float>{6, 9}));
  mean.sum().backward();
  EXPECT_TRUE(testing::all_close(col.grad(), tensor<float>({1.0f / 3, 1.0f / 3, 4.0f / 3}, Shape{1, 1, 3, 1})));
  // Counting the padding, the first window divides by 2^63 - 1 rows, more than int64's
  // products of a window's sides hold in general: the divisor is a double.
  const Tensor padded_mean = avg_pool2d(col.detach(), {max - 1, 1}, {{big, 1}}, {big - 2, 0}, true, true);
  EXPECT_FLOAT_EQ(padded_mean.to_vector<float>()[0], 18.0f / 9223372036854775807.0f);
  EXPECT_FLOAT_EQ(padded_mean.to_vector<float>()[1], 9.0f / float(big - 1));
}

// Pooling over random valid configurations (seeded: sizes 1-9, kernels 1-4, strides 1-3,
// padding up to half the kernel, dilation 1-3, ceil_mode; small integers for ties, a NaN now and
// then) against loops written from PyTorch's definitions in double: max pool's values, int64
// indices (the first maximal tap in scan order, a NaN first; -1 for a window in the padding
// only) and both gradient paths (autograd's uint8 taps, the int64 indices), and avg_pool2d's
// values and gradients with either divisor rule.
TEST(Pooling, RandomValidConfigurationsMatchLoopsFromTheDefinition) {
  testing::SeededInts in(2028);
  int checked = 0;
  for (int draw = 0; draw < 300; ++draw) {
    const int64_t N = in(1, 2), C = in(1, 3), H = in(1, 9), W = in(1, 9);
    const Int2 k{in(1, 4), in(1, 4)}, s{in(1, 3), in(1, 3)}, pad{in(0, k[0] / 2), in(0, k[1] / 2)};
    const Int2 dil = in(0, 2) == 0 ? Int2{in(1, 3), in(1, 3)} : Int2{1, 1};
    const bool ceil_mode = in(0, 1) == 1, include_pad = in(0, 1) == 1;
    manual_seed(static_cast<uint64_t>(draw));
    std::vector<double> x = randint(-3, 4, {N * C * H * W}).to(kFloat64).to_vector<double>();
    if (in(0, 3) == 0) x[static_cast<size_t>(in(0, static_cast<int64_t>(x.size()) - 1))] = NAN;
    const Tensor xt = tensor(x, Shape{N, C, H, W});
    // PyTorch's output size, and whether the shape checks refuse the configuration
    auto out_size = [&](int64_t size, int a, int64_t d) {
      const int64_t span = size + 2 * pad[a] - d * (k[a] - 1) - 1 + (ceil_mode ? s[a] - 1 : 0);
      if (span < 0) return int64_t{0};
      int64_t o = span / s[a] + 1;
      if (ceil_mode && (o - 1) * s[a] >= size + pad[a]) --o;
      return o;
    };
    const int64_t Ho = out_size(H, 0, dil[0]), Wo = out_size(W, 1, dil[1]);
    SCOPED_TRACE(detail::concat("draw ", draw, ": ", N, "x", C, "x", H, "x", W, " kernel ", k[0], ",", k[1], " stride ",
                                s[0], ",", s[1], " padding ", pad[0], ",", pad[1], " dilation ", dil[0], ",", dil[1],
                                ceil_mode ? " ceil_mode" : ""));
    if (Ho <= 0 || Wo <= 0) {
      EXPECT_THROW(max_pool2d(xt, k, s, pad, dil, ceil_mode), Error);
      continue;
    }
    ++checked;
    const int64_t planes = N * C, outs = planes * Ho * Wo;
    const std::vector<double> dy = randn({outs}, kFloat64).to_vector<double>();
    std::vector<double> max_v(outs), max_dx(x.size(), 0.0);
    std::vector<int64_t> max_i(outs);
    for (int64_t pl = 0; pl < planes; ++pl)
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const int64_t o = (pl * Ho + oh) * Wo + ow;
          double best = -INFINITY;
          int64_t at = -1;
          for (int64_t i = 0; i < k[0]; ++i)
            for (int64_t j = 0; j < k[1]; ++j) {
              const int64_t h = oh * s[0] - pad[0] + i * dil[0], w = ow * s[1] - pad[1] + j * dil[1];
              if (h < 0 || h >= H || w < 0 || w >= W || std::isnan(best)) continue;
              const double v = x[static_cast<size_t>((pl * H + h) * W + w)];
              if (at < 0 || v > best || std::isnan(v)) best = v, at = h * W + w;
            }
          max_v[o] = best, max_i[o] = at;
          if (at >= 0) max_dx[static_cast<size_t>(pl * H * W + at)] += dy[o];
        }
    for (DType dt : {kFloat32, kFloat64}) {
      SCOPED_TRACE(dtype_name(dt));
      Tensor xr = xt.to(dt).detach().requires_grad_();
      const auto [values, indices] = max_pool2d_with_indices(xr.detach(), k, s, pad, dil, ceil_mode);
      EXPECT_TRUE(testing::all_close(values.to(kFloat64), tensor(max_v, values.sizes()), 0, 0));
      EXPECT_EQ(indices.to_vector<int64_t>(), max_i);
      const Tensor dyt = tensor(dy, values.sizes()).to(dt);
      max_pool2d(xr, k, s, pad, dil, ceil_mode).backward(dyt);  // autograd's tap records
      EXPECT_TRUE(testing::all_close(xr.grad().to(kFloat64), tensor(max_dx, xt.sizes()), 1e-5, 1e-5));
      EXPECT_TRUE(testing::all_close(native::max_pool2d_backward(dyt, indices, xt.sizes()).to(kFloat64),
                                     tensor(max_dx, xt.sizes()), 1e-5, 1e-5));
    }
    if (dil != Int2{1, 1}) continue;  // avg_pool2d has no dilation
    std::vector<double> avg_v(outs), avg_dx(x.size(), 0.0);
    for (int64_t pl = 0; pl < planes; ++pl)
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const int64_t o = (pl * Ho + oh) * Wo + ow;
          int64_t h0 = oh * s[0] - pad[0], w0 = ow * s[1] - pad[1];
          int64_t h1 = std::min(h0 + k[0], H + pad[0]), w1 = std::min(w0 + k[1], W + pad[1]);
          const int64_t padded = (h1 - h0) * (w1 - w0);
          h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0);
          h1 = std::min(h1, H), w1 = std::min(w1, W);
          const double divisor = double(include_pad ? padded : (h1 - h0) * (w1 - w0));
          double sum = 0;
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) {
              sum += x[static_cast<size_t>((pl * H + h) * W + w)];
              avg_dx[static_cast<size_t>((pl * H + h) * W + w)] += dy[o] / divisor;
            }
          avg_v[o] = sum / divisor;
        }
    Tensor xr = xt.detach().requires_grad_();
    const Tensor mean = avg_pool2d(xr, k, s, pad, ceil_mode, include_pad);
    EXPECT_TRUE(testing::all_close(mean, tensor(avg_v, mean.sizes()), 1e-12, 1e-12));
    mean.backward(tensor(dy, mean.sizes()));
    EXPECT_TRUE(testing::all_close(xr.grad(), tensor(avg_dx, xt.sizes()), 1e-12, 1e-12));
  }
  EXPECT_GT(checked, 200);  // most draws are valid configurations
}

// The 2x2 stride-2 float32 pooling runs 8 windows per AVX2 step (pool.cpp): the same values and
// indices as a plain loop (first tap of the maximum in scan order, or the first NaN; the tap's
// own -0 or +0) on every row length from 1 to 19 (masked tails), odd heights, ties, NaNs, and
// float64 (the scalar path) and bfloat16/float16 on the same data.
TEST(Pooling, VectorMaxPoolMatchesALoopOnTiesNaNsZerosAndTails) {
  manual_seed(8);
  for (int64_t W = 2; W <= 40; W += 3)
    for (int64_t H : {2, 5}) {
      // Small integers make ties common; a few NaNs and signed zeros.
      std::vector<float> v = randint(-3, 3, {2, 3, H, W}).to(kFloat32).to_vector<float>();
      for (size_t i = 0; i < v.size(); i += 7) v[i] = (i % 3 == 0) ? NAN : (i % 3 == 1 ? -0.0f : 0.0f);
      const Tensor x = tensor(v, Shape{2, 3, H, W});
      auto [y, idx] = max_pool2d_with_indices(x, {2, 2});
      const int64_t Ho = H / 2, Wo = W / 2;
      ASSERT_EQ(y.sizes(), (Shape{2, 3, Ho, Wo}));
      const auto yv = y.to_vector<float>();
      const auto iv = idx.to_vector<int64_t>();
      for (int64_t pl = 0; pl < 6; ++pl)
        for (int64_t oh = 0; oh < Ho; ++oh)
          for (int64_t ow = 0; ow < Wo; ++ow) {
            int64_t at = -1;
            bool nan = false;
            for (int64_t i = 0; i < 2 && !nan; ++i)
              for (int64_t j = 0; j < 2 && !nan; ++j) {
                const int64_t pos = (2 * oh + i) * W + 2 * ow + j;
                const float c = v[pl * H * W + pos];
                if (std::isnan(c)) {
                  at = pos, nan = true;
                } else if (at < 0 || c > v[pl * H * W + at]) {
                  at = pos;
                }
              }
            const int64_t o = (pl * Ho + oh) * Wo + ow;
            SCOPED_TRACE(detail::concat("W ", W, " H ", H, " plane ", pl, " output ", oh, ",", ow));
            EXPECT_EQ(iv[o], at);
            const float want = v[pl * H * W + at];
            if (nan) {
              EXPECT_TRUE(std::isnan(yv[o]));
            } else {
              EXPECT_EQ(yv[o], want);
              EXPECT_EQ(std::signbit(yv[o]), std::signbit(want));
            }
          }
      auto [y64, idx64] = max_pool2d_with_indices(x.to(kFloat64), {2, 2});
      EXPECT_EQ(idx64.to_vector<int64_t>(), iv);
      // autocast's 16-bit activations (widened in the vector path): the same taps and values.
      for (DType dt : {kBFloat16, kFloat16}) {
        auto [yh, idxh] = max_pool2d_with_indices(x.to(dt), {2, 2});
        SCOPED_TRACE(detail::concat("W ", W, " H ", H, " ", dt));
        EXPECT_EQ(yh.dtype(), dt);
        EXPECT_EQ(idxh.to_vector<int64_t>(), iv);
        const auto yhv = yh.to(kFloat32).to_vector<float>();
        for (size_t i = 0; i < yv.size(); ++i) {
          EXPECT_EQ(std::isnan(yhv[i]), std::isnan(yv[i])) << i;
          if (!std::isnan(yv[i])) EXPECT_TRUE(yhv[i] == yv[i] && std::signbit(yhv[i]) == std::signbit(yv[i])) << i;
        }
      }
    }
}

// A 16-bit max pool's gradient adds up in float32 and is rounded once: exactly the float32
// backward of the widened gradient, rounded, for overlapping windows (3x3, stride 2) too.
TEST(Pooling, HalfPrecisionMaxPoolBackwardRoundsOnce) {
  manual_seed(13);
  const Tensor x = randn({2, 3, 9, 11});
  for (DType dt : {kBFloat16, kFloat16})
    for (bool overlapping : {false, true}) {
      SCOPED_TRACE(detail::concat(dt, overlapping ? " 3x3 stride 2" : " 2x2"));
      const auto [y, idx] = overlapping ? max_pool2d_with_indices(x.to(dt), {3, 3}, {{2, 2}}, {1, 1})
                                        : max_pool2d_with_indices(x.to(dt), {2, 2});
      const Tensor dy = randn_like(y.to(kFloat32)).to(dt);
      const Tensor dx = native::max_pool2d_backward(dy, idx, x.sizes());
      const Tensor dx32 = native::max_pool2d_backward(dy.to(kFloat32), idx, x.sizes());
      ASSERT_EQ(dx.dtype(), dt);
      EXPECT_EQ(dx.to(kFloat32).to_vector<float>(), dx32.to(dt).to(kFloat32).to_vector<float>());
    }
}

// Autograd's max_pool2d keeps each maximum's tap number in its window (one byte per output) and
// routes the gradient through it: the same values and gradient as PyTorch's int64 indices give,
// for every window the kernels tell apart (the vector 2x2, the unrolled 3x3, windows over the
// padding, dilation, ceil_mode, a 3x2 window, a 3-D input, 256 taps) and every floating dtype,
// with ties and NaNs; the taps name the same positions as the indices.
TEST(Pooling, AutogradMaxPoolRoutesGradientsThroughOneByteTaps) {
  struct Case {
    Shape shape;
    Int2 kernel;
    std::optional<Int2> stride;
    Int2 padding, dilation;
    bool ceil_mode;
  };
  const std::vector<Case> cases = {
      {{2, 3, 8, 13}, {2, 2}, std::nullopt, {0, 0}, {1, 1}, false},
      {{2, 3, 9, 11}, {3, 3}, Int2{2, 2}, {1, 1}, {1, 1}, false},
      {{1, 2, 10, 9}, {3, 3}, Int2{1, 1}, {0, 0}, {1, 1}, false},
      {{1, 2, 11, 12}, {2, 2}, Int2{1, 2}, {1, 0}, {2, 3}, false},
      {{2, 1, 7, 9}, {3, 2}, Int2{2, 2}, {1, 1}, {1, 1}, true},
      {{3, 7, 10}, {2, 3}, Int2{2, 3}, {0, 1}, {1, 1}, true},
      {{1, 2, 40, 36}, {16, 16}, Int2{8, 4}, {0, 0}, {1, 1}, false},
  };
  auto floats = [](const Tensor& t) { return t.to(kFloat32).to_vector<float>(); };
  auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
    return true;
  };
  manual_seed(21);
  for (const Case& c : cases) {
    std::vector<float> v = randint(-3, 3, c.shape).to(kFloat32).to_vector<float>();  // ties everywhere
    for (size_t i = 5; i < v.size(); i += 37) v[i] = NAN;
    for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
      SCOPED_TRACE(detail::concat(shape_str(c.shape), " kernel ", c.kernel[0], "x", c.kernel[1], " ", dt));
      const Tensor x = tensor(v, c.shape).to(dt).requires_grad_();
      const Tensor y = max_pool2d(x, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode);
      const auto [y_ref, idx] =
          max_pool2d_with_indices(x.detach(), c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode);
      ASSERT_EQ(y.sizes(), y_ref.sizes());
      EXPECT_TRUE(same(floats(y), floats(y_ref)));
      const Tensor dy = randn_like(y.detach().to(kFloat32)).to(dt);
      y.backward(dy);
      EXPECT_EQ(floats(x.grad()), floats(native::max_pool2d_backward(dy, idx, x.sizes())));

      const auto [y_taps, taps] =
          native::max_pool2d_with_taps(x.detach(), c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode);
      ASSERT_EQ(taps.dtype(), kUInt8);
      const Int2 stride = c.stride.value_or(c.kernel);
      const int64_t W = c.shape.back(), Ho = y.size(-2), Wo = y.size(-1);
      const auto tv = taps.to_vector<uint8_t>();
      const auto iv = idx.to_vector<int64_t>();
      for (size_t o = 0; o < tv.size(); ++o) {
        const int64_t oh = static_cast<int64_t>(o) / Wo % Ho, ow = static_cast<int64_t>(o) % Wo, t = tv[o];
        const int64_t h = oh * stride[0] - c.padding[0] + t / c.kernel[1] * c.dilation[0];
        const int64_t w = ow * stride[1] - c.padding[1] + t % c.kernel[1] * c.dilation[1];
        ASSERT_EQ(h * W + w, iv[o]) << "output " << o << " tap " << t;
      }
    }
  }
}

// The tape keeps a max pool's output and one byte per output, not PyTorch's eight; without a
// gradient the pool writes no indices at all (exact bytes from the allocator's counters).
TEST(Pooling, AutogradMaxPoolSavesOneBytePerOutput) {
  const Tensor x = randn({8, 16, 32, 32}).requires_grad_();
  const int64_t outputs = 8 * 16 * 16 * 16;
  auto held_by = [](auto&& f) {
    memory::empty_cache();
    const int64_t base = memory::stats().current_bytes;
    const Tensor y = f();
    return memory::stats().current_bytes - base;
  };
  EXPECT_EQ(held_by([&] { return max_pool2d(x, {2, 2}); }), outputs * (4 + 1));
  EXPECT_EQ(held_by([&] {
              NoGradGuard no_grad;
              return max_pool2d(x, {2, 2});
            }),
            outputs * 4);
  EXPECT_EQ(held_by([&] { return std::get<0>(max_pool2d_with_indices(x, {2, 2})); }), outputs * (4 + 8));
}

// Taps that max_pool2d could not have written, and gradients of another shape, are errors
// naming the op and the shapes; so is a window whose taps do not fit in a byte.
TEST(Pooling, MaxPoolTapsAreChecked) {
  EXPECT_ERROR_CONTAINS(native::max_pool2d_backward_taps(ones({1, 1, 1, 1}), full({1, 1, 1, 1}, 7, kUInt8),
                                                         {1, 1, 2, 2}, {2, 2}, std::nullopt, {0, 0}, {1, 1}, false),
                        "tap 7 of output 0 is not inside both its 2x2 window and the 2x2 input");
  // A tap in the window's padding (3x3 window, padding 1: tap 0 is above and left of the input).
  EXPECT_ERROR_CONTAINS(native::max_pool2d_backward_taps(ones({1, 1, 1, 1}), zeros({1, 1, 1, 1}, kUInt8), {1, 1, 2, 2},
                                                         {3, 3}, Int2{2, 2}, {1, 1}, {1, 1}, false),
                        "tap 0 of output 0 is not inside both its 3x3 window");
  EXPECT_ERROR_CONTAINS(native::max_pool2d_backward_taps(ones({1, 1, 2, 2}), zeros({1, 1, 2, 2}, kInt64), {1, 1, 4, 4},
                                                         {2, 2}, std::nullopt, {0, 0}, {1, 1}, false),
                        "uint8 taps and a gradient of the pooled shape [1, 1, 2, 2] expected for input [1, 1, 4, 4]");
  EXPECT_ERROR_CONTAINS(native::max_pool2d_backward_taps(ones({1, 1, 3, 3}), zeros({1, 1, 3, 3}, kUInt8), {1, 1, 4, 4},
                                                         {2, 2}, std::nullopt, {0, 0}, {1, 1}, false),
                        "pooled shape [1, 1, 2, 2]");
  EXPECT_ERROR_CONTAINS(
      native::max_pool2d_with_taps(ones({1, 1, 20, 20}), {17, 16}, std::nullopt, {0, 0}, {1, 1}, false),
      "does not number them in one byte");
  // Such a window still pools with a gradient, through int64 indices.
  const Tensor big = randn({1, 1, 20, 20}).requires_grad_();
  max_pool2d(big, {17, 16}).sum().backward();
  EXPECT_EQ(big.grad().sum().item<float>(), 1.0f);
}

// float16 and bfloat16 elementwise ops run in float32 chunks (widened 8 at a time, the op on
// floats, rounded 8 at a time): exactly the float32 op on the widened operands, rounded, for
// runs shorter and longer than a chunk, operands broadcast on either side, and strided views
// (which take the element-by-element path).
// clamp and leaky_relu carry parameters in their functors, and their loops vectorize (Note
// [Functor copies]): on runs long enough for the vector body and its tail, every dtype, against
// a loop in double; NaN propagates, infinities pass a missing bound, min > max gives max
// (PyTorch's min(max(x, min), max)), and integer types keep their extremes.
TEST(Elementwise, ClampAndLeakyReluMatchALoopOnLongRunsAndTheirEdges) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> values;
  for (int i = 0; i < 301; ++i) values.push_back(std::sin(i * 0.37) * 4);
  values[3] = nan, values[150] = inf, values[151] = -inf, values[299] = nan;  // body and tail
  auto clamp_of = [](double v, std::optional<double> lo, std::optional<double> hi) {
    if (v != v) return v;
    if (lo && v < *lo) v = *lo;
    if (hi && v > *hi) v = *hi;
    return v;
  };
  auto expect_equal = [](const Tensor& got, const std::vector<double>& want) {
    const auto g = got.to(kFloat64).to_vector<double>();
    ASSERT_EQ(g.size(), want.size());
    for (size_t i = 0; i < g.size(); ++i)
      EXPECT_TRUE(g[i] == want[i] || (g[i] != g[i] && want[i] != want[i])) << i << ": " << g[i] << " vs " << want[i];
  };
  const Tensor x64 = tensor(values);
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor x = x64.to(dt);
    const std::vector<double> xs = x.to(kFloat64).to_vector<double>();
    for (const auto& [lo, hi] : std::vector<std::pair<std::optional<double>, std::optional<double>>>{
             {-1.5, 2.0}, {std::nullopt, 0.5}, {-0.25, std::nullopt}, {2.0, -1.0}}) {
      std::vector<double> want;
      for (double v : xs) want.push_back(clamp_of(v, lo, hi));
      const std::optional<Scalar> min = lo ? std::optional<Scalar>(*lo) : std::nullopt;
      const std::optional<Scalar> max = hi ? std::optional<Scalar>(*hi) : std::nullopt;
      expect_equal(x.clamp(min, max), want);
    }
    // leaky_relu in M (float32 for 16-bit dtypes), rounded once to dt
    std::vector<double> computed;
    for (double v : xs)
      computed.push_back(dt == kFloat64
                             ? (v > 0 ? v : v * 0.2)
                             : static_cast<double>(v > 0 ? static_cast<float>(v) : static_cast<float>(v) * 0.2f));
    expect_equal(nn::functional::leaky_relu(x, 0.2), tensor(computed).to(dt).to(kFloat64).to_vector<double>());
  }
  // integers: a missing bound leaves the type's extremes alone
  const Tensor ints = tensor(std::vector<int8_t>{-128, -3, 0, 5, 127});
  EXPECT_EQ(ints.clamp(std::nullopt, 4).to_vector<int8_t>(), (std::vector<int8_t>{-128, -3, 0, 4, 4}));
  EXPECT_EQ(ints.clamp(-2).to_vector<int8_t>(), (std::vector<int8_t>{-2, -2, 0, 5, 127}));
}

// Note [Vector forms]: float32 exp, tanh, sigmoid, silu, elu and both gelus run 8 at a time
// through tensor/cpu/vec_math.h. Their error in units of the last place against the function in
// double, over [-20, 20] in steps of 1e-4, logarithmic sweeps of both signs from 1e-40 to 1e30,
// and the edges (signed zeros, subnormals, the overflow and underflow thresholds, infinities,
// NaN). gelu(tanh) is x sigmoid(2u) in double as in float (x/2 (1 + tanh(u)) cancels for x < 0);
// float's 2u carries a rounding of a few ulps, which e^(2u) turns into |2u| ulps: its unit is
// the spacing at |2u| gelu(x) (beyond |2u| = 1). gelu's error is counted in ulps of x/2 where x > -sqrt(2) (there, 1/2
// + erf(z)/2 cancels in its vector form). silu's x e^x for x < -87 multiplies an e^x already rounded to a subnormal:
// its unit there is the spacing at x FLT_MIN. Each value's result is also that of the value
// alone, in a strided view and in bfloat16's float32 chunks: the vector form serves every
// element, so a result does not depend on its place.
TEST(Elementwise, VectorFormsOfLibmOpsAreWithinAFewUlpsAndIndependentOfPlace) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float big = std::numeric_limits<float>::max(), tiny = std::numeric_limits<float>::denorm_min();
  std::vector<float> xs = {0.0f,   -0.0f,  tiny,   -tiny,   1e-38f,      -1e-38f,      inf,        -inf,      nan,
                           88.72f, 88.73f, 89.0f,  -87.33f, -88.8f,      -103.2f,      -103.97f,   -104.0f,   -110.0f,
                           9.0f,   -9.0f,  10.0f,  -10.0f,  1e30f,       -1e30f,       big,        -big,      0.5f,
                           -0.5f,  0.35f,  -0.35f, -1.0f,   -1.0000001f, -0.99999994f, 1.4142135f, 1.4142137f};
  for (int i = -200000; i <= 200000; ++i) xs.push_back(static_cast<float>(i) * 1e-4f);
  for (int i = -4000; i <= 3000; ++i) {
    const float v = static_cast<float>(std::pow(10.0, i / 100.0));
    xs.insert(xs.end(), {v, -v});
  }
  // Distance from `got` to the exact `want` in units of float's spacing at `scale` (subnormal
  // spacing below the normal range); 0 where both are the same infinity or both NaN.
  auto ulps = [](float got, double want, double scale) {
    if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got) ? 0.0 : 1e30;
    if (std::isinf(got) || std::isinf(static_cast<float>(want))) return got == static_cast<float>(want) ? 0.0 : 1e30;
    const float s = std::fabs(static_cast<float>(scale));
    const double spacing = s == std::numeric_limits<float>::max()
                               ? static_cast<double>(s) - std::nextafter(s, 0.0f)
                               : static_cast<double>(std::nextafter(s, std::numeric_limits<float>::infinity())) - s;
    return std::fabs(static_cast<double>(got) - want) / spacing;
  };
  struct Case {
    const char* name;
    Tensor (*op)(const Tensor&);
    double (*exact)(double);
    double max_ulps;
    double (*unit)(double x, double want);  // the value whose float spacing is the error's unit
  };
  auto result = [](double, double want) { return want; };
  const Case cases[] = {
      {"exp", [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); }, 2, result},
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](double x) { return std::tanh(x); }, 3, result},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, [](double x) { return 1 / (1 + std::exp(-x)); }, 3,
       result},
      {"silu", [](const Tensor& x) { return silu(x); }, [](double x) { return x / (1 + std::exp(-x)); }, 3,
       [](double x, double want) { return x < -87 ? x * std::numeric_limits<float>::min() : want; }},
      {"elu", [](const Tensor& x) { return elu(x, 1.5); }, [](double x) { return x > 0 ? x : 1.5 * std::expm1(x); }, 3,
       result},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, "tanh"); },
       [](double x) { return x / (1 + std::exp(-2 * 0.7978845608028654 * (x + 0.044715 * x * x * x))); }, 8,
       [](double x, double want) { return want * std::max(1.0, 1.6 * std::fabs(x + 0.044715 * x * x * x)); }},
      {"gelu", [](const Tensor& x) { return gelu(x); },
       [](double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }, 4,
       [](double x, double want) { return x < -1.42 ? want : 0.5 * x; }},
      {"log", [](const Tensor& x) { return log(x); }, [](double x) { return std::log(x); }, 2, result},
      {"log1p", [](const Tensor& x) { return log1p(x); }, [](double x) { return std::log1p(x); }, 2, result},
      {"softplus", [](const Tensor& x) { return softplus(x, 1.0, 20.0); },
       [](double x) { return x > 20 ? x : std::log1p(std::exp(x)); }, 2, result},
      {"softplus_beta", [](const Tensor& x) { return softplus(x, 0.5, 3.0); },
       [](double x) { return x * 0.5 > 3 ? x : std::log1p(std::exp(0.5 * x)) / 0.5; }, 2, result},
  };
  const Tensor x = tensor(xs);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::vector<float> got = c.op(x).to_vector<float>();
    double worst = 0;
    float worst_x = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      const double want = c.exact(xs[i]);
      const double e = ulps(got[i], want, c.unit(xs[i], want));
      if (e > worst) worst = e, worst_x = xs[i];
    }
    EXPECT_LE(worst, c.max_ulps) << "at x = " << worst_x;
    // the same values one at a time (each a run's only, partial group), every third of a strided
    // view, and through bfloat16's chunks (x rounded to bfloat16 first, the result rounded after)
    for (size_t i = 0; i < xs.size(); i += 997) {
      const float alone = c.op(tensor(std::vector<float>{xs[i]})).to_vector<float>()[0];
      EXPECT_TRUE(alone == got[i] || (std::isnan(alone) && std::isnan(got[i]))) << "x = " << xs[i];
    }
    const int64_t n = static_cast<int64_t>(xs.size()) / 3 * 3;
    const std::vector<float> strided = c.op(x.slice(0, 0, n).view({n / 3, 3}).t()[1]).to_vector<float>();
    for (int64_t i = 0; i < n / 3; ++i) {
      const float g = got[static_cast<size_t>(3 * i + 1)];
      ASSERT_TRUE(strided[static_cast<size_t>(i)] == g ||
                  (std::isnan(g) && std::isnan(strided[static_cast<size_t>(i)])))
          << "x = " << xs[static_cast<size_t>(3 * i + 1)];
    }
    const Tensor xb = x.to(kBFloat16);
    EXPECT_TRUE(testing::all_close(c.op(xb).to(kFloat32), c.op(xb.to(kFloat32)).to(kBFloat16).to(kFloat32), 0, 0));
  }
}

// gelu_backward (PyTorch's op, what GeluBackward calls) in float32 runs through vector forms too
// (tensor/cpu/vec_math.h): grad (Φ(x) + x φ(x)) and the tanh form's derivative, against double
// in units of the larger of the two terms (they cancel near x = -0.75), or of 1/2 for |x| < sqrt(2)
// where Φ = 1/2 + erf(z)/2 cancels near z = -1, and the tanh form's times |2u| (the forward's
// test says why); broadcast and strided
// grads give the same bits as contiguous ones; the errors name the op.
TEST(Elementwise, GeluBackwardIsWithinAFewUlpsAndIndependentOfPlace) {
  std::vector<float> xs = {0.0f, -0.0f, 1e-30f, -1e-30f, 1.4142f, -1.4143f, 15.6f, -15.6f, 30.0f, -30.0f};
  for (int i = -120000; i <= 120000; ++i) xs.push_back(static_cast<float>(i) * 1e-4f);
  const Tensor x = tensor(xs);
  const double k = 0.7978845608028654, c = 0.044715;
  struct Terms {
    double value, scale;
  };
  auto exact_none = [](double v) {
    const double cdf = 0.5 * std::erfc(-v / std::sqrt(2.0)), xpdf = v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
    return Terms{cdf + xpdf, std::max({std::fabs(cdf), std::fabs(xpdf), std::fabs(v) < 1.42 ? 0.5 : 0.0})};
  };
  auto exact_tanh = [&](double v) {  // (1 + tanh(u)) / 2 = s = sigmoid(2u), 1 - tanh(u)^2 = 4 s (1 - s)
    const double u = k * (v + c * v * v * v), s = 1 / (1 + std::exp(-2 * u)), rest = 1 / (1 + std::exp(2 * u));
    const double a = s, b = 2 * v * s * rest * k * (1 + 3 * c * v * v);
    // the result is s times a factor: where s is subnormal (2u < -87), the unit is at least that
    // factor times FLT_MIN
    return Terms{a + b, std::max(std::max(std::fabs(a), std::fabs(b)) * std::max(1.0, 2 * std::fabs(u)),
                                 std::fabs((a + b) / s) * std::numeric_limits<float>::min())};
  };
  for (const char* approximate : {"none", "tanh"}) {
    SCOPED_TRACE(approximate);
    const Tensor d = full({static_cast<int64_t>(xs.size())}, 1.0);
    const std::vector<float> got = native::gelu_backward(d, x, approximate).to_vector<float>();
    double worst = 0;
    float worst_x = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      const Terms want = std::string(approximate) == "none" ? exact_none(xs[i]) : exact_tanh(xs[i]);
      const float s = static_cast<float>(want.scale);
      const double spacing = static_cast<double>(std::nextafter(s, 2 * s + 1)) - s;
      const double e = std::fabs(got[i] - want.value) / spacing;
      if (e > worst) worst = e, worst_x = xs[i];
    }
    EXPECT_LE(worst, 4) << "at x = " << worst_x;
    // a broadcast grad of 2 (stride 0), and a strided x: the same values, doubled exactly
    const Tensor two = native::gelu_backward(full({}, 2.0), x, approximate);
    EXPECT_TRUE(testing::all_close(two, native::gelu_backward(d, x, approximate) * 2.0, 0, 0));
    const int64_t n = static_cast<int64_t>(xs.size()) / 3 * 3;
    const Tensor xt = x.slice(0, 0, n).view({n / 3, 3}).t();
    EXPECT_TRUE(testing::all_close(native::gelu_backward(full({n / 3}, 1.0), xt[1], approximate),
                                   native::gelu_backward(full({n / 3}, 1.0), xt[1].contiguous(), approximate), 0, 0));
    // float64 takes the functor: agreeing with float32 to float32's precision
    EXPECT_TRUE(testing::all_close(native::gelu_backward(d, x, approximate),
                                   native::gelu_backward(d.to(kFloat64), x.to(kFloat64), approximate).to(kFloat32),
                                   1e-6, 1e-6));
  }
  EXPECT_ERROR_CONTAINS(native::gelu_backward(x, x, "erf"), "gelu_backward: approximate must be 'none' or 'tanh'");
  EXPECT_ERROR_CONTAINS(native::gelu_backward(x, arange(3), "none"), "gelu_backward: expects floating point");
}

// where selects bits: in every element size (bool and int8, 16-bit floats, float32 and int32,
// float64 and int64), with each
// of a and b contiguous or broadcast (the four vectorized runs), a strided operand (the general
// loop), a mask broadcast over the batch (masked_fill's causal case), and -0 and NaN kept as they
// are; against a loop over the same values.
TEST(Elementwise, WhereSelectsBitsInEveryDtypeContiguousBroadcastOrStrided) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const int64_t n = 301;  // a run that is not a multiple of any vector width
  std::vector<float> av, bv;
  std::vector<bool> cv;
  for (int64_t i = 0; i < n; ++i) {
    av.push_back(i % 11 == 0 ? -0.0f : i % 13 == 0 ? nan : static_cast<float>(i) - 150.5f);
    bv.push_back(static_cast<float>(3 * i % 17) * 0.25f);
    cv.push_back((i * 7919) % 5 < 2);
  }
  Tensor c = zeros({n}, kBool);
  for (int64_t i = 0; i < n; ++i)
    if (cv[static_cast<size_t>(i)]) c.slice(0, i, i + 1).fill_(1);
  auto same_bits = [](const Tensor& got, const std::vector<double>& want) {
    const std::vector<double> g = got.to(kFloat64).to_vector<double>();
    if (g.size() != want.size()) return false;
    for (size_t i = 0; i < g.size(); ++i)
      if (std::memcmp(&g[i], &want[i], sizeof(double)) != 0 && !(std::isnan(g[i]) && std::isnan(want[i]))) return false;
    return true;
  };
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16, kInt32, kInt64, kInt8, kBool}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = tensor(av).to(dt), b = tensor(bv).to(dt);
    const std::vector<double> ar = a.to(kFloat64).to_vector<double>(), br = b.to(kFloat64).to_vector<double>();
    const double a0 = ar[5], b0 = br[7];
    std::vector<double> both, a_one, b_one, ones_only, strided;
    for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
      both.push_back(cv[i] ? ar[i] : br[i]);
      a_one.push_back(cv[i] ? a0 : br[i]);
      b_one.push_back(cv[i] ? ar[i] : b0);
      ones_only.push_back(cv[i] ? a0 : b0);
    }
    EXPECT_TRUE(same_bits(where(c, a, b), both));
    EXPECT_TRUE(same_bits(where(c, a[5], b), a_one));
    EXPECT_TRUE(same_bits(where(c, a, b[7]), b_one));
    EXPECT_TRUE(same_bits(where(c, a[5], b[7]), ones_only));
    // every other element of a longer a: the general loop
    const Tensor a2 = stack({a, a}, 1).view({2 * n}).slice(0, 0, 2 * n, 2);
    EXPECT_TRUE(same_bits(where(c, a2, b), both));
    // the mask broadcast over a batch of 3
    const std::vector<double> batch = where(c, a.expand({3, n}), b).to(kFloat64).to_vector<double>();
    EXPECT_TRUE(same_bits(where(c, a.expand({3, n}), b)[2], both));
    EXPECT_EQ(batch.size(), static_cast<size_t>(3 * n));
  }
  const std::vector<float> kept = where(c, tensor(av), tensor(bv)).to_vector<float>();
  EXPECT_TRUE(std::signbit(kept[11]) || !cv[11]);  // -0 stays -0 where chosen
}

// pow of a floating tensor to 2, 0.5, -0.5, -1 and 1 takes the cheaper op, as PyTorch's kernel
// does (3 and -2 too, in float32 and float64): the same bits as x x, sqrt, rsqrt, 1/x and a copy
// in every floating dtype, -0 and -inf
// included (sqrt(-0) = -0 and sqrt(-inf) = NaN, PyTorch's values, where std::pow gives +0 and
// inf); other exponents and integer tensors keep std::pow and the integer power.
TEST(Elementwise, PowTakesPyTorchsShortcutsForCommonExponents) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> xs = {-3.5f, -1.0f, -0.0f, 0.0f, 1e-30f, 0.25f, 2.0f, 7.0f, 1e30f, inf, -inf, nan};
  auto bits = [](const Tensor& t) { return t.to(kFloat64).to_vector<double>(); };
  auto same = [](const std::vector<double>& a, const std::vector<double>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!(std::isnan(a[i]) && std::isnan(b[i])) && std::memcmp(&a[i], &b[i], sizeof(double)) != 0) return false;
    return true;
  };
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor x = tensor(xs).to(dt);
    EXPECT_TRUE(same(bits(pow(x, 2.0)), bits(x * x)));
    EXPECT_TRUE(same(bits(pow(x, 2)), bits(x * x)));
    EXPECT_TRUE(same(bits(pow(x, 0.5)), bits(sqrt(x))));
    EXPECT_TRUE(same(bits(pow(x, -0.5)), bits(rsqrt(x))));
    EXPECT_TRUE(same(bits(pow(x, -1.0)), bits(reciprocal(x))));
    const Tensor one = pow(x, 1.0);
    EXPECT_TRUE(same(bits(one), bits(x)));
    EXPECT_NE(one.data_ptr(), x.data_ptr());
    EXPECT_EQ(pow(x, 2.0).dtype(), dt);
  }
  const std::vector<float> half = pow(tensor(xs), 0.5).to_vector<float>();
  EXPECT_TRUE(std::signbit(half[2]) && half[2] == 0.0f);  // -0
  EXPECT_TRUE(std::isnan(half[10]));                      // -inf
  // 3 and -2 in float32 and float64: (x x) x and 1 / (x x), as PyTorch; in 16 bits, and 2.5, std::pow's
  for (DType dt : {kFloat32, kFloat64}) {
    const Tensor x = tensor(xs).to(dt);
    EXPECT_TRUE(same(bits(pow(x, 3)), bits(x * x * x)));
    EXPECT_TRUE(same(bits(pow(x, -2.0)), bits(reciprocal(x * x))));
  }
  const Tensor xb = tensor(xs).to(kBFloat16);
  EXPECT_TRUE(same(bits(pow(xb, 3)), bits(pow(xb.to(kFloat32), 3).to(kBFloat16))));
  const std::vector<float> p25 = pow(tensor(xs), 2.5).to_vector<float>();
  for (size_t i = 0; i < xs.size(); ++i)
    EXPECT_TRUE(p25[i] == std::pow(xs[i], 2.5f) || (std::isnan(p25[i]) && std::isnan(std::pow(xs[i], 2.5f))));
  // integer tensors: the integer power, and to 0.5 the default float dtype
  EXPECT_EQ(pow(arange(5), 2).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 4, 9, 16}));
  EXPECT_EQ(pow(arange(5), 0.5).dtype(), kFloat32);
  EXPECT_ERROR_CONTAINS(pow(Tensor(), 2.0), "pow");
  EXPECT_ERROR_CONTAINS(pow(arange(3), -1), "pow: integers to negative integer powers are not allowed");
}

// leaky_relu_backward (what LeakyReluBackward calls; it was where, gt and mul): grad where x > 0,
// grad times the slope elsewhere, 0 and NaN included, as PyTorch; in every floating dtype, with a
// broadcast grad; and its errors.
TEST(Elementwise, LeakyReluBackwardMatchesALoop) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> xs = {-2.0f, -0.0f, 0.0f, 1e-30f, -1e-30f, 3.0f, nan}, ds;
  for (int i = 0; i < 300; ++i) xs.push_back(static_cast<float>(i % 17) - 8.5f);
  for (size_t i = 0; i < xs.size(); ++i) ds.push_back(static_cast<float>(i % 5) - 1.5f);
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor x = tensor(xs).to(dt), d = tensor(ds).to(dt);
    const std::vector<float> xr = x.to(kFloat32).to_vector<float>(), dr = d.to(kFloat32).to_vector<float>();
    std::vector<float> want(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) want[i] = xr[i] > 0 ? dr[i] : dr[i] * 0.25f;  // exact in every dtype
    const Tensor got = native::leaky_relu_backward(d, x, 0.25);
    EXPECT_EQ(got.dtype(), dt);
    EXPECT_EQ(got.to(kFloat32).to_vector<float>(), want);
    const std::vector<float> two =
        native::leaky_relu_backward(full({}, 2.0, dt), x, 0.25).to(kFloat32).to_vector<float>();
    for (size_t i = 0; i < xs.size(); ++i) EXPECT_EQ(two[i], xr[i] > 0 ? 2.0f : 0.5f) << "x = " << xr[i];
  }
  EXPECT_ERROR_CONTAINS(native::leaky_relu_backward(arange(3), arange(3), 0.1),
                        "leaky_relu_backward: expects floating point tensors");
  EXPECT_ERROR_CONTAINS(native::leaky_relu_backward(ones({2}), ones({3}), 0.1), "leaky_relu_backward");
}

// elu_backward (what EluBackward calls; it was where, gt, exp and two muls): grad where x > 0,
// grad alpha e^x elsewhere (0 included, as PyTorch), within 3 units of float's spacing at the
// result (where e^x is subnormal, the unit of FLT_MIN |d alpha|); every
// value the same alone, strided, broadcast and through the 16-bit chunks; and its errors.
TEST(Elementwise, EluBackwardIsWithinAFewUlpsAndIndependentOfPlace) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> xs = {0.0f, -0.0f, 1e-30f, -1e-30f, -87.5f, -103.0f, -104.0f, -200.0f, 88.0f, 89.0f, inf, -inf};
  for (int i = -110000; i <= 10000; ++i) xs.push_back(static_cast<float>(i) * 1e-3f);
  const int64_t n = static_cast<int64_t>(xs.size());
  std::vector<float> ds(xs.size());
  for (int64_t i = 0; i < n; ++i) ds[i] = static_cast<float>(i % 7) - 3.25f;
  const double alpha = 1.5;
  const Tensor x = tensor(xs), d = tensor(ds);
  const std::vector<float> got = native::elu_backward(d, x, alpha).to_vector<float>();
  double worst = 0;
  float worst_x = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = xs[i], want = v > 0 ? ds[i] : ds[i] * alpha * std::exp(v);
    // below x = -87, e^x is subnormal before it meets d alpha: its rounding is scaled by |d alpha|
    const double subnormal_scale = std::max(1.0, std::fabs(ds[i] * alpha));
    const float s = static_cast<float>(std::max(std::fabs(want), std::numeric_limits<float>::min() * subnormal_scale));
    const double e = std::fabs(got[i] - want) / (static_cast<double>(std::nextafter(s, inf)) - s);
    if (e > worst) worst = e, worst_x = xs[i];
  }
  EXPECT_LE(worst, 3) << "at x = " << worst_x;  // 2.4 measured: e^x's 0.9 and two roundings
  EXPECT_EQ(got[10], ds[10]);                   // x = inf
  EXPECT_EQ(got[11], 0.0f);                     // x = -inf: e^x = 0
  EXPECT_TRUE(std::isnan(native::elu_backward(tensor({1.0f}), tensor({nan}), alpha).item<float>()));
  EXPECT_TRUE(std::isnan(native::elu_backward(tensor({nan}), tensor({-1.0f}), alpha).item<float>()));
  // a broadcast grad of 2 (stride 0) doubles exactly; a strided x gives what its copy gives
  EXPECT_TRUE(testing::all_close(native::elu_backward(full({}, 2.0), x, alpha),
                                 native::elu_backward(full({n}, 1.0), x, alpha) * 2.0, 0, 0));
  const int64_t m = n / 3 * 3;
  const Tensor xt = x.slice(0, 0, m).view({m / 3, 3}).t();
  EXPECT_TRUE(testing::all_close(native::elu_backward(d.slice(0, 0, m / 3), xt[1], alpha),
                                 native::elu_backward(d.slice(0, 0, m / 3), xt[1].contiguous(), alpha), 0, 0));
  // 16-bit dtypes: the float32 result of the widened values, rounded once
  for (DType dt : {kBFloat16, kFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor xh = x.to(dt), dh = d.to(dt);
    const Tensor want = native::elu_backward(dh.to(kFloat32), xh.to(kFloat32), alpha).to(dt);
    EXPECT_EQ(native::elu_backward(dh, xh, alpha).to(kFloat32).to_vector<float>(),
              want.to(kFloat32).to_vector<float>());
  }
  // float64 takes the functor: agreeing with float32 to float32's precision
  EXPECT_TRUE(testing::all_close(native::elu_backward(d, x, alpha),
                                 native::elu_backward(d.to(kFloat64), x.to(kFloat64), alpha).to(kFloat32), 1e-6,
                                 1e-30));
  EXPECT_ERROR_CONTAINS(native::elu_backward(arange(3), arange(3), 1.0),
                        "elu_backward: expects floating point tensors");
  EXPECT_ERROR_CONTAINS(native::elu_backward(ones({2}), ones({3}), 1.0), "elu_backward");
}

TEST(Elementwise, HalfPrecisionRunsEqualFloatMathRounded) {
  manual_seed(12);
  auto bits = [](const Tensor& t) { return t.to(kFloat32).to_vector<float>(); };
  for (DType dt : {kBFloat16, kFloat16})
    for (int64_t n : {1, 7, 255, 256, 257, 1000}) {
      SCOPED_TRACE(detail::concat(dt, ", ", n, " elements"));
      const Tensor x = randn({n}).to(dt), y = randn({n}).to(dt), one = randn({1}).to(dt);
      const Tensor xf = x.to(kFloat32), yf = y.to(kFloat32), onef = one.to(kFloat32);
      auto same = [&](const Tensor& half, const Tensor& reference) {
        ASSERT_EQ(half.dtype(), dt);
        EXPECT_EQ(bits(half), bits(reference.to(dt)));
      };
      same(relu(x), relu(xf));
      same(exp(x), exp(xf));
      same(sigmoid(x), sigmoid(xf));
      same(leaky_relu(x, 0.1), leaky_relu(xf, 0.1));
      same(add(x, y, 0.5), add(xf, yf, 0.5));
      same(x * y, xf * yf);
      same(x / one, xf / onef);  // broadcast on the right
      same(one - x, onef - xf);  // and on the left
      same(maximum(x, y), maximum(xf, yf));
      same(native::relu_backward(y, x), native::relu_backward(yf, xf));
      if (n % 7 == 0) {  // strided: every other element of a [n/7, 7] transpose
        const Tensor xt = x.view({n / 7, 7}).t(), yt = y.view({n / 7, 7}).t();
        same(xt * yt, xf.view({n / 7, 7}).t() * yf.view({n / 7, 7}).t());
        same(exp(xt), exp(xf.view({n / 7, 7}).t()));
      }
    }
}

// A 16-bit softmax row (autocast's attention) is widened, computed as a float32 row and rounded
// once: the bits of the float32 softmax on the widened input, rounded; masked (-inf) entries too.
TEST(Softmax, HalfPrecisionRowsEqualFloatSoftmaxRounded) {
  manual_seed(13);
  for (DType dt : {kBFloat16, kFloat16})
    for (int64_t D : {1, 7, 8, 65, 128}) {
      SCOPED_TRACE(detail::concat(dt, ", rows of ", D));
      Tensor x = (randn({3, D}) * 4).to(dt);
      {
        NoGradGuard g;
        x.select(0, 1).narrow(0, 0, (D + 1) / 2).fill_(-std::numeric_limits<double>::infinity());
      }
      const Tensor xf = x.to(kFloat32);
      EXPECT_TRUE(all_close(x.softmax(1).to(kFloat32), xf.softmax(1).to(dt).to(kFloat32), 0, 0));
      EXPECT_TRUE(all_close(x.log_softmax(1).to(kFloat32), xf.log_softmax(1).to(dt).to(kFloat32), 0, 0));
      // Along dim 0 (rows strided): the scalar loop, within one rounding of it.
      EXPECT_TRUE(all_close(x.softmax(0).to(kFloat32), xf.softmax(0), 1e-2, 1e-3));
    }
}

// A uint8 max pool (quantized activations) writes no indices; its 2x2 stride-2 windows run
// eight per step, a row's last step moved back to end at the row's end and a step near the
// tensor's end done in scalars. The values equal a plain loop's on every row length 2 to 41,
// odd heights, one plane or many (a single short plane ends where the vector would read past it),
// and the indexed path's on the same data; other windows take the general loop without indices.
TEST(Pooling, Uint8MaxPoolWithoutIndicesMatchesALoop) {
  manual_seed(9);
  for (int64_t W = 2; W <= 41; ++W)
    for (Shape planes : {Shape{1, 1}, Shape{2, 3}})
      for (int64_t H : {2, 3, 6}) {
        const Tensor x = randint(0, 256, {planes[0], planes[1], H, W}).to(kUInt8);
        const std::vector<uint8_t> v = x.to_vector<uint8_t>();
        const Tensor y = max_pool2d(x, {2, 2});
        const int64_t Ho = H / 2, Wo = W / 2, n = planes[0] * planes[1];
        ASSERT_EQ(y.sizes(), (Shape{planes[0], planes[1], Ho, Wo}));
        const auto yv = y.to_vector<uint8_t>();
        for (int64_t pl = 0; pl < n; ++pl)
          for (int64_t oh = 0; oh < Ho; ++oh)
            for (int64_t ow = 0; ow < Wo; ++ow) {
              const uint8_t* r = v.data() + pl * H * W + 2 * oh * W + 2 * ow;
              const uint8_t want = std::max({r[0], r[1], r[W], r[W + 1]});
              ASSERT_EQ(yv[(pl * Ho + oh) * Wo + ow], want) << "W " << W << " H " << H << " plane " << pl;
            }
        EXPECT_EQ(std::get<0>(max_pool2d_with_indices(x, {2, 2})).to_vector<uint8_t>(), yv);
      }
  const Tensor x = randint(0, 256, {2, 2, 7, 9}).to(kUInt8);
  for (auto [k, s, pad] : {std::array<int64_t, 3>{3, 2, 1}, {2, 1, 0}, {3, 3, 0}})
    EXPECT_EQ(max_pool2d(x, {k, k}, Int2{s, s}, {pad, pad}).to_vector<uint8_t>(),
              std::get<0>(max_pool2d_with_indices(x, {k, k}, Int2{s, s}, {pad, pad})).to_vector<uint8_t>());
}

// Every op at sizes that take its parallel paths (a row split over threads, rows over threads,
// columns swept with one accumulator each) gives the same results on one thread and on two:
// integer, bool and index results exactly, floating results to 1e-5 (a float sum split over
// threads adds its partial sums in another order). A sum of one long bool row once counted 2.
TEST(Threads, OpsGiveTheSameResultsOnOneThreadAndOnTwo) {
  manual_seed(5);
  const Tensor big = randn({300001}), wide = randn({3, 200003}), tall = randn({200003, 3});
  const Tensor img = randn({4, 16, 40, 40}), w = randn({8, 16, 3, 3}), emb = randn({3, 5});
  const Tensor idx = randint(0, 3, {200003}), logits = randn({70000, 10}), target = randint(0, 10, {70000});
  using Results = std::vector<Tensor>;
  const std::vector<std::pair<std::string, std::function<Results()>>> cases = {
      {"sum",
       [&] {
         return Results{big.sum(),
                        wide.sum({1}),
                        tall.sum({0}),
                        wide.t().sum({1}),
                        big.to(kFloat16).sum(),
                        big.to(kBFloat16).sum({0}),
                        big.sum({}, false, kFloat64),
                        (big > 0).sum(),
                        (wide > 0).sum({1}),
                        (tall > 0).sum({0}),
                        (big * 100).to(kInt32).sum(),
                        (big * 100).to(kInt8).sum()};
       }},
      {"mean, var, std, norm",
       [&] {
         return Results{big.mean(),         wide.mean({1}),    tall.var({0}),
                        big.std(),          wide.norm(2, {1}), tall.norm(1, {0}),
                        big.norm(INFINITY), big.norm(3),       big.to(kFloat64).var()};
       }},
      {"prod",
       [&] {
         return Results{(big * 1e-3 + 1).prod(), (tall * 1e-3 + 1).prod({0}), wide.sign().to(kInt64).prod({1})};
       }},
      {"extremes",
       [&] {
         return Results{big.amax(),
                        big.amin(),
                        wide.amax({1}),
                        tall.amin({0}),
                        big.argmax(),
                        tall.argmin(0),
                        std::get<0>(wide.max(1)),
                        std::get<1>(wide.max(1)),
                        (big * 3).to(kInt32).argmax(),
                        (big > 0).argmax(),
                        big.to(kInt32).amax()};
       }},
      {"all, any",
       [&] {
         return Results{(big > 3).any(), (big > -5).all(), (wide > 4).any({1}), (tall > -4.5).all({0})};
       }},
      {"logsumexp, softmax",
       [&] {
         return Results{
             wide.logsumexp({1}), tall.logsumexp({0}),         wide.softmax(1), tall.softmax(0), big.log_softmax(0),
             img.softmax(1),      img.to(kBFloat16).softmax(3)};
       }},
      {"unary",
       [&] {
         return Results{big.exp(),          big.tanh(),      big.sigmoid(),          gelu(big),
                        big.abs().log(),    big.sin(),       big.to(kFloat16).exp(), big.to(kFloat64).tanh(),
                        big.abs().pow(2.5), big.clamp(-1, 1)};
       }},
      {"binary, where, copies",
       [&] {
         return Results{wide + wide.sum({0}, true),
                        tall * tall.amax({0}, true),
                        where(big > 0, big, -big),
                        wide.t().contiguous(),
                        img.permute({0, 2, 3, 1}).contiguous(),
                        big.to(kBFloat16),
                        (big > 0).to(kFloat16),
                        img.masked_fill(img > 1, 0.5)};
       }},
      {"convolution, pooling, normalization",
       [&] {
         return Results{conv2d(img, w, {}, {1, 1}, {1, 1}),
                        conv2d(img, w, {}, {2, 2}, {0, 0}),
                        max_pool2d(img, {2, 2}),
                        avg_pool2d(img, {2, 2}),
                        adaptive_avg_pool2d(img, {3, 3}),
                        std::get<0>(native_layer_norm(wide, {200003}, Tensor(), Tensor(), 1e-5)),
                        std::get<0>(native_group_norm(img, Tensor(), Tensor(), 4, 1e-5))};
       }},
      {"indexing",
       [&] {
         return Results{tall.index_select(0, idx), tall.gather(1, idx.unsqueeze(1)),
                        zeros({3, 3}).scatter_add(0, idx.unsqueeze(1).expand({200003, 3}), tall), embedding(emb, idx),
                        one_hot(idx, 3)};
       }},
      {"losses and gradients",
       [&] {
         const Tensor e = emb.detach().requires_grad_(), l = logits.detach().requires_grad_(),
                      x = img.detach().requires_grad_(), k = w.detach().requires_grad_(),
                      t = tall.detach().requires_grad_();
         const Tensor loss = embedding(e, idx).sum() + nn::functional::cross_entropy(l, target) +
                             conv2d(max_pool2d(x, {2, 2}), k, {}, {1, 1}, {1, 1}).square().sum() +
                             t.softmax(0).square().sum() + nn::functional::layer_norm(t, {3}).square().sum();
         loss.backward();
         return Results{loss.detach(), e.grad(), l.grad(), x.grad(), k.grad(), t.grad()};
       }},
  };
  for (const auto& [name, run] : cases) {
    set_num_threads(1);
    const Results one = run();
    set_num_threads(2);
    const Results two = run();
    for (size_t i = 0; i < one.size(); ++i) {
      SCOPED_TRACE(name + ", result " + std::to_string(i));
      ASSERT_EQ(one[i].dtype(), two[i].dtype());
      ASSERT_EQ(one[i].sizes(), two[i].sizes());
      if (!one[i].is_floating_point()) {
        EXPECT_TRUE(testing::all_close(one[i].to(kFloat64), two[i].to(kFloat64), 0, 0));
      } else {
        const Tensor a = one[i].to(kFloat64), b = two[i].to(kFloat64);
        EXPECT_LE((a - b).abs().max().item<double>(), 1e-5 * (1 + a.abs().max().item<double>()));
      }
    }
  }
}

}  // namespace
}  // namespace ember
