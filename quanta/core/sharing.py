"""GPU sharing in the mechanism: validating a decision's pairs and spanning guests, which jobs
change because a host or guest changed, placing a spanning guest, and the rate of a job that shares
its GPUs (used by both drivers). `core.mechanism.apply` calls these; a GPU holds at most one host
and one guest (placement/occupancy.py)."""

from __future__ import annotations

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.perf.base import allocation_rate
from quanta.placement.occupancy import Occupancy
from quanta.policies.base import PolicyError


def read_sharing(dec: Decision, tgt_g: np.ndarray, tgt_t: np.ndarray, on: np.ndarray,
                 rows_d: np.ndarray, n: int
                 ) -> tuple[np.ndarray, np.ndarray, dict[int, str], dict[int, list[tuple[int, int]]]]:
    """Validate the decision's sharing and return, per snapshot row, the partner's driver row
    (-1 none; a spanning guest's: the host `share` names), whether the row is a guest, the mode of
    every shared row, and the hosts and GPUs of each spanning guest (snapshot rows)."""
    # (Python lists: a decision may hold a pair on every GPU of the cluster)
    tgt_g, tgt_t, on, rows_d = tgt_g.tolist(), tgt_t.tolist(), on.tolist(), rows_d.tolist()
    partner = [-1] * n
    guest = [False] * n
    mode_of: dict[int, str] = {}
    used: dict[int, int] = {}          # host -> GPUs it gives guests
    whole: set[int] = set()            # hosts of a plain (whole, same-size) pair
    spans: dict[int, list[tuple[int, int]]] = {}
    for g in dec.span:
        if g not in dec.share:
            raise PolicyError("a spanning guest must also be in Decision.share")
    for g, (h, mode) in dec.share.items():
        if mode not in ("pack", "slice"):
            raise PolicyError(f"sharing mode '{mode}' is not pack or slice")
        span = dec.span.get(g)
        parts = [(int(x), int(c)) for x, c in span.items()] if span else [(h, tgt_g[h])]
        if span is not None and h not in span:
            raise PolicyError("a spanning guest's share must name one of its hosts")
        if not on[g] or any(not on[x] or x == g for x, _c in parts):
            raise PolicyError("a shared job and its host must both run")
        if span is None and tgt_g[g] != tgt_g[h]:
            raise PolicyError("a guest must ask for as many GPUs of the same type as its host")
        if any(tgt_t[x] != tgt_t[g] for x, _c in parts):
            raise PolicyError("a guest must run on GPUs of its hosts' type")
        if any(not 0 < c <= tgt_g[x] for x, c in parts) or sum(c for _x, c in parts) > tgt_g[g]:
            raise PolicyError("a spanning guest uses more GPUs than it or its hosts hold")
        for x, c in parts:
            used[x] = used.get(x, 0) + c
            if x in dec.share or x in whole or used[x] > tgt_g[x]:
                raise PolicyError("a GPU holds at most two jobs: one host and one guest")
            if span is None:
                whole.add(x)
            # a host's partner: its guest (of several on different GPUs: the lowest row)
            partner[x] = rows_d[g] if partner[x] < 0 else min(partner[x], rows_d[g])
            mode_of[x] = mode
        guest[g] = True
        partner[g] = rows_d[h]
        mode_of[g] = mode
        if span:
            spans[g] = parts
    return np.array(partner, dtype=np.int64), np.array(guest, dtype=bool), mode_of, spans


def _want_layout(dec: Decision, spans: dict[int, list[tuple[int, int]]], rows_d: np.ndarray,
                 tgt_g: np.ndarray, want_guest: np.ndarray, r: int) -> tuple[dict[int, int], int]:
    """The GPUs row r is to share with each other job (driver rows) and to have alone."""
    if not want_guest[r]:
        return {}, int(tgt_g[r])
    parts = spans.get(r) or [(dec.share[r][0], int(tgt_g[r]))]
    mates = {int(rows_d[x]): c for x, c in parts}
    return mates, int(tgt_g[r]) - sum(mates.values())


def span_changes(snap: Snapshot, dec: Decision, occ: Occupancy,
                 spans: dict[int, list[tuple[int, int]]], tgt_g: np.ndarray,
                 want_guest: np.ndarray, on: np.ndarray, changed: np.ndarray) -> None:
    """Mark changed the spanning guests (wanted or held) whose hosts or GPUs per host differ
    from what they hold."""
    jobs = snap.jobs
    rows_d = jobs.rows
    check = set(spans)
    if occ.spans:
        check |= {i for i, d in enumerate(rows_d.tolist()) if d in occ.spans}
    for r in check:
        d = int(rows_d[r])
        if changed[r] or not on[r] or d not in occ.held:
            continue
        if occ.tenants(d) != _want_layout(dec, spans, rows_d, tgt_g, want_guest, r):
            changed[r] = True


