"""Example training jobs that really train, on synthetic data: an MLP, a small CNN and a tiny
transformer language model. Single process or DDP (gloo on CPU, nccl on GPUs), any accumulation.

    python -m quanta.examples.train --model mlp|cnn|lm [--steps N] [--batch B] [--seed S]

Under Quanta the allocation comes from the environment (see quanta.job); run by hand, it trains
alone for --steps steps in ./ . The data of optimiser step s is drawn from a generator seeded by
(seed, s) and cut into the allocation's micro-batches, so the same global batch is used whatever
the allocation: a job resumed on another number of workers follows the same optimisation.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from contextlib import nullcontext
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import nn

from quanta.job import Allocation, Job

MODELS = ("mlp", "cnn", "lm")


VOCAB, CONTEXT = 32, 16


class TinyLM(nn.Module):
    """A 2-layer causal transformer over a 32-token vocabulary."""

    def __init__(self, dim: int = 32):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.pos = nn.Parameter(torch.zeros(CONTEXT, dim))
        layer = nn.TransformerEncoderLayer(dim, 4, 2 * dim, dropout=0.0, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(dim, VOCAB)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(CONTEXT))

    def forward(self, x):
        n = x.shape[1]
        return self.head(self.blocks(self.embed(x) + self.pos[:n], mask=self.mask[:n, :n],
                                     is_causal=True))


def build(name: str, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    if name == "mlp":
        return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                             nn.Linear(64, 4))
    if name == "cnn":
        return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2),
                             nn.Flatten(), nn.Linear(64, 4))
    return TinyLM()


def batch(name: str, seed: int, step: int, size: int):
    """The global batch of optimiser step `step` (inputs, targets), the same on every rank."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    teacher = torch.Generator().manual_seed(seed)
    if name == "mlp":
        w = torch.randn(32, 4, generator=teacher)
        x = torch.randn(size, 32, generator=g)
        return x, (x @ w).argmax(dim=1)
    if name == "cnn":
        w = torch.randn(4, 4, generator=teacher)
        x = torch.randn(size, 1, 8, 8, generator=g)
        pooled = torch.nn.functional.adaptive_avg_pool2d(x, 2).flatten(1)
        return x, (pooled @ w).argmax(dim=1)
    # lm: arithmetic sequences mod VOCAB (start and stride random): predictable next tokens
    start = torch.randint(0, VOCAB, (size, 1), generator=g)
    stride = torch.randint(1, 4, (size, 1), generator=g)
    seq = (start + stride * torch.arange(CONTEXT + 1)) % VOCAB
    return seq[:, :-1], seq[:, 1:]


def loss_sum(name: str, out, y):
    if name == "lm":
        return F.cross_entropy(out.reshape(-1, VOCAB), y.reshape(-1), reduction="sum") / y.shape[1]
    return F.cross_entropy(out, y, reduction="sum")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=MODELS, default="mlp")
    ap.add_argument("--steps", type=int, default=200, help="total steps when run by hand")
    ap.add_argument("--batch", type=int, default=64, help="global batch when run by hand")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--step-sleep", type=float, default=0.0,
                    help="extra seconds per step (to stretch a demo; 0 = none)")
    args = ap.parse_args(argv)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    alloc = Allocation.from_env()
    if alloc.global_batch <= 0:
        alloc = replace(alloc, global_batch=args.batch)
    if alloc.total_steps <= 0:
        alloc = replace(alloc, total_steps=args.steps)
    job = Job(alloc)
    model = build(args.model, args.seed)
    net = job.wrap(model)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    dev = torch.device(job.alloc.device)      # (the CPU where CUDA is not usable)
    scale = alloc.world_size / alloc.global_batch   # DDP averages over ranks: sum / global batch
    loss_val = float("nan")
    for step in job.steps(model, opt):
        x, y = batch(args.model, args.seed, step, alloc.global_batch)
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for micro in range(alloc.accumulation):
            sl = alloc.micro_slice(micro)
            xb, yb = x[sl].to(dev), y[sl].to(dev)
            last = micro == alloc.accumulation - 1
            sync = net.no_sync() if (alloc.world_size > 1 and not last) else nullcontext()
            with sync:
                loss = loss_sum(args.model, net(xb), yb) * scale
                loss.backward()
            total += loss.item()
        opt.step()
        loss_val = total / alloc.world_size
        if alloc.rank == 0 and (step % 20 == 0 or step + 1 == alloc.total_steps):
            print(f"step {step + 1}/{alloc.total_steps} loss {loss_val:.4f}", flush=True)
        if args.step_sleep:
            time.sleep(args.step_sleep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
