#!/usr/bin/env python3
"""Generates tests/reference/nn.bin (layers, optimizer trajectories, LR schedules) and
tests/reference/torch_mlp.safetensors (weights saved from PyTorch) and torch_save.pt (a tensor
saved by torch.save, which ember refuses by name) for ember's nn, optim and checkpoint tests. Run with Debian's PyTorch:  /usr/bin/python3 tools/gen_reference.py
(which runs this script too). Format of nn.bin: "EMBREF01", as in gen_reference.py.

Names in nn.bin:
  layer.<case>.state.<key>   the layer's state_dict before the forward (ember loads it)
  layer.<case>.in / .out / .gout / .grad_in   input, output, upstream gradient, input gradient
  layer.<case>.grad.<param>  parameter gradients; layer.<case>.after.<buffer> buffers after
  optim.model.<key>, optim.model.x / .y   the small model's initial state and data
  optim.<model|rosen>.<config>  parameters after each of 10 steps, flattened: [10, P]
  optim.<model64|rosen64>.<config>  the same in float64 (L-BFGS configurations)
  sched.<config>             lr after construction and after each of 100 steps: [101]
  sched.<config>.momentum    the same for the momentum (OneCycleLR)
  st_mlp.in / st_mlp.out     input and output of the model in torch_mlp.safetensors
  mha.<case>.state.<key> / .in0.. / .out / .weights / .gout / .gweights / .grad_in0.. / .grad.<param>
                             nn.MultiheadAttention (in0 alone: self-attention), with its masks
                             .key_padding_mask / .attn_mask when given
  encoder.<case>.state.<key> / .in / .out / .gout / .grad_in / .grad.<param> / .mask /
                             .key_padding_mask: TransformerEncoderLayer and TransformerEncoder
  decoder.<case>.state.<key> / .tgt / .memory / .out / .gout / .grad_tgt / .grad_memory /
                             .grad.<param> / masks by their keyword names (.tgt_mask, ...):
                             TransformerDecoderLayer and TransformerDecoder
  transformer.<case>...      the same for nn.Transformer, inputs .src and .tgt
  embed.<case>.weight / .input / .offsets / .psw / .out / .gout / .weight_after / .grad_weight /
                             .grad_psw: F.embedding and F.embedding_bag (weight_after: max_norm's
                             renormalization in place)
  sdpa.<case>.in0..in3 / .out0 / .gout / .grad0..2   F.scaled_dot_product_attention (float64):
                             query, key, value, mask (bool, floating, or an empty [0] for none),
                             output, upstream gradient, gradients of query, key and value
The C++ tests build the same layers and optimizer configurations by these names.
"""
import json
import math
import os
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F

import gen_reference as ref

HERE = os.path.dirname(os.path.abspath(__file__))


# ---- the small GPT pieces, nanoGPT's layout and names (ember's nn/modules/transformer.h) ----
class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head = n_head

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = [z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v)]
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        y = att.softmax(-1) @ v
        return self.c_proj(y.transpose(1, 2).reshape(b, t, c))


class MLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


def r(*shape):
    return torch.randn(*shape)


def layer(name, module, x, train=True):
    """Stores the module's state, x, the output, an upstream gradient and the gradients."""
    module.train(train)
    for k, v in module.state_dict().items():
        ref.put(f"layer.{name}.state.{k}", v)
    if x.is_floating_point():
        x = x.clone().requires_grad_(True)
    out = module(x)
    gout = torch.linspace(-1.0, 1.0, out.numel()).reshape(out.shape)
    out.backward(gout)
    ref.put(f"layer.{name}.in", x)
    ref.put(f"layer.{name}.out", out)
    ref.put(f"layer.{name}.gout", gout)
    if x.is_floating_point():
        ref.put(f"layer.{name}.grad_in", x.grad)
    for k, p in module.named_parameters():
        ref.put(f"layer.{name}.grad.{k}", p.grad if p.grad is not None else torch.zeros_like(p))
    for k, b in module.named_buffers():
        ref.put(f"layer.{name}.after.{k}", b)


