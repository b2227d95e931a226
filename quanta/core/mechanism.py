"""The mechanism: turn a policy's target allocation into the smallest set of transitions.

A job whose target equals what it holds keeps its GPUs (lease extension: no restart). Every other
job is released first, then placed, biggest gang first, consolidated where the free GPUs allow.
The drivers apply the transitions: the simulator charges restart delays, the runtime signals
processes. GPU sharing (pairs, spanning guests, a shared job's rate) is in core/sharing.py,
allocations over several GPU types and forked copies in core/mixed.py, the transitions
themselves in core/transition.py.
"""

from __future__ import annotations

from itertools import repeat
from operator import add

import numpy as np

from quanta.core.decision import Decision
from quanta.core.jobtable import PREEMPT_CODE, SHARE_MODES
from quanta.core.mixed import mixed_transition, place_copies, read_mixed
from quanta.core.sharing import (keep_inheriting_guests, place_span, read_sharing, retouch_hosts,
                                 span_changes)
from quanta.core.snapshot import Snapshot
from quanta.core.transition import (KIND_OF_CODE, NO_GPUS, PLAIN_REST, Kind, Plain, Transition,
                                    Transitions, kind_code, transition_kind)
from quanta.placement.occupancy import Occupancy
from quanta.policies.base import PolicyError

_new_tuple = tuple.__new__


