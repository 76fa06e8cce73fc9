#!/usr/bin/env python3
"""Generates tests/reference/quant.bin: PyTorch's pruning masks (torch.nn.utils.prune) and, for
the quantization tests, its quantized tensors, observers' qparams, fake-quant gradients and
dynamic quantized Linear outputs. Run with Debian's PyTorch:
    /usr/bin/python3 tools/gen_reference.py     (runs this script too)
Format: "EMBREF01", as in gen_reference.py. Strings (state_dict keys) are stored as uint8 tensors
of their bytes, keys joined by newlines.

Names (the quantization entries: see quantization() below):
  prune.l1.w, .mask1, .mask2            l1_unstructured 0.3, then 0.5 of what remains (round(10.5) = 10)
  prune.l1_count.w, .mask               l1_unstructured with a count (7)
  prune.ln.w, .mask1, .mask2, .mask_inf ln_structured (0.25, n=2, dim=0), then (0.5, n=1, dim=1);
                                        alone: (2, n=inf, dim=0)
  prune.global.w1, .w2, .mask1, .mask2  global_unstructured L1 0.4 over two Linear weights
  prune.global2.mask1, .mask2           then global 0.5 again (ranks the masked weights)
  prune.linear.*                        a pruned Linear: state, input, output, weight_orig's grad,
                                        keys (state_dict keys after pruning), keys_removed (after remove)
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.utils.prune as prune

import gen_reference as ref


def put_keys(name, keys):
    ref.put(name, torch.tensor(list("\n".join(keys).encode()), dtype=torch.uint8))


def pruning():
    torch.manual_seed(2024)
    lin = nn.Linear(5, 6)
    ref.put("prune.l1.w", lin.weight)
    prune.l1_unstructured(lin, "weight", amount=0.3)
    ref.put("prune.l1.mask1", lin.weight_mask)
    prune.l1_unstructured(lin, "weight", amount=0.5)
    ref.put("prune.l1.mask2", lin.weight_mask)

    lin = nn.Linear(4, 5)
    ref.put("prune.l1_count.w", lin.weight)
    prune.l1_unstructured(lin, "weight", amount=7)
    ref.put("prune.l1_count.mask", lin.weight_mask)

    conv = nn.Conv2d(3, 8, 3)
    ref.put("prune.ln.w", conv.weight)
    prune.ln_structured(conv, "weight", amount=0.25, n=2, dim=0)
    ref.put("prune.ln.mask1", conv.weight_mask)
    prune.ln_structured(conv, "weight", amount=0.5, n=1, dim=1)
    ref.put("prune.ln.mask2", conv.weight_mask)
    conv = nn.Conv2d(3, 8, 3)
    conv.weight.data.copy_(ref_get("prune.ln.w"))
    prune.ln_structured(conv, "weight", amount=2, n=float("inf"), dim=0)
    ref.put("prune.ln.mask_inf", conv.weight_mask)

    a, b = nn.Linear(4, 6), nn.Linear(6, 3)
    ref.put("prune.global.w1", a.weight)
    ref.put("prune.global.w2", b.weight)
    prune.global_unstructured([(a, "weight"), (b, "weight")], pruning_method=prune.L1Unstructured, amount=0.4)
    ref.put("prune.global.mask1", a.weight_mask)
    ref.put("prune.global.mask2", b.weight_mask)
    prune.global_unstructured([(a, "weight"), (b, "weight")], pruning_method=prune.L1Unstructured, amount=0.5)
    ref.put("prune.global2.mask1", a.weight_mask)
    ref.put("prune.global2.mask2", b.weight_mask)

    lin = nn.Linear(4, 3)
    for k, v in lin.state_dict().items():
        ref.put(f"prune.linear.state.{k}", v)
    prune.l1_unstructured(lin, "weight", amount=0.5)
    x = torch.randn(2, 4)
    out = lin(x)
    out.sum().backward()
    ref.put("prune.linear.in", x)
    ref.put("prune.linear.out", out)
    ref.put("prune.linear.grad_orig", lin.weight_orig.grad)
    put_keys("prune.linear.keys", list(lin.state_dict().keys()))
    prune.remove(lin, "weight")
    put_keys("prune.linear.keys_removed", list(lin.state_dict().keys()))


def quantization():
    from torch.ao.quantization import observer as obs
    from torch.ao.quantization import fake_quantize as fq
    torch.manual_seed(77)
    # Quantize / dequantize, with values on rounding ties (x / scale = k + 0.5).
    x = torch.cat([torch.randn(30) * 3, torch.tensor([0.125, 0.375, -0.125, -0.375, 100.0, -100.0])])
    ref.put("q.x", x)
    for name, scale, zp, dtype in [("quint8", 0.25, 10, torch.quint8), ("qint8", 0.07, -3, torch.qint8),
                                   ("qint32", 0.001, 5, torch.qint32)]:
        q = torch.quantize_per_tensor(x, scale, zp, dtype)
        ref.put(f"q.{name}.int", q.int_repr())
        ref.put(f"q.{name}.deq", q.dequantize())
    w = torch.randn(3, 4, 2)
    ref.put("q.w", w)
    scales, zps = torch.tensor([0.1, 0.02, 0.3], dtype=torch.double), torch.tensor([0, 5, -2])
    q = torch.quantize_per_channel(w, scales, zps, 0, torch.qint8)
    ref.put("q.per_channel0.int", q.int_repr())
    ref.put("q.per_channel0.deq", q.dequantize())
    scales, zps = torch.tensor([0.05, 0.01, 0.2, 0.03], dtype=torch.double), torch.tensor([100, 120, 128, 140])
    q = torch.quantize_per_channel(w, scales, zps, 1, torch.quint8)
    ref.put("q.per_channel1.int", q.int_repr())
    ref.put("q.per_channel1.deq", q.dequantize())

    # Observers over three batches: the range they keep and the qparams they compute.
    batches = [torch.randn(4, 6) * 2 + 0.5, torch.randn(4, 6) * 3 - 1, torch.randn(4, 6)]
    for i, b in enumerate(batches):
        ref.put(f"obs.batch{i}", b)
    cases = {
        "minmax": obs.MinMaxObserver(),
        "minmax_sym": obs.MinMaxObserver(dtype=torch.qint8, qscheme=torch.per_tensor_symmetric),
        "minmax_sym_quint8": obs.MinMaxObserver(dtype=torch.quint8, qscheme=torch.per_tensor_symmetric),
        "minmax_reduce": obs.MinMaxObserver(reduce_range=True),
        "moving": obs.MovingAverageMinMaxObserver(),
        "moving_custom": obs.MovingAverageMinMaxObserver(quant_min=0, quant_max=255, reduce_range=True),
        "per_channel_sym": obs.PerChannelMinMaxObserver(dtype=torch.qint8, qscheme=torch.per_channel_symmetric),
        "per_channel_affine1": obs.PerChannelMinMaxObserver(ch_axis=1),
    }
    for name, o in cases.items():
        for b in batches:
            o(b)
        scale, zp = o.calculate_qparams()
        ref.put(f"obs.{name}.min", o.min_val)
        ref.put(f"obs.{name}.max", o.max_val)
        ref.put(f"obs.{name}.scale", scale.float())
        ref.put(f"obs.{name}.zero_point", zp.to(torch.int32))

    # The histogram observer (2048 bins, L2 search) over three batches of different ranges, and the
    # same with a symmetric qint8 scheme and with 7 bits.
    hist_batches = [torch.randn(500) * 2 + 0.3, torch.randn(700) * 4 - 1, torch.rand(300) * 6 - 2]
    for i, b in enumerate(hist_batches):
        ref.put(f"hist.batch{i}", b)
    for name, o in {"affine": obs.HistogramObserver(),
                    "sym": obs.HistogramObserver(dtype=torch.qint8, qscheme=torch.per_tensor_symmetric),
                    "reduce": obs.HistogramObserver(reduce_range=True)}.items():
        for i, b in enumerate(hist_batches):
            o(b)
            if i == 0:
                ref.put(f"hist.{name}.histogram0", o.histogram)
        scale, zp = o.calculate_qparams()
        ref.put(f"hist.{name}.histogram", o.histogram)
        ref.put(f"hist.{name}.min", o.min_val)
        ref.put(f"hist.{name}.max", o.max_val)
        ref.put(f"hist.{name}.scale", scale.float())
        ref.put(f"hist.{name}.zero_point", zp.to(torch.int32))

    # Fake quantization: forward and the straight-through gradient, with values cut by the clamp.
    x = torch.randn(40) * 4
    gout = torch.linspace(0.5, 1.5, 40)
    leaf = x.clone().requires_grad_()
    out = torch.fake_quantize_per_tensor_affine(leaf, 0.1, 3, 0, 127)
    out.backward(gout)
    ref.put("fq.x", x)
    ref.put("fq.gout", gout)
    ref.put("fq.out", out)
    ref.put("fq.grad", leaf.grad)
    xw = torch.randn(3, 5) * 2
    leaf = xw.clone().requires_grad_()
    out = torch.fake_quantize_per_channel_affine(leaf, torch.tensor([0.05, 0.1, 0.02]), torch.tensor([0, -1, 2],
                                                 dtype=torch.int32), 0, -128, 127)
    out.backward(torch.ones(3, 5))
    ref.put("fq.pc.x", xw)
    ref.put("fq.pc.out", out)
    ref.put("fq.pc.grad", leaf.grad)
    # The FakeQuantize module (default_fake_quant: moving average, [0, 255] halved by reduce_range).
    m = fq.default_fake_quant()
    for i, b in enumerate(batches):
        y = m(b)
    ref.put("fqm.out", y)
    ref.put("fqm.scale", m.scale)
    ref.put("fqm.zero_point", m.zero_point.to(torch.int32))

    # Dynamic quantized Linear (torch.ao.quantization.quantize_dynamic), per tensor and per channel.
    from torch.ao.quantization import per_channel_dynamic_qconfig
    lin = nn.Linear(40, 12)
    x = torch.randn(7, 40)
    for k, v in lin.state_dict().items():
        ref.put(f"dyn.state.{k}", v)
    ref.put("dyn.x", x)
    for name, spec in [("per_tensor", {nn.Linear}), ("per_channel", {nn.Linear: per_channel_dynamic_qconfig})]:
        qm = torch.ao.quantization.quantize_dynamic(nn.Sequential(lin), spec, dtype=torch.qint8)
        qw = qm[0].weight()
        ref.put(f"dyn.{name}.weight_int", qw.int_repr())
        if qw.qscheme() == torch.per_tensor_affine:
            ref.put(f"dyn.{name}.weight_scale", torch.tensor([qw.q_scale()], dtype=torch.float32))
        else:
            ref.put(f"dyn.{name}.weight_scale", qw.q_per_channel_scales().float())
        ref.put(f"dyn.{name}.out", qm(x))
    put_keys("dyn.engine", [torch.backends.quantized.engine])


def ref_get(name):
    for n, code, shape, raw in ref.entries:
        if n == name:
            return torch.frombuffer(bytearray(raw), dtype=torch.float32).reshape(shape)
    raise KeyError(name)


def main():
    ref.entries.clear()
    pruning()
    quantization()
    ref.write("quant.bin")


if __name__ == "__main__":
    sys.exit(main())