def layers():
    torch.manual_seed(2024)
    layer("linear", nn.Linear(5, 3), r(4, 5))
    layer("linear_nobias_3d", nn.Linear(5, 3, bias=False), r(2, 4, 5))
    layer("conv2d", nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2), r(2, 4, 7, 7))
    layer("conv2d_dilation", nn.Conv2d(3, 5, (3, 2), padding=(2, 1), dilation=2), r(2, 3, 6, 6))
    layer("maxpool2d", nn.MaxPool2d(3, 2, 1), r(2, 3, 7, 7))
    layer("avgpool2d", nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False), r(2, 3, 7, 7))
    layer("adaptive_avgpool2d", nn.AdaptiveAvgPool2d((2, 3)), r(2, 3, 5, 7))
    bn = nn.BatchNorm1d(4)
    layer("batchnorm1d", bn, r(8, 4))
    layer("batchnorm1d_3d", nn.BatchNorm1d(3, momentum=None), r(4, 3, 5))
    layer("batchnorm2d", nn.BatchNorm2d(3, momentum=0.2), r(4, 3, 3, 3))
    bn_eval = nn.BatchNorm2d(3)
    with torch.no_grad():
        bn_eval.running_mean.copy_(r(3))
        bn_eval.running_var.copy_(torch.rand(3) + 0.5)
        bn_eval.weight.copy_(r(3))
        bn_eval.bias.copy_(r(3))
    layer("batchnorm2d_eval", bn_eval, r(4, 3, 3, 3), train=False)
    ln = nn.LayerNorm([4, 5])
    with torch.no_grad():
        ln.weight.copy_(r(4, 5))
        ln.bias.copy_(r(4, 5))
    layer("layernorm", ln, r(3, 4, 5))
    gn = nn.GroupNorm(2, 6)
    with torch.no_grad():
        gn.weight.copy_(r(6))
        gn.bias.copy_(r(6))
    layer("groupnorm", gn, r(2, 6, 3, 2))
    layer("dropout_eval", nn.Dropout(0.3), r(4, 5), train=False)
    layer("embedding", nn.Embedding(10, 4), torch.tensor([[1, 9, 1], [0, 3, 1]]))
    layer("embedding_padding", nn.Embedding(10, 4, padding_idx=1), torch.tensor([[1, 9, 1], [0, 3, 1]]))
    layer("flatten", nn.Flatten(), r(2, 3, 2, 2))
    layer("identity", nn.Identity(), r(3, 2))
    layer("relu", nn.ReLU(), r(4, 5))
    layer("gelu", nn.GELU(), r(4, 5))
    layer("gelu_tanh", nn.GELU(approximate="tanh"), r(4, 5))
    layer("silu", nn.SiLU(), r(4, 5))
    layer("tanh", nn.Tanh(), r(4, 5))
    layer("sigmoid", nn.Sigmoid(), r(4, 5))
    layer("softmax", nn.Softmax(dim=1), r(3, 4, 2))
    layer("sequential", nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 2)), r(6, 5))
    layer("cnn", nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                               nn.Linear(4 * 4 * 4, 10)), r(3, 1, 8, 8))
    layer("attention", CausalSelfAttention(8, 2), r(2, 5, 8))
    layer("mlp", MLP(8), r(2, 3, 8))
    layer("block", Block(8, 2), r(2, 5, 8))
    # The LibTorch frontend's layers (issue 17), with a seed of their own.
    torch.manual_seed(1717)
    layer("conv_transpose2d", nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2),
          r(2, 4, 5, 5))
    layer("conv_transpose2d_nobias", nn.ConvTranspose2d(3, 2, (2, 3), bias=False, dilation=(1, 2)), r(2, 3, 4, 4))
    layer("leaky_relu", nn.LeakyReLU(0.2), r(4, 5))
    layer("elu", nn.ELU(0.7), r(4, 5))
    layer("softplus", nn.Softplus(beta=2, threshold=5), r(4, 5) * 3)
    layer("log_softmax", nn.LogSoftmax(dim=1), r(3, 4, 2))
    layer("upsample_nearest", nn.Upsample(scale_factor=2), r(2, 3, 3, 4))
    layer("upsample_bilinear", nn.Upsample(size=(5, 7), mode="bilinear", align_corners=True), r(2, 2, 3, 4))
    layer("dropout2d_eval", nn.Dropout2d(0.3), r(2, 3, 4, 4), train=False)
    layer("dcgan_generator", nn.Sequential(nn.ConvTranspose2d(8, 4, 4, bias=False), nn.BatchNorm2d(4), nn.ReLU(),
                                           nn.ConvTranspose2d(4, 1, 4, stride=2, padding=1, bias=False),
                                           nn.Tanh()), r(3, 8, 1, 1))