def apply(snap: Snapshot, dec: Decision, occ: Occupancy) -> list[Transition]:
    jobs = snap.jobs
    n = len(jobs)
    if dec.gpus.shape != (n,) or dec.gpu_type.shape != (n,):
        raise PolicyError(f"decision has {dec.gpus.shape} targets for {n} jobs")
    tgt_g = dec.gpus
    on = tgt_g > 0
    tgt_t = np.where(on, dec.gpu_type, -1)
    rows_d = jobs.rows
    sharing = bool(dec.share or occ.guests)
    changed = (tgt_g != jobs.gpus) | (on & (tgt_t != jobs.gtype))
    mixed = read_mixed(snap, dec, on, tgt_t, changed) if dec.mixed or jobs.any_mixed else {}
    spans: dict[int, list[tuple[int, int]]] = {}
    if sharing:
        want_partner, want_guest, mode_of, spans = read_sharing(dec, tgt_g, tgt_t, on, rows_d, n)
        cur_partner, cur_guest = jobs.partner, jobs.is_guest
        changed |= (want_guest != cur_guest) | (want_guest & (want_partner != cur_partner))
        if spans or occ.spans:
            span_changes(snap, dec, occ, spans, tgt_g, want_guest, on, changed)
        if dec.guests_inherit and cur_guest.any():
            keep_inheriting_guests(snap, dec, occ, spans, tgt_g, tgt_t, want_guest, on, changed)
        for g, (h, _m) in dec.share.items():
            if changed[h] or (g in spans and any(changed[x] for x, _c in spans[g])):
                changed[g] = True          # a guest follows its host(s)
        demand_g, demand_on = tgt_g, on & ~want_guest
        if spans:                          # a spanning guest's own GPUs count
            demand_g = tgt_g.copy()
            for g, parts in spans.items():
                demand_g[g] = tgt_g[g] - sum(c for _h, c in parts)
                demand_on[g] = demand_g[g] > 0
        _validate(snap, demand_g, tgt_t, demand_on, changed, mixed)
    else:
        want_partner = want_guest = None
        mode_of = {}
        _validate(snap, tgt_g, tgt_t, on, changed, mixed)
    extras = bool(dec.plans) or dec.cpus is not None or dec.mem_gb is not None or \
        dec.net_gbps is not None or jobs.extras_seen
    if extras:
        tgt_plan, tgt_cpu, tgt_mem, tgt_net, regear = _extras(snap, dec, on, changed)
        changed |= regear
    else:
        tgt_plan = tgt_cpu = tgt_mem = tgt_net = regear = None
    for r in dec.exact:
        held = occ.held.get(int(rows_d[r]))
        if held is None or not np.array_equal(np.sort(held), np.sort(dec.exact[r])):
            changed[r] = True
    rows = changed.nonzero()[0]
    if sharing:
        want_mode = np.zeros(n, dtype=np.int8)
        for r, m in mode_of.items():
            want_mode[r] = SHARE_MODES[m]
        new_terms = (want_partner != cur_partner) | (want_mode != jobs.share_mode) | \
            (want_guest != cur_guest)      # (a guest kept as owner: guests_inherit)
        if spans or occ.spans:             # hosts whose guests come or go: re-rated
            retouch_hosts(snap, dec, occ, spans, changed, want_guest, new_terms)
        reshare = np.flatnonzero(~changed & on & new_terms)
    else:
        reshare = rows[:0]
    if rows.size == 0 and reshare.size == 0:
        # nothing else moves: only the policy's defragmentations (a job left spread over nodes
        # once the jobs around it finished is moved here, with no other change in the decision)
        return _defragmentations(snap, dec, occ, changed) if dec.defrag else []
    running = jobs.running[rows].tolist()
    drows = rows_d[rows].tolist()
    keep_gpus = {} if regear is None else \
        {r: occ.held[int(rows_d[r])] for r in np.flatnonzero(regear).tolist()}
    gone = [i for i, run in enumerate(running) if run]
    occ.release_all([drows[i] for i in gone],
                    jobs.is_guest[rows[gone]].tolist() if occ.guests else None)
    # placement order: exact requests first, then biggest gang first, ties by the policy's order;
    # guests last, on their hosts' GPUs
    to_place = rows[on[rows] & ~want_guest[rows]] if sharing else rows[on[rows]]
    if dec.order is not None and len(to_place) > 1:
        rank = np.empty(n, dtype=np.int64)
        rank[dec.order] = np.arange(len(dec.order))
        to_place = to_place[np.lexsort((rank[to_place], -tgt_g[to_place]))]
    elif len(to_place) > 1:
        to_place = to_place[np.argsort(-tgt_g[to_place], kind="stable")]
    place_list = to_place.tolist()
    if dec.exact or keep_gpus:      # exact requests, then jobs reconfigured on their own GPUs
        first = set(dec.exact) | set(keep_gpus)
        place_list = [r for r in place_list if r in dec.exact] + \
                     [r for r in place_list if r in keep_gpus and r not in dec.exact] + \
                     [r for r in place_list if r not in first]
    if not (sharing or extras or mixed or dec.exact or keep_gpus or dec.consolidate):
        # GPUs only, none shared, kept or asked for exactly: each gang placed and assigned where
        # the free-GPU index puts it (the general walk below, minus its tests), the transitions
        # built column by column
        return _apply_plain(snap, dec, occ, rows.tolist(), drows, running, changed, to_place,
                            tgt_t, tgt_g)
    if dec.share:
        place_list += rows[want_guest[rows]].tolist()
    out: list[Transition] = []
    placed: set[int] = set()
    forks: list[tuple] = []
    cluster = snap.cluster
    idx = np.asarray(place_list, dtype=np.int64)
    cols = zip(place_list, rows_d[idx].tolist(), tgt_t[idx].tolist(), tgt_g[idx].tolist(),
               jobs.gpus[idx].tolist())
    exact = dec.exact
    for r, drow, t, g, was in cols:
        guest = sharing and bool(want_guest[r])
        cpu = float(tgt_cpu[r]) if extras else 0.0
        mem = float(tgt_mem[r]) if extras else 0.0
        net = float(tgt_net[r]) if extras else 0.0
        kind = None
        claimed = False
        if guest and r in spans:
            gpus = place_span(occ, rows_d, spans[r], t, g, drow)
            if gpus is None:
                continue               # a host could not be placed: the guest waits
            nodes = occ.nodes_of(gpus)
        elif guest:
            host = int(want_partner[r])
            gpus = occ.held.get(host)
            if gpus is None:
                continue               # its host could not be placed: the guest waits
            occ.assign_guest(drow, gpus)
            nodes = occ.nodes_of(gpus)
        elif mixed and r in mixed:
            own = mixed[r] if r not in dec.copies else mixed[r] - np.bincount(
                cluster.node_type, weights=dec.copies[r], minlength=len(mixed[r])).astype(np.int64)
            got = occ.place_parts(own)
            if got is None:
                continue       # cannot happen after the capacity check; left pending if it does
            gpus, got_parts = got
            occ.assign(drow, gpus)
            placed.add(r)
            if r in dec.copies:            # copies after every own gang: placed below
                forks.append((r, drow, t, gpus, got_parts, was))
                continue
            out.append(mixed_transition(snap, dec, r, drow, t, gpus, got_parts, was))
            continue
        else:
            gpus = exact.get(r) if exact else None
            own = keep_gpus.get(r) if gpus is None and keep_gpus else None
            if gpus is not None:
                gpus = _check_exact(snap, occ, np.asarray(gpus, dtype=np.int64), g, t, jobs.specs[r].job_id)
                nodes = occ.nodes_of(gpus)
            elif own is not None and occ.fits(own, cpu, mem, net):
                gpus, nodes, kind = own, occ.nodes_of(own), Kind.RECONFIGURE
            elif cpu or mem or net:
                got = occ.place(t, g, cpu / g, mem / g, net / g)
                if got is None:
                    continue   # cannot happen after the capacity check; left pending if it does
                gpus, nodes = got
                if r in dec.consolidate and nodes > cluster.min_nodes(t, g):
                    continue   # the policy wants it consolidated or not at all: it waits
            else:              # GPUs only: placed and assigned at once
                # (the policy may want it consolidated or not at all: then it waits)
                got = occ.claim(drow, t, g, cluster.min_nodes(t, g) if r in dec.consolidate
                                else None)
                if got is None:
                    continue   # too spread to be consolidated (too few free cannot happen
                               # after the capacity check)
                gpus, nodes = got
                claimed = True
            if not claimed:
                occ.assign(drow, gpus, cpu, mem, net)
        placed.add(r)
        if kind is None:
            kind = transition_kind(was, g)
        consolidated = nodes <= cluster.min_nodes(t, g)
        out.append(Transition(drow, kind, t, gpus, nodes, consolidated,
                              tgt_plan[r] if extras else None,
                              int(want_partner[r]) if sharing else -1, mode_of.get(r, ""), guest,
                              cpu, mem, net_gbps=net))
    for r, drow, t, gpus, got_parts, was in forks:
        out.append(place_copies(snap, dec, occ, r, drow, t, gpus, got_parts, was))
    out += _defragmentations(snap, dec, occ, changed)
    for r, d, run in zip(rows.tolist(), drows, running):
        if run and r not in placed:
            out.append(Transition(d, Kind.PREEMPT, -1, NO_GPUS, 0, True))
    for r in reshare.tolist():
        d = int(rows_d[r])
        gpus = occ.held[d]
        out.append(Transition(d, Kind.RESHARE, int(tgt_t[r]), gpus, occ.nodes_of(gpus),
                              bool(jobs.consolidated[r]), tgt_plan[r] if extras else None,
                              int(want_partner[r]), mode_of.get(r, ""), bool(want_guest[r]),
                              float(tgt_cpu[r]) if extras else 0.0,
                              float(tgt_mem[r]) if extras else 0.0,
                              net_gbps=float(tgt_net[r]) if extras else 0.0))
    return out


