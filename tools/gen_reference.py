#!/usr/bin/env python3
"""Generates tests/reference/ops.bin and grads.bin: inputs, PyTorch's outputs and (grads.bin)
PyTorch's gradients for ember's op and autograd tests.

Run with Debian's PyTorch (apt-get install python3-torch):
    /usr/bin/python3 tools/gen_reference.py
(The outputs of BLAS-backed ops, matrix-vector products among them, change in their last bits
with the BLAS that libblas.so.3 points to; the tests' tolerances allow for it.)
The C++ tests (tests/test_reference.cpp, tests/test_reference_grads.cpp) apply the same op
to the same inputs and compare. Each case "name" stores tensors "name.in0", "name.in1", ...
and "name.out0", ...; a gradient case also stores the upstream gradient "name.gout" and the
gradients "name.grad0", ... of the floating inputs (in input order).

File format "EMBREF01" (all little-endian):
    8 bytes magic "EMBREF01", u32 count, then per tensor:
    u32 name length, name bytes, u8 dtype code, u32 ndim, i64 dims[ndim], u64 nbytes, raw data.
dtype codes follow ember::DType: bool 0, uint8 1, int8 2, int32 3, int64 4, float16 5,
bfloat16 6, float32 7, float64 8.
"""
import os
import struct
import sys

import torch
import torch.nn.functional as F

CODES = {torch.bool: 0, torch.uint8: 1, torch.int8: 2, torch.int32: 3, torch.int64: 4,
         torch.float16: 5, torch.bfloat16: 6, torch.float32: 7, torch.float64: 8}

entries = []


def put(name, t):
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        raw = t.view(torch.int16).numpy().tobytes()
    else:
        raw = t.numpy().tobytes()
    entries.append((name, CODES[t.dtype], list(t.shape), raw))


def case(name, inputs, fn):
    """Stores inputs and fn(*inputs) (a tensor or a tuple of tensors)."""
    for i, t in enumerate(inputs):
        put(f"{name}.in{i}", t)
    out = fn(*inputs)
    if not isinstance(out, (tuple, list)):
        out = (out,)
    for i, t in enumerate(out):
        put(f"{name}.out{i}", t)


def grad_case(name, inputs, fn, wrt=None):
    """Stores inputs, fn(*inputs), an upstream gradient and the gradients of the inputs
    listed in `wrt` (default: every floating input), with their indices in "name.wrt"."""
    if wrt is None:
        wrt = [i for i, t in enumerate(inputs) if t.is_floating_point()]
    leaves = [t.clone().requires_grad_(i in wrt) for i, t in enumerate(inputs)]
    out = fn(*leaves)
    gout = torch.linspace(0.5, 1.5, out.numel(), dtype=out.dtype).reshape(out.shape)
    out.backward(gout)
    for i, t in enumerate(inputs):
        put(f"{name}.in{i}", t)
    put(f"{name}.out0", out)
    put(f"{name}.gout", gout)
    put(f"{name}.wrt", torch.tensor(wrt, dtype=torch.int64))
    for k, i in enumerate(wrt):
        put(f"{name}.grad{k}", leaves[i].grad if leaves[i].grad is not None else torch.zeros_like(leaves[i]))


def r(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype)


def pos(*shape, dtype=torch.float32):
    return torch.rand(*shape, dtype=dtype) + 0.5