# ---- optimizer trajectories ----
OPTIMIZERS = {
    # name: (constructor, rosenbrock lr, model lr)
    "sgd": (lambda p, lr: torch.optim.SGD(p, lr=lr), 1e-3, 0.1),
    "sgd_momentum": (lambda p, lr: torch.optim.SGD(p, lr=lr, momentum=0.9, dampening=0.1), 1e-3, 0.1),
    "sgd_nesterov": (lambda p, lr: torch.optim.SGD(p, lr=lr, momentum=0.9, nesterov=True), 1e-3, 0.1),
    "sgd_weight_decay": (lambda p, lr: torch.optim.SGD(p, lr=lr, momentum=0.5, weight_decay=0.1), 1e-3, 0.1),
    "adam": (lambda p, lr: torch.optim.Adam(p, lr=lr), 1e-2, 1e-2),
    "adam_amsgrad_l2": (lambda p, lr: torch.optim.Adam(p, lr=lr, amsgrad=True, weight_decay=0.1), 1e-2, 1e-2),
    "adamw": (lambda p, lr: torch.optim.AdamW(p, lr=lr, betas=(0.8, 0.99), weight_decay=0.1), 1e-2, 1e-2),
    "rmsprop": (lambda p, lr: torch.optim.RMSprop(p, lr=lr), 1e-3, 1e-3),
    "rmsprop_centered_momentum": (lambda p, lr: torch.optim.RMSprop(p, lr=lr, momentum=0.5, centered=True,
                                                                     weight_decay=0.01), 1e-3, 1e-3),
    "adagrad": (lambda p, lr: torch.optim.Adagrad(p, lr=lr), 0.1, 0.05),
    "adagrad_decay_maximize": (lambda p, lr: torch.optim.Adagrad(p, lr=lr, lr_decay=0.1, weight_decay=0.1,
                                                                initial_accumulator_value=0.5, eps=1e-6,
                                                                maximize=True), 0.1, 0.05),
    "lbfgs": (lambda p, lr: torch.optim.LBFGS(p, lr=lr, max_iter=5), 1.0, 1.0),
    "lbfgs_strong_wolfe": (lambda p, lr: torch.optim.LBFGS(p, lr=lr, max_iter=5, line_search_fn="strong_wolfe"),
                           1.0, 1.0),
}


