// Tensor core: views and strides, factories, dtype conversion, printing, random numbers.
#include <cmath>
#include <cstring>

#include <limits>

#include "helpers.h"

namespace ember {
namespace {

using testing::all_close;

TEST(Views, ShareStorageAndStrides) {
  Tensor a = arange(24, kFloat32).view({2, 3, 4});
  EXPECT_EQ(a.strides(), (Shape{12, 4, 1}));
  EXPECT_TRUE(a.is_contiguous());

  Tensor t = a.transpose(0, 2);
  EXPECT_EQ(t.sizes(), (Shape{4, 3, 2}));
  EXPECT_EQ(t.strides(), (Shape{1, 4, 12}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_TRUE(t.shares_storage(a));
  EXPECT_EQ(t[3][2][1].item<float>(), a[1][2][3].item<float>());

  Tensor p = a.permute({1, 2, 0});
  EXPECT_EQ(p.sizes(), (Shape{3, 4, 2}));
  EXPECT_EQ(p.strides(), (Shape{4, 1, 12}));

  Tensor s = a.slice(2, 1, 4, 2);  // a[:, :, 1:4:2]
  EXPECT_EQ(s.sizes(), (Shape{2, 3, 2}));
  EXPECT_EQ(s.strides(), (Shape{12, 4, 2}));
  EXPECT_EQ(s.storage_offset(), 1);
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23}));

  Tensor n = a.narrow(1, 1, 2);
  EXPECT_EQ(n.storage_offset(), 4);
  EXPECT_EQ(n.sizes(), (Shape{2, 2, 4}));
  EXPECT_EQ(a.slice(0, -1).sizes(), (Shape{1, 3, 4}));      // negative start counts from the end
  EXPECT_EQ(a.slice(1, 2, 100).sizes(), (Shape{2, 1, 4}));  // out-of-range end clamps

  Tensor sel = a.select(1, -1);
  EXPECT_EQ(sel.sizes(), (Shape{2, 4}));
  EXPECT_EQ(sel.storage_offset(), 8);