def main():
    torch.manual_seed(1234)
    # ---- elementwise, broadcasting, non-contiguous inputs ----
    case("add_bcast", [r(3, 1, 4), r(2, 4)], lambda a, b: a + b)
    case("add_alpha", [r(2, 3), r(3)], lambda a, b: torch.add(a, b, alpha=2.5))
    case("sub_bcast", [r(4, 1), r(1, 5)], lambda a, b: a - b)
    case("mul_bcast", [r(2, 3, 4), r(3, 1)], lambda a, b: a * b)
    case("div_bcast", [r(3, 4), pos(4)], lambda a, b: a / b)
    case("add_noncontig", [r(4, 3), r(3, 4)], lambda a, b: a + b.t())
    case("mul_slice_scalar", [r(6, 5)], lambda a: a[::2, 1:4] * 3.0)
    case("pow_tensor", [pos(3, 4), r(4)], lambda a, b: a.pow(b))
    case("pow_scalar", [pos(5)], lambda a: a.pow(2.5))
    case("maximum", [r(3, 4), r(4)], torch.maximum)
    case("minimum", [r(3, 1), r(1, 4)], torch.minimum)
    case("eq", [torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([1.0, 0.0, 3.0, 5.0])], lambda a, b: a == b)
    case("lt_bcast", [r(3, 1), r(4)], lambda a, b: a < b)
    case("ge_scalar", [r(5)], lambda a: a >= 0.1)
    case("where", [r(3, 4) > 0, r(3, 1), r(4)], torch.where)
    case("masked_fill", [r(3, 4), r(4) > 0], lambda a, m: a.masked_fill(m, -7.5))
    case("clamp", [r(10)], lambda a: a.clamp(-0.5, 0.5))
    case("clamp_min", [r(10)], lambda a: a.clamp(min=0.2))
    for name, fn, gen in [
        ("neg", torch.neg, r), ("abs", torch.abs, r), ("exp", torch.exp, r), ("log", torch.log, pos),
        ("log1p", torch.log1p, pos), ("sqrt", torch.sqrt, pos), ("rsqrt", torch.rsqrt, pos),
        ("sin", torch.sin, r), ("cos", torch.cos, r), ("tanh", torch.tanh, r),
        ("sigmoid", torch.sigmoid, r), ("relu", torch.relu, r), ("gelu", F.gelu, r),
        ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), r), ("silu", F.silu, r),
        ("sign", torch.sign, r), ("square", torch.square, r), ("reciprocal", torch.reciprocal, pos),
        ("erf", torch.erf, r),
        ("softplus", F.softplus, lambda *s, dtype=torch.float32: r(*s, dtype=dtype) * 15)]:  # both sides of 20
        case("unary_" + name, [gen(4, 5)], fn)
        case("unary64_" + name, [gen(3, 2, dtype=torch.float64)], fn)
    # ---- type promotion ----
    case("promote_int_double", [torch.tensor([1, 2, 3], dtype=torch.int32), r(3, dtype=torch.float64)],
         lambda a, b: a + b)
    case("promote_long_scalar_float", [torch.tensor([1, 2, 3])], lambda a: a + 2.5)
    case("promote_uint8_long", [torch.tensor([200, 100], dtype=torch.uint8), torch.tensor([100, -300])],
         lambda a, b: a + b)
    case("promote_bool_int", [torch.tensor([True, False]), torch.tensor([3, 4], dtype=torch.int32)],
         lambda a, b: a + b)
    case("promote_int_div", [torch.tensor([7, -7, 9]), torch.tensor([2, 2, 3])], lambda a, b: a / b)
    case("promote_half_zero_dim_double", [r(3).half(), torch.tensor(2.0, dtype=torch.float64)], lambda a, b: a * b)
    case("promote_int8_uint8_mul", [torch.tensor([-3, 100], dtype=torch.int8),
                                     torch.tensor([200, 3], dtype=torch.uint8)], lambda a, b: (a * b).to(torch.int32))
    case("int_pow", [torch.tensor([2, -3, 5]), torch.tensor([10, 3, 0])], torch.pow)
    case("half_add", [r(6).half(), r(6).half()], lambda a, b: a + b)
    case("bf16_mul", [r(6).bfloat16(), r(6).bfloat16()], lambda a, b: a * b)
    # ---- conversions: float16 / bfloat16 rounding edge cases ----
    edge = torch.tensor([0.0, -0.0, 1.0, 65504.0, 65519.0, 65520.0, 1e5, 1e-8, 5.9604645e-8, 2.9802322e-8,
                         1.0 + 2 ** -11, 1.0 + 3 * 2 ** -11, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, 3.14159265,
                         -2.71828, 6.1035156e-5, 6.0975552e-5, 3.3895314e38, 3.3961776e38,
                         float("inf"), float("-inf"), float("nan")], dtype=torch.float32)
    case("cast_half", [edge], lambda a: a.half())
    case("cast_bf16", [edge], lambda a: a.bfloat16())
    case("cast_double_float", [torch.tensor([1.0 + 2 ** -30, 1e-50, 1e300, -3.5], dtype=torch.float64)],
         lambda a: a.float())
    case("cast_float_int", [torch.tensor([2.7, -2.7, 300.5, -1.5])], lambda a: a.to(torch.int32))
    case("cast_int_uint8", [torch.tensor([-1, 256, 255, 1000])], lambda a: a.to(torch.uint8))
    case("cast_to_bool", [torch.tensor([0.0, -0.0, 0.5, float("nan")])], lambda a: a.bool())
    # ---- reductions ----
    case("sum_all", [r(4, 5)], lambda a: a.sum())
    case("sum_dims_keepdim", [r(2, 3, 4)], lambda a: a.sum((0, 2), keepdim=True))
    case("sum_transposed", [r(5, 6)], lambda a: a.t().sum(1))
    case("sum_columns", [r(50, 7)], lambda a: a.sum(0))
    case("sum_int", [torch.tensor([[1, 2], [3, 4]], dtype=torch.int32)], lambda a: a.sum(1))
    case("sum_bool", [r(10) > 0], lambda a: a.sum())
    case("mean_last", [r(3, 4, 5)], lambda a: a.mean(-1))
    case("mean_double", [r(3, 4, dtype=torch.float64)], lambda a: a.mean((0, 1)))
    case("prod_dim", [pos(3, 4)], lambda a: a.prod(1))
    case("max_dim", [r(4, 6)], lambda a: torch.max(a, 1))
    case("min_dim_keepdim", [r(4, 6)], lambda a: torch.min(a, 0, keepdim=True))
    case("max_ties", [torch.tensor([[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, 1.0, 5.0]])], lambda a: torch.max(a, 1))
    case("amax_dims", [r(2, 3, 4)], lambda a: a.amax((0, 2)))
    case("argmax_dim", [r(4, 6)], lambda a: a.argmax(1))
    case("argmax_all", [r(4, 6)], lambda a: a.argmax())
    case("argmin_dim", [r(4, 6)], lambda a: a.argmin(0))
    case("var_dim", [r(4, 6)], lambda a: a.var(1))
    case("var_biased_all", [r(4, 6)], lambda a: a.var(unbiased=False))
    case("std_dim_keepdim", [r(4, 6)], lambda a: a.std(0, keepdim=True))
    case("norm_2", [r(4, 6)], lambda a: a.norm())
    case("norm_1_dim", [r(4, 6)], lambda a: a.norm(p=1, dim=1))
    case("norm_inf_dim", [r(4, 6)], lambda a: a.norm(p=float("inf"), dim=0))
    case("norm_3", [r(4, 6)], lambda a: a.norm(p=3))
    case("logsumexp", [r(4, 6) * 50], lambda a: a.logsumexp(1))
    case("logsumexp_keepdim", [r(3, 4, 5)], lambda a: a.logsumexp((0, 2), keepdim=True))
    case("sum_empty", [torch.zeros(0, 3)], lambda a: a.sum(0))
    case("prod_empty", [torch.zeros(3, 0)], lambda a: a.prod(1))
    case("mean_empty", [torch.zeros(0)], lambda a: a.mean())
    case("all_any", [torch.tensor([[True, False], [True, True]])], lambda a: (a.all(1), a.any(0)))
    # ---- matmul ----
    case("mm", [r(5, 7), r(7, 3)], torch.mm)
    case("mm_transposed", [r(7, 5), r(3, 7)], lambda a, b: a.t() @ b.t())
    case("mm_double", [r(4, 6, dtype=torch.float64), r(6, 2, dtype=torch.float64)], torch.mm)
    case("matmul_dot", [r(6), r(6)], torch.matmul)
    case("matmul_mv", [r(3, 6), r(6)], torch.matmul)
    case("matmul_vm", [r(6), r(6, 4)], torch.matmul)
    case("matmul_batched_2d", [r(2, 3, 4), r(4, 5)], torch.matmul)
    case("matmul_broadcast", [r(2, 1, 4, 5), r(3, 5, 6)], torch.matmul)
    case("matmul_vec_batched", [r(5), r(2, 5, 3)], torch.matmul)
    case("matmul_batched_vec", [r(2, 3, 5), r(5)], torch.matmul)
    case("bmm", [r(3, 4, 5), r(3, 5, 2)], torch.bmm)
    case("addmm", [r(3), r(2, 4), r(4, 3)], lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0))
    case("linear", [r(2, 3, 5), r(4, 5), r(4)], F.linear)
    case("addmm_bias_transposed", [r(5), r(7, 3), r(7, 5)], lambda c, a, b: torch.addmm(c, a.t(), b))
    case("linear_half", [r(6, 9).half(), r(5, 9).half(), r(5).half()],
         lambda x, w, b: F.linear(x.float(), w.float(), b.float()).half())  # CPU PyTorch has no half addmm
    case("matmul_int", [torch.tensor([[1, 2], [3, 4]]), torch.tensor([[5], [6]])], torch.matmul)
    case("matmul_half", [r(3, 8).half(), r(8, 2).half()], lambda a, b: (a.float() @ b.float()).half())
    # ---- softmax ----
    case("softmax_last", [r(4, 7) * 10], lambda a: a.softmax(-1))
    case("softmax_dim0", [r(3, 4, 5)], lambda a: a.softmax(0))
    case("log_softmax_mid", [r(3, 4, 5) * 10], lambda a: a.log_softmax(1))
    case("log_softmax_double", [r(4, 9, dtype=torch.float64)], lambda a: a.log_softmax(1))
    # ---- convolution and pooling ----
    case("conv2d_basic", [r(2, 3, 7, 7), r(4, 3, 3, 3), r(4)], lambda x, w, b: F.conv2d(x, w, b))
    case("conv2d_stride_pad", [r(2, 3, 8, 7), r(5, 3, 3, 2), r(5)],
         lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=(1, 2)))
    case("conv2d_dilation", [r(1, 2, 9, 9), r(3, 2, 3, 3)], lambda x, w: F.conv2d(x, w, dilation=2, padding=1))
    case("conv2d_groups", [r(2, 4, 6, 6), r(6, 2, 3, 3), r(6)], lambda x, w, b: F.conv2d(x, w, b, padding=1, groups=2))
    case("conv2d_1x1", [r(3, 8, 5, 5), r(4, 8, 1, 1), r(4)], lambda x, w, b: F.conv2d(x, w, b))
    case("conv2d_double", [r(1, 2, 5, 5, dtype=torch.float64), r(2, 2, 3, 3, dtype=torch.float64)],
         lambda x, w: F.conv2d(x, w, padding=1))
    case("max_pool2d", [r(2, 3, 9, 9)], lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True))
    case("max_pool2d_ceil", [r(1, 2, 8, 8)], lambda x: F.max_pool2d(x, 3, 2, ceil_mode=True, return_indices=True))
    case("max_pool2d_dilation", [r(1, 2, 9, 9)], lambda x: F.max_pool2d(x, 2, 1, dilation=2, return_indices=True))
    case("avg_pool2d", [r(2, 3, 8, 8)], lambda x: F.avg_pool2d(x, 2))
    case("avg_pool2d_pad", [r(1, 2, 7, 7)], lambda x: F.avg_pool2d(x, 3, 2, padding=1))
    case("avg_pool2d_pad_exclude", [r(1, 2, 7, 7)], lambda x: F.avg_pool2d(x, 3, 2, padding=1, count_include_pad=False))
    case("avg_pool2d_ceil", [r(1, 2, 8, 8)], lambda x: F.avg_pool2d(x, 3, 2, ceil_mode=True))
    case("adaptive_avg_pool2d", [r(2, 3, 5, 7)], lambda x: F.adaptive_avg_pool2d(x, (3, 2)))
    case("adaptive_avg_pool2d_global", [r(2, 3, 4, 4)], lambda x: F.adaptive_avg_pool2d(x, 1))
    # ---- indexing, joining ----
    case("index_select", [r(3, 5), torch.tensor([4, 0, 4, 2])], lambda x, i: x.index_select(1, i))
    case("gather", [r(3, 5), torch.tensor([[0, 4], [1, 1], [3, 2]])], lambda x, i: x.gather(1, i))
    case("scatter_add", [r(3, 4), torch.tensor([[0, 1, 2, 0], [2, 2, 1, 0]]), r(2, 4)],
         lambda x, i, s: x.scatter_add(0, i, s))
    case("embedding", [r(10, 3), torch.tensor([[1, 9], [0, 1]])], lambda w, i: F.embedding(i, w))
    case("one_hot", [torch.tensor([0, 3, 1])], lambda i: F.one_hot(i, 5))
    case("tril", [r(4, 5)], lambda x: x.tril(-1))
    case("triu", [r(2, 4, 3)], lambda x: x.triu(1))
    case("cat_promote", [r(2, 3), r(2, 1, dtype=torch.float64)], lambda a, b: torch.cat([a, b], 1))
    case("stack", [r(2, 3), r(2, 3)], lambda a, b: torch.stack([a, b], 1))
    frontend_cases()
    indexing_cases()
    composite_cases()
    ports3_cases()
    ports4_cases()
    ports6_cases()
    linalg_cases()
    svd_cases()
    qr_cases()

    write("ops.bin")
    entries.clear()
    grad_cases()
    double_backward_cases()
    det_singular_case()
    write("grads.bin")
    import gen_reference_nn  # layers, optimizers, schedulers, checkpoints: tests/reference/nn.bin
    gen_reference_nn.main()
    import gen_reference_quant  # pruning and quantization: tests/reference/quant.bin
    gen_reference_quant.main()