def rosenbrock(x):
    return (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2


def trajectory(params, make, loss_fn):
    opt = make(params)
    rows = []
    for _ in range(10):
        def closure():
            opt.zero_grad()
            loss = loss_fn()
            loss.backward()
            return loss
        opt.step(closure)
        rows.append(torch.cat([p.detach().reshape(-1) for p in params]))
    return torch.stack(rows)


def optimizers():
    torch.manual_seed(7)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    x, y = r(16, 4), r(16, 3)
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    for k, v in initial.items():
        ref.put(f"optim.model.{k}", v)
    ref.put("optim.model.x", x)
    ref.put("optim.model.y", y)
    for name, (make, rosen_lr, model_lr) in OPTIMIZERS.items():
        xr = torch.tensor([-1.5, 2.0], requires_grad=True)
        ref.put(f"optim.rosen.{name}", trajectory([xr], lambda p: make(p, rosen_lr), lambda: rosenbrock(xr)))
        model.load_state_dict(initial)
        ref.put(f"optim.model.{name}", trajectory(list(model.parameters()), lambda p: make(p, model_lr),
                                                  lambda: F.mse_loss(model(x), y)))
        if name.startswith("lbfgs"):
            # L-BFGS in float32 amplifies rounding (a different summation order in a dot product)
            # from step to step; float64 trajectories show that the algorithms agree.
            xr = torch.tensor([-1.5, 2.0], dtype=torch.float64, requires_grad=True)
            ref.put(f"optim.rosen64.{name}", trajectory([xr], lambda p: make(p, rosen_lr), lambda: rosenbrock(xr)))
            model.load_state_dict(initial)
            model.double()
            ref.put(f"optim.model64.{name}", trajectory(list(model.parameters()), lambda p: make(p, model_lr),
                                                        lambda: F.mse_loss(model(x.double()), y.double())))
            model.float()


# ---- LR schedulers ----
SCHEDULERS = {
    "step": lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=7, gamma=0.5),
    "multistep": lambda o: torch.optim.lr_scheduler.MultiStepLR(o, milestones=[10, 30, 30, 60], gamma=0.3),
    "exponential": lambda o: torch.optim.lr_scheduler.ExponentialLR(o, gamma=0.95),
    "cosine": lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=30, eta_min=0.001),
    "linear": lambda o: torch.optim.lr_scheduler.LinearLR(o, start_factor=0.25, end_factor=1.0, total_iters=10),
    "onecycle": lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=1.0, total_steps=100),
    "onecycle_three_phase_linear": lambda o: torch.optim.lr_scheduler.OneCycleLR(
        o, max_lr=0.5, total_steps=100, pct_start=0.25, anneal_strategy="linear", three_phase=True),
    "sequential": lambda o: torch.optim.lr_scheduler.SequentialLR(
        o, [torch.optim.lr_scheduler.LinearLR(o, start_factor=0.1, total_iters=5),
            torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=20)], milestones=[5]),
}


def schedulers():
    import warnings
    warnings.simplefilter("ignore")
    for name, make in SCHEDULERS.items():
        p = torch.zeros(1, requires_grad=True)
        opt = torch.optim.SGD([p], lr=0.1, momentum=0.9)
        sched = make(opt)
        lrs, moms = [opt.param_groups[0]["lr"]], [opt.param_groups[0]["momentum"]]
        for _ in range(100):
            opt.step()
            sched.step()
            lrs.append(opt.param_groups[0]["lr"])
            moms.append(opt.param_groups[0]["momentum"])
        ref.put(f"sched.{name}", torch.tensor(lrs, dtype=torch.float64))
        ref.put(f"sched.{name}.momentum", torch.tensor(moms, dtype=torch.float64))


# ---- a safetensors file written from PyTorch tensors ----
ST_DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.bfloat16: "BF16",
             torch.int64: "I64", torch.int32: "I32", torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL"}