  // Writes through a view are seen by the base.
  a.select(0, 1).select(0, 0).fill_(-1);
  EXPECT_EQ(a[1][0][3].item<float>(), -1.0f);
}

TEST(Views, ExpandSqueezeUnsqueezeFlatten) {
  Tensor a = arange(3, kFloat32).view({3, 1});
  Tensor e = a.expand({2, 3, 4});
  EXPECT_EQ(e.strides(), (Shape{0, 1, 0}));
  EXPECT_EQ(e.contiguous().to_vector<float>()[5], 1.0f);
  EXPECT_EQ(a.expand({-1, 5}).sizes(), (Shape{3, 5}));

  Tensor u = a.unsqueeze(0);
  EXPECT_EQ(u.sizes(), (Shape{1, 3, 1}));
  EXPECT_EQ(u.squeeze().sizes(), (Shape{3}));
  EXPECT_EQ(u.squeeze(-1).sizes(), (Shape{1, 3}));
  EXPECT_EQ(u.squeeze(1).sizes(), (Shape{1, 3, 1}));  // not size 1: unchanged

  Tensor b = zeros({2, 3, 4, 5});
  EXPECT_EQ(b.flatten().sizes(), (Shape{120}));
  EXPECT_EQ(b.flatten(1, 2).sizes(), (Shape{2, 12, 5}));
  EXPECT_EQ(b.flatten(1).unflatten(1, {3, -1, 5}).sizes(), (Shape{2, 3, 4, 5}));
  EXPECT_EQ(scalar_tensor(2.0).flatten().sizes(), (Shape{1}));
  EXPECT_EQ(b.movedim(1, 3).sizes(), (Shape{2, 4, 5, 3}));
  EXPECT_EQ(b.movedim(-1, 0).sizes(), (Shape{5, 2, 3, 4}));
  // A 0-d tensor moves its only "dimension" onto itself (PyTorch accepts 0 and -1 there).
  Tensor s = scalar_tensor(7.0);
  EXPECT_EQ(s.movedim(0, 0).dim(), 0);
  EXPECT_EQ(s.movedim(-1, 0).item<double>(), 7.0);
  EXPECT_TRUE(s.movedim(0, -1).shares_storage(s));
  EXPECT_ERROR_CONTAINS(s.movedim(1, 0), "movedim: dimension out of range");
}

TEST(Views, ViewVersusReshape) {
  Tensor a = arange(12, kFloat32).view({3, 4});
  EXPECT_TRUE(a.view({2, -1}).shares_storage(a));
  EXPECT_EQ(a.view({2, -1}).sizes(), (Shape{2, 6}));
  // A transposed tensor cannot be viewed flat; reshape copies instead.
  Tensor t = a.t();
  EXPECT_ERROR_CONTAINS(t.view({12}), "view: size [12] is not compatible with input of size [4, 3]");
  Tensor r = t.reshape({12});
  EXPECT_FALSE(r.shares_storage(a));
  EXPECT_EQ(r.to_vector<float>()[1], 4.0f);
  // Splitting a dim of a transposed tensor is still a view.
  EXPECT_TRUE(t.view({2, 2, 3}).shares_storage(a));
  EXPECT_EQ(t.view({2, 2, 3}).strides(), (Shape{2, 1, 4}));
  // A slice keeps some view-ability.
  EXPECT_TRUE(a.slice(1, 0, 2).view({3, 2, 1}).shares_storage(a));
}

TEST(Views, AsStridedAndContiguous) {
  Tensor a = arange(10, kFloat32);
  Tensor w = a.as_strided({4, 3}, {2, 1});  // sliding windows
  EXPECT_EQ(w.contiguous().to_vector<float>(), (std::vector<float>{0, 1, 2, 2, 3, 4, 4, 5, 6, 6, 7, 8}));
  EXPECT_ERROR_CONTAINS(a.as_strided({4, 3}, {3, 1}), "reach element 11 but the storage holds only 10 elements");
  EXPECT_ERROR_CONTAINS(a.as_strided({2}, {-1}), "negative stride");
  Tensor c = w.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_TRUE(a.contiguous().is_same(a));  // already contiguous: the same tensor
  Tensor cl = a.clone();
  EXPECT_FALSE(cl.shares_storage(a));
}

TEST(Views, SplitChunkStackCat) {
  Tensor a = arange(10, kInt64);
  auto parts = a.split(4);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[2].to_vector<int64_t>(), (std::vector<int64_t>{8, 9}));
  EXPECT_TRUE(parts[1].shares_storage(a));
  auto chunks = a.chunk(3);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].numel(), 4);
  EXPECT_EQ(chunk(arange(6), 4).size(), 3u);  // PyTorch: ceil(6/4)=2 per chunk -> 3 chunks
  auto ws = split_with_sizes(a, {1, 9});
  EXPECT_EQ(ws[1].numel(), 9);
  EXPECT_TRUE(cat(parts).to_vector<int64_t>() == a.to_vector<int64_t>());
  EXPECT_EQ(cat({a, empty({0})}).numel(), 10);  // legacy empty 1-D tensors are skipped
}