def indexing_cases():
    """x[...] and x[...] = v as LibTorch's x.index({...}) and x.index_put_({...}, v), scatter and
    nonzero, with a seed of their own."""
    torch.manual_seed(2027)

    def put(x, fn):
        x = x.clone()
        fn(x)
        return x

    case("index_basic", [r(4, 5, 6)], lambda x: x[1:3, None, ..., ::2])
    case("index_ints", [r(4, 5, 6)], lambda x: x[-1, :, 2])
    case("index_bools", [r(2, 3)], lambda x: x[..., None, True])
    case("index_false", [r(2, 3)], lambda x: x[False, 1])
    case("index_long", [r(4, 5), torch.tensor([[3, 0], [1, -1]])], lambda x, i: x[i])
    case("index_long_dim1", [r(4, 5), torch.tensor([[3, 0], [1, -1]])], lambda x, i: x[:, i])
    case("index_two_adjacent", [r(3, 4, 5), torch.tensor([0, 3, 1]), torch.tensor([4, 4, 0])],
         lambda x, i, j: x[:, i, j])
    case("index_two_separated", [r(3, 4, 5), torch.tensor([[2], [0]]), torch.tensor([1, 3, 2])],
         lambda x, i, j: x[i, :, j])
    case("index_int_with_long", [r(2, 3, 4, 5), torch.tensor([0, 2, 1])], lambda x, j: x[0, :, :, j])
    case("index_mask_all", [r(3, 4)], lambda x: x[x > 0])
    case("index_mask_leading", [r(3, 4, 2), r(3, 4) > 0], lambda x, m: x[m])
    case("index_mask_middle", [r(2, 3, 4), r(3, 4) > 0], lambda x, m: x[:, m])
    case("index_put_slice", [r(3, 4), r(2)], lambda x, v: put(x, lambda y: y.__setitem__((slice(1, None), 0), v)))
    case("index_put_long", [r(3, 4), torch.tensor([0, 2]), r(2, 2)],
         lambda x, i, v: put(x, lambda y: y.__setitem__((i, slice(1, 3)), v)))
    case("index_put_mask_scalar", [r(3, 4)], lambda x: put(x, lambda y: y.__setitem__(y < 0, 0.5)))
    case("index_put_broadcast", [r(2, 5), torch.tensor([1, 3]), r(2, 1)],
         lambda x, i, v: put(x, lambda y: y.__setitem__((slice(None), i), v)))
    case("index_put_accumulate", [r(3, 4), torch.tensor([0, 0, 2]), r(3, 4)],
         lambda x, i, v: x.index_put((i,), v, accumulate=True))
    case("index_put_transposed", [r(4, 3), torch.tensor([2, 0]), r(2, 4)],
         lambda x, i, v: put(x, lambda y: y.t().__setitem__(i, v)))
    case("masked_select", [r(3, 4), r(4) > 0], torch.masked_select)
    case("nonzero", [torch.relu(r(3, 4))], torch.nonzero)
    case("nonzero_bool_3d", [r(2, 2, 3) > 0], torch.nonzero)
    case("scatter", [r(3, 4), torch.tensor([[0, 1, 2, 0], [2, 0, 1, 1]]), r(2, 5)],
         lambda x, i, s: x.scatter(0, i, s))
    case("scatter_dim1", [r(2, 5), torch.tensor([[4, 0], [1, 3]]), r(2, 2)], lambda x, i, s: x.scatter(1, i, s))
    # scans and sorting
    case("cumsum", [r(3, 4)], lambda x: x.cumsum(1))
    case("cumsum_dim0_3d", [r(2, 3, 4)], lambda x: x.cumsum(0))
    case("cumsum_int", [torch.tensor([[3, -1, 4], [1, 5, -9]], dtype=torch.int32)], lambda x: x.cumsum(1))
    case("cumsum_to_double", [r(5)], lambda x: x.cumsum(0, dtype=torch.float64))
    case("sort", [r(3, 5)], lambda x: x.sort())
    case("sort_descending_dim0", [r(4, 3)], lambda x: x.sort(0, descending=True))
    nan = float("nan")
    case("sort_nan", [torch.tensor([[1.0, nan, -2.0, 3.0, nan], [0.5, -1.0, nan, 2.0, 0.0]])], lambda x: x.sort())
    case("sort_nan_descending", [torch.tensor([[1.0, nan, -2.0, 3.0, nan]])], lambda x: x.sort(descending=True))
    case("sort_stable_ties", [torch.tensor([2, 1, 2, 0, 1, 2])], lambda x: x.sort(stable=True))
    case("argsort_int", [torch.tensor([[5, -3, 7], [0, 9, -1]])], lambda x: x.argsort(1, descending=True))
    case("topk", [r(3, 6)], lambda x: x.topk(2))
    case("topk_smallest_dim0", [r(5, 3)], lambda x: x.topk(3, 0, largest=False))
    # einsum
    case("einsum_matmul", [r(3, 4), r(4, 5)], lambda a, b: torch.einsum("ij,jk->ik", a, b))
    case("einsum_batched_transposed", [r(2, 3, 4), r(2, 5, 4)], lambda a, b: torch.einsum("bik,bjk->bji", a, b))
    case("einsum_attention", [r(2, 3, 4, 5), r(2, 3, 6, 5)], lambda q, k: torch.einsum("bhqd,bhkd->bhqk", q, k))
    case("einsum_implicit", [r(3, 4), r(4, 2)], lambda a, b: torch.einsum("ij,jk", a, b))
    case("einsum_dot_outer", [r(4), r(4), r(3)], lambda a, b, c: torch.einsum("i,i,j->j", a, b, c))
    case("einsum_outer", [r(3), r(2)], lambda a, b: torch.einsum("i,j->ij", a, b))
    case("einsum_sum_permute", [r(2, 3, 4)], lambda a: torch.einsum("ijk->kj", a))
    case("einsum_three", [r(2, 3), r(3, 4), r(4, 5)], lambda a, b, c: torch.einsum("ab,bc,cd->da", a, b, c))
    case("einsum_bilinear", [r(2, 3), r(5, 3, 4), r(2, 4)], lambda x, w, y: torch.einsum("bi,oij,bj->bo", x, w, y))


def composite_cases():
    """LibTorch's composite ops (autograd/composites.cpp), the rounding unaries and the losses
    added with them, with a seed of their own."""
    torch.manual_seed(2028)
    halves = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.49999, -0.0, 1e8 + 0.5, 3.7, -3.7])
    for name, fn in [("expm1", torch.expm1), ("floor", torch.floor), ("ceil", torch.ceil), ("round", torch.round),
                     ("trunc", torch.trunc)]:
        case("unary_" + name, [r(4, 5) * 3], fn)
        case("unary64_" + name, [r(3, 2, dtype=torch.float64) * 3], fn)
    case("expm1_range", [torch.tensor([-100.0, -20.0, -1e-3, -1e-7, 0.0, 1e-7, 1e-3, 0.5, 20.0, 88.5, 88.8, 100.0,
                                       float("inf"), float("-inf"), float("nan")])], torch.expm1)
    case("round_halves", [halves], torch.round)
    case("round_halves64", [halves.double()], torch.round)
    case("floor_int", [torch.tensor([-3, 0, 7])], torch.floor)
    case("flip", [r(2, 3, 4)], lambda x: x.flip([0, 2]))
    case("flip_int", [torch.arange(6).reshape(2, 3)], lambda x: x.flip([-1]))
    case("roll_dims", [r(3, 4)], lambda x: x.roll((1, -5), (0, 1)))
    case("roll_flat", [r(3, 4)], lambda x: x.roll(5))
    case("repeat_interleave_dim", [r(2, 3)], lambda x: x.repeat_interleave(2, dim=1))
    case("repeat_interleave_flat", [r(2, 2)], lambda x: x.repeat_interleave(3))
    case("repeat_interleave_tensor", [r(3, 2), torch.tensor([2, 0, 3])], lambda x, k: x.repeat_interleave(k, dim=0))
    case("repeat_interleave_counts", [torch.tensor([1, 0, 2])], lambda k: torch.repeat_interleave(k))
    case("dot", [r(7), r(7)], torch.dot)
    case("dot64", [r(5, dtype=torch.float64), r(5, dtype=torch.float64)], torch.dot)
    case("outer", [r(3), r(4)], torch.outer)
    special = torch.tensor([1.0, float("nan"), float("inf"), float("-inf"), 0.0, 1e-9, 100.0, 5.0])
    other = torch.tensor([1.0 + 1e-6, float("nan"), float("inf"), float("inf"), 1e-8, 0.0, 100.001, 5.1])
    case("isclose", [special, other], torch.isclose)
    case("isclose_nan_tol", [special, other], lambda a, b: torch.isclose(a, b, rtol=1e-4, atol=1e-2, equal_nan=True))
    case("isclose_int", [torch.tensor([1, 5, 10]), torch.tensor([1, 6, 12])],
         lambda a, b: torch.isclose(a, b, rtol=0.1, atol=0))
    case("isnan_isinf_isfinite", [special], lambda x: (x.isnan(), x.isinf(), x.isfinite()))
    case("clamp_max", [r(10)], lambda x: x.clamp(max=0.3))
    t = r(4, 5)
    case("huber_loss", [r(4, 5) * 2, t], F.huber_loss)
    case("huber_loss_delta_sum", [r(4, 5) * 2, t], lambda x, y: F.huber_loss(x, y, reduction="sum", delta=0.5))
    case("smooth_l1_loss_beta", [r(4, 5) * 2, t], lambda x, y: F.smooth_l1_loss(x, y, beta=0.5, reduction="none"))
    logp, q = torch.log_softmax(r(3, 4), 1), torch.softmax(r(3, 4), 1)
    case("kl_div_batchmean", [logp, q], lambda x, y: F.kl_div(x, y, reduction="batchmean"))
    case("kl_div_log_target_sum", [logp, q.log()], lambda x, y: F.kl_div(x, y, reduction="sum", log_target=True))


def ports3_cases():
    """The third sweep of LibTorch calls: lerp, unbind, normalize, cosine_similarity."""
    torch.manual_seed(2029)
    case("lerp_scalar", [r(3, 4), r(3, 4)], lambda a, b: torch.lerp(a, b, 0.3))
    case("lerp_tensor", [r(3, 4), r(4), torch.rand(3, 1)], torch.lerp)
    case("unbind", [r(3, 2, 4)], lambda x: torch.unbind(x, 1))
    case("normalize", [r(3, 5)], F.normalize)
    case("normalize_l1_dim0", [r(4, 3)], lambda x: F.normalize(x, p=1.0, dim=0))
    case("cosine_similarity", [r(4, 6), r(4, 6)], F.cosine_similarity)
    case("cosine_similarity_bcast", [r(2, 3, 5), r(3, 5)], lambda a, b: F.cosine_similarity(a, b, dim=-1))