def _apply_plain(snap: Snapshot, dec: Decision, occ: Occupancy, rows: list[int],
                 drows: list[int], running: list[bool], changed: np.ndarray, to_place: np.ndarray,
                 tgt_t: np.ndarray, tgt_g: np.ndarray) -> Transitions:
    """`apply`'s placement and transitions where every changed job (`rows`, driver rows `drows`,
    which of them ran) holds GPUs only, once those that ran have released theirs: `to_place`
    (job rows, placement order) claimed, the policy's defragmentations, then a preemption for
    each changed row that ran and was not placed. Their columns go with them (unless a job was
    defragmented: it keeps its plan and resources). Python lists throughout: most decisions
    move a few jobs, where numpy's per-call cost would dominate."""
    jobs, cluster = snap.jobs, snap.cluster
    place = to_place.tolist()
    d, t, g = jobs.rows[to_place].tolist(), tgt_t[to_place].tolist(), tgt_g[to_place].tolist()
    got, nodes = _claim_all(d, t, g, occ)
    placed = set()
    c_rows, c_kinds, c_types, c_gpus, c_count, c_nodes, c_cons = [], [], [], [], [], [], []
    fewest: dict[tuple[int, int], int] = {}    # (type, GPUs) -> cluster.min_nodes
    for r, drow, ty, n, was, gpus, nd in zip(place, d, t, g, jobs.gpus[to_place].tolist(),
                                              got, nodes):
        if gpus is None:
            continue           # cannot happen after the capacity check; left pending if it does
        placed.add(r)
        least = fewest.get((ty, n))
        if least is None:
            least = fewest[ty, n] = cluster.min_nodes(ty, n)
        c_rows.append(drow)
        c_kinds.append(kind_code(was, n))
        c_types.append(ty)
        c_gpus.append(gpus)
        c_count.append(n)
        c_nodes.append(nd)
        c_cons.append(nd <= least)
    claimed = len(c_rows)
    moved = _defragmentations(snap, dec, occ, changed)
    for r, drow, ran in zip(rows, drows, running):
        if ran and r not in placed:
            c_rows.append(drow)
            c_kinds.append(PREEMPT_CODE)
            c_types.append(-1)
            c_gpus.append(NO_GPUS)
            c_count.append(0)
            c_nodes.append(0)
            c_cons.append(True)
    # Transition(row, kind, type, gpus, nodes, consolidated), each built as its tuple
    out = Transitions(map(_new_tuple, repeat(Transition), map(add, zip(
        c_rows, map(KIND_OF_CODE.__getitem__, c_kinds), c_types, c_gpus, c_nodes, c_cons),
        repeat(PLAIN_REST))))
    if moved:                      # after the claims, before the preemptions
        out[claimed:claimed] = moved
    else:
        out.plain = Plain(c_rows, c_kinds, c_types, c_gpus, c_count, c_nodes, c_cons)
    return out


