"""Gavel's worker assignment: which GPUs of its type each job of a round gets.

As Sia's simulator's Gavel baseline does it (sia-simulator gavel.py:332-428
`schedule_jobs_on_workers`, `assign_workers_to_job`, after Gavel's own scheduler): per GPU type,
the round's jobs by GPU count (largest first; the order the round chose them within a count).
For each count, first every job that held GPUs of this type keeps them if none was taken yet;
then the others take free GPUs server by server, in server order, from a pointer that only moves
forward, so a job may span more servers than it needs (4 GPUs as 2 + 2 when the pointer's server
has 2 left). A kept job of a smaller count loses its GPUs when a larger job took one first.

Quanta's mechanism places a job consolidated where the free GPUs allow and keeps a job's GPUs
when it keeps its type and count; this gives a policy the reference's exact GPUs instead
(`Decision.exact`), for the `sia-sim` world (`gavel-throughput:workers=gavel`).
"""

from __future__ import annotations

import numpy as np

from quanta.core.snapshot import Snapshot
from quanta.policies.base import PolicyError


def gavel_workers(snap: Snapshot, gpus: np.ndarray, gtype: np.ndarray, picked: list[int]
                  ) -> dict[int, np.ndarray]:
    """Exact global GPU ids per snapshot row for the jobs `picked` (in the order the round chose
    them), each getting gpus[row] GPUs of type gtype[row]."""
    cl = snap.cluster
    j = snap.jobs
    held = j.placement
    exact: dict[int, np.ndarray] = {}
    for k in range(len(cl.types)):
        chosen = sorted((i for i in picked if gtype[i] == k), key=lambda i: -int(gpus[i]))
        if not chosen:
            continue
        nodes = np.flatnonzero(cl.node_type == k).tolist()
        servers = [list(range(int(cl.node_first_gpu[n]), int(cl.node_first_gpu[n] + cl.node_gpus[n])))
                   for n in nodes]
        taken: set[int] = set()
        ptr = 0
        for size in sorted({int(gpus[i]) for i in chosen}, reverse=True):
            group = [i for i in chosen if int(gpus[i]) == size]
            for i in group:                # keep its GPUs of this type if none is taken yet
                if j.running[i] and int(j.gtype[i]) == k:
                    prev = held[i].tolist()
                    if not taken.intersection(prev):
                        exact[i] = held[i]
                        taken.update(prev)
            for i in group:                # the others: server by server from the pointer
                if i in exact:
                    continue
                got: list[int] = []
                while len(got) < size and ptr < len(servers):
                    if not servers[ptr]:
                        ptr += 1
                        continue
                    w = servers[ptr].pop(0)
                    if w not in taken:
                        got.append(w)
                        taken.add(w)
                if len(got) != size:
                    raise PolicyError(f"gavel: no {size} workers of type {cl.types[k]} left for "
                                      f"job {j.specs[i].job_id} (Gavel's assignment)")
                exact[i] = np.array(got, dtype=np.int64)
    return exact