def ports6_cases():
    """The sixth sweep of LibTorch calls: erfinv (with its edges), cumprod (zeros included, whose
    gradient is a case of its own), median and nanmedian (NaNs included)."""
    torch.manual_seed(2040)
    nan, inf = float("nan"), float("inf")

    def unit(*s, dtype=torch.float32):  # (-0.98, 0.98)
        return (torch.rand(*s, dtype=dtype) * 2 - 1) * 0.98
    case("unary_erfinv", [unit(4, 5)], torch.erfinv)
    case("unary64_erfinv", [unit(3, 2, dtype=torch.float64)], torch.erfinv)
    case("erfinv_edges", [torch.tensor([0.0, -0.0, 1.0, -1.0, 1.5, -inf, nan, 0.999999, -0.9999, 1e-30, 0.5, 0.7])],
         torch.erfinv)
    # (float64 up to |y| = 0.9999: further out PyTorch 1.13's erfinv loses digits, 1e-9 relative at
    # 1 - 1e-9, where ember's stays at double's rounding: a test of its own checks erf(erfinv(y)))
    case("erfinv_edges64", [torch.tensor([0.0, 1.0, -1.0, 0.9999, -0.999, 1e-300, 0.3, 0.7, -0.69999],
                                         dtype=torch.float64)], torch.erfinv)
    case("cumprod", [r(3, 4, 5)], lambda x: torch.cumprod(x, 1))
    case("cumprod_zeros_last_dim", [torch.tensor([[1.5, 0.0, 2.0, -1.0], [0.0, 3.0, 0.0, 2.0], [2.0, 2.0, 2.0, 0.5]])],
         lambda x: torch.cumprod(x, -1))
    case("cumprod_int", [torch.tensor([[2, 3, -4], [100000, 100000, 100000]])], lambda x: torch.cumprod(x, 1))
    case("cumprod_int_to_double", [torch.tensor([1, 2, 3, 4], dtype=torch.int32)],
         lambda x: torch.cumprod(x, 0, dtype=torch.float64))
    case("cumprod64", [r(5, 2, dtype=torch.float64)], lambda x: torch.cumprod(x, 0))
    case("median_all", [r(4, 5)], torch.median)
    case("median_dim", [r(4, 6)], lambda x: tuple(torch.median(x, 1)))
    case("median_dim_keepdim", [r(3, 4, 2)], lambda x: tuple(torch.median(x, 1, keepdim=True)))
    case("median_nan", [torch.tensor([[1.0, nan, 3.0, nan], [4.0, 2.0, 1.0, 5.0]])], lambda x: tuple(torch.median(x, 1)))
    case("median_all_nan", [torch.tensor([2.0, nan, 1.0])], torch.median)
    case("nanmedian_dim", [torch.tensor([[1.0, nan, 3.0, nan, 0.5], [4.0, 2.0, 1.0, 5.0, 9.0], [nan] * 5])],
         lambda x: tuple(torch.nanmedian(x, 1)))
    case("nanmedian_all", [torch.tensor([[3.0, nan], [1.0, 2.0]])], torch.nanmedian)
    case("median_int", [torch.tensor([[3, 1, 2], [9, 7, 8]])], lambda x: tuple(torch.median(x, 0)))


def linalg_cases():
    """torch.linalg: solve (batches broadcast, vectors, left=False), inv, det (an exactly singular
    matrix included), slogdet and logdet (negative determinants), cholesky, solve_triangular in
    every form, eigh and eigvalsh (vectors' signs normalized: the first row positive), matrix_power
    and the vector and matrix norms."""
    torch.manual_seed(2041)
    inf = float("inf")

    def well(*s, dtype=torch.float32):  # well-conditioned square matrices
        n = s[-1]
        return r(*s, dtype=dtype) + 3 * torch.eye(n, dtype=dtype)

    def spd(*s, dtype=torch.float32):
        m = r(*s, dtype=dtype)
        return m @ m.mT + s[-1] * torch.eye(s[-1], dtype=dtype)

    def signed(v):  # eigenvectors with their first row made positive
        return v * torch.sign(v[..., :1, :])
    la = torch.linalg
    case("linalg_solve", [well(4, 4), r(4, 2)], la.solve)
    case("linalg_solve64", [well(3, 3, dtype=torch.float64), r(3, 5, dtype=torch.float64)], la.solve)
    case("linalg_solve_broadcast", [well(2, 1, 3, 3), r(4, 3, 2)], la.solve)
    case("linalg_solve_vector", [well(2, 3, 3), r(2, 3)], la.solve)
    case("linalg_solve_right", [well(3, 3), r(2, 3)], lambda a, b: la.solve(a, b, left=False))
    case("linalg_inv", [well(2, 4, 4)], la.inv)
    case("linalg_inv64", [well(5, 5, dtype=torch.float64)], la.inv)
    case("linalg_det", [torch.cat([r(2, 3, 3), torch.tensor([[[1.0, 2, 3], [2, 4, 6], [1, 0, 1]]])])], la.det)
    case("linalg_det64", [r(4, 4, dtype=torch.float64)], la.det)
    case("linalg_slogdet", [torch.stack([r(3, 3), -torch.eye(3) * 2, torch.diag(torch.tensor([1e-20, 1e-20, 1e-20]))])],
         lambda a: tuple(la.slogdet(a)))
    case("logdet", [torch.stack([spd(3, 3), torch.diag(torch.tensor([-1.0, 2.0, 3.0])), torch.zeros(3, 3)])],
         torch.logdet)
    case("linalg_cholesky", [spd(2, 4, 4)], la.cholesky)
    case("linalg_cholesky_upper64", [spd(3, 3, dtype=torch.float64)], lambda a: la.cholesky(a, upper=True))
    # (L of a matrix that is not positive-definite holds partial results, which differ between
    # LAPACK and cuSOLVER: zeroed on both sides)
    case("linalg_cholesky_ex", [torch.stack([spd(3, 3), torch.tensor([[1.0, 2, 0], [2, 1, 0], [0, 0, 1]])])],
         lambda a: (la.cholesky_ex(a)[0] * (la.cholesky_ex(a)[1] == 0)[:, None, None], la.cholesky_ex(a)[1]))
    case("linalg_solve_triangular_upper", [well(2, 4, 4), r(4, 3)], lambda a, b: la.solve_triangular(a, b, upper=True))
    case("linalg_solve_triangular_lower_unit", [r(3, 3), r(2, 3, 2)],
         lambda a, b: la.solve_triangular(a, b, upper=False, unitriangular=True))
    case("linalg_solve_triangular_right", [well(3, 3), r(5, 3)],
         lambda a, b: la.solve_triangular(a, b, upper=True, left=False))
    case("linalg_solve_triangular64", [well(4, 4, dtype=torch.float64), r(4, 1, dtype=torch.float64)],
         lambda a, b: la.solve_triangular(a, b, upper=False))
    sym = r(2, 5, 5)
    case("linalg_eigh", [sym + sym.mT], lambda a: (la.eigh(a)[0], signed(la.eigh(a)[1])))
    case("linalg_eigh_upper64", [r(4, 4, dtype=torch.float64)],
         lambda a: (la.eigh(a, UPLO="U")[0], signed(la.eigh(a, UPLO="U")[1])))
    case("linalg_eigvalsh", [r(3, 3)], la.eigvalsh)
    case("linalg_matrix_power", [r(2, 3, 3)], lambda a: (la.matrix_power(a, 3), la.matrix_power(a, 0),
                                                      la.matrix_power(a, 1)))
    case("linalg_matrix_power_negative", [well(3, 3, dtype=torch.float64)], lambda a: la.matrix_power(a, -2))
    v = torch.cat([r(3, 6), torch.zeros(3, 1)], 1)
    case("linalg_vector_norm", [v], lambda x: (la.vector_norm(x), la.vector_norm(x, 1, dim=1), la.vector_norm(x, inf, dim=0),
                                               la.vector_norm(x, -inf, dim=1, keepdim=True), la.vector_norm(x, 0, dim=1),
                                               la.vector_norm(x, 3.5, dim=(0, 1)), la.vector_norm(x[:, :6], -1.5, dim=1),
                                               la.vector_norm(x, 2, dim=1, dtype=torch.float64)))
    case("linalg_matrix_norm", [r(2, 3, 4)], lambda a: (la.matrix_norm(a), la.matrix_norm(a, 1), la.matrix_norm(a, -1),
                                                      la.matrix_norm(a, inf), la.matrix_norm(a, -inf, keepdim=True),
                                                      la.matrix_norm(a, "fro", dim=(0, 2)),
                                                      la.matrix_norm(a, 1, dim=(2, 0))))
    case("linalg_norm", [r(3, 4)], lambda a: (la.norm(a), la.norm(a, inf), la.norm(a[0], 1), la.norm(a, "fro"),
                                              la.norm(a, 3, dim=1), la.norm(a, -1, dim=(1, 0), keepdim=True)))


def signed_svd(u, s, vh):
    """U and Vh with each pair of singular vectors signed so that U's first row is positive (a
    singular vector is unique only up to sign)."""
    k = s.shape[-1]
    sign = torch.sign(u[..., :1, :k])
    return u[..., :, :k] * sign, s, vh[..., :k, :] * sign.mT