def _claim_all(drows: list[int], types: list[int], gpus: list[int], occ: Occupancy
               ) -> tuple[list[np.ndarray | None], list[int]]:
    """Each gang (driver row, type, GPUs; biggest first) claimed in order where the free-GPU
    index puts it: its GPUs (None where too few are free: cannot happen after the capacity
    check) and its number of nodes. One-GPU gangs come last; those of a type whose nodes hold
    one GPU each are claimed together (`Occupancy.claim_ones`: the same GPUs)."""
    n = len(drows)
    ones = n
    while ones and gpus[ones - 1] == 1:
        ones -= 1
    got: list = [None] * n
    nodes = [1] * n
    for i in range(ones):
        placement = occ.claim(drows[i], types[i], gpus[i])
        if placement is not None:
            got[i], nodes[i] = placement
    by_type: dict[int, list[int]] = {}
    for i in range(ones, n):
        by_type.setdefault(types[i], []).append(i)
    for t, at in by_type.items():
        each = occ.claim_ones([drows[i] for i in at], t) if occ.one_gpu_nodes(t) else None
        if each is None:           # other nodes (or too few free: cannot happen after the
            for i in at:           # capacity check): one by one, as claimed
                placement = occ.claim(drows[i], t, 1)
                if placement is not None:
                    got[i], nodes[i] = placement
        elif len(at) == n - ones:  # one type only: in order
            got[ones:] = each
        else:
            for i, one in zip(at, each):
                got[i] = one
    return got, nodes