TEST(Factories, Values) {
  EXPECT_EQ(zeros({2, 3}).sum().item<float>(), 0.0f);
  EXPECT_EQ(ones({2, 3}, kInt32).sum().item<int64_t>(), 6);
  EXPECT_EQ(full({2}, 7, kInt8).to_vector<int8_t>(), (std::vector<int8_t>{7, 7}));
  EXPECT_EQ(arange(5).dtype(), kInt64);
  EXPECT_EQ(arange(0.0, 1.0, 0.25).dtype(), kFloat32);
  EXPECT_EQ(arange(0.0, 1.0, 0.25).to_vector<float>(), (std::vector<float>{0, 0.25f, 0.5f, 0.75f}));
  EXPECT_EQ(arange(10, 0, -3).to_vector<int64_t>(), (std::vector<int64_t>{10, 7, 4, 1}));
  EXPECT_EQ(linspace(0, 1, 5, kFloat64).to_vector<double>(), (std::vector<double>{0, 0.25, 0.5, 0.75, 1}));
  EXPECT_EQ(linspace(2, 3, 1).to_vector<float>(), (std::vector<float>{2}));
  EXPECT_EQ(eye(2, 3).to_vector<float>(), (std::vector<float>{1, 0, 0, 0, 1, 0}));
  EXPECT_EQ(tensor({1.5f, 2.5f}).dtype(), kFloat32);
  EXPECT_EQ(tensor<int64_t>({1, 2, 3, 4}, Shape{2, 2}).sizes(), (Shape{2, 2}));
  EXPECT_EQ(tensor({true, false}).to_vector<uint8_t>(), (std::vector<uint8_t>{1, 0}));
  Tensor like = zeros_like(ones({3}, kFloat64));
  EXPECT_EQ(like.dtype(), kFloat64);
  EXPECT_EQ(full_like(like, 2).sum().item<double>(), 6.0);
}

TEST(Factories, FromBlob) {
  float data[6] = {1, 2, 3, 4, 5, 6};
  Tensor t = from_blob(data, {2, 3});
  EXPECT_EQ(t.data_ptr<float>(), data);  // no copy
  t.mul_(2);
  EXPECT_EQ(data[5], 12.0f);
  Tensor col = from_blob(data, {3}, {2}, nullptr, kFloat32);  // strided view of the blob
  EXPECT_EQ(col.to_vector<float>(), (std::vector<float>{2, 6, 10}));
  bool freed = false;
  {
    Tensor owned = from_blob(data, {6}, {1}, [&](void* p) { freed = p == data; });
  }
  EXPECT_TRUE(freed);
  EXPECT_ERROR_CONTAINS(from_blob(nullptr, {2}), "from_blob: data is a null pointer but shape [2] has 2 elements");
  EXPECT_ERROR_CONTAINS(from_blob(reinterpret_cast<char*>(data) + 1, {2}), "is not aligned");
  EXPECT_ERROR_CONTAINS(from_blob(data, {2, 3}, {3}, nullptr), "from_blob: sizes [2, 3] and strides [3] differ");
  EXPECT_ERROR_CONTAINS(from_blob(data, {-2}), "negative dimension -2");
  EXPECT_EQ(from_blob(nullptr, {0, 5}).numel(), 0);
}