def svd_cases():
    """The SVD half of torch.linalg: svd (reduced and full; singular vectors signed, and the
    arbitrary extra columns of full U and Vh checked through their projector), svdvals, pinv (its
    tolerances, hermitian, rcond), matrix_rank, the matrix norms 2, -2 and "nuc", and lstsq."""
    torch.manual_seed(2042)
    la = torch.linalg

    def svd_outputs(a, full):
        u, s, vh = la.svd(a, full_matrices=full)
        k = s.shape[-1]
        su, ss, svh = signed_svd(u, s, vh)
        rest_u, rest_v = u[..., :, k:], vh[..., k:, :]  # the projectors onto the extra columns and rows
        return su, ss, svh, rest_u @ rest_u.mT, rest_v.mT @ rest_v
    case("linalg_svd", [r(2, 5, 3)], lambda a: svd_outputs(a, False)[:3])
    case("linalg_svd_wide64", [r(3, 5, dtype=torch.float64)], lambda a: svd_outputs(a, False)[:3])
    case("linalg_svd_full", [r(2, 5, 3)], lambda a: svd_outputs(a, True))
    case("linalg_svd_full_wide64", [r(2, 6, dtype=torch.float64)], lambda a: svd_outputs(a, True))
    case("linalg_svdvals", [r(2, 3, 4, 3)], la.svdvals)
    low_rank = r(2, 5, 2) @ r(2, 2, 4)  # rank 2 of 4
    sym = r(4, 4, dtype=torch.float64)
    sym = sym + sym.mT
    case("linalg_pinv", [r(3, 5), low_rank, sym],
         lambda a, b, c: (la.pinv(a), la.pinv(a.mT), la.pinv(b), la.pinv(b, atol=0.5), la.pinv(b, rtol=0.2),
                          la.pinv(c, hermitian=True), la.pinv(c[:2, :2].to(torch.float32), rcond=0.3)))
    ranks = torch.stack([torch.zeros(4, 4), torch.eye(4), r(4, 1) @ r(1, 4), r(4, 3) @ r(3, 4)])
    case("linalg_matrix_rank", [ranks, sym],
         lambda a, c: (la.matrix_rank(a), la.matrix_rank(a, atol=0.9), la.matrix_rank(a, rtol=0.5),
                       la.matrix_rank(c, hermitian=True), la.matrix_rank(a, tol=1.5)))
    case("linalg_matrix_norm_svd", [r(2, 3, 4)],
         lambda a: (la.matrix_norm(a, 2), la.matrix_norm(a, -2), la.matrix_norm(a, "nuc"),
                    la.matrix_norm(a, 2, dim=(0, 2), keepdim=True), la.matrix_norm(a, "nuc", dim=(2, 1)),
                    la.norm(a[0], 2), la.norm(a[0], "nuc")))
    # lstsq: every driver's outputs (the empty ones included), vectors, broadcast batches, a
    # rank-deficient A (its minimum-norm solution), a wide one
    case("linalg_lstsq_gelsd", [r(2, 5, 3), r(2, 5, 4)], lambda a, b: tuple(la.lstsq(a, b, driver="gelsd")))
    case("linalg_lstsq_default", [r(5, 3, dtype=torch.float64), r(5, 2, dtype=torch.float64)],
         lambda a, b: tuple(la.lstsq(a, b)))
    case("linalg_lstsq_vector_gels", [r(2, 4, 3), r(2, 4)], lambda a, b: tuple(la.lstsq(a, b, driver="gels")))
    deficient = r(6, 2, dtype=torch.float64) @ r(2, 4, dtype=torch.float64)
    case("linalg_lstsq_rank_deficient", [deficient, r(6, 3, dtype=torch.float64)],
         lambda a, b: tuple(la.lstsq(a, b, driver="gelsd")))
    case("linalg_lstsq_wide_gelss", [r(3, 5, dtype=torch.float64), r(3, 2, dtype=torch.float64)],
         lambda a, b: tuple(la.lstsq(a, b, rcond=0.1, driver="gelss")))
    case("linalg_lstsq_broadcast", [r(1, 5, 3), r(2, 5, 4)], lambda a, b: tuple(la.lstsq(a, b, driver="gelsy")))


def qr_cases():
    """linalg.qr in its three modes, tall, wide and batched. Q and R are compared as they come:
    Householder QR (LAPACK's geqrf and orgqr here) fixes their signs, and ember's follows the same
    convention. The zero column gives a reflector with tau = 0 and a zero on R's diagonal."""
    torch.manual_seed(2043)
    la = torch.linalg
    case("linalg_qr", [r(2, 5, 3)], lambda a: tuple(la.qr(a)))
    case("linalg_qr_wide64", [r(3, 5, dtype=torch.float64)], lambda a: tuple(la.qr(a)))
    case("linalg_qr_complete", [r(2, 5, 3)], lambda a: tuple(la.qr(a, mode="complete")))
    case("linalg_qr_complete_wide64", [r(2, 3, 6, dtype=torch.float64)], lambda a: tuple(la.qr(a, mode="complete")))
    case("linalg_qr_r", [r(4, 3)], lambda a: tuple(la.qr(a, mode="r")))
    zero_column = torch.cat([r(4, 2, dtype=torch.float64), torch.zeros(4, 1, dtype=torch.float64)], 1)
    case("linalg_qr_zero_column", [zero_column], lambda a: tuple(la.qr(a, mode="complete")))


def det_singular_case():
    """det's gradient at exactly singular matrices (ranks 2 and 1 of 3) beside a regular one: the
    cofactor matrix, computed here from its definition (signed minors), since PyTorch 1.13's
    autograd returns zeros at a singular matrix (pytorch/pytorch#104675)."""
    d = torch.float64
    a = torch.stack([torch.tensor([[1.0, 2, 3], [2, 4, 6], [1, 0, 1]], dtype=d),
                     torch.tensor([[1.0, 2, 3], [2, 4, 6], [3, 6, 9]], dtype=d),
                     torch.tensor([[2.0, -1, 0], [1, 3, 1], [0, 1, 4]], dtype=d)])
    out = torch.linalg.det(a)
    gout = torch.linspace(0.5, 1.5, out.numel(), dtype=d)
    cof = torch.zeros_like(a)
    for i in range(3):
        for j in range(3):
            minor = torch.cat([a[:, :i], a[:, i + 1:]], 1)
            minor = torch.cat([minor[:, :, :j], minor[:, :, j + 1:]], 2)
            cof[:, i, j] = (-1) ** (i + j) * torch.linalg.det(minor)
    put("linalg_det_singular.in0", a)
    put("linalg_det_singular.out0", out)
    put("linalg_det_singular.gout", gout)
    put("linalg_det_singular.wrt", torch.tensor([0], dtype=torch.int64))
    put("linalg_det_singular.grad0", gout[:, None, None] * cof)


def ports4_cases():
    """The fourth sweep of LibTorch calls: the rest of the unary math, atan2, remainder, fmod,
    diagonals, var_mean, the 1-D convolution and pooling, pad, prelu and instance_norm."""
    torch.manual_seed(2030)
    def unit(*s, dtype=torch.float32):  # (-0.95, 0.95): asin, acos, atanh
        return (torch.rand(*s, dtype=dtype) * 2 - 1) * 0.95
    def above1(*s, dtype=torch.float32):  # acosh
        return torch.rand(*s, dtype=dtype) * 3 + 1.01
    def wide(*s, dtype=torch.float32):
        return r(*s, dtype=dtype) * 3
    for name, fn, gen in [("tan", torch.tan, r), ("asin", torch.asin, unit), ("acos", torch.acos, unit),
                          ("atan", torch.atan, wide), ("sinh", torch.sinh, wide), ("cosh", torch.cosh, wide),
                          ("asinh", torch.asinh, wide), ("acosh", torch.acosh, above1), ("atanh", torch.atanh, unit),
                          ("log2", torch.log2, pos), ("log10", torch.log10, pos), ("exp2", torch.exp2, wide)]:
        case("unary_" + name, [gen(4, 5)], fn)
        case("unary64_" + name, [gen(3, 2, dtype=torch.float64)], fn)
    case("unary_edges", [torch.tensor([0.0, -0.0, 1.0, -1.0, 2.0, float("inf"), float("-inf"), float("nan"), 1e-30])],
         lambda x: (torch.log2(x), torch.log10(x), torch.exp2(x), torch.asin(x), torch.acosh(x), torch.atanh(x),
                    torch.atan(x), torch.sinh(x)))
    case("int_log2", [torch.tensor([1, 2, 8, 1000])], torch.log2)
    case("atan2", [r(3, 4), r(4)], torch.atan2)
    case("atan2_quadrants", [torch.tensor([0.0, -0.0, 1.0, 1.0, -1.0, -1.0, 0.0, 0.0, float("inf"), 1.0]),
                             torch.tensor([1.0, 1.0, 1.0, -1.0, 1.0, -1.0, -1.0, 0.0, float("inf"), 0.0])], torch.atan2)
    case("atan2_int", [torch.tensor([1, -2, 3]), torch.tensor([3, 4, -5])], torch.atan2)
    signs_a = torch.tensor([5.3, -5.3, 5.3, -5.3, 0.0, -0.0, 1e-30, -1e-30, 7.5, float("inf"), 3.0, 4.0])
    signs_b = torch.tensor([2.0, 2.0, -2.0, -2.0, -2.0, 2.0, 3.0, 3.0, 0.0, 2.0, float("inf"), 2.0])
    case("remainder", [signs_a, signs_b], torch.remainder)
    case("fmod", [signs_a, signs_b], torch.fmod)
    case("remainder_bcast64", [r(3, 4, dtype=torch.float64) * 5, r(4, dtype=torch.float64)], torch.remainder)
    ia, ib = torch.tensor([7, -7, 7, -7, 0, 9, -9]), torch.tensor([3, 3, -3, -3, -5, 1, -1])
    case("remainder_int", [ia, ib], torch.remainder)
    case("fmod_int", [ia, ib], torch.fmod)
    case("remainder_int8", [ia.to(torch.int8), ib.to(torch.int8)], torch.remainder)
    case("remainder_uint8", [torch.tensor([200, 7, 0], dtype=torch.uint8)], lambda x: torch.remainder(x, 3))
    case("remainder_scalar", [r(6) * 4], lambda x: torch.remainder(x, -1.5))
    case("fmod_scalar", [r(6) * 4], lambda x: torch.fmod(x, 1.5))
    case("remainder_int_float_scalar", [ia], lambda x: torch.remainder(x, 2.5))
    case("diagonal", [r(3, 4)], lambda x: torch.diagonal(x))
    case("diagonal_offset", [r(3, 4)], lambda x: (torch.diagonal(x, 1), torch.diagonal(x, -2), torch.diagonal(x, 5)))
    case("diagonal_dims", [r(2, 3, 4)], lambda x: torch.diagonal(x, 1, 2, 0))
    case("diag_vector", [r(3)], lambda x: (torch.diag(x), torch.diag(x, 2), torch.diag(x, -1)))
    case("diag_matrix", [r(4, 3)], lambda x: (torch.diag(x), torch.diag(x, -1)))
    case("diag_inf", [torch.tensor([float("inf"), 1.0])], torch.diag)
    case("trace", [r(4, 3)], torch.trace)
    case("trace_int", [torch.arange(9, dtype=torch.int32).reshape(3, 3)], torch.trace)
    case("var_mean", [r(3, 5)], lambda x: torch.var_mean(x, 1))
    case("std_mean_biased_keepdim", [r(3, 5)], lambda x: torch.std_mean(x, 0, unbiased=False, keepdim=True))
    case("var_mean_all", [r(3, 5)], torch.var_mean)
    case("conv1d", [r(2, 4, 9), r(6, 2, 3), r(6)], lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1, groups=2))
    case("conv1d_dilation_unbatched", [r(3, 10), r(2, 3, 3)], lambda x, w: F.conv1d(x, w, dilation=2))
    case("max_pool1d", [r(2, 3, 9)], lambda x: F.max_pool1d(x, 3, 2, padding=1))
    case("max_pool1d_ceil_dilation", [r(2, 3, 10)], lambda x: F.max_pool1d(x, 2, dilation=2, ceil_mode=True))
    case("avg_pool1d", [r(2, 3, 9)], lambda x: F.avg_pool1d(x, 3, 2, padding=1, count_include_pad=False))
    case("avg_pool1d_default", [r(3, 8)], lambda x: F.avg_pool1d(x, 2))
    x4 = r(2, 3, 4, 5)
    case("pad_constant", [x4], lambda x: F.pad(x, (1, 2, 0, 1), value=-1.5))
    case("pad_constant_crop", [x4], lambda x: F.pad(x, (-1, 2, 1, -2, 1, 0)))
    case("pad_reflect", [x4], lambda x: F.pad(x, (3, 1, 2, 3), mode="reflect"))
    case("pad_replicate", [x4], lambda x: F.pad(x, (2, 4, 3, 0), mode="replicate"))
    case("pad_circular", [x4], lambda x: F.pad(x, (5, 1, 2, 4), mode="circular"))
    case("pad_reflect_1d", [r(2, 3, 6)], lambda x: F.pad(x, (5, 2), mode="reflect"))
    case("pad_int", [torch.arange(6).reshape(2, 3)], lambda x: F.pad(x, (1, 1), value=7))
    case("prelu", [r(2, 3, 4), torch.tensor([0.25, -0.5, 2.0])], F.prelu)
    case("prelu_one", [r(5, 2), torch.tensor([0.1])], F.prelu)
    case("instance_norm", [r(2, 3, 5, 4)], F.instance_norm)
    case("instance_norm_affine", [r(2, 3, 7), r(3), r(3)],
         lambda x, w, b: F.instance_norm(x, weight=w, bias=b, eps=1e-3))
    rm, rv = r(3), torch.rand(3) + 0.5
    def running(x, m, v):
        m, v = m.clone(), v.clone()
        return F.instance_norm(x, m, v, use_input_stats=True, momentum=0.2), m, v
    case("instance_norm_running", [r(4, 3, 6), rm, rv], running)
    case("instance_norm_eval", [r(4, 3, 6), rm, rv], lambda x, m, v: F.instance_norm(x, m, v, use_input_stats=False))


