#!/usr/bin/env python3
"""PyTorch's own training loop for train_mnist --model cnn: the same model, optimizer, batch
size and normalization, one epoch over MNIST on the same number of threads; prints the epoch's
training time (as train_mnist's "epoch 1: ... N s" line: the loop over batches, not the test).

  python3 bench/pytorch_mnist_cnn.py ../shared/data/mnist [threads] [epochs]

BENCHMARKS.md ("CPU convolution") runs it beside `train_mnist --data ... --model cnn --epochs 1`.
"""
import gzip
import struct
import sys
import time

import numpy as np
import torch
from torch import nn


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def main():
    folder = sys.argv[1]
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    epochs = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    images = torch.from_numpy(read_idx(f"{folder}/train-images-idx3-ubyte.gz").copy()).float().div_(255)
    labels = torch.from_numpy(read_idx(f"{folder}/train-labels-idx1-ubyte.gz").astype(np.int64))
    images = images.sub_(0.1307).div_(0.3081).unsqueeze(1)  # [60000, 1, 28, 28], as train_mnist's normalize
    model = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)  # train_mnist's sgd
    batch = 64
    for epoch in range(epochs):
        start = time.perf_counter()
        order = torch.randperm(len(images))
        total, correct, seen = 0.0, 0, 0
        for i in range(0, len(images), batch):
            idx = order[i:i + batch]
            x, y = images[idx], labels[idx]
            opt.zero_grad()
            logits = model(x)
            loss = nn.functional.cross_entropy(logits, y)
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
            correct += (logits.argmax(1) == y).sum().item()
            seen += len(idx)
        secs = time.perf_counter() - start
        print(f"epoch {epoch + 1}: train loss {total / seen:.4f} accuracy {correct / seen:.4f} | {secs:.1f} s "
              f"({threads} threads, PyTorch {torch.__version__})")


if __name__ == "__main__":
    main()