// A floating Scalar converted to an integer: Scalar(double) cast every value to int64 for its
// integer field (undefined for the -inf of every attention mask, caught once the asan preset
// checked float-to-integer overflow), and to<T>() wrapped through int64. Both now saturate, NaN
// to 0, as tensor conversions do.
TEST(DTypes, FloatingScalarsSaturateWhenConvertedToIntegers) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(Scalar(-inf).to_int64(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(Scalar(1e300).to<int64_t>(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(Scalar(std::numeric_limits<double>::quiet_NaN()).to<int32_t>(), 0);
  EXPECT_EQ(Scalar(300.0).to<int8_t>(), 127);
  EXPECT_EQ(Scalar(-2.7).to<int64_t>(), -2);  // in range: truncation, as before
  EXPECT_EQ(full({2}, 300.0, kFloat32).to(kInt8).to_vector<int8_t>(), (std::vector<int8_t>{127, 127}));
}

TEST(DTypes, PromotionTable) {
  EXPECT_EQ(promote_types(kUInt8, kInt8), kInt32);  // PyTorch: int16, which ember does not have
  EXPECT_EQ(promote_types(kBool, kInt8), kInt8);
  EXPECT_EQ(promote_types(kInt32, kInt64), kInt64);
  EXPECT_EQ(promote_types(kInt64, kFloat16), kFloat16);
  EXPECT_EQ(promote_types(kFloat16, kBFloat16), kFloat32);
  EXPECT_EQ(promote_types(kFloat32, kFloat64), kFloat64);
  EXPECT_EQ(promote_types(kUInt8, kInt64), kInt64);
  // Scalars and 0-d tensors only lift the category.
  EXPECT_EQ(result_type(ones({2}, kInt32), Scalar(5)), kInt32);
  EXPECT_EQ(result_type(ones({2}, kInt32), Scalar(5.0)), kFloat32);
  EXPECT_EQ(result_type(ones({2}, kFloat16), Scalar(5.0)), kFloat16);
  EXPECT_EQ(result_type(ones({2}, kBool), Scalar(1)), kInt64);
  EXPECT_EQ(result_type(ones({2}, kFloat32), scalar_tensor(1.0, kFloat64)), kFloat32);
  EXPECT_EQ(result_type(ones({2}, kInt32), scalar_tensor(1.0, kFloat64)), kFloat64);
  EXPECT_EQ(result_type(scalar_tensor(1, kInt32), scalar_tensor(1, kInt64)), kInt64);
}

TEST(DTypes, HalfRoundTripsEveryBitPattern) {
  // Every finite half converts to float and back to the same bits; NaNs stay NaN.
  for (uint32_t b = 0; b < 65536; ++b) {
    const Half h = Half::from_bits(static_cast<uint16_t>(b));
    const float f = h;
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(static_cast<float>(Half(f))));
      continue;
    }
    ASSERT_EQ(Half(f).bits, b) << "bits " << b;
  }
}

TEST(DTypes, HalfRoundsToNearestEven) {
  EXPECT_EQ(Half(1.0f + std::ldexp(1.0f, -11)).bits, 0x3C00);      // tie -> even (down)
  EXPECT_EQ(Half(1.0f + 3 * std::ldexp(1.0f, -11)).bits, 0x3C02);  // tie -> even (up)
  EXPECT_EQ(Half(65519.0f).bits, 0x7BFF);                          // largest finite
  EXPECT_EQ(Half(65520.0f).bits, 0x7C00);                          // rounds to inf
  EXPECT_EQ(Half(std::ldexp(1.0f, -25)).bits, 0x0000);             // half the smallest subnormal: tie -> 0
  EXPECT_EQ(Half(std::ldexp(1.5f, -25)).bits, 0x0001);             // rounds up to the smallest subnormal
  EXPECT_EQ(Half(-0.0f).bits, 0x8000);
  EXPECT_EQ(BFloat16(1.0f + std::ldexp(1.0f, -8)).bits, 0x3F80);  // tie -> even
  EXPECT_EQ(BFloat16(1.0f + 3 * std::ldexp(1.0f, -8)).bits, 0x3F82);
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(NAN))));
  EXPECT_TRUE(std::isinf(static_cast<float>(BFloat16(3.4e38f))));
}