def frontend_cases():
    """The LibTorch frontend's layers and losses (issue 17), with a seed of their own so that the
    cases above keep their inputs."""
    torch.manual_seed(1717)
    for name, fn in [("leaky_relu", F.leaky_relu), ("elu", F.elu)]:
        case("unary_" + name, [r(4, 5)], fn)
        case("unary64_" + name, [r(3, 2, dtype=torch.float64)], fn)
    case("leaky_relu_slope", [r(4, 5)], lambda x: F.leaky_relu(x, 0.2))
    case("elu_alpha", [r(4, 5) * 3], lambda x: F.elu(x, 0.5))
    case("conv_transpose2d", [r(2, 4, 5, 5), r(4, 3, 3, 3), r(3)],
         lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1))
    case("conv_transpose2d_groups_dilation", [r(2, 4, 4, 5), r(4, 2, 3, 2)],
         lambda x, w: F.conv_transpose2d(x, w, stride=(1, 2), padding=(1, 0), groups=2, dilation=2))
    case("conv_transpose2d_unbatched", [r(3, 4, 4), r(3, 2, 2, 2)], lambda x, w: F.conv_transpose2d(x, w, stride=2))
    case("interpolate_nearest_size", [r(2, 3, 5, 7)], lambda x: F.interpolate(x, size=(8, 4)))
    case("interpolate_nearest_scale", [r(1, 2, 3, 5)], lambda x: F.interpolate(x, scale_factor=2.5))
    case("interpolate_nearest_double", [r(1, 2, 3, 4)], lambda x: F.interpolate(x, scale_factor=2))
    case("interpolate_bilinear", [r(2, 3, 4, 6)],
         lambda x: F.interpolate(x, size=(7, 9), mode="bilinear", align_corners=False))
    case("interpolate_bilinear_align", [r(1, 2, 3, 4)],
         lambda x: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True))
    case("interpolate_bilinear_scale", [r(1, 2, 5, 4)],
         lambda x: F.interpolate(x, scale_factor=(1.7, 0.6), mode="bilinear", align_corners=False))
    case("interpolate_bilinear_recompute", [r(1, 1, 5, 4)],
         lambda x: F.interpolate(x, scale_factor=1.7, mode="bilinear", recompute_scale_factor=True))
    p, t = torch.rand(3, 4) * 0.98 + 0.01, torch.rand(3, 4)
    case("binary_cross_entropy", [p, t], F.binary_cross_entropy)
    case("binary_cross_entropy_weight_sum", [p, t, torch.rand(4) + 0.5],
         lambda x, y, w: F.binary_cross_entropy(x, y, weight=w, reduction="sum"))
    case("binary_cross_entropy_edges", [torch.tensor([0.0, 1.0, 0.0, 1.0, 0.5]),
                                        torch.tensor([0.0, 1.0, 1.0, 0.0, 0.5])],
         lambda x, y: F.binary_cross_entropy(x, y, reduction="none"))


def svd_invariants(a, full):
    """S, U's leading pair of columns' projector U₂U₂ᵀ, V's leading column's V₁V₁ᵀ and U diag(S²) Uᵀ
    (each independent of the singular vectors' signs), flattened into one vector."""
    u, s, vh = torch.linalg.svd(a, full_matrices=full)
    k = s.shape[-1]
    u2, v1 = u[..., :, :2], vh[..., :1, :].mT
    return torch.cat([s.flatten(), (u2 @ u2.mT).flatten(), (v1 @ v1.mT).flatten(),
                      ((u[..., :, :k] * s.square()) @ u[..., :, :k].mT).flatten()])


