"""Decayed fair share: Slurm's classic fair-share factor over GPU-seconds weighted by GPU speed.

Usage U of a queue (and of each user within a queue) is GPU-seconds x the GPU type's speed,
decayed with a half-life H: U(t + dt) = U(t) * 2^(-dt/H) + what was used during dt (itself decayed
to the middle of dt). The factor of a queue is Slurm's classic one,

    F = 2^(-U_E / S)

S: normalised shares, the product of weight / (weight of it and its siblings) along the path from
the top; U_E: effective usage, the queue's normalised usage (its share of all usage) pulled
toward its parent's effective usage in proportion to its share among its siblings:
U_E = U_N + (U_E(parent) - U_N) * w / sum(w of it and its siblings), with U_E(above the top) = 1
while anything has been used. A user's factor within its queue is the same formula one level
down (users of a queue share it by their `shares`, default 1).
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from quanta.queues.spec import QueueTree

SEP = "\x1f"       # joins queue and user names in the per-user usage keys


def user_key(queue: str, user: str) -> str:
    return f"{queue}{SEP}{user}"


def decay(usage: Mapping[str, float], dt: float, half_life_s: float) -> dict[str, float]:
    """Every entry decayed by dt; entries that fell below 1e-9 of the largest are dropped."""
    f = 0.5 ** (dt / half_life_s) if dt > 0 else 1.0
    out = {k: v * f for k, v in usage.items()}
    if out:
        floor = max(out.values()) * 1e-9
        out = {k: v for k, v in out.items() if v > floor}
    return out


def node_usage(tree: QueueTree, usage: Mapping[str, float]) -> np.ndarray:
    """(N,) decayed usage of every queue: a leaf's own, a cohort's the sum of its subtree."""
    n = len(tree.names)
    u = np.array([float(usage.get(tree.names[q], 0.0)) if q in tree.leaf_pos else 0.0
                  for q in range(n)])
    for q in tree.bottom_up:
        p = int(tree.parent[q])
        if p >= 0:
            u[p] += u[q]
    return u


def classic(tree: QueueTree, usage: Mapping[str, float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(F, U_E, S) per queue (node index): Slurm's classic fair-share factor."""
    n = len(tree.names)
    u = node_usage(tree, usage)
    S = tree.norm_share()
    tops = [i for i in range(n) if tree.parent[i] < 0]
    total = float(u[tops].sum())
    un = u / total if total > 0 else np.zeros(n)
    ue = np.zeros(n)
    root_ue = 1.0 if total > 0 else 0.0
    stack = [(i, root_ue, float(tree.weight[tops].sum())) for i in tops]
    while stack:
        i, parent_ue, sib_w = stack.pop()
        ue[i] = un[i] + (parent_ue - un[i]) * float(tree.weight[i]) / sib_w
        kids = tree.children[i]
        if kids:
            w = float(tree.weight[kids].sum())
            stack.extend((c, ue[i], w) for c in kids)
    F = np.power(2.0, -ue / np.maximum(S, 1e-300))
    return F, ue, S


def user_factors(queue: str, users: list[str], shares: Mapping[str, float], uusage: Mapping[str, float],
                 total: float, queue_ue: float, queue_s: float) -> dict[str, float]:
    """Factor of each user of one queue: the classic formula one level below the queue."""
    if not users:
        return {}
    w = {u: float(shares.get(u, 1.0)) for u in users}
    wsum = sum(w.values())
    out = {}
    for u in users:
        un = float(uusage.get(user_key(queue, u), 0.0)) / total if total > 0 else 0.0
        ue = un + (queue_ue - un) * w[u] / wsum
        s = queue_s * w[u] / wsum
        out[u] = math.pow(2.0, -ue / max(s, 1e-300))
    return out