// Casts of contiguous runs between float32 and the 16-bit types are vectorized (vec_half.h);
// they must give the scalar conversions' bits (NaN: a NaN; payloads may differ).
TEST(DTypes, VectorizedHalfCastsEqualTheScalarConversionsBitForBit) {
  std::vector<float> floats;
  for (uint32_t b = 0; b < 65536; ++b) {  // every 16-bit value of both types, their midpoints (ties) and neighbours
    const auto h = static_cast<uint16_t>(b), next = static_cast<uint16_t>(b + 1);
    for (float f : {static_cast<float>(Half::from_bits(h)), static_cast<float>(BFloat16::from_bits(h))}) {
      floats.push_back(f);
      floats.push_back(std::nextafter(f, INFINITY));
      floats.push_back(std::nextafter(f, -INFINITY));
    }
    floats.push_back(0.5f * (static_cast<float>(Half::from_bits(h)) + static_cast<float>(Half::from_bits(next))));
    floats.push_back(detail::bits_float((b << 16) | 0x8000u));  // a bfloat16 tie
  }
  const Tensor f32 = tensor(floats, Shape{static_cast<int64_t>(floats.size())});
  for (DType dtype : {kFloat16, kBFloat16}) {
    SCOPED_TRACE(dtype);
    const bool bf = dtype == kBFloat16;
    const Tensor narrowed = f32.to(dtype);
    const auto* bits = static_cast<const uint16_t*>(narrowed.data_ptr());
    for (size_t i = 0; i < floats.size(); ++i) {
      const uint16_t expected = bf ? BFloat16(floats[i]).bits : Half(floats[i]).bits;
      const float back =
          bf ? static_cast<float>(BFloat16::from_bits(bits[i])) : static_cast<float>(Half::from_bits(bits[i]));
      if (std::isnan(floats[i]))
        ASSERT_TRUE(std::isnan(back)) << i;
      else
        ASSERT_EQ(bits[i], expected) << "float " << floats[i];
    }
    Tensor all = empty({65536}, TensorOptions().dtype(dtype));
    auto* raw = static_cast<uint16_t*>(all.data_ptr());
    for (uint32_t b = 0; b < 65536; ++b) raw[b] = static_cast<uint16_t>(b);
    const Tensor widened = all.to(kFloat32);
    const float* w = widened.data_ptr<float>();
    for (uint32_t b = 0; b < 65536; ++b) {
      const auto h = static_cast<uint16_t>(b);
      const float expected = bf ? static_cast<float>(BFloat16::from_bits(h)) : static_cast<float>(Half::from_bits(h));
      if (std::isnan(expected))
        ASSERT_TRUE(std::isnan(w[b])) << b;
      else
        ASSERT_EQ(detail::float_bits(w[b]), detail::float_bits(expected)) << "bits " << b;
    }
  }
}

TEST(DTypes, ConversionsBetweenAllTypes) {
  const std::vector<DType> all = {kBool, kUInt8, kInt8, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64};
  const Tensor src = tensor<double>({0, 1, 2, 100});
  for (DType a : all)
    for (DType b : all) {
      const Tensor x = src.to(a).to(b);
      ASSERT_EQ(x.dtype(), b);
      const auto v = x.to(kFloat64).to_vector<double>();
      const double expect_last = a == kBool || b == kBool ? 1.0 : 100.0;
      EXPECT_EQ(v[0], 0.0) << a << "->" << b;
      EXPECT_EQ(v[3], expect_last) << a << "->" << b;
    }
  // Float to integer saturates and maps NaN to 0 (C++ would leave it undefined).
  EXPECT_EQ(tensor({NAN, 1e20f, -1e20f}).to(kInt32).to_vector<int32_t>(),
            (std::vector<int32_t>{0, 2147483647, -2147483647 - 1}));
}

TEST(Printing, LikePyTorch) {
  EXPECT_EQ(to_string(tensor({1.0f, -2.5f, 3.0f})), "tensor([ 1.0000, -2.5000,  3.0000])");
  EXPECT_EQ(to_string(tensor({1.0f, 2.0f})), "tensor([1., 2.])");
  EXPECT_EQ(to_string(arange(4).view({2, 2})), "tensor([[0, 1],\n        [2, 3]])");
  EXPECT_EQ(to_string(tensor({1.0, 2.5})), "tensor([1.0000, 2.5000], dtype=float64)");
  EXPECT_EQ(to_string(tensor({true, false})), "tensor([ True, False])");
  EXPECT_EQ(to_string(scalar_tensor(3.5)), "tensor(3.5000)");
  EXPECT_EQ(to_string(tensor({1e-5f, 1.0f})), "tensor([1.0000e-05, 1.0000e+00])");
  EXPECT_EQ(to_string(zeros({0, 3})), "tensor([], size=(0, 3))");
  EXPECT_EQ(to_string(tensor({NAN, INFINITY, 1.5f})), "tensor([   nan,    inf, 1.5000])");
  EXPECT_EQ(to_string(ones({2}, kInt32)), "tensor([1, 1], dtype=int32)");
  // int64 prints exactly: 2^53 + 1 and the range's ends are not doubles (INT64_MAX's double
  // overflowed the conversion back, UBSan).
  EXPECT_EQ(to_string(tensor<int64_t>(
                {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(), (int64_t{1} << 53) + 1})),
            "tensor([ 9223372036854775807, -9223372036854775808,     9007199254740993])");
  const std::string big = to_string(arange(2000));
  EXPECT_NE(big.find("0,    1,    2,  ..., 1997, 1998, 1999"), std::string::npos) << big;
  EXPECT_EQ(to_string(Tensor()), "[ undefined Tensor ]");
}