def save_safetensors(tensors, path, metadata=None):
    """The safetensors layout (Debian has no python3-safetensors): u64 header length, JSON, data."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, t in tensors.items():
        t = t.detach().contiguous()
        raw = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()
        header[name] = {"dtype": ST_DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    js = json.dumps(header).encode()
    js += b" " * ((8 - len(js) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(js)) + js + b"".join(blobs))


def safetensors_model():
    torch.manual_seed(99)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    x = r(5, 4)
    save_safetensors(model.state_dict(), os.path.join(HERE, "..", "tests", "reference", "torch_mlp.safetensors"),
                     {"format": "pt"})
    ref.put("st_mlp.in", x)
    ref.put("st_mlp.out", model(x))
    # What torch.save writes (a zip archive): ember must name it and say how to convert it.
    torch.save(torch.arange(3.0), os.path.join(HERE, "..", "tests", "reference", "torch_save.pt"))


def attention():
    torch.manual_seed(4242)

    def d(*shape):
        return torch.randn(*shape, dtype=torch.float64)

    none = torch.zeros(0, dtype=torch.float64)
    # name: (query, key, value, mask or none, is_causal, scale)
    cases = {
        "plain": (d(2, 2, 4, 3), d(2, 2, 5, 3), d(2, 2, 5, 6), none, False, None),
        "causal_scale": (d(2, 3, 4, 5), d(2, 3, 4, 5), d(2, 3, 4, 2), none, True, 0.3),
        "bool_mask": (d(2, 4, 3), d(2, 5, 3), d(2, 5, 3), torch.rand(4, 5) > 0.3, False, None),
        "float_mask": (d(2, 2, 4, 3), d(2, 2, 5, 3), d(2, 2, 5, 3), d(2, 1, 4, 5), False, None),
        "broadcast": (d(2, 3, 4, 3), d(1, 3, 5, 3), d(1, 3, 5, 2), none, False, None),
    }
    for name, (q, k, v, mask, causal, scale) in cases.items():
        def fn(q, k, v, mask, causal=causal, scale=scale):
            return sdpa(q, k, v, mask if mask.numel() else None, causal, scale)
        ref.grad_case(f"sdpa.{name}", [q, k, v, mask], fn, wrt=[0, 1, 2])


def sdpa(q, k, v, mask, is_causal, scale):
    """F.scaled_dot_product_attention (PyTorch >= 2.1 for `scale`); Debian's PyTorch 1.13 predates
    it, so there its documented reference implementation, in PyTorch's ops."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale)
    L, S = q.size(-2), k.size(-2)
    scores = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.size(-1)) if scale is None else scale)
    if is_causal:
        mask = torch.ones(L, S, dtype=torch.bool).tril()
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    return torch.softmax(scores, dim=-1) @ v


def rnn(name, module, x, h0=None, c0=None):
    """A recurrent layer: its state, the input and initial states, the output and final states,
    their upstream gradients, and the gradients of the input, the initial states and the weights."""
    for k, v in module.state_dict().items():
        ref.put(f"rnn.{name}.state.{k}", v)
    x = x.clone().requires_grad_(True)
    states = [s.clone().requires_grad_(True) for s in (h0, c0) if s is not None]
    if isinstance(module, nn.LSTM):
        out, (hn, cn) = module(x, tuple(states) if states else None)
        finals = [hn, cn]
    else:
        out, hn = module(x, states[0] if states else None)
        finals = [hn]
    ref.put(f"rnn.{name}.in", x)
    loss = 0
    for key, t in [("out", out)] + list(zip(["hn", "cn"], finals)):
        g = torch.linspace(-1.0, 1.0, t.numel()).reshape(t.shape)
        ref.put(f"rnn.{name}.{key}", t)
        ref.put(f"rnn.{name}.g{key}", g)
        loss = loss + (t * g).sum()
    loss.backward()
    ref.put(f"rnn.{name}.grad_in", x.grad)
    for key, s in zip(["h0", "c0"], states):
        ref.put(f"rnn.{name}.{key}", s)
        ref.put(f"rnn.{name}.grad_{key}", s.grad)
    for k, p in module.named_parameters():
        ref.put(f"rnn.{name}.grad.{k}", p.grad)


def rnns():
    torch.manual_seed(2028)
    rnn("lstm", nn.LSTM(3, 5), r(4, 2, 3), r(1, 2, 5), r(1, 2, 5))
    rnn("lstm_2layer_bidir_batch_first", nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True),
        r(2, 5, 3))
    rnn("gru", nn.GRU(3, 5, num_layers=2), r(4, 2, 3), r(2, 2, 5))
    rnn("gru_bidir_unbatched", nn.GRU(3, 4, bidirectional=True), r(5, 3))
    rnn("rnn_relu_nobias", nn.RNN(3, 4, nonlinearity="relu", bias=False), r(4, 2, 3), r(1, 2, 4))
    rnn("rnn_tanh_2layer", nn.RNN(2, 3, num_layers=2, batch_first=True), r(3, 4, 2))


def perturb(module):
    """Moves every parameter off its initial value (LayerNorm's ones and zeros, zero biases), so
    that a parameter read at the wrong place shows."""
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    return module


