"""The same measurements as bench/gpu_report.cpp through PyTorch, for a side-by-side table.

Run by tools/gpu_check.sh when Python's torch with CUDA is installed on the GPU machine.
"""
import torch


def time_ms(f, iters):
    for _ in range(2):
        f()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        f()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / iters


def main():
    dev = torch.device("cuda")
    print(f"device: {torch.cuda.get_device_name()} (PyTorch {torch.__version__})\n")
    print("| PyTorch | size | time | rate |\n|---|---|---|---|")
    for n in (4096, 8192):
        for label, dtype, tf32 in (("GEMM float32", torch.float32, False), ("GEMM TF32", torch.float32, True),
                                   ("GEMM float16", torch.float16, False), ("GEMM bfloat16", torch.bfloat16, False)):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            a, b = torch.randn(n, n, device=dev, dtype=dtype), torch.randn(n, n, device=dev, dtype=dtype)
            ms = time_ms(lambda: a @ b, 10)
            print(f"| {label} | {n}³ | {ms:.3f} ms | {2 * n ** 3 / (ms * 1e-3) / 1e12:.1f} TFLOP/s |")
    torch.backends.cuda.matmul.allow_tf32 = False
    m, k, n = 16384, 4096, 4096
    x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    w = (torch.randn(n, k, device=dev) * 0.02).bfloat16()
    b = torch.randn(n, device=dev, dtype=torch.bfloat16)
    ms = time_ms(lambda: torch.nn.functional.linear(x, w, b), 10)
    print(f"| Linear + bias, bfloat16 (epilogue) | 16384x4096x4096 | {ms:.3f} ms | {2 * m * k * n / (ms * 1e-3) / 1e12:.1f} TFLOP/s |")
    del x, w, b
    n = 256 << 20
    x, y = torch.ones(n, device=dev), torch.full((n,), 2.0, device=dev)
    d = torch.empty_like(x)
    copy = time_ms(lambda: d.copy_(x), 20)
    add = time_ms(lambda: x + y, 20)
    total = time_ms(lambda: x.sum(), 20)
    nbytes = 4.0 * n
    print(f"| device-to-device copy | 256 M float | {copy:.3f} ms | {2 * nbytes / copy / 1e6:.0f} GB/s |")
    print(f"| add (x + y) | 256 M float | {add:.3f} ms | {3 * nbytes / add / 1e6:.0f} GB/s |")
    print(f"| sum | 256 M float | {total:.3f} ms | {nbytes / total / 1e6:.0f} GB/s |")
    del x, y, d
    m = 64 << 20
    pageable = torch.ones(m)
    pinned = pageable.pin_memory()
    slow = time_ms(lambda: pageable.to(dev), 10)
    fast = time_ms(lambda: pinned.to(dev, non_blocking=True), 10)
    print(f"| host-to-device copy, pageable | 256 MB | {slow:.3f} ms | {4.0 * m / slow / 1e6:.1f} GB/s |")
    print(f"| host-to-device copy, pinned | 256 MB | {fast:.3f} ms | {4.0 * m / fast / 1e6:.1f} GB/s |")
    del pageable, pinned
    x = torch.randn(64, 64, 56, 56, device=dev, requires_grad=True)
    w = (torch.randn(64, 64, 3, 3, device=dev) * 0.05).requires_grad_()
    flops = 3 * 2.0 * 64 * 64 * 56 * 56 * 64 * 9
    torch.backends.cudnn.allow_tf32 = False
    for bench in (False, True):
        torch.backends.cudnn.benchmark = bench
        ms = time_ms(lambda: torch.nn.functional.conv2d(x, w, padding=1).sum().backward(), 10)
        name = "cudnn.benchmark" if bench else "heuristic"
        print(f"| conv2d fwd+bwd, {name} | 64x64x56x56, 3x3 | {ms:.3f} ms | {flops / (ms * 1e-3) / 1e12:.1f} TFLOP/s |")
    torch.backends.cudnn.benchmark = False
    training_rows(dev)
    amp_rows(dev)


def training_rows(dev):
    """train_mnist's MLP and CNN, one SGD step (momentum 0.9) at batch 128, as in gpu_report.cpp."""
    nn = torch.nn
    models = {
        "MLP": lambda: nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                                     nn.Linear(128, 10)),
        "CNN": lambda: nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                     nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                                     nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10)),
    }
    x, y = torch.randn(128, 1, 28, 28, device=dev), torch.randint(0, 10, (128,), device=dev)
    for kind, make in models.items():
        model = make().to(dev)
        sgd = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

        def step():
            sgd.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            sgd.step()

        ms = time_ms(step, 20)
        print(f"| {kind} training step, GPU | batch 128 | {ms:.3f} ms | |")


class Block(torch.nn.Module):
    """nanoGPT's pre-norm block, as ember's nn::TransformerBlock."""

    def __init__(self, width, heads):
        super().__init__()
        nn = torch.nn
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.c_attn, self.c_proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / (c // self.heads) ** 0.5
        att = att.masked_fill(torch.ones(t, t, device=x.device).triu(1).bool(), float("-inf")).softmax(-1)
        x = x + self.c_proj((att @ v).transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln_2(x))


class TinyGpt(torch.nn.Module):
    def __init__(self, vocab, block, width, layers, heads):
        super().__init__()
        nn = torch.nn
        self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(block, width)
        self.h = nn.Sequential(*[Block(width, heads) for _ in range(layers)])
        self.ln_f, self.lm_head = nn.LayerNorm(width), nn.Linear(width, vocab, bias=False)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        return self.lm_head(self.ln_f(self.h(self.wte(idx) + self.wpe(pos))))


def amp_rows(dev):
    """The CNN and a character GPT (8x512, seq 256, batch 16), one SGD step in float32, TF32,
    fp16 autocast + GradScaler and bf16 autocast, as in gpu_report.cpp."""
    nn = torch.nn
    cases = [
        ("CNN, batch 128",
         lambda: nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                               nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                               nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10)),
         torch.randn(128, 1, 28, 28, device=dev), torch.randint(0, 10, (128,), device=dev)),
        ("char GPT 8x512, seq 256, batch 16", lambda: TinyGpt(65, 256, 512, 8, 8),
         torch.randint(0, 65, (16, 256), device=dev), torch.randint(0, 65, (16, 256), device=dev)),
    ]
    modes = ["float32", "TF32", "fp16 autocast + GradScaler", "bf16 autocast"]
    for name, make, x, y in cases:
        for mode, label in enumerate(modes):
            torch.manual_seed(3)
            model = make().to(dev)
            sgd = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
            scaler = torch.cuda.amp.GradScaler(enabled=mode == 2)
            torch.backends.cuda.matmul.allow_tf32 = mode == 1
            torch.backends.cudnn.allow_tf32 = mode == 1

            def step():
                sgd.zero_grad()
                with torch.autocast("cuda", dtype=torch.bfloat16 if mode == 3 else torch.float16, enabled=mode >= 2):
                    out = model(x)
                    loss = torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
                scaler.scale(loss).backward()
                scaler.step(sgd)
                scaler.update()

            ms = time_ms(step, 10)
            print(f"| {label} step, {name} | | {ms:.3f} ms | |")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


if __name__ == "__main__":
    main()
