// ember against LibTorch (Debian's libtorch-dev, PyTorch 1.13) on the same work, in one
// run, with the same thread count. Inputs are shared (from_blob both ways) and outputs are
// compared before anything is timed. Ratio = LibTorch time / ember time (> 1: ember faster).
//   build/bench/bench/libtorch_peer [threads]
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>

#include <ember/ember.h>

#include "timing.h"

namespace {

using ember::bench::fmt;
using ember::bench::median_seconds;

torch::Tensor as_torch(const ember::Tensor& t) {
  std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
  return torch::from_blob(t.data_ptr(), shape, torch::kFloat32);
}

void check(const char* name, const ember::Tensor& ours, const torch::Tensor& theirs, double tol) {
  const torch::Tensor diff = (as_torch(ours.contiguous()) - theirs.contiguous()).abs().max();
  const double d = diff.item<double>();
  if (!(d <= tol)) {
    std::printf("%s: ember and LibTorch disagree by %g\n", name, d);
    std::exit(1);
  }
}

// t_out: LibTorch writing into a preallocated output (its out= form), which removes the
// fresh-page cost LibTorch pays for each new large output (0 when there is no such form).
void compare(const char* name, double t_ember, double t_torch, double t_out = 0) {
  std::printf("| %s | %.2f ms | %.2f ms | %.2f | %s | %s |\n", name, t_ember * 1e3, t_torch * 1e3, t_torch / t_ember,
              t_out > 0 ? fmt("%.2f ms", t_out * 1e3).c_str() : "-", t_out > 0 ? fmt("%.2f", t_out / t_ember).c_str() : "-");
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  ember::set_num_threads(threads);
  torch::set_num_threads(threads);
  ember::manual_seed(0);
  std::printf("ember vs LibTorch %s, %d threads\n\n", TORCH_VERSION, threads);
  std::printf("| workload | ember | LibTorch | LibTorch / ember | LibTorch, preallocated out | that / ember |\n"
              "|---|---|---|---|---|---|\n");

  {  // softmax over rows of a 4096 x 4096 matrix
    const ember::Tensor x = ember::randn({4096, 4096});
    const torch::Tensor tx = as_torch(x);
    check("softmax", x.softmax(1), tx.softmax(1), 1e-6);
    torch::Tensor out = torch::empty_like(tx);
    compare("softmax rows of 4096x4096", median_seconds([&] { (void)x.softmax(1); }),
            median_seconds([&] { (void)tx.softmax(1); }),
            median_seconds([&] { at::_softmax_out(out, tx, 1, false); }));
  }
  {  // transpose-copy of a 4096 x 4096 matrix
    const ember::Tensor x = ember::randn({4096, 4096});
    const torch::Tensor tx = as_torch(x);
    check("transpose", x.t().contiguous(), tx.t().contiguous(), 0);
    torch::Tensor out = torch::empty_like(tx);
    compare("transpose-copy 4096x4096", median_seconds([&] { (void)x.t().contiguous(); }),
            median_seconds([&] { (void)tx.t().contiguous(); }), median_seconds([&] { out.copy_(tx.t()); }));
  }
  {  // conv2d 64 -> 64, 3x3, padding 1, on a 32 x 64 x 56 x 56 batch
    const ember::Tensor x = ember::randn({32, 64, 56, 56}), w = ember::randn({64, 64, 3, 3}) * 0.05;
    const ember::Tensor b = ember::randn({64});
    const torch::Tensor tx = as_torch(x), tw = as_torch(w), tb = as_torch(b);
    check("conv2d", ember::conv2d(x, w, b, {1, 1}, {1, 1}), torch::conv2d(tx, tw, tb, 1, 1), 1e-3);
    compare("conv2d 64->64 3x3 on 32x64x56x56", median_seconds([&] { (void)ember::conv2d(x, w, b, {1, 1}, {1, 1}); }, 5),
            median_seconds([&] { (void)torch::conv2d(tx, tw, tb, 1, 1); }, 5));
  }
  {  // GEMM 1024^3 and a 16M-float add, for context
    const ember::Tensor a = ember::randn({1024, 1024}), b = ember::randn({1024, 1024});
    const torch::Tensor ta = as_torch(a), tb = as_torch(b);
    check("matmul", ember::matmul(a, b), torch::matmul(ta, tb), 1e-2);
    torch::Tensor mo = torch::empty_like(ta);
    compare("float32 GEMM 1024^3", median_seconds([&] { (void)ember::matmul(a, b); }),
            median_seconds([&] { (void)torch::matmul(ta, tb); }), median_seconds([&] { torch::mm_out(mo, ta, tb); }));
    const ember::Tensor u = ember::rand({16 << 20}), v = ember::rand({16 << 20});
    const torch::Tensor tu = as_torch(u), tv = as_torch(v);
    check("add", u + v, tu + tv, 0);
    torch::Tensor ao = torch::empty_like(tu);
    compare("add of 16M floats", median_seconds([&] { (void)(u + v); }), median_seconds([&] { (void)(tu + tv); }),
            median_seconds([&] { torch::add_out(ao, tu, tv); }));
    compare("sum of 16M floats", median_seconds([&] { (void)u.sum(); }), median_seconds([&] { (void)tu.sum(); }));
  }
  return 0;
}