def mha(name, module, q, k, v, key_padding_mask=None, attn_mask=None, need_weights=True, average=True):
    """nn.MultiheadAttention: its state, the inputs (one when it is self-attention) and masks,
    the output and weights, their upstream gradients, and every gradient."""
    perturb(module).train()
    for key, t in module.state_dict().items():
        ref.put(f"mha.{name}.state.{key}", t)
    self_attention = q is k and k is v
    leaves = [t.clone().requires_grad_(True) for t in ([q] if self_attention else [q, k, v])]
    qs, ks, vs = (leaves * 3) if self_attention else leaves
    out, weights = module(qs, ks, vs, key_padding_mask=key_padding_mask, need_weights=need_weights,
                          attn_mask=attn_mask, average_attn_weights=average)
    loss = 0
    for key, t in [("out", out), ("weights", weights)]:
        if t is None:
            continue
        g = torch.linspace(-1.0, 1.0, t.numel()).reshape(t.shape)
        ref.put(f"mha.{name}.{key}", t)
        ref.put(f"mha.{name}.g{key}", g)
        loss = loss + (t * g).sum()
    loss.backward()
    for i, t in enumerate(leaves):
        ref.put(f"mha.{name}.in{i}", t)
        ref.put(f"mha.{name}.grad_in{i}", t.grad)
    for key, t in [("key_padding_mask", key_padding_mask), ("attn_mask", attn_mask)]:
        if t is not None:
            ref.put(f"mha.{name}.{key}", t)
    for key, p in module.named_parameters():
        ref.put(f"mha.{name}.grad.{key}", p.grad)


def encoder(name, module, src, mask=None, src_key_padding_mask=None):
    """nn.TransformerEncoderLayer / TransformerEncoder (dropout 0, train mode: PyTorch's math path)."""
    perturb(module).train()
    for key, t in module.state_dict().items():
        ref.put(f"encoder.{name}.state.{key}", t)
    x = src.clone().requires_grad_(True)
    out = module(x, mask, src_key_padding_mask)
    g = torch.linspace(-1.0, 1.0, out.numel()).reshape(out.shape)
    (out * g).sum().backward()
    ref.put(f"encoder.{name}.in", x)
    ref.put(f"encoder.{name}.out", out)
    ref.put(f"encoder.{name}.gout", g)
    ref.put(f"encoder.{name}.grad_in", x.grad)
    for key, t in [("mask", mask), ("key_padding_mask", src_key_padding_mask)]:
        if t is not None:
            ref.put(f"encoder.{name}.{key}", t)
    for key, p in module.named_parameters():
        ref.put(f"encoder.{name}.grad.{key}", p.grad)


def transformers():
    torch.manual_seed(2031)
    x = r(5, 3, 8)
    mha("self", nn.MultiheadAttention(8, 2), x, x, x)
    padding = torch.tensor([[False, False, True, False, False, True], [False, True, False, False, False, False]])
    mha("cross_masks", nn.MultiheadAttention(8, 4), r(4, 2, 8), r(6, 2, 8), r(6, 2, 8), key_padding_mask=padding,
        attn_mask=r(4, 6), average=False)
    causal = torch.ones(3, 4, dtype=torch.bool).triu(2)
    mha("kdim_vdim_bias_kv_zero_attn",
        nn.MultiheadAttention(6, 2, kdim=5, vdim=3, add_bias_kv=True, add_zero_attn=True),
        r(3, 2, 6), r(4, 2, 5), r(4, 2, 3), key_padding_mask=torch.tensor([[False] * 3 + [True], [False] * 4]),
        attn_mask=causal)
    u = r(5, 8)
    mha("unbatched_no_weights", nn.MultiheadAttention(8, 2, bias=False), u, u, u,
        attn_mask=torch.ones(5, 5, dtype=torch.bool).triu(1), need_weights=False)
    y = r(3, 2, 4)
    mha("attn_mask_3d", nn.MultiheadAttention(4, 2), y, y, y, attn_mask=r(4, 3, 3))
    encoder("layer", nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0), r(5, 3, 8),
            src_key_padding_mask=torch.tensor([[False] * 4 + [True], [False] * 5, [False, True] + [False] * 3]))
    encoder("layer_gelu_norm_first_batch_first",
            nn.TransformerEncoderLayer(8, 2, dim_feedforward=12, dropout=0.0, activation="gelu", norm_first=True,
                                       batch_first=True),
            r(3, 5, 8), mask=nn.Transformer.generate_square_subsequent_mask(5))
    encoder("stack_norm",
            nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0), 2,
                                  norm=nn.LayerNorm(8)),
            r(4, 2, 8), mask=torch.ones(4, 4, dtype=torch.bool).triu(1))