def grad_cases():
    torch.manual_seed(4321)
    d = torch.float64
    idx = torch.tensor([2, 0, 4, 1, 4, 3])
    case_inputs = [
        ("cross_entropy", [r(6, 5, dtype=d), idx], lambda x, t: F.cross_entropy(x, t)),
        ("cross_entropy_weight_ignore", [r(6, 5, dtype=d), torch.tensor([2, -100, 4, 1, 4, -100]), pos(5, dtype=d)],
         lambda x, t, w: F.cross_entropy(x, t, weight=w, ignore_index=-100), [0]),
        ("cross_entropy_smoothing", [r(6, 5, dtype=d), idx, pos(5, dtype=d)],
         lambda x, t, w: F.cross_entropy(x, t, weight=w, label_smoothing=0.1), [0]),
        ("cross_entropy_sum_4d", [r(2, 3, 4, 2, dtype=d), torch.randint(0, 3, (2, 4, 2))],
         lambda x, t: F.cross_entropy(x, t, reduction="sum")),
        ("cross_entropy_none", [r(4, 3, dtype=d), torch.tensor([0, 2, 1, 2])],
         lambda x, t: F.cross_entropy(x, t, reduction="none", label_smoothing=0.2)),
        ("cross_entropy_probs", [r(4, 3, dtype=d), torch.softmax(r(4, 3, dtype=d), 1)],
         lambda x, p: F.cross_entropy(x, p, label_smoothing=0.1), [0]),
        ("nll_loss", [torch.log_softmax(r(6, 5, dtype=d), 1), idx], lambda x, t: F.nll_loss(x, t)),
        ("mse_loss", [r(3, 4, dtype=d), r(3, 4, dtype=d)], lambda a, b: F.mse_loss(a, b)),
        ("bce_with_logits", [r(3, 4, dtype=d) * 3, torch.rand(3, 4, dtype=d), pos(4, dtype=d)],
         lambda x, y, pw: F.binary_cross_entropy_with_logits(x, y, pos_weight=pw), [0, 1]),
        ("layer_norm", [r(3, 4, 5, dtype=d), r(4, 5, dtype=d), r(4, 5, dtype=d)],
         lambda x, w, b: F.layer_norm(x, (4, 5), w, b)),
        ("batch_norm_train", [r(4, 3, 2, 2, dtype=d), r(3, dtype=d), r(3, dtype=d)],
         lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True)),
        ("batch_norm_eval", [r(4, 3, 2, 2, dtype=d), torch.zeros(3, dtype=d) + 0.1, torch.ones(3, dtype=d) * 2,
                             r(3, dtype=d), r(3, dtype=d)],
         lambda x, m, v, w, b: F.batch_norm(x, m, v, w, b, training=False), [0, 3, 4]),
        ("matmul_broadcast", [r(2, 1, 4, 5, dtype=d), r(3, 5, 6, dtype=d)], torch.matmul),
        ("softmax", [r(4, 7, dtype=d)], lambda x: x.softmax(1)),
        ("conv2d_groups", [r(2, 4, 6, 6, dtype=d), r(6, 2, 3, 3, dtype=d), r(6, dtype=d)],
         lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, groups=2)),
        ("max_pool2d", [r(2, 3, 7, 7, dtype=d)], lambda x: F.max_pool2d(x, 3, 2, 1)),
        ("avg_pool2d", [r(2, 3, 7, 7, dtype=d)], lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True)),
        ("adaptive_avg_pool2d", [r(2, 3, 5, 7, dtype=d)], lambda x: F.adaptive_avg_pool2d(x, (3, 2))),
        ("gelu", [r(3, 4, dtype=d)], F.gelu),
        ("logsumexp", [r(3, 4, dtype=d)], lambda x: x.logsumexp(1)),
        ("var", [r(3, 4, dtype=d)], lambda x: x.var(1)),
        ("amax_ties", [torch.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]], dtype=d)], lambda x: x.amax(1)),
        ("max_dim_ties", [torch.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]], dtype=d)], lambda x: x.max(1)[0]),
        ("maximum_ties", [torch.tensor([1.0, 2.0, 3.0], dtype=d), torch.tensor([1.0, 5.0, 3.0], dtype=d)], torch.maximum),
        ("prod_zero", [torch.tensor([[2.0, 0.0, 3.0], [1.0, 4.0, 5.0]], dtype=d)], lambda x: x.prod(1)),
        ("index_select_repeats", [r(5, 3, dtype=d)], lambda x: x.index_select(0, torch.tensor([4, 0, 4]))),
        ("cat", [r(2, 3, dtype=d), r(2, 2, dtype=d)], lambda a, b: torch.cat([a, b], 1)),
        ("norm", [r(3, 4, dtype=d)], lambda x: x.norm()),
        ("l1_loss", [r(3, 4, dtype=d), r(3, 4, dtype=d)], lambda a, b: F.l1_loss(a, b)),
        ("smooth_l1_loss", [r(3, 4, dtype=d), r(3, 4, dtype=d)], lambda a, b: F.smooth_l1_loss(a, b, beta=0.5)),
        ("smooth_l1_loss_sum", [r(3, 4, dtype=d), r(3, 4, dtype=d)],
         lambda a, b: F.smooth_l1_loss(a, b, reduction="sum")),
        ("kl_div_batchmean", [torch.log_softmax(r(3, 4, dtype=d), 1), torch.softmax(r(3, 4, dtype=d), 1)],
         lambda a, b: F.kl_div(a, b, reduction="batchmean")),
        ("kl_div_log_target", [torch.log_softmax(r(3, 4, dtype=d), 1), torch.log_softmax(r(3, 4, dtype=d), 1)],
         lambda a, b: F.kl_div(a, b, reduction="sum", log_target=True)),
        ("group_norm", [r(2, 6, 3, dtype=d), r(6, dtype=d), r(6, dtype=d)],
         lambda x, w, b: F.group_norm(x, 3, w, b)),
        ("conv2d_wide", [r(3, 8, 7, 9, dtype=d), r(16, 8, 3, 3, dtype=d), r(16, dtype=d)],
         lambda x, w, b: F.conv2d(x, w, b, padding=1)),
        ("conv2d_pad2_nobias", [r(2, 9, 5, 6, dtype=d), r(8, 9, 3, 3, dtype=d)],
         lambda x, w: F.conv2d(x, w, padding=2)),
        # The LibTorch frontend's layers and losses (issue 17).
        ("conv_transpose2d", [r(2, 4, 5, 5, dtype=d), r(4, 3, 3, 3, dtype=d), r(6, dtype=d)],
         lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1, groups=2)),
        ("conv_transpose2d_dilation", [r(2, 3, 4, 4, dtype=d), r(3, 2, 2, 3, dtype=d)],
         lambda x, w: F.conv_transpose2d(x, w, stride=(2, 1), dilation=(1, 2), padding=(0, 1))),
        ("binary_cross_entropy", [torch.rand(3, 4, dtype=d) * 0.9 + 0.05, torch.rand(3, 4, dtype=d),
                                  torch.rand(4, dtype=d) + 0.5],
         lambda x, y, w: F.binary_cross_entropy(x, y, weight=w), [0, 1]),
        ("binary_cross_entropy_none", [torch.tensor([0.0, 1.0, 0.3, 0.9], dtype=d),
                                       torch.tensor([1.0, 0.0, 0.3, 1.0], dtype=d)],
         lambda x, y: F.binary_cross_entropy(x, y, reduction="none"), [0]),
        ("interpolate_bilinear", [r(2, 2, 4, 5, dtype=d)],
         lambda x: F.interpolate(x, size=(7, 3), mode="bilinear", align_corners=False)),
        ("interpolate_bilinear_align", [r(1, 2, 3, 3, dtype=d)],
         lambda x: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True)),
        ("interpolate_nearest", [r(1, 2, 3, 5, dtype=d)], lambda x: F.interpolate(x, size=(5, 4))),
        ("leaky_relu", [r(3, 4, dtype=d)], lambda x: F.leaky_relu(x, 0.2)),
        ("elu", [r(3, 4, dtype=d)], lambda x: F.elu(x, 0.7)),
        # x[...] (Note [Tensor indexing]): repeated positions add their gradients
        ("index_long_repeats", [r(4, 5, dtype=d), torch.tensor([3, 0, 3])], lambda x, i: x[i, 1:]),
        ("index_two_separated", [r(3, 4, 5, dtype=d), torch.tensor([2, 0, 2]), torch.tensor([1, 3, 1])],
         lambda x, i, j: x[i, :, j]),
        ("index_mask", [r(3, 5, dtype=d), torch.tensor([True, False, True, True, False])], lambda x, m: x[:, m]),
        ("masked_select", [r(3, 4, dtype=d), r(4) > 0], lambda x, m: torch.masked_select(x, m)),
        ("scatter", [r(3, 4, dtype=d), torch.tensor([[0, 1, 2, 0], [2, 0, 1, 1]]), r(2, 4, dtype=d)],
         lambda x, i, s: x.scatter(0, i, s)),
        ("cumsum", [r(3, 4, dtype=d)], lambda x: x.cumsum(1)),
        ("sort_values", [r(3, 5, dtype=d)], lambda x: x.sort(0, descending=True)[0]),
        ("topk_values", [r(4, 6, dtype=d)], lambda x: x.topk(3)[0]),
        ("einsum_three", [r(2, 3, dtype=d), r(3, 4, dtype=d), r(4, 2, dtype=d)],
         lambda a, b, c: torch.einsum("ab,bc,cd->da", a, b, c)),
        ("einsum_bilinear", [r(2, 3, dtype=d), r(5, 3, 4, dtype=d), r(2, 4, dtype=d)],
         lambda x, w, y: torch.einsum("bi,oij,bj->bo", x, w, y)),
        # composites: their gradients are those of the recorded ops they are made of
        ("flip", [r(2, 3, 4, dtype=d)], lambda x: x.flip([0, 2])),
        ("roll", [r(3, 4, dtype=d)], lambda x: x.roll((1, -5), (0, 1))),
        ("repeat_interleave", [r(2, 3, dtype=d)], lambda x: x.repeat_interleave(2, dim=1)),
        ("repeat_interleave_tensor", [r(3, 2, dtype=d), torch.tensor([2, 0, 3])],
         lambda x, k: x.repeat_interleave(k, dim=0)),
        ("dot", [r(6, dtype=d), r(6, dtype=d)], torch.dot),
        ("outer", [r(3, dtype=d), r(4, dtype=d)], torch.outer),
        ("expm1", [r(3, 4, dtype=d)], torch.expm1),
        ("round", [r(3, 4, dtype=d)], torch.round),
        ("huber_loss", [r(4, 5, dtype=d) * 2, r(4, 5, dtype=d)], lambda x, y: F.huber_loss(x, y, delta=0.7)),
        ("lerp_tensor", [r(3, 4, dtype=d), r(4, dtype=d), torch.rand(3, 1, dtype=d)], torch.lerp),
        ("normalize", [r(3, 5, dtype=d)], F.normalize),
        ("cosine_similarity", [r(4, 6, dtype=d), r(4, 6, dtype=d)], F.cosine_similarity),
        # the fourth sweep
        ("tan", [r(3, 4, dtype=d)], torch.tan),
        ("asin_acos_atan", [torch.rand(3, 4, dtype=d) * 1.8 - 0.9],
         lambda x: torch.asin(x) + torch.acos(x) * 2 + torch.atan(x) * 3),
        ("hyperbolic", [r(3, 4, dtype=d)], lambda x: torch.sinh(x) + torch.cosh(x) * 2 + torch.asinh(x) * 3),
        ("acosh_atanh", [torch.rand(3, 4, dtype=d) * 0.9 + 0.05],
         lambda x: torch.acosh(x + 1.5) + torch.atanh(x) * 2),
        ("log2_log10_exp2", [pos(3, 4, dtype=d)], lambda x: torch.log2(x) + torch.log10(x) * 2 + torch.exp2(x) * 3),
        ("atan2", [r(3, 4, dtype=d), r(4, dtype=d)], torch.atan2),
        ("remainder", [r(3, 4, dtype=d) * 5, r(4, dtype=d)], torch.remainder),
        ("fmod", [r(3, 4, dtype=d) * 5, r(3, 1, dtype=d)], torch.fmod),
        ("remainder_scalar", [r(3, 4, dtype=d) * 5], lambda x: torch.remainder(x, 1.5)),
        ("diagonal", [r(2, 3, 4, dtype=d)], lambda x: torch.diagonal(x, -1, 2, 1)),
        ("diag_vector", [r(3, dtype=d)], lambda x: torch.diag(x, 1)),
        ("trace", [r(4, 3, dtype=d)], torch.trace),
        ("conv1d", [r(2, 4, 9, dtype=d), r(6, 2, 3, dtype=d), r(6, dtype=d)],
         lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1, groups=2)),
        ("max_pool1d", [r(2, 3, 9, dtype=d)], lambda x: F.max_pool1d(x, 3, 2, padding=1)),
        ("avg_pool1d", [r(2, 3, 9, dtype=d)], lambda x: F.avg_pool1d(x, 3, 2, padding=1)),
        ("pad_reflect", [r(2, 3, 4, 5, dtype=d)], lambda x: F.pad(x, (3, 1, 2, 3), mode="reflect")),
        ("pad_replicate", [r(2, 3, 4, 5, dtype=d)], lambda x: F.pad(x, (2, 4, 3, 0), mode="replicate")),
        ("pad_circular", [r(2, 3, 4, 5, dtype=d)], lambda x: F.pad(x, (5, 1, 2, 4), mode="circular")),
        ("pad_constant_crop", [r(2, 3, 4, 5, dtype=d)], lambda x: F.pad(x, (-1, 2, 1, -2, 1, 0), value=0.5)),
        ("prelu", [r(2, 3, 4, dtype=d), torch.tensor([0.25, -0.5, 2.0], dtype=d)], F.prelu),
        ("instance_norm_affine", [r(2, 3, 7, dtype=d), r(3, dtype=d), r(3, dtype=d)],
         lambda x, w, b: F.instance_norm(x, weight=w, bias=b)),
        # the sixth sweep
        ("erfinv", [(torch.rand(3, 4, dtype=d) * 2 - 1) * 0.9], torch.erfinv),
        ("cumprod", [r(3, 5, dtype=d)], lambda x: torch.cumprod(x, 1)),
        ("cumprod_zeros", [torch.tensor([[1.5, 0.0, 2.0, -1.0, 3.0], [0.0, 3.0, 0.0, 2.0, 1.0],
                                         [2.0, -2.0, 2.0, 0.5, 0.0]], dtype=d)], lambda x: torch.cumprod(x, 1)),
        ("median_dim", [r(3, 5, dtype=d)], lambda x: torch.median(x, 1)[0]),
        ("nanmedian_all", [torch.tensor([3.0, float("nan"), 1.0, 2.0], dtype=d)], torch.nanmedian),
        # torch.linalg
        ("linalg_solve", [r(2, 3, 3, dtype=d) + 3 * torch.eye(3, dtype=d), r(3, 2, dtype=d)], torch.linalg.solve),
        ("linalg_solve_vector", [r(2, 3, 3, dtype=d) + 3 * torch.eye(3, dtype=d), r(2, 3, dtype=d)],
         torch.linalg.solve),
        ("linalg_solve_right", [r(3, 3, dtype=d) + 3 * torch.eye(3, dtype=d), r(2, 4, 3, dtype=d)],
         lambda a, b: torch.linalg.solve(a, b, left=False)),
        ("linalg_inv", [r(4, 4, dtype=d) + 3 * torch.eye(4, dtype=d)], torch.linalg.inv),
        ("linalg_det", [r(2, 3, 3, dtype=d)], torch.linalg.det),
        ("linalg_logabsdet", [r(3, 3, dtype=d)], lambda a: torch.linalg.slogdet(a)[1]),
        ("linalg_cholesky", [r(2, 3, 3, dtype=d)],
         lambda a: torch.linalg.cholesky(a @ a.mT + 2 * torch.eye(3, dtype=d))),
        ("linalg_cholesky_upper", [r(4, 4, dtype=d)],
         lambda a: torch.linalg.cholesky(a @ a.mT + 2 * torch.eye(4, dtype=d), upper=True)),
        ("linalg_solve_triangular", [r(3, 3, dtype=d) + 3 * torch.eye(3, dtype=d), r(2, 3, 2, dtype=d)],
         lambda a, b: torch.linalg.solve_triangular(a, b, upper=True)),
        ("linalg_solve_triangular_right_unit", [r(3, 3, dtype=d), r(4, 3, dtype=d)],
         lambda a, b: torch.linalg.solve_triangular(a, b, upper=False, left=False, unitriangular=True)),
        ("linalg_eigh", [r(4, 4, dtype=d)],
         lambda a: torch.cat([torch.linalg.eigh(a + a.mT)[0], torch.linalg.eigh(a + a.mT)[1].pow(2).flatten()])),
        ("linalg_eigvalsh_upper", [r(2, 3, 3, dtype=d)], lambda a: torch.linalg.eigvalsh(a + a.mT, UPLO="U")),
        ("linalg_matrix_power", [r(3, 3, dtype=d) + 3 * torch.eye(3, dtype=d)],
         lambda a: torch.linalg.matrix_power(a, -3)),
        ("linalg_vector_norm", [r(3, 4, dtype=d)], lambda x: torch.linalg.vector_norm(x, 3.5, dim=1)),
        ("linalg_matrix_norm", [r(2, 3, 4, dtype=d)], lambda a: torch.linalg.matrix_norm(a, float("inf"))),
        # the SVD half: functions of the singular vectors that do not depend on their signs
        ("linalg_svd", [r(4, 3, dtype=d)], lambda a: svd_invariants(a, False)),
        ("linalg_svd_full_wide", [r(3, 5, dtype=d)], lambda a: svd_invariants(a, True)),
        ("linalg_svdvals", [r(2, 3, 4, dtype=d)], torch.linalg.svdvals),
        ("linalg_pinv", [r(3, 5, dtype=d)], torch.linalg.pinv),
        ("linalg_pinv_tall", [r(2, 5, 3, dtype=d)], torch.linalg.pinv),
        ("linalg_pinv_hermitian", [r(4, 4, dtype=d)], lambda a: torch.linalg.pinv(a + a.mT, hermitian=True)),
        ("linalg_matrix_norm_2", [r(2, 3, 4, dtype=d)], lambda a: torch.linalg.matrix_norm(a, 2)),
        ("linalg_matrix_norm_nuc", [r(4, 3, dtype=d)], lambda a: torch.linalg.matrix_norm(a, "nuc")),
        ("linalg_lstsq", [r(2, 5, 3, dtype=d), r(2, 5, 2, dtype=d)], lambda a, b: torch.linalg.lstsq(a, b).solution),
        # (PyTorch 1.13's backward fails on a vector B: a matrix here, vectors in test_gradcheck.cpp)
        ("linalg_lstsq_wide", [r(3, 5, dtype=d), r(3, 2, dtype=d)],
         lambda a, b: torch.linalg.lstsq(a, b, driver="gelsd").solution),
        # QR: both factors at once (their signs are fixed by the Householder convention)
        ("linalg_qr", [r(2, 5, 3, dtype=d)], lambda a: torch.cat([t.flatten() for t in torch.linalg.qr(a)])),
        ("linalg_qr_wide", [r(3, 5, dtype=d)], lambda a: torch.cat([t.flatten() for t in torch.linalg.qr(a)])),
        ("linalg_qr_complete_square", [r(4, 4, dtype=d)],
         lambda a: torch.cat([t.flatten() for t in torch.linalg.qr(a, mode="complete")])),
    ]
    for name, inputs, fn, *wrt in case_inputs:
        grad_case(name, inputs, fn, wrt[0] if wrt else None)