TEST(Random, PhiloxKnownAnswer) {
  // Random123's known-answer vector for philox4x32-10 with zero counter and key.
  const auto r = philox4x32(0, 0);
  EXPECT_EQ(r[0], 0x6627e8d5u);
  EXPECT_EQ(r[1], 0xe169c58du);
  EXPECT_EQ(r[2], 0xbc57ac4cu);
  EXPECT_EQ(r[3], 0x9b00dbd8u);
}

// Every CPU draw is the scalar philox4x32 of its block, value for value: the CPU back end makes
// eight blocks at once with AVX2, the CUDA back end one per thread with the scalar function, and
// both must give these numbers (float32 normals, whose log and sincos are vectorized too, to
// within their rounding). Sizes cover a partial group of eight, a partial block and several
// threads' ranges; the offset makes the block counter's low word wrap past 2^32 mid-draw.
TEST(Random, EveryDrawIsThePhiloxWordsOfItsBlock) {
  const uint64_t seed = 0x9E3779B97F4A7C15ull;
  double worst_normal = 0;
  for (const uint64_t start : {uint64_t{0}, (uint64_t{1} << 32) - 13}) {
    for (const int64_t n : {1, 7, 33, 259, 100003}) {
      SCOPED_TRACE("n = " + std::to_string(n) + ", first block " + std::to_string(start));
      default_generator().set_state(seed, start);
      const auto f32 = rand({n}).to_vector<float>();
      const auto f64 = rand({n}, kFloat64).to_vector<double>();
      const auto bf16 = rand({n}, kBFloat16).to(kFloat32).to_vector<float>();
      const auto g32 = randn({n}).to_vector<float>();
      const auto g64 = randn({n}, kFloat64).to_vector<double>();
      const auto ints = randint(-1000000007, 1000000007, {n}).to_vector<int64_t>();
      const auto block = [&](uint64_t b) { return philox4x32(seed, b); };
      // The blocks each draw reserved, in order: 4 floats or 2 doubles/int64 per block.
      const uint64_t b32 = start, b64 = b32 + (n + 3) / 4, bbf = b64 + (n + 1) / 2, bg32 = bbf + (n + 3) / 4,
                     bg64 = bg32 + (n + 3) / 4, bint = bg64 + (n + 1) / 2;
      EXPECT_EQ(default_generator().offset(), bint + (n + 1) / 2);
      int64_t mismatches = 0;
      for (int64_t i = 0; i < n; ++i) {
        const auto r32 = block(b32 + i / 4), r64 = block(b64 + i / 2), rg32 = block(bg32 + i / 4),
                   rg64 = block(bg64 + i / 2), rint = block(bint + i / 2);
        const int64_t lane4 = i % 4, lane2 = i % 2, pair = lane4 / 2 * 2;
        mismatches += f32[i] != uniform_float(r32[lane4]);
        mismatches += f64[i] != uniform_double(r64[2 * lane2], r64[2 * lane2 + 1]);
        mismatches += bf16[i] != static_cast<float>(BFloat16(uniform_float(block(bbf + i / 4)[lane4])));
        // float32 normals: Box-Muller in float (8 pairs at once with AVX2: vec_math.h's log and
        // sincos), against the same formula in double from the same uniforms and float angle.
        const float u1 = 1.0f - uniform_float(rg32[pair]),
                    th = static_cast<float>(6.283185307179586) * uniform_float(rg32[pair + 1]);
        const double rad = std::sqrt(-2.0 * std::log(static_cast<double>(u1)));
        const double want =
            rad * (lane4 % 2 == 0 ? std::cos(static_cast<double>(th)) : std::sin(static_cast<double>(th)));
        worst_normal = std::max(worst_normal, std::abs(g32[i] - want) / (std::ldexp(1.0, -23) * std::max(rad, 0.5)));
        const double v1 = 1.0 - uniform_double(rg64[0], rg64[1]), v2 = uniform_double(rg64[2], rg64[3]);
        const double drad = std::sqrt(-2.0 * std::log(v1)), dth = 6.283185307179586 * v2;
        mismatches += g64[i] != drad * (lane2 == 0 ? std::cos(dth) : std::sin(dth));
        const uint64_t bits = (uint64_t{rint[2 * lane2]} << 32) | rint[2 * lane2 + 1];
        mismatches += ints[i] != -1000000007 + static_cast<int64_t>(bits % 2000000014u);
      }
      EXPECT_EQ(mismatches, 0);
    }
  }
  // In units of float's epsilon times the radius (at least 1/2): rad's and the angle's roundings.
  EXPECT_LT(worst_normal, 3.0);
  std::printf("float32 normals: largest error %.2f epsilon x radius\n", worst_normal);
}