def two_inputs(kind, name, module, inputs, masks):
    """nn.TransformerDecoderLayer / TransformerDecoder (inputs tgt, memory) and nn.Transformer
    (src, tgt), dropout 0, train mode: the state, the inputs, the masks by their keyword names,
    the output, its upstream gradient, and every gradient."""
    perturb(module).train()
    base = f"{kind}.{name}"
    for key, t in module.state_dict().items():
        ref.put(f"{base}.state.{key}", t)
    leaves = {key: t.clone().requires_grad_(True) for key, t in inputs.items()}
    out = module(*leaves.values(), **masks)
    g = torch.linspace(-1.0, 1.0, out.numel()).reshape(out.shape)
    (out * g).sum().backward()
    ref.put(f"{base}.out", out)
    ref.put(f"{base}.gout", g)
    for key, t in leaves.items():
        ref.put(f"{base}.{key}", t)
        ref.put(f"{base}.grad_{key}", t.grad)
    for key, t in masks.items():
        ref.put(f"{base}.{key}", t)
    for key, p in module.named_parameters():
        ref.put(f"{base}.grad.{key}", p.grad)


def seq2seq():
    torch.manual_seed(2032)
    no, yes = False, True
    causal4 = nn.Transformer.generate_square_subsequent_mask(4)
    two_inputs("decoder", "layer", nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0),
               {"tgt": r(4, 3, 8), "memory": r(5, 3, 8)},
               {"tgt_mask": causal4,
                "memory_key_padding_mask": torch.tensor([[no] * 4 + [yes], [no] * 5, [no, yes] + [no] * 3])})
    two_inputs("decoder", "layer_gelu_norm_first_batch_first",
               nn.TransformerDecoderLayer(8, 2, dim_feedforward=12, dropout=0.0, activation="gelu", norm_first=True,
                                          batch_first=True),
               {"tgt": r(2, 4, 8), "memory": r(2, 6, 8)},
               {"memory_mask": torch.ones(4, 6, dtype=torch.bool).triu(3),
                "tgt_key_padding_mask": torch.tensor([[no, no, yes, no], [no] * 4])})
    two_inputs("decoder", "stack_norm",
               nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0), 2,
                                     norm=nn.LayerNorm(8)),
               {"tgt": r(3, 2, 8), "memory": r(5, 2, 8)},
               {"tgt_mask": nn.Transformer.generate_square_subsequent_mask(3)})
    padding = torch.tensor([[no] * 4 + [yes], [no] * 5])
    two_inputs("transformer", "small",
               nn.Transformer(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=1, dim_feedforward=16,
                              dropout=0.0),
               {"src": r(5, 2, 8), "tgt": r(4, 2, 8)},
               {"tgt_mask": causal4, "src_key_padding_mask": padding, "memory_key_padding_mask": padding})
    two_inputs("transformer", "gelu_norm_first_batch_first",
               nn.Transformer(d_model=6, nhead=3, num_encoder_layers=1, num_decoder_layers=2, dim_feedforward=10,
                              dropout=0.0, activation="gelu", layer_norm_eps=1e-6, batch_first=True,
                              norm_first=True),
               {"src": r(2, 3, 6), "tgt": r(2, 4, 6)},
               {"src_mask": r(3, 3), "memory_mask": torch.ones(4, 3, dtype=torch.bool).triu(2)})


