// Bad input never crashes, checked at random: every op is called many times with arguments
// drawn to be awkward (empty and one-sized dimensions, transposed and expanded views, every
// dtype, dims and sizes near and far out of range, huge counts). Each call must either return
// or throw ember::Error; any other exception fails here, and a crash or a sanitizer report fails
// the run (the ASan+UBSan preset runs this file too). The draws are seeded: a failure names
// the op and the draw that reproduces it.
#include <map>
#include <sstream>

#include "ember/nn/prune.h"
#include "random_arguments.h"

namespace ember {
namespace {

using testing::Call;
using testing::Calls;
using testing::Draw;

Calls calls() {
  Calls c;
  auto op = [&](const char* name, Call f) { c.emplace_back(name, std::move(f)); };
  // views
  op("view", [](Draw& d) { (void)d.tensor().view(d.shape()); });
  op("reshape", [](Draw& d) { (void)d.tensor().reshape(d.dims()); });
  op("transpose", [](Draw& d) { (void)d.tensor().transpose(d.integer(), d.integer()); });
  op("permute", [](Draw& d) { (void)d.tensor().permute(d.dims()); });
  op("movedim", [](Draw& d) { (void)d.tensor().movedim(d.integer(), d.integer()); });
  op("slice", [](Draw& d) {
    auto bound = [&]() { return d.coin() ? std::optional<int64_t>(d.integer()) : std::nullopt; };
    (void)d.tensor().slice(d.integer(), bound(), bound(), d.integer());
  });
  op("narrow", [](Draw& d) { (void)d.tensor().narrow(d.integer(), d.integer(), d.integer()); });
  op("select", [](Draw& d) { (void)d.tensor().select(d.integer(), d.integer()); });
  op("expand", [](Draw& d) { (void)d.tensor().expand(d.dims()); });
  op("squeeze", [](Draw& d) { (void)d.tensor().squeeze(d.integer()); });
  op("unsqueeze", [](Draw& d) { (void)d.tensor().unsqueeze(d.integer()); });
  op("unflatten", [](Draw& d) { (void)d.tensor().unflatten(d.integer(), d.dims()); });
  op("flatten", [](Draw& d) { (void)d.tensor().flatten(d.integer(), d.integer()); });
  op("to", [](Draw& d) { (void)d.tensor().to(d.dtype()); });
  op("split", [](Draw& d) { (void)d.tensor().split(d.integer(), d.integer()); });
  op("chunk", [](Draw& d) { (void)d.tensor().chunk(d.integer(), d.integer()); });
  op("split_with_sizes", [](Draw& d) { (void)split_with_sizes(d.tensor(), d.dims(), d.integer()); });
  op("tril", [](Draw& d) { (void)d.tensor().tril(d.integer()); });
  op("triu", [](Draw& d) { (void)d.tensor().triu(d.integer()); });
  // elementwise
  op("add", [](Draw& d) { (void)add(d.tensor(), d.tensor(), d.real()); });
  op("sub_scalar", [](Draw& d) { (void)(d.tensor() - d.real()); });
  op("mul", [](Draw& d) { (void)(d.tensor() * d.tensor()); });
  op("div", [](Draw& d) { (void)(d.tensor() / d.tensor()); });
  op("pow", [](Draw& d) { (void)d.tensor().pow(d.tensor()); });
  op("pow_scalar", [](Draw& d) { (void)d.tensor().pow(d.coin() ? Scalar(d.integer()) : Scalar(d.real())); });
  op("maximum", [](Draw& d) { (void)maximum(d.tensor(), d.tensor()); });
  op("eq", [](Draw& d) { (void)d.tensor().eq(d.tensor()); });
  op("where", [](Draw& d) { (void)where(d.tensor(), d.tensor(), d.tensor()); });
  op("masked_fill", [](Draw& d) { (void)d.tensor().masked_fill(d.tensor(), d.real()); });
  op("clamp", [](Draw& d) { (void)clamp(d.tensor(), d.real(), d.real()); });
  op("unary", [](Draw& d) {
    const Tensor t = d.tensor();
    (void)t.abs(), (void)t.exp(), (void)t.log(), (void)t.sqrt(), (void)t.sigmoid(), (void)t.relu(), (void)t.neg();
  });
  op("unary_rest", [](Draw& d) {
    const Tensor t = d.tensor();
    (void)t.sign(), (void)t.log1p(), (void)t.rsqrt(), (void)t.sin(), (void)t.cos(), (void)t.tanh(), (void)t.silu();
    (void)t.reciprocal(), (void)t.erf(), (void)t.square(), (void)t.softplus(d.real(), d.real()), (void)t.clone();
    (void)t.contiguous(), (void)t.t();
  });
  op("leaky_relu", [](Draw& d) { (void)leaky_relu(d.tensor(), d.real()); });
  op("sub", [](Draw& d) { (void)sub(d.tensor(), d.tensor(), d.coin() ? Scalar(d.integer()) : Scalar(d.real())); });
  op("sub_", [](Draw& d) {
    Tensor t = d.tensor();
    (void)t.sub_(d.tensor(), d.coin() ? Scalar(d.integer()) : Scalar(d.real()));
  });
  op("div_", [](Draw& d) {
    Tensor t = d.tensor();
    (void)t.div_(d.tensor());
  });
  op("pow_scalar_base", [](Draw& d) { (void)pow(d.coin() ? Scalar(d.integer()) : Scalar(d.real()), d.tensor()); });
  op("where_scalar", [](Draw& d) {
    const Tensor c = d.tensor();
    if (d.coin()) {
      (void)where(c, d.tensor(), d.real());
    } else {
      (void)where(c, d.integer(), d.tensor());
    }
  });
  op("comparisons_rest", [](Draw& d) {
    const Tensor a = d.tensor(), b = d.tensor();
    (void)a.gt(b), (void)a.ge(d.real()), (void)a.le(d.integer()), (void)a.eq(d.real()), (void)logical_or(a, b);
    (void)a.any(d.dims(), d.coin());
  });
  op("add_", [](Draw& d) {
    Tensor t = d.tensor();
    (void)t.add_(d.tensor(), d.real());
  });
  op("mul_", [](Draw& d) {
    Tensor t = d.tensor();
    (void)t.mul_(d.tensor());
  });
  op("copy_", [](Draw& d) {
    Tensor t = d.tensor();
    (void)t.copy_(d.tensor());
  });
  op("fill_", [](Draw& d) {
    Tensor t = d.tensor();
    (void)t.fill_(d.real());
  });
  // reductions
  op("sum", [](Draw& d) { (void)d.tensor().sum(d.dims(), d.coin()); });
  op("mean", [](Draw& d) { (void)d.tensor().mean(d.dims(), d.coin()); });
  op("prod", [](Draw& d) { (void)d.tensor().prod(d.dims(), d.coin()); });
  op("amax", [](Draw& d) { (void)d.tensor().amax(d.dims(), d.coin()); });
  op("max_dim", [](Draw& d) { (void)d.tensor().max(d.integer(), d.coin()); });
  op("argmax", [](Draw& d) { (void)d.tensor().argmax(d.coin() ? std::optional<int64_t>(d.integer()) : std::nullopt); });
  op("var", [](Draw& d) { (void)d.tensor().var(d.dims(), d.coin(), d.coin()); });
  op("norm", [](Draw& d) { (void)d.tensor().norm(d.real(), d.dims(), d.coin()); });
  op("logsumexp", [](Draw& d) { (void)d.tensor().logsumexp(d.dims(), d.coin()); });
  op("all", [](Draw& d) { (void)d.tensor().all(d.dims(), d.coin()); });
  // matrices
  op("matmul", [](Draw& d) { (void)matmul(d.tensor(), d.tensor()); });
  op("mm", [](Draw& d) { (void)mm(d.tensor(d.shape(2), kFloat32), d.tensor(d.shape(2), d.dtype())); });
  op("bmm", [](Draw& d) { (void)bmm(d.tensor(d.shape(3), kFloat32), d.tensor(d.shape(3), kFloat32)); });
  op("addmm", [](Draw& d) { (void)addmm(d.floating(), d.floating(), d.floating(), d.real(), d.real()); });
  op("linear", [](Draw& d) { (void)linear(d.floating(), d.floating(), d.coin() ? d.floating() : Tensor()); });
  // convolution and pooling
  op("conv2d", [](Draw& d) {
    (void)conv2d(d.floating(), d.floating(), d.coin() ? d.floating() : Tensor(), d.pair(), d.pair(), d.pair(),
                 d.integer());
  });
  op("conv2d_shaped", [](Draw& d) {  // shapes that often agree, parameters that often do not
    const int64_t c = 1 + d.below(2);
    (void)conv2d(d.tensor({1 + d.below(2), c, 1 + d.below(4), 1 + d.below(4)}, kFloat32),
                 d.tensor({1 + d.below(2), c, 1 + d.below(3), 1 + d.below(3)}, d.coin() ? kFloat32 : kBFloat16),
                 Tensor(), d.coin() ? d.positive_pair() : d.pair(), d.pair(), d.positive_pair(), 1);
  });
  op("conv_transpose2d", [](Draw& d) {
    (void)conv_transpose2d(d.floating(), d.floating(), Tensor(), d.pair(), d.pair(), d.pair(), d.integer(), d.pair());
  });
  op("max_pool2d", [](Draw& d) {
    (void)max_pool2d(d.floating(), d.pair(), d.coin() ? std::optional<Int2>(d.pair()) : std::nullopt, d.pair(),
                     d.pair(), d.coin());
  });
  op("max_pool2d_shaped", [](Draw& d) {
    (void)max_pool2d(d.tensor({1, 1 + d.below(2), 1 + d.below(5), 1 + d.below(5)}, d.coin() ? kFloat32 : kFloat16),
                     d.positive_pair(), std::optional<Int2>(d.positive_pair()), {d.below(2), d.below(2)},
                     d.positive_pair(), d.coin());
  });
  op("max_pool2d_with_indices", [](Draw& d) {  // mostly valid arguments, then perhaps one absurd
    auto maybe = [&](Int2 valid) { return d.below(4) != 0 ? valid : d.pair(); };
    (void)max_pool2d_with_indices(
        d.tensor(d.near({1, 1 + d.below(2), 1 + d.below(5), 1 + d.below(5)}), d.coin() ? kFloat32 : d.dtype()),
        maybe(d.positive_pair()), std::optional<Int2>(maybe(d.positive_pair())), maybe({d.below(2), d.below(2)}),
        maybe(d.positive_pair()), d.coin());
  });
  op("avg_pool2d", [](Draw& d) {
    (void)avg_pool2d(d.floating(), d.pair(), d.coin() ? std::optional<Int2>(d.pair()) : std::nullopt, d.pair(),
                     d.coin(), d.coin());
  });
  op("adaptive_avg_pool2d", [](Draw& d) { (void)adaptive_avg_pool2d(d.floating(), d.pair()); });
  // softmax and losses
  op("softmax", [](Draw& d) { (void)d.tensor().softmax(d.integer()); });
  op("log_softmax", [](Draw& d) { (void)d.tensor().log_softmax(d.integer()); });
  op("cross_entropy", [](Draw& d) {
    const Tensor x = d.floating();
    (void)nn::functional::cross_entropy(x, d.index(x.defined() && x.dim() > 1 ? x.size(1) : 3));
  });
  op("nll_loss", [](Draw& d) { (void)nn::functional::nll_loss(d.floating(), d.index(3)); });
  op("mse_loss", [](Draw& d) { (void)nn::functional::mse_loss(d.floating(), d.floating()); });
  op("binary_cross_entropy", [](Draw& d) { (void)binary_cross_entropy(d.floating().sigmoid(), d.floating()); });
  // indexing
  op("index_select", [](Draw& d) { (void)d.tensor().index_select(d.integer(), d.index(3)); });
  op("gather", [](Draw& d) { (void)d.tensor().gather(d.integer(), d.index(3)); });
  op("scatter_add", [](Draw& d) { (void)d.tensor().scatter_add(d.integer(), d.index(3), d.tensor()); });
  op("scatter", [](Draw& d) {
    Tensor x = d.tensor();
    (void)x.scatter(d.integer(), d.index(3), d.tensor());
    NoGradGuard no_grad;
    (void)x.scatter_(d.integer(), d.index(3), d.tensor());
  });
  op("nonzero", [](Draw& d) { (void)nonzero(d.tensor()); });
  op("masked_select", [](Draw& d) { (void)d.tensor().masked_select(d.tensor()); });
  // x[...] and x[...] = v (Note [Tensor indexing]): up to four entries of every kind
  auto index_list = [](Draw& d) {
    std::vector<indexing::TensorIndex> list;
    for (int64_t i = 0, n = d.below(5); i < n; ++i) switch (d.below(7)) {
        case 0:
          list.emplace_back(indexing::None);
          break;
        case 1:
          list.emplace_back(indexing::Ellipsis);
          break;
        case 2:
          list.emplace_back(d.integer());
          break;
        case 3:
          list.emplace_back(d.coin());
          break;
        case 4: {
          auto bound = [&]() { return d.coin() ? std::optional<int64_t>(d.integer()) : std::nullopt; };
          list.emplace_back(indexing::Slice(bound(), bound(), d.coin() ? std::optional<int64_t>(d.integer()) : 1));
          break;
        }
        case 5:
          list.emplace_back(d.index(3));
          break;
        default:
          list.emplace_back(d.tensor(d.shape(2), kBool));
      }
    return list;
  };
  op("index", [index_list](Draw& d) { (void)d.tensor().index(index_list(d)); });
  op("index_put_", [index_list](Draw& d) {
    Tensor x = d.tensor();
    if (d.coin())
      (void)x.index_put_(index_list(d), d.tensor(), d.coin());
    else
      (void)x.index_put_(index_list(d), Scalar(d.real()));
  });
  op("repeat", [](Draw& d) { (void)d.tensor().repeat(d.dims()); });
  op("einsum", [](Draw& d) {
    static const char* equations[] = {"ij,jk->ik", "i,i->", "bij,bjk", "ijk->kj", "i,j->ij", "ij->", "a,b,c->cab"};
    const std::string eq = equations[d.below(7)];
    std::map<char, int64_t> size;  // operands mostly of the shapes the letters give, some a dim off
    TensorList operands(1);
    Shape shape;
    for (size_t i = 0; i <= eq.find("->"); ++i) {
      if (i == eq.size() || eq[i] == ',' || eq[i] == '-') {
        operands.back() = d.coin() ? d.tensor(d.near(shape), kFloat32) : d.tensor();
        if (i < eq.size() && eq[i] == ',') operands.emplace_back();
        shape.clear();
        if (i == eq.size() || eq[i] == '-') break;
        continue;
      }
      shape.push_back(size.emplace(eq[i], d.below(4)).first->second);
    }
    (void)einsum(eq, operands);
  });
  op("equal", [](Draw& d) { (void)d.tensor().equal(d.tensor()); });
  // scans and sorting
  op("cumsum",
     [](Draw& d) { (void)d.tensor().cumsum(d.integer(), d.coin() ? std::optional<DType>(d.dtype()) : std::nullopt); });
  op("sort", [](Draw& d) { (void)d.tensor().sort(d.integer(), d.coin()); });
  op("cumprod_median", [](Draw& d) {
    const Tensor t = d.tensor();
    const int64_t dim = d.coin() ? d.below(3) : d.integer();
    switch (d.below(4)) {
      case 0:
        (void)t.cumprod(dim, d.coin() ? std::optional<DType>(d.dtype()) : std::nullopt);
        break;
      case 1:
        (void)t.median(dim, d.coin()), (void)t.nanmedian(dim, d.coin());
        break;
      case 2:
        (void)t.median(), (void)t.nanmedian();
        break;
      default:
        (void)t.erfinv();
    }
  });
  op("linalg", [](Draw& d) {
    // float batches, square ones often, often enough to reach the kernels; anything else otherwise
    auto matrix = [&d]() {
      if (d.coin()) return d.tensor();
      const int64_t n = d.below(5), cols = d.coin() ? n : d.below(5);
      Tensor m = randn({d.below(3), n, cols}, d.coin() ? kFloat64 : kFloat32);
      return d.coin() ? m.transpose(-2, -1) : m;
    };
    const Tensor a = matrix(), b = d.coin() ? matrix() : d.tensor();
    auto tolerance = [&d]() { return d.coin() ? std::optional<double>(d.real()) : std::nullopt; };
    switch (d.below(14)) {
      case 0:
        (void)linalg::solve(a, b, d.coin());
        break;
      case 1:
        (void)linalg::inv(a), (void)linalg::det(a), (void)linalg::slogdet(a), (void)logdet(a);
        break;
      case 2:
        (void)linalg::cholesky_ex(a, d.coin(), d.coin());
        break;
      case 3:
        (void)linalg::solve_triangular(a, b, d.coin(), d.coin(), d.coin());
        break;
      case 4:
        (void)linalg::eigh(a, d.coin() ? "L" : (d.coin() ? "U" : "X"));
        break;
      case 5:
        (void)linalg::matrix_power(a, d.integer() % 5);
        break;
      case 6:
        (void)linalg::vector_norm(a, d.real(), d.coin() ? std::optional<Shape>(d.dims()) : std::nullopt, d.coin());
        break;
      case 7:
        (void)linalg::matrix_norm(a, d.real(), d.dims(), d.coin());
        break;
      case 8:
        (void)linalg::svd(a, d.coin()), (void)linalg::svdvals(a);
        break;
      case 9:
        (void)linalg::pinv(a, tolerance(), tolerance(), d.coin());
        break;
      case 10:
        (void)linalg::matrix_rank(a, tolerance(), tolerance(), d.coin());
        break;
      case 11:
        (void)linalg::lstsq(a, b, tolerance(),
                            d.coin() ? std::optional<std::string>() : (d.coin() ? "gelsd" : (d.coin() ? "gels" : "x")));
        break;
      case 12:
        (void)linalg::qr(a, d.coin() ? "reduced" : (d.coin() ? "complete" : (d.coin() ? "r" : "x")));
        break;
      default:
        (void)linalg::norm(a, d.coin() ? "fro" : "nuc", d.coin() ? std::optional<Shape>(d.dims()) : std::nullopt);
    }
  });
  op("argsort", [](Draw& d) { (void)d.tensor().argsort(d.integer(), d.coin()); });
  op("topk", [](Draw& d) { (void)d.tensor().topk(d.integer(), d.integer(), d.coin()); });
  // LibTorch's composites (autograd/composites.cpp) and the rounding ops
  op("rounding", [](Draw& d) {
    const Tensor t = d.tensor();
    (void)t.expm1(), (void)t.floor(), (void)t.ceil(), (void)t.round(), (void)t.trunc();
  });
  op("flip", [](Draw& d) { (void)d.tensor().flip(d.dims()); });
  op("roll", [](Draw& d) {
    Shape shifts(static_cast<size_t>(d.below(3)));
    for (auto& s : shifts) s = d.integer();
    (void)d.tensor().roll(shifts, d.coin() ? Shape{} : d.dims());
  });
  op("repeat_interleave", [](Draw& d) {
    const std::optional<int64_t> dim = d.coin() ? std::optional<int64_t>(d.integer()) : std::nullopt;
    if (d.coin())
      (void)d.tensor().repeat_interleave(d.integer(), dim);
    else
      (void)d.tensor().repeat_interleave(d.coin() ? d.index(4) : d.tensor(), dim);
  });
  op("dot", [](Draw& d) {  // same-shaped operands half of the time, so that some reach the GEMV
    const Tensor a = d.tensor();
    (void)dot(a, d.coin() ? d.tensor(a.sizes(), a.dtype()) : d.tensor());
  });
  op("outer", [](Draw& d) { (void)outer(d.tensor(), d.tensor()); });
  op("isclose", [](Draw& d) {
    const Tensor a = d.tensor();
    (void)isclose(a, d.coin() ? d.tensor(a.sizes(), a.dtype()) : d.tensor(), d.real(), d.real(), d.coin());
    (void)isnan(d.tensor()), (void)isinf(d.tensor()), (void)isfinite(d.tensor());
  });
  op("logspace", [](Draw& d) {
    (void)logspace(d.real(), d.real(), d.integer(), d.real(), d.coin() ? TensorOptions(d.dtype()) : TensorOptions());
  });
  op("huber_loss", [](Draw& d) {
    const Tensor x = d.floating();
    (void)nn::functional::huber_loss(x, d.coin() ? d.tensor(x.sizes(), x.dtype()) : d.floating(),
                                     d.coin() ? "mean" : "sum", d.coin() ? 1.0 : d.real());
  });
  op("kl_div", [](Draw& d) {
    const Tensor x = d.floating();
    (void)nn::functional::kl_div(x, d.coin() ? d.tensor(x.sizes(), x.dtype()) : d.floating(),
                                 d.coin() ? "batchmean" : "none", d.coin());
  });
  op("vector_to_parameters", [](Draw& d) {
    const std::vector<Tensor> params{d.floating(), d.floating()};
    (void)nn::utils::parameters_to_vector(params);
    nn::utils::vector_to_parameters(d.tensor(), params);
  });
  op("unbind_lerp", [](Draw& d) {
    (void)unbind(d.tensor(), d.integer());
    const Tensor a = d.tensor();
    (void)lerp(a, d.coin() ? d.tensor(a.sizes(), a.dtype()) : d.tensor(),
               d.coin() ? Scalar(d.real()) : Scalar(d.integer()));
    (void)lerp(d.tensor(), d.tensor(), d.tensor());
  });
  op("normalize_cosine", [](Draw& d) {
    const Tensor a = d.floating();
    (void)nn::functional::normalize(a,
                                    nn::functional::NormalizeFuncOptions().p(d.real()).dim(d.integer()).eps(d.real()));
    (void)nn::functional::cosine_similarity(a, d.coin() ? d.tensor(a.sizes(), a.dtype()) : d.floating(),
                                            nn::functional::CosineSimilarityFuncOptions().dim(d.integer()));
  });
  // the fourth sweep of LibTorch calls
  op("trigonometric_logarithmic", [](Draw& d) {
    const Tensor t = d.tensor();
    (void)t.tan(), (void)t.asin(), (void)t.acos(), (void)t.atan(), (void)t.sinh(), (void)t.cosh();
    (void)t.asinh(), (void)t.acosh(), (void)t.atanh(), (void)t.log2(), (void)t.log10(), (void)t.exp2();
  });
  op("atan2_remainder_fmod", [](Draw& d) {
    const Tensor a = d.tensor();
    const Tensor b = d.coin() ? d.tensor(a.sizes(), a.dtype()) : d.tensor();
    (void)atan2(a, b), (void)remainder(a, b), (void)fmod(a, b);
    const Scalar s = d.coin() ? Scalar(d.real()) : Scalar(d.integer());
    (void)remainder(a, s), (void)fmod(a, s);
  });
  op("diagonal", [](Draw& d) { (void)diagonal(d.tensor(), d.integer(), d.integer(), d.integer()); });
  op("diag_trace", [](Draw& d) {
    const Tensor t = d.coin() ? d.tensor(d.near({3}), d.dtype()) : d.tensor();
    (void)diag(t, d.integer());
    (void)trace(d.coin() ? d.tensor(d.near({3, 2}), d.dtype()) : t);
  });
  op("var_mean", [](Draw& d) {
    const Tensor t = d.tensor();
    (void)var_mean(t, d.dims(), d.coin(), d.coin()), (void)std_mean(t, d.dims(), d.coin(), d.coin());
  });
  op("conv1d", [](Draw& d) {
    const Tensor x = d.coin() ? d.tensor(d.near({2, 2, 5}), kFloat32) : d.tensor();
    const Tensor w = d.coin() ? d.tensor(d.near({2, 2, 3}), kFloat32) : d.tensor();
    // Mostly valid sizes (>= 1; a padding >= 0), sometimes awkward ones: never arithmetic on a
    // drawn integer here, which may be INT64_MIN.
    auto small = [&] { return d.coin() ? 1 + d.below(2) : d.integer(); };
    auto padding = [&] { return d.coin() ? d.below(2) : d.integer(); };
    (void)conv1d(x, w, d.coin() ? Tensor() : d.tensor(), small(), padding(), small(), small());
  });
  op("pool1d", [](Draw& d) {
    const Tensor x = d.coin() ? d.tensor(d.near({2, 2, 5}), kFloat32) : d.tensor();
    auto small = [&] { return d.coin() ? 1 + d.below(2) : d.integer(); };
    auto padding = [&] { return d.coin() ? d.below(2) : d.integer(); };
    const std::optional<int64_t> stride = d.coin() ? std::optional<int64_t>(small()) : std::nullopt;
    if (d.coin())
      (void)max_pool1d(x, small(), stride, padding(), small(), d.coin());
    else
      (void)avg_pool1d(x, small(), stride, padding(), d.coin(), d.coin());
  });
  op("pad", [](Draw& d) {
    static const char* modes[] = {"constant", "reflect", "replicate", "circular", "wrap"};
    Shape amounts(static_cast<size_t>(d.below(7)));
    for (auto& a : amounts) a = d.integer();
    (void)nn::functional::pad(d.tensor(),
                              nn::functional::PadFuncOptions(amounts).mode(modes[d.below(5)]).value(d.real()));
  });
  op("prelu", [](Draw& d) {
    const Tensor x = d.tensor();
    const int64_t channels = x.defined() && x.dim() > 1 ? x.size(1) : 1;
    (void)nn::functional::prelu(x, d.coin() ? d.tensor(d.near({channels}), x.dtype()) : d.tensor());
  });
  op("instance_norm", [](Draw& d) {
    const Tensor x = d.coin() ? d.tensor(d.near({2, 2, 3}), kFloat32) : d.tensor();
    const int64_t channels = x.defined() && x.dim() > 1 ? x.size(1) : 1;
    auto per_channel = [&] { return d.coin() ? d.tensor(d.near({channels}), kFloat32) : d.tensor(); };
    const Tensor mean = d.coin() ? per_channel() : Tensor();
    const Tensor var = d.coin() && mean.defined() ? per_channel() : d.coin() ? Tensor() : d.tensor();
    (void)nn::functional::instance_norm(x, mean, var, d.coin() ? Tensor() : per_channel(),
                                        d.coin() ? Tensor() : per_channel(), d.coin(), d.real(), d.real());
  });
  op("embedding", [](Draw& d) { (void)embedding(d.floating(), d.index(3)); });
  // the recurrent layers: small ones, awkward inputs and states
  op("lstm", [](Draw& d) {
    const int64_t in = 1 + d.below(3), hidden = 1 + d.below(3), layers = 1 + d.below(2);
    nn::LSTM m(nn::LSTMOptions(in, hidden).num_layers(layers).batch_first(d.coin()).bidirectional(d.coin()));
    std::optional<std::tuple<Tensor, Tensor>> hx;  // (mostly) of the right shape, or anything
    auto state = [&] { return d.coin() ? d.tensor(d.near({layers * 2, 3, hidden}), kFloat32) : d.tensor(); };
    if (d.coin()) hx = std::make_tuple(state(), state());
    (void)m->forward(d.coin() ? d.tensor(d.near({2, 3, in}), kFloat32) : d.tensor(), hx);
  });
  op("gru", [](Draw& d) {
    const int64_t in = 1 + d.below(3);
    nn::GRU m(nn::GRUOptions(in, 1 + d.below(3)).bidirectional(d.coin()));
    (void)m->forward(d.coin() ? d.tensor(d.near({4, in}), kFloat32) : d.tensor(), d.coin() ? d.tensor() : Tensor());
  });
  op("one_hot", [](Draw& d) { (void)one_hot(d.index(3), d.integer()); });
  op("cat", [](Draw& d) { (void)cat({d.tensor(), d.tensor()}, d.integer()); });
  op("stack", [](Draw& d) { (void)stack({d.tensor(), d.tensor()}, d.integer()); });
  // the tensor's own accessors
  op("print", [](Draw& d) {
    std::ostringstream out;
    Tensor t = d.tensor();
    if (d.coin() && t.defined() && is_floating(t.dtype())) t = t * d.real();  // inf, NaN, huge and tiny values
    out << t;
  });
  op("item_and_data", [](Draw& d) {
    const Tensor t = d.tensor();
    switch (d.below(4)) {
      case 0:
        (void)t.item<double>();
        break;
      case 1:
        (void)t.to_vector<float>();
        break;
      case 2:
        (void)t.data_ptr<int64_t>();
        break;
      default:
        (void)tensor<float>(std::vector<float>(static_cast<size_t>(d.below(5)), 1.0f), d.shape());
    }
  });
  op("state_dict", [](Draw& d) {
    nn::Linear a(1 + d.below(3), 2), b(1 + d.below(3), 2);
    StateDict state = a->state_dict();
    if (d.coin()) state.insert("extra", d.tensor());
    b->load_state_dict(state, d.coin());
  });
  // the data layer: loaders over small datasets with awkward options, a distributed sampler
  op("data_loader", [](Draw& d) {
    const int64_t n = d.below(5);
    auto dataset = std::make_shared<data::TensorDataset>(d.tensor(d.near({n, 2}), kFloat32),
                                                         d.coin() ? d.tensor(d.near({n}), kInt64) : Tensor());
    data::DataLoaderOptions o;
    o.batch_size(d.integer()).shuffle(d.coin()).drop_last(d.coin()).num_workers(static_cast<int>(d.below(3)));
    if (d.coin()) o.prefetch_factor(static_cast<int>(d.integer()));
    data::DataLoader loader(
        dataset, o,
        d.coin() ? std::make_shared<data::DistributedSampler>(n, d.integer(), d.integer(), d.coin()) : nullptr);
    for (const auto& batch : loader) (void)batch;
    loader.set_epoch(d.integer());
    loader.load_state_dict({d.integer(), d.integer()});
    for (const auto& batch : loader) (void)batch;
  });
  // the module API: names, containers and hooks
  op("module_api", [](Draw& d) {
    static const char* names[] = {"", "a", "a.b", "weight", "0", " "};
    nn::Sequential seq(nn::Linear(2, 2), nn::ReLU());
    switch (d.below(5)) {
      case 0:
        seq->register_parameter(names[d.below(6)], d.tensor(), d.coin());
        break;
      case 1:
        seq->register_buffer(names[d.below(6)], d.tensor(), d.coin());
        break;
      case 2:
        (void)(*seq)[static_cast<size_t>(d.integer())];
        break;
      case 3:
        seq->push_back(nn::Linear(2, 2));
        seq->register_module(names[d.below(6)], nn::ReLU().ptr());
        break;
      default:
        (void)seq->named_parameters().find(names[d.below(6)]);
    }
    (void)seq->forward(d.floating());
  });
  // factories
  op("full", [](Draw& d) { (void)full(d.dims(), d.real(), d.dtype()); });
  op("arange", [](Draw& d) { (void)arange(d.real(), d.real(), d.real()); });
  op("linspace", [](Draw& d) { (void)linspace(d.real(), d.real(), d.integer()); });
  op("randint", [](Draw& d) { (void)randint(d.integer(), d.integer(), d.shape()); });
  op("randn", [](Draw& d) { (void)randn(d.dims()); });
  op("bernoulli_", [](Draw& d) {
    Tensor t = d.tensor();
    if (t.defined()) (void)t.bernoulli_(d.real());
  });
  op("dropout_mask", [](Draw& d) { (void)dropout_mask(d.dims(), d.real(), d.dtype()); });
  // the same ops with shapes that mostly agree, to reach their kernels
  op("matrices_shaped", [](Draw& d) {
    const int64_t m = d.below(4), k = d.below(4), n = d.below(4), b = 1 + d.below(2);
    const DType dt = d.coin() ? kFloat32 : (d.coin() ? kBFloat16 : kFloat16);
    switch (d.below(4)) {
      case 0:
        (void)mm(d.tensor(d.near({m, k}), dt), d.tensor(d.near({k, n}), dt));
        break;
      case 1:
        (void)bmm(d.tensor(d.near({b, m, k}), dt), d.tensor(d.near({b, k, n}), dt));
        break;
      case 2:
        (void)addmm(d.tensor(d.near({n}), dt), d.tensor(d.near({m, k}), dt), d.tensor(d.near({k, n}), dt), d.real(),
                    d.real());
        break;
      default:
        (void)matmul(d.tensor(d.near({b, m, k}), dt), d.tensor(d.near({k}), dt));
    }
  });
  op("attention_shaped", [](Draw& d) {
    const int64_t b = d.below(3), l = d.below(4), s = d.below(4), e = 1 + d.below(3);
    (void)nn::functional::scaled_dot_product_attention(
        d.tensor(d.near({b, l, e}), kFloat32), d.tensor(d.near({b, s, e}), kFloat32),
        d.tensor(d.near({b, s, e}), kFloat32),
        nn::functional::AttentionOptions()
            .is_causal(d.coin())
            .attn_mask(d.coin() ? d.tensor(d.near({l, s}), d.coin() ? kBool : kFloat32) : Tensor())
            .dropout_p(d.coin() ? 0.0 : d.real()));
  });
  op("losses_shaped", [](Draw& d) {
    const int64_t n = d.below(4), c = 1 + d.below(4);
    const Tensor target = randint(-1, c + 1, d.near({n})).to(d.below(8) == 0 ? kInt32 : kInt64);
    nn::functional::CrossEntropyOptions o;
    o.ignore_index(d.coin() ? -1 : -100).reduction(d.coin() ? "mean" : (d.coin() ? "sum" : "none"));
    if (d.coin()) o.weight(d.tensor(d.near({c}), kFloat32));
    if (d.coin())
      (void)nn::functional::cross_entropy(d.tensor(d.near({n, c}), kFloat32), target, o);
    else
      (void)nn::functional::nll_loss(d.tensor(d.near({n, c}), kFloat32).log_softmax(1), target, o);
  });
  op("indexing_shaped", [](Draw& d) {
    const Shape shape = {1 + d.below(3), 1 + d.below(3)};
    const int64_t dim = d.below(2);
    const Tensor index = randint(-1, shape[static_cast<size_t>(dim)] + 1, d.near({d.below(3), d.below(3)}));
    if (d.coin())
      (void)d.tensor(shape, kFloat32).gather(dim, index);
    else
      (void)d.tensor(shape, kFloat32).scatter_add(dim, index, d.tensor(d.near({3, 3}), kFloat32));
  });
  op("pooling_shaped", [](Draw& d) {
    const Tensor x = d.tensor(d.near({1 + d.below(2), 1 + d.below(2), d.below(6), d.below(6)}), kFloat32);
    const Int2 kernel = d.positive_pair(), stride = d.positive_pair(), padding = {d.below(2), d.below(2)};
    if (d.coin())
      (void)avg_pool2d(x, kernel, stride, padding, d.coin(), d.coin());
    else
      (void)conv_transpose2d(x, d.tensor(d.near({x.size(1), 1 + d.below(2), kernel[0], kernel[1]}), kFloat32), Tensor(),
                             stride, padding, {d.below(2), d.below(2)}, 1, d.positive_pair());
  });
  // nn.functional
  op("layer_norm", [](Draw& d) {
    (void)nn::functional::layer_norm(d.floating(), d.shape(2), d.coin() ? d.floating() : Tensor(),
                                     d.coin() ? d.floating() : Tensor(), d.real());
  });
  op("layer_norm_shaped", [](Draw& d) {  // normalized_shape mostly x's trailing dims, and backward
    const Tensor x = d.floating();
    const int64_t k = d.below(x.dim() + 2);
    const Shape normalized = k <= x.dim() && d.below(4) > 0 ? Shape(x.sizes().end() - k, x.sizes().end()) : d.shape(2);
    auto affine = [&] {
      return d.coin() ? d.tensor(d.near(normalized), d.below(3) == 0 ? d.dtype() : x.dtype()) : Tensor();
    };
    const Tensor w = affine(), b = affine();
    if (d.coin()) {
      const auto [out, mean, rstd] = native_layer_norm(x, normalized, w, b, d.real());
      (void)native::native_layer_norm_backward(d.coin() ? d.tensor(d.near(x.sizes()), d.dtype()) : out, x, normalized,
                                               d.coin() ? mean : d.floating(), rstd, w, {d.coin(), d.coin(), d.coin()});
    } else if (x.is_floating_point()) {
      const Tensor leaf = x.detach().requires_grad_();
      nn::functional::layer_norm(leaf, normalized, w, b, d.real()).sum().backward();
    }
  });
  op("group_norm_shaped", [](Draw& d) {  // mostly a divisor of the channels for groups, and backward
    const Tensor x = d.floating();
    const int64_t C = x.dim() >= 2 ? x.size(1) : 1,
                  groups = d.below(4) > 0 ? 1 + d.below(std::max<int64_t>(C, 1)) : d.integer();
    auto affine = [&] { return d.coin() ? d.tensor(d.near({C}), d.below(3) == 0 ? d.dtype() : x.dtype()) : Tensor(); };
    const Tensor w = affine(), b = affine();
    if (d.coin()) {
      const auto [out, mean, rstd] = native_group_norm(x, w, b, groups, d.real());
      (void)native::native_group_norm_backward(d.coin() ? d.tensor(d.near(x.sizes()), d.dtype()) : out, x,
                                               d.coin() ? mean : d.floating(), rstd, w, groups,
                                               {d.coin(), d.coin(), d.coin()});
    } else if (x.is_floating_point()) {
      const Tensor leaf = x.detach().requires_grad_();
      nn::functional::group_norm(leaf, groups, w, b, d.real()).sum().backward();
    }
  });
  op("group_norm", [](Draw& d) {
    (void)nn::functional::group_norm(d.floating(), d.integer(), d.coin() ? d.floating() : Tensor(), Tensor(), d.real());
  });
  op("batch_norm_shaped", [](Draw& d) {  // statistics of x's channels mostly, and backward
    const Tensor x = d.floating();
    const int64_t C = x.dim() >= 2 ? x.size(1) : 1;
    auto channel = [&] { return d.coin() ? d.tensor(d.near({C}), d.below(3) == 0 ? d.dtype() : x.dtype()) : Tensor(); };
    const Tensor w = channel(), b = channel(), rm = channel(), rv = d.coin() ? channel() : rm;
    const bool training = d.coin();
    if (d.coin()) {
      const auto [out, mean, rstd] = native_batch_norm(x, w, b, rm, rv, training, d.real(), d.real());
      (void)native::native_batch_norm_backward(d.coin() ? d.tensor(d.near(x.sizes()), d.dtype()) : out, x,
                                               d.coin() ? mean : d.floating(), rstd, w, d.coin(),
                                               {d.coin(), d.coin(), d.coin()});
    } else if (x.is_floating_point()) {
      const Tensor leaf = x.detach().requires_grad_();
      nn::functional::batch_norm(leaf, rm, rv, w, b, training, d.real(), d.real()).sum().backward();
    }
  });
  op("batch_norm", [](Draw& d) {
    Tensor mean = d.floating(), var = d.floating();
    (void)nn::functional::batch_norm(d.floating(), d.coin() ? mean : Tensor(), d.coin() ? var : Tensor(),
                                     d.coin() ? d.floating() : Tensor(), Tensor(), d.coin(), d.real(), d.real());
  });
  op("dropout", [](Draw& d) { (void)nn::functional::dropout(d.tensor(), d.real(), d.coin()); });
  op("dropout2d", [](Draw& d) { (void)nn::functional::dropout2d(d.tensor(), d.real(), d.coin()); });
  op("losses", [](Draw& d) {
    const Tensor x = d.floating(), y = d.floating();
    switch (d.below(5)) {
      case 0:
        (void)nn::functional::l1_loss(x, y, d.coin() ? "sum" : "bogus");
        break;
      case 1:
        (void)nn::functional::smooth_l1_loss(x, y, "mean", d.real());
        break;
      case 2:
        (void)nn::functional::kl_div(x, y, d.coin() ? "batchmean" : "mean", d.coin());
        break;
      case 3:
        (void)nn::functional::binary_cross_entropy_with_logits(
            x, y, nn::functional::BCEWithLogitsOptions().pos_weight(d.coin() ? d.floating() : Tensor()));
        break;
      default:
        (void)nn::functional::cross_entropy(
            x, y, nn::functional::CrossEntropyOptions().label_smoothing(d.real()).ignore_index(d.integer()));
    }
  });
  op("attention", [](Draw& d) {
    (void)nn::functional::scaled_dot_product_attention(
        d.floating(), d.floating(), d.floating(),
        nn::functional::AttentionOptions().is_causal(d.coin()).attn_mask(d.coin() ? d.tensor() : Tensor()));
  });
  op("interpolate", [](Draw& d) {
    nn::functional::InterpolateOptions o;
    o.mode(d.coin() ? "nearest" : "bilinear");
    if (d.coin())
      o.size(d.dims());
    else
      o.scale_factor(std::vector<double>{d.real(), d.real()});
    (void)nn::functional::interpolate(d.floating(), o);
  });
  // lookups with PyTorch's options (Note [Embedding options]), bags from awkward offsets
  op("embedding_bag", [](Draw& d) {
    const Tensor weight = d.tensor(d.near({6, 3}), d.coin() ? kFloat32 : d.dtype());
    static const char* const modes[] = {"sum", "mean", "max", "median"};
    auto o = nn::functional::EmbeddingBagFuncOptions()
                 .mode(modes[d.below(4)])
                 .include_last_offset(d.below(4) == 0)
                 .scale_grad_by_freq(d.coin());
    if (d.coin()) o.offsets(d.coin() ? tensor<int64_t>({0, 2}).to(d.device()) : d.index(5));
    if (d.below(4) == 0) o.per_sample_weights(d.floating());
    if (d.below(4) == 0) o.padding_idx(d.coin() ? 1 : d.integer());
    if (d.below(4) == 0) o.max_norm(d.real());
    (void)nn::functional::embedding_bag(d.index(6), weight, o);
  });
  op("embedding", [](Draw& d) {
    auto o = nn::functional::EmbeddingFuncOptions().scale_grad_by_freq(d.coin());
    if (d.below(3) == 0) o.padding_idx(d.integer());
    if (d.below(3) == 0) o.max_norm(d.real()).norm_type(d.coin() ? 2.0 : d.real());
    (void)nn::functional::embedding(d.index(5), d.tensor(d.near({5, 2}), d.coin() ? kFloat32 : d.dtype()), o);
  });
  // modules built with awkward options, then called
  op("modules", [](Draw& d) {
    switch (d.below(5)) {
      case 0:
        (void)nn::Linear(d.integer(), d.integer())(d.floating());
        break;
      case 1:
        (void)nn::Conv2d(nn::Conv2dOptions(d.integer(), d.integer(), d.integer()).stride(d.integer()))(d.floating());
        break;
      case 2:
        (void)nn::Embedding(d.integer(), d.integer())(d.index(3));
        break;
      case 3:
        (void)nn::LayerNorm(nn::LayerNormOptions(d.dims()))(d.floating());
        break;
      default:
        (void)nn::BatchNorm2d(d.integer())(d.floating());
    }
  });
  // backward through an op of a random graph
  op("backward", [](Draw& d) {
    Tensor x = d.floating();
    if (x.defined() && is_floating(x.dtype()) && x.is_contiguous()) x = x.detach().requires_grad_();
    Tensor y = x;
    for (int i = 0; i < 3; ++i) {
      switch (d.below(5)) {
        case 0:
          y = y.sum(d.dims(), d.coin());
          break;
        case 1:
          y = y.transpose(d.integer(), d.integer());
          break;
        case 2:
          y = y.softmax(d.integer());
          break;
        case 3:
          y = y * d.tensor();
          break;
        default:
          y = y.expand(d.dims());
          // an expand to [2^62] is valid and costs nothing, but summing it would take years
          if (y.numel() > (int64_t{1} << 20)) return;
      }
    }
    y.backward(d.coin() ? Tensor() : d.tensor());
  });
  // mixed precision: ops under autocast of any dtype, and the GradScaler's calls in any order
  op("autocast", [](Draw& d) {
    autocast::AutocastGuard guard(kCPU, d.dtype(), d.coin());
    switch (d.below(4)) {
      case 0:
        (void)matmul(d.floating(), d.floating());
        break;
      case 1:
        (void)linear(d.floating(), d.floating(), d.floating());
        break;
      case 2:
        (void)conv2d(d.floating(), d.floating(), Tensor(), d.positive_pair(), d.pair());
        break;
      default:
        (void)nn::functional::cross_entropy(d.floating(), d.index(3));
    }
  });
  op("grad_scaler", [](Draw& d) {
    amp::GradScaler scaler(amp::GradScalerOptions().init_scale(d.real()).growth_interval(d.integer()));
    Tensor w = d.floating();
    if (!w.defined() || !is_floating(w.dtype()) || !w.is_contiguous()) return;
    w = w.detach().requires_grad_();
    optim::SGD opt({w}, optim::SGDOptions(0.1));
    for (int step = 0; step < 6; ++step) {
      switch (d.below(5)) {
        case 0:
          scaler.scale((w * d.real()).sum()).backward();
          break;
        case 1:
          scaler.unscale_(opt);
          break;
        case 2:
          scaler.step(opt);
          break;
        case 3:
          scaler.update(d.coin() ? std::optional<double>(d.real()) : std::nullopt);
          break;
        default:
          scaler.load_state_dict({{"scale", d.real()},
                                  {"growth_factor", d.real()},
                                  {"backoff_factor", d.real()},
                                  {"growth_interval", d.real()},
                                  {"_growth_tracker", d.real()}});
      }
    }
  });
  // data parallel over replicas on the CPU, with awkward batches and devices
  op("data_parallel", [](Draw& d) {
    const int64_t in = 1 + d.below(3);
    nn::Linear model(in, 2);
    std::vector<Device> devices(static_cast<size_t>(d.below(4)), Device(kCPU));
    nn::DataParallel parallel(
        model, [&] { return nn::Linear(in, 2); }, nn::DataParallelOptions().devices(devices).dim(d.integer()));
    (void)parallel(d.floating());
  });
  // pruning with awkward amounts and dims
  op("prune", [](Draw& d) {
    nn::Linear layer(3, 2);
    const nn::utils::prune::Amount amount =
        d.coin() ? nn::utils::prune::Amount(d.integer()) : nn::utils::prune::Amount(d.real());
    switch (d.below(3)) {
      case 0:
        nn::utils::prune::l1_unstructured(*layer, d.coin() ? "weight" : "nothing", amount);
        break;
      case 1:
        nn::utils::prune::ln_structured(*layer, "weight", amount, d.real(), d.integer());
        break;
      default:
        nn::utils::prune::random_structured(*layer, "bias", amount, d.integer());
    }
    (void)layer(ones({1, 3}));
  });
  op("quantize_per_tensor", [](Draw& d) {
    const QDType types[] = {QDType::QInt8, QDType::QUInt8, QDType::QInt32};
    (void)quantize_per_tensor(d.floating(), d.real(), d.integer(), types[d.below(3)]).dequantize();
  });
  // quantization
  op("fake_quantize_per_tensor_affine", [](Draw& d) {
    (void)fake_quantize_per_tensor_affine(d.floating(), d.real(), d.integer(), d.integer(), d.integer());
  });
  op("fake_quantize_per_channel_affine", [](Draw& d) {
    (void)fake_quantize_per_channel_affine(d.floating(), d.floating(), d.index(3), d.integer(), d.integer(),
                                           d.integer());
  });
  return c;
}

TEST(Errors, RandomArgumentsReturnOrThrowAnEmberError) { testing::expect_only_ember_errors(calls(), Device(kCPU)); }

TEST(Errors, RandomArgumentsOnCudaReturnOrThrowAnEmberError) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  testing::expect_only_ember_errors(calls(), Device(kCUDA));
}

}  // namespace
}  // namespace ember