// bernoulli_(p) is 1 exactly where the element's uniform_() draw would be below p, in every dtype
// (the CPU compares integers, m < ceil(p 2^24)); dropout's mask is bernoulli_(1 - p) scaled by
// 1 / (1 - p), made in one pass.
TEST(Random, BernoulliIsOneWhereTheUniformDrawIsBelowP) {
  const uint64_t seed = 1234567;
  const int64_t n = 1003;
  for (const DType dtype : {kFloat32, kFloat64, kBFloat16, kFloat16, kInt64, kUInt8, kBool}) {
    for (const double p : {0.0, 0.3, 0.5, 1.0 - 1e-9, 1.0}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + ", p = " + std::to_string(p));
      default_generator().set_state(seed, 40);
      Tensor t = zeros({n}, dtype);
      t.bernoulli_(p);
      const auto got = t.to(kFloat64).to_vector<double>();
      int64_t mismatches = 0, ones = 0;
      for (int64_t i = 0; i < n; ++i) {
        const auto r2 = philox4x32(seed, 40 + i / 2), r4 = philox4x32(seed, 40 + i / 4);
        const double u =
            dtype == kFloat64 ? uniform_double(r2[2 * (i % 2)], r2[2 * (i % 2) + 1]) : uniform_float(r4[i % 4]);
        const bool below = u < p;
        mismatches += got[i] != (below ? 1.0 : 0.0);
        ones += got[i] == 1.0;
      }
      EXPECT_EQ(mismatches, 0);
      if (p == 0.0) EXPECT_EQ(ones, 0);
      if (p == 1.0) EXPECT_EQ(ones, n);
      if (p == 0.3) EXPECT_NEAR(static_cast<double>(ones) / n, 0.3, 0.05);
    }
  }
  // A strided target gets the values of a contiguous one, through a copy.
  default_generator().set_state(seed, 0);
  const Tensor plain = empty({6, 5}).bernoulli_(0.5);
  default_generator().set_state(seed, 0);
  Tensor base = zeros({5, 6});
  Tensor strided = base.t();
  strided.bernoulli_(0.5);
  EXPECT_TRUE(all_close(strided, plain, 0, 0));

  // dropout_mask: bernoulli_(1 - p) * (1 / (1 - p)), the product rounded once to the dtype.
  for (const DType dtype : {kFloat32, kBFloat16, kFloat64}) {
    default_generator().set_state(seed, 7);
    const Tensor mask = dropout_mask({3, 333}, 0.1, dtype);
    default_generator().set_state(seed, 7);
    const Tensor expected = zeros({3, 333}, dtype).bernoulli_(0.9) * (1.0 / 0.9);
    EXPECT_EQ(mask.dtype(), dtype);
    EXPECT_TRUE(all_close(mask, expected, 0, 0)) << dtype_name(dtype);
    EXPECT_FALSE(mask.requires_grad());
  }
  EXPECT_TRUE(dropout_mask({2}, 0.5, TensorOptions(kFloat32).requires_grad(true)).requires_grad());

  EXPECT_ERROR_CONTAINS(zeros({2}).bernoulli_(1.5), "bernoulli_: expects p to be in [0, 1], but got p=1.5");
  EXPECT_ERROR_CONTAINS(zeros({2}).bernoulli_(-0.25), "bernoulli_: expects p to be in [0, 1], but got p=-0.25");
  EXPECT_ERROR_CONTAINS(zeros({2}).bernoulli_(std::nan("")), "bernoulli_: expects p to be in [0, 1]");
  Tensor undefined;
  EXPECT_ERROR_CONTAINS(undefined.bernoulli_(0.5), "bernoulli_");
  EXPECT_ERROR_CONTAINS(dropout_mask({2}, 1.0), "dropout_mask: expects p to be in [0, 1), but got p=1");
  EXPECT_ERROR_CONTAINS(dropout_mask({2}, 0.5, kInt32), "dropout_mask: expects a floating point dtype, got int32");
}