def embedding_case(name, fn, weight, input, offsets=None, psw=None, **options):
    """F.embedding / F.embedding_bag (fn) on a copy of `weight`: the weight before and after (max_norm
    renormalizes in place), the inputs, the output, its upstream gradient, and the gradients."""
    base = f"embed.{name}"
    ref.put(f"{base}.weight", weight)
    w = weight.clone().requires_grad_(True)
    args = {}
    if offsets is not None:
        args["offsets"] = offsets
        ref.put(f"{base}.offsets", offsets)
    if psw is not None:
        psw = psw.clone().requires_grad_(True)
        args["per_sample_weights"] = psw
    out = fn(input, w, **args, **options)
    g = torch.linspace(-1.0, 1.0, out.numel()).reshape(out.shape)
    (out * g).sum().backward()
    ref.put(f"{base}.input", input)
    ref.put(f"{base}.out", out)
    ref.put(f"{base}.gout", g)
    ref.put(f"{base}.weight_after", w.detach())
    ref.put(f"{base}.grad_weight", w.grad)
    if psw is not None:
        ref.put(f"{base}.psw", psw.detach())
        ref.put(f"{base}.grad_psw", psw.grad)


def bag_mean_by_lookups(input, weight, offsets, max_norm=None, scale_grad_by_freq=False):
    """F.embedding_bag(mode="mean") as F.embedding's lookups and a mean per bag. Under
    scale_grad_by_freq, PyTorch 1.13's CPU embedding_bag divides some rows' gradients by another
    index's count (pytorch/pytorch#190063, fixed upstream in 2026; its CUDA kernel was right);
    F.embedding divides each by its own, the documented rule ember follows."""
    rows = F.embedding(input, weight, max_norm=max_norm, scale_grad_by_freq=scale_grad_by_freq)
    starts = offsets.tolist()
    ends = starts[1:] + [len(input)]
    return torch.stack([rows[s:e].mean(0) for s, e in zip(starts, ends)])


def embeddings():
    torch.manual_seed(2033)
    long = lambda v: torch.tensor(v, dtype=torch.int64)  # noqa: E731
    embedding_case("embedding_max_norm_freq_padding", F.embedding, r(10, 4) * 1.5,
                   long([[1, 2, 4, 5], [4, 3, 2, 9], [4, 4, 1, 0]]), padding_idx=2, max_norm=1.5,
                   scale_grad_by_freq=True)
    embedding_case("embedding_l1_max_norm", F.embedding, r(6, 3), long([5, 0, 5, 3]), max_norm=1.0, norm_type=1.0)
    embedding_case("bag_sum_offsets_weights", F.embedding_bag, r(10, 3), long([1, 2, 4, 5, 4, 3, 2, 9]),
                   offsets=long([0, 3, 3, 6]), psw=r(8), mode="sum")
    embedding_case("bag_mean_2d_padding", F.embedding_bag, r(7, 4), long([[0, 1, 2, 0], [0, 0, 0, 0], [6, 5, 5, 3]]),
                   mode="mean", padding_idx=0)
    embedding_case("bag_max_last_offset", F.embedding_bag, r(9, 5), long([3, 1, 7, 7, 2, 8, 0]),
                   offsets=long([0, 2, 2, 5, 7]), mode="max", include_last_offset=True)
    embedding_case("bag_max_padding", F.embedding_bag, r(6, 2), long([[1, 4, 2], [5, 5, 0], [2, 2, 2]]), mode="max",
                   padding_idx=2)
    embedding_case("bag_mean_max_norm_freq", bag_mean_by_lookups, r(8, 3) * 2, long([1, 1, 7, 2, 1, 6]),
                   offsets=long([0, 4]), max_norm=1.0, scale_grad_by_freq=True)


def main():
    ref.entries.clear()
    layers()
    optimizers()
    schedulers()
    safetensors_model()
    attention()
    rnns()
    transformers()
    seq2seq()
    embeddings()
    ref.write("nn.bin")


if __name__ == "__main__":
    main()
