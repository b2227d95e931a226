"""The mechanism: turn a policy's target allocation into the smallest set of transitions.

A job whose target equals what it holds keeps its GPUs (lease extension: no restart). Every other
job is released first, then placed, biggest gang first, consolidated where the free GPUs allow.
The drivers apply the transitions: the simulator charges restart delays, the runtime signals
processes.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.placement.occupancy import Occupancy
from quanta.policies.base import PolicyError


class Kind(str, Enum):
    START = "start"        # pending -> running
    PREEMPT = "preempt"    # running -> pending
    MIGRATE = "migrate"    # same GPU count, other GPUs (or other type)
    RESIZE = "resize"      # other GPU count


@dataclass(frozen=True)
class Transition:
    row: int                  # driver row
    kind: Kind
    gpu_type: int             # new type index (-1 on preempt)
    gpus: np.ndarray          # new global GPU ids (empty on preempt)
    nodes: int
    consolidated: bool
    plan: object = None


def apply(snap: Snapshot, dec: Decision, occ: Occupancy) -> list[Transition]:
    jobs = snap.jobs
    n = len(jobs)
    if dec.gpus.shape != (n,) or dec.gpu_type.shape != (n,):
        raise PolicyError(f"decision has {dec.gpus.shape} targets for {n} jobs")
    tgt_g, tgt_t = dec.gpus, np.where(dec.gpus > 0, dec.gpu_type, -1)
    on = tgt_g > 0
    if np.any(tgt_t[on] < 0) or np.any(~jobs.allowed[np.flatnonzero(on), tgt_t[on]]):
        raise PolicyError("decision puts a job on a GPU type it may not use")
    over = dec.demand(len(snap.capacity)) > snap.capacity
    if over.any():
        t = int(np.flatnonzero(over)[0])
        raise PolicyError(f"decision asks for {dec.demand(len(snap.capacity))[t]} "
                          f"{snap.cluster.types[t]} GPUs; {snap.capacity[t]} are up")
    changed = (tgt_g != jobs.gpus) | (on & (tgt_t != jobs.gtype))
    for r in dec.exact:
        held = occ.held.get(int(jobs.rows[r]))
        if held is None or not np.array_equal(np.sort(held), np.sort(dec.exact[r])):
            changed[r] = True
    rows = np.flatnonzero(changed)
    if rows.size == 0:
        return []
    for r in rows:
        if jobs.running[r]:
            occ.release(int(jobs.rows[r]))
    # placement order: exact requests first, then by the policy's order (or biggest first)
    to_place = rows[on[rows]]
    if dec.order is not None:
        rank = np.empty(n, dtype=np.int64)
        rank[dec.order] = np.arange(len(dec.order))
        to_place = to_place[np.lexsort((rank[to_place], -tgt_g[to_place]))]
    else:
        to_place = to_place[np.argsort(-tgt_g[to_place], kind="stable")]
    exact_first = [r for r in to_place if r in dec.exact] + [r for r in to_place if r not in dec.exact]
    out: list[Transition] = []
    placed: set[int] = set()
    for r in exact_first:
        drow, t = int(jobs.rows[r]), int(tgt_t[r])
        gpus = dec.exact.get(r)
        if gpus is not None:
            gpus = np.asarray(gpus, dtype=np.int64)
            if len(gpus) != tgt_g[r] or np.any(occ.owner[gpus] != -1) or \
                    np.any(snap.cluster.gpu_type_idx[gpus] != t):
                raise PolicyError(f"exact GPUs for job {jobs.specs[r].job_id} are not free "
                                  f"GPUs of the target type")
        else:
            gpus = occ.place(t, int(tgt_g[r]))
        if gpus is None:
            continue   # cannot happen after the capacity check; left pending if it does
        occ.assign(drow, gpus)
        placed.add(r)
        if not jobs.running[r]:
            kind = Kind.START
        elif tgt_g[r] != jobs.gpus[r]:
            kind = Kind.RESIZE
        else:
            kind = Kind.MIGRATE
        out.append(Transition(drow, kind, t, gpus, occ.nodes_of(gpus), occ.consolidated(t, gpus),
                              dec.plans.get(r)))
    for r in rows:
        if jobs.running[r] and r not in placed:
            out.append(Transition(int(jobs.rows[r]), Kind.PREEMPT, -1, np.empty(0, np.int64), 0, True))
    return out
