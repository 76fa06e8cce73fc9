#!/usr/bin/env python3
"""Generates tests/reference/quant.bin: PyTorch's pruning masks (torch.nn.utils.prune) and, for
the quantization tests, its quantized tensors, observers' qparams, fake-quant gradients and
dynamic quantized Linear outputs. Run with Debian's PyTorch:
    /usr/bin/python3 tools/gen_reference.py     (runs this script too)
Format: "EMBREF01", as in gen_reference.py. Strings (state_dict keys) are stored as uint8 tensors
of their bytes, keys joined by newlines.

Names:
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


def ref_get(name):
    for n, code, shape, raw in ref.entries:
        if n == name:
            return torch.frombuffer(bytearray(raw), dtype=torch.float32).reshape(shape)
    raise KeyError(name)


def main():
    ref.entries.clear()
    pruning()
    ref.write("quant.bin")


if __name__ == "__main__":
    sys.exit(main())