def keep_inheriting_guests(snap: Snapshot, dec: Decision, occ: Occupancy,
                           spans: dict[int, list[tuple[int, int]]], tgt_g: np.ndarray,
                           tgt_t: np.ndarray, want_guest: np.ndarray, on: np.ndarray,
                           changed: np.ndarray) -> None:
    """A guest whose host(s) leave their GPUs in this decision becomes their owner (the
    occupancy hands them over): if that is what the policy asks (same GPUs and type, the hosts it
    keeps unchanged, the rest its own), the guest keeps running there without a restart. So does
    a guest whose GPUs already are as the policy asks (its host left them before, e.g. in the
    runtime, which does not re-pair on a completion)."""
    jobs = snap.jobs
    rows_d = jobs.rows
    cand = np.flatnonzero(changed & jobs.is_guest & on & (tgt_g == jobs.gpus) &
                          (tgt_t == jobs.gtype))
    if not cand.size:
        return
    pos = {int(d): i for i, d in enumerate(rows_d.tolist())}
    for r in cand.tolist():
        d = int(rows_d[r])
        if d not in occ.held:
            continue
        cur, alone = occ.tenants(d)
        want, want_alone = _want_layout(dec, spans, rows_d, tgt_g, want_guest, r)
        if any(cur.get(h) != c for h, c in want.items()):
            continue
        dropped = [h for h in cur if h not in want]
        if any(h not in pos or not changed[pos[h]] for h in dropped):
            continue
        if want_alone == alone + sum(cur[h] for h in dropped):
            changed[r] = False


def retouch_hosts(snap: Snapshot, dec: Decision, occ: Occupancy,
                  spans: dict[int, list[tuple[int, int]]], changed: np.ndarray,
                  want_guest: np.ndarray, new_terms: np.ndarray) -> None:
    """Mark in `new_terms` the hosts a changed guest comes to or leaves (a host of several guests
    keeps its partner, the lowest, but its rate depends on all of them)."""
    jobs = snap.jobs
    rows_d = jobs.rows
    moving = np.flatnonzero(changed & (want_guest | jobs.is_guest))
    if not moving.size:
        return
    pos = None
    for g in moving.tolist():
        if want_guest[g]:
            for h, _c in spans.get(g) or [(dec.share[g][0], 0)]:
                new_terms[h] = True
        d = int(rows_d[g])
        if jobs.is_guest[g] and d in occ.held:
            if pos is None:
                pos = {int(x): i for i, x in enumerate(rows_d.tolist())}
            for h in occ.tenants(d)[0]:
                if h in pos:
                    new_terms[pos[h]] = True


def place_span(occ: Occupancy, rows_d: np.ndarray, parts: list[tuple[int, int]], t: int,
               g: int, drow: int) -> np.ndarray | None:
    """Put a spanning guest on the GPUs it asks for of each host and on idle GPUs for the rest;
    None (nothing assigned) if a host is not placed or idle GPUs are missing."""
    shared = []
    for h, c in parts:
        held = occ.held.get(int(rows_d[h]))
        if held is None:
            return None
        avail = held[occ.guest[held] == -1]
        if len(avail) < c:
            return None
        shared.append(avail[:c])
    own_n = g - sum(c for _h, c in parts)
    own = np.empty(0, dtype=np.int64)
    if own_n:
        got = occ.place(t, own_n)
        if got is None:
            return None
        own = got[0]
    occ.assign_span(drow, own, np.concatenate(shared))
    return occ.held[drow]


def tenancy_rate(perf, specs, types, occ: Occupancy, row: int, gpu_type: int, count: int,
                 nodes: int, consolidated: bool, mode: str, plan=None, plan_of=None,
                 cpus: float = 0.0, mem_gb: float = 0.0, net_gbps: float = 0.0) -> float:
    """Steps/s of driver row `row` from what shares its GPUs in the occupancy: a synchronous gang
    runs at its slowest worker, so the lowest of its rate alone (if some GPUs are its own) and its
    pair rate with each job it shares GPUs with (the pair model, each at its plan). Both drivers
    use it for a spanning guest and its hosts."""
    mates, alone = occ.tenants(row)
    spec, t = specs[row], types[gpu_type]
    rates = [allocation_rate(perf, spec, t, count, nodes, consolidated, specs[m], mode or "pack",
                             plan, partner_plan=plan_of(m) if plan_of else None) for m in mates]
    if alone or not rates:
        rates.append(allocation_rate(perf, spec, t, count, nodes, consolidated, None, "", plan,
                                     cpus, mem_gb, net_gbps=net_gbps))
    return min(rates)