TEST(Random, SeededAndReproducible) {
  manual_seed(42);
  const Tensor a = randn({1000});
  const Tensor u = rand({1000}, kFloat64);
  manual_seed(42);
  EXPECT_TRUE(all_close(randn({1000}), a, 0, 0));
  EXPECT_TRUE(all_close(rand({1000}, kFloat64), u, 0, 0));
  EXPECT_FALSE(all_close(randn({1000}), a, 0, 0));  // the stream moves on

  // Moments of 200k draws: mean 0, std 1 for randn; mean 1/2 for rand.
  manual_seed(7);
  const Tensor n = randn({200000}, kFloat64);
  EXPECT_NEAR(n.mean().item<double>(), 0.0, 0.01);
  EXPECT_NEAR(n.std().item<double>(), 1.0, 0.01);
  const Tensor n32 = randn({200000});
  EXPECT_NEAR(n32.mean().item<double>(), 0.0, 0.01);
  EXPECT_NEAR(n32.std().item<double>(), 1.0, 0.01);
  const Tensor r = rand({200000});
  EXPECT_NEAR(r.mean().item<double>(), 0.5, 0.01);
  EXPECT_GE(r.min().item<float>(), 0.0f);
  EXPECT_LT(r.max().item<float>(), 1.0f);

  const Tensor ri = randint(-3, 4, {10000});
  EXPECT_EQ(ri.dtype(), kInt64);
  EXPECT_EQ(ri.min().item<int64_t>(), -3);
  EXPECT_EQ(ri.max().item<int64_t>(), 3);

  const Tensor p = randperm(100);
  auto v = p.to_vector<int64_t>();
  std::sort(v.begin(), v.end());
  for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(v[i], i);
  EXPECT_NE(p.to_vector<int64_t>(), v);  // shuffled (1 chance in 100! to fail)

  // A strided target is filled through a contiguous draw.
  Tensor base = zeros({4, 4});
  base.t().uniform_(2, 3);
  EXPECT_GE(base.min().item<float>(), 2.0f);
}

}  // namespace
}  // namespace ember