def double_backward_cases():
    """create_graph: a WGAN-GP gradient penalty through a small critic, and a Hessian-vector
    product, with the gradients PyTorch takes through its own backward."""
    torch.manual_seed(98)
    d = torch.float64
    x, w1, b1, w2, b2 = r(5, 4, dtype=d), r(6, 4, dtype=d), r(6, dtype=d), r(1, 6, dtype=d), r(1, dtype=d)
    params = [t.clone().requires_grad_(True) for t in (w1, b1, w2, b2)]
    xs = x.clone().requires_grad_(True)
    critic = F.linear(torch.tanh(F.linear(xs, params[0], params[1])), params[2], params[3])
    (gx,) = torch.autograd.grad(critic.sum(), xs, create_graph=True)
    penalty = ((gx.norm(2, dim=1) - 1) ** 2).mean()
    penalty.backward()
    for name, t in zip(["x", "w1", "b1", "w2", "b2"], [x, w1, b1, w2, b2]):
        put(f"double.gp.{name}", t)
    put("double.gp.gx", gx)
    put("double.gp.penalty", penalty)
    for name, p in zip(["w1", "b1", "w2", "b2"], params):
        put(f"double.gp.grad_{name}", p.grad if p.grad is not None else torch.zeros_like(p))  # b2: unused
    # Hessian-vector product of f(x) = sum(softmax(x a) * log_softmax(x a)) + sum(sigmoid(x)^3)
    x, a, v = r(3, 4, dtype=d), r(4, 5, dtype=d), r(3, 4, dtype=d)
    xs = x.clone().requires_grad_(True)
    y = xs @ a
    f = (torch.softmax(y, 1) * torch.log_softmax(y, 1)).sum() + (torch.sigmoid(xs) ** 3).sum()
    (g,) = torch.autograd.grad(f, xs, create_graph=True)
    (hv,) = torch.autograd.grad((g * v).sum(), xs)
    for name, t in zip(["x", "a", "v", "g", "hv"], [x, a, v, g, hv]):
        put(f"double.hvp.{name}", t)


def write(filename):
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference", filename)
    with open(path, "wb") as f:
        f.write(b"EMBREF01")
        f.write(struct.pack("<I", len(entries)))
        for name, code, shape, raw in entries:
            nb = name.encode()
            f.write(struct.pack("<I", len(nb)))
            f.write(nb)
            f.write(struct.pack("<BI", code, len(shape)))
            f.write(struct.pack(f"<{len(shape)}q", *shape))
            f.write(struct.pack("<Q", len(raw)))
            f.write(raw)
    print(f"wrote {len(entries)} tensors to {os.path.normpath(path)} (torch {torch.__version__})")


if __name__ == "__main__":
    sys.exit(main())