def _extras(snap: Snapshot, dec: Decision, on: np.ndarray, changed: np.ndarray
            ) -> tuple[list, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Target plan, CPU threads, host memory and network bandwidth per row, and the rows that
    keep their GPUs but change plan or resources (reconfigured by checkpoint-restart).
    Over-committing the CPUs, memory or network bandwidth of the nodes that are up is a
    PolicyError."""
    jobs = snap.jobs
    n = len(jobs)
    plan: list = [None] * n
    on_l = on.tolist()
    for r, p in dec.plans.items():
        if on_l[r]:
            plan[r] = p
    zero = np.zeros(n)
    asked = dec.cpus is not None or dec.mem_gb is not None or dec.net_gbps is not None
    cpu, mem, net = _resources(snap, dec, on, zero) if asked else (zero, zero, zero)
    keep = on & ~changed                                 # the rows that keep their GPUs
    held = jobs.plan.tolist()
    regear = np.zeros(n, dtype=bool)
    regear[[r for r in np.flatnonzero(keep).tolist() if not plan[r] == held[r]]] = True
    # (where nothing is asked or held, no row's resources change)
    if asked or jobs.cpus.any() or jobs.mem_gb.any() or jobs.net_gbps.any():
        regear |= keep & ((cpu != jobs.cpus) | (mem != jobs.mem_gb) | (net != jobs.net_gbps))
    return plan, cpu, mem, net, regear


def _resources(snap: Snapshot, dec: Decision, on: np.ndarray, zero: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CPU threads, host memory and network bandwidth the decision asks for per row (0 where it
    asks for none, or the row gets no GPUs); over-committing what the nodes that are up have is
    a PolicyError."""
    n = len(zero)
    cpu = zero if dec.cpus is None else np.where(on, np.asarray(dec.cpus, dtype=float), 0.0)
    mem = zero if dec.mem_gb is None else np.where(on, np.asarray(dec.mem_gb, dtype=float), 0.0)
    if cpu.shape != (n,) or mem.shape != (n,):
        raise PolicyError(f"decision has CPU / memory targets of shape {cpu.shape} for {n} jobs")
    if not ((cpu >= 0) & (mem >= 0) & (cpu < np.inf) & (mem < np.inf)).all():     # (NaN too)
        raise PolicyError("decision asks for negative, infinite or NaN CPUs or memory")
    cap_cpu, cap_mem = snap.resources
    checks = [("CPU threads", cpu, cap_cpu), ("GB of host memory", mem, cap_mem)]
    if dec.net_gbps is None:
        net = zero
    else:
        net = np.where(on, np.asarray(dec.net_gbps, dtype=float), 0.0)
        if net.shape != (n,):
            raise PolicyError(f"decision has network targets of shape {net.shape} for {n} jobs")
        if not ((net >= 0) & (net < np.inf)).all():
            raise PolicyError("decision asks for negative, infinite or NaN network bandwidth")
        checks.append(("GB/s of node network", net, snap.network))
    for name, want, cap in checks:
        total = float(want.sum())
        if total > cap + 1e-6:
            raise PolicyError(f"decision asks for {total:g} {name}; {cap:g} are up")
    return cpu, mem, net


def _defragmentations(snap: Snapshot, dec: Decision, occ: Occupancy, changed: np.ndarray
                      ) -> list[Transition]:
    """The policy's defragmentations (`dec.defrag`): each unchanged running job, alone on its
    GPUs and of one type, moved to fewer nodes where the free GPUs now allow."""
    jobs = snap.jobs
    out = []
    for r in sorted(dec.defrag):
        if not changed[r] and jobs.running[r] and jobs.partner[r] < 0 and not jobs.mixed[r]:
            moved = _defragment(snap, occ, r)
            if moved is not None:
                out.append(moved)
    return out


def _defragment(snap: Snapshot, occ: Occupancy, r: int) -> Transition | None:
    """Move a running job to a placement on fewer nodes, if the free GPUs now allow one."""
    jobs = snap.jobs
    d, t = int(jobs.rows[r]), int(jobs.gtype[r])
    old = occ.held[d]
    before = occ.nodes_of(old)
    if before <= 1:
        return None
    cpu, mem, net = float(jobs.cpus[r]), float(jobs.mem_gb[r]), float(jobs.net_gbps[r])
    occ.release(d)
    got = occ.place(t, len(old), cpu / len(old), mem / len(old), net / len(old))
    if got is None or got[1] >= before:
        occ.assign(d, old, cpu, mem, net)
        return None
    gpus, nodes = got
    occ.assign(d, gpus, cpu, mem, net)
    return Transition(d, Kind.MIGRATE, t, gpus, nodes, nodes <= snap.cluster.min_nodes(t, len(gpus)),
                      jobs.plan[r], cpus=cpu, mem_gb=mem, net_gbps=net)


def _validate(snap: Snapshot, tgt_g: np.ndarray, tgt_t: np.ndarray, on: np.ndarray,
              changed: np.ndarray, mixed: dict[int, np.ndarray] | None = None) -> None:
    """Types may be used by the jobs that move there (the rest hold what was placed before)
    and no type is over-committed (a mixed row counts GPUs of each of its types)."""
    if mixed:
        on = on.copy()
        on[list(mixed)] = False          # validated in _mixed, counted below
    new = (on & changed).nonzero()[0]
    one_type = len(snap.capacity) == 1     # active jobs may all use the only type
    if new.size and (np.count_nonzero(tgt_t[new] < 0) or
                     not one_type and not snap.jobs.allowed[new, tgt_t[new]].all()):
        raise PolicyError("decision puts a job on a GPU type it may not use")
    tt = tgt_t[on]
    if tt.size == 0 and not mixed:
        return
    demand = np.bincount(tt, weights=tgt_g[on], minlength=len(snap.capacity))
    for c in (mixed or {}).values():
        demand = demand + c
    over = demand > snap.capacity
    if np.count_nonzero(over):
        t = int(np.flatnonzero(over)[0])
        raise PolicyError(f"decision asks for {int(demand[t])} {snap.cluster.types[t]} GPUs; "
                          f"{snap.capacity[t]} are up")


def _check_exact(snap: Snapshot, occ: Occupancy, gpus: np.ndarray, g: int, t: int,
                 job_id: str) -> np.ndarray:
    if len(gpus) != g or np.any(occ.owner[gpus] != -1) or \
            np.any(snap.cluster.gpu_type_idx[gpus] != t) or len(set(gpus.tolist())) != g:
        raise PolicyError(f"exact GPUs for job {job_id} are not {g} distinct free GPUs of the "
                          f"target type")
    return gpus


def shadow(snap: Snapshot) -> Occupancy:
    """An occupancy rebuilt from the snapshot (what the drivers' occupancy holds): policies use it
    to try their decision through the real placement before returning it."""
    occ = Occupancy(snap.cluster)
    for node in np.flatnonzero(~snap.node_up).tolist():
        occ.node_down(node)
    j = snap.jobs
    run = np.flatnonzero(j.running)
    guest = j.is_guest[run] if run.size else run.astype(bool)
    if not (guest.any() or j.cpus[run].any() or j.mem_gb[run].any() or j.net_gbps[run].any()):
        occ.assign_all(j.rows[run].tolist(), [j.placement[i] for i in run.tolist()])   # GPUs only
        return occ
    for i in np.concatenate([run[~guest], run[guest]]).tolist():
        if j.is_guest[i]:
            gpus = j.placement[i]
            owners = occ.owner[gpus]
            host = occ.held.get(int(owners[0]))
            if (owners < 0).any() or (owners != owners[0]).any() or host is None or \
                    len(host) != len(gpus):
                occ.assign_span(int(j.rows[i]), gpus[owners < 0], gpus[owners >= 0])
            else:
                occ.assign_guest(int(j.rows[i]), gpus)
        else:
            occ.assign(int(j.rows[i]), j.placement[i], float(j.cpus[i]), float(j.mem_gb[i]),
                       float(j.net_gbps[i]))
    return occ


def dry_run(snap: Snapshot, dec: Decision) -> np.ndarray:
    """Per snapshot row: whether the job would hold GPUs after the mechanism applied `dec`."""
    trs = apply(snap, dec, shadow(snap))
    row_of = {int(d): i for i, d in enumerate(snap.jobs.rows.tolist())}
    held = snap.jobs.running.copy()
    for tr in trs:
        held[row_of[tr.row]] = tr.kind is not Kind.PREEMPT
    return held & (dec.gpus > 0)
