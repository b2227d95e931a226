"""SJF-BSBF's sharing model and its pool of hosts (quanta/policies/sjf_bsbf.py decides with
them): the pair's average JCT packed or one after the other (`pair_times`), the host remaining
time above which sharing pays (`benefit_threshold`), the running jobs that could host grouped by
what the performance model reads of them (`HostPool`), and one waiting job's options against those
groups as arrays for the screen (`ShareOptions`)."""

from __future__ import annotations

import bisect

import numpy as np

from quanta.model.job import JobSpec

SCREEN_ROWS = 12                # option rows from which a type's groups are screened with numpy


def pair_times(e_a: float, e_b: float, xi_a: float, xi_b: float, s_a: float = 1.0,
               s_b: float = 1.0) -> tuple[float, float]:
    """(t_seq, t_con): the pair's average JCT if a waits for b, and if they run packed now.
    e = remaining time alone, xi = slowdown while packed, s = slowdown when running alone again
    after the partner ended (1 = full speed)."""
    t_seq = e_b + e_a / 2.0
    ha, hb = xi_a * e_a, xi_b * e_b
    if ha >= hb:
        end_a, end_b = hb + s_a * (e_a - hb / xi_a), hb
    else:
        end_a, end_b = ha, ha + s_b * (e_b - ha / xi_b)
    return t_seq, (end_a + end_b) / 2.0


def benefit_threshold(e_a: float, xa: np.ndarray, xb: np.ndarray, sa: np.ndarray) -> np.ndarray:
    """The host remaining time e* above which sharing is beneficial (t_con < t_seq), for s_a >= 1
    and s_b = 1. t_con - t_seq is piecewise linear in e_b: (e_b c1 + e_a (s_a - 1)) / 2 while
    xi_b e_b <= xi_a e_a, with c1 = 2 xi_b - s_a xi_b / xi_a - 2, and (e_a (2 xi_a - xi_a / xi_b
    - 1) - e_b) / 2 after; it is >= 0 at e_b = 0 and decreasing once below zero."""
    c1 = 2.0 * xb - sa * xb / xa - 2.0
    edge = xa * e_a / xb
    with np.errstate(divide="ignore", invalid="ignore"):
        r1 = np.where(c1 < 0, e_a * (sa - 1.0) / -c1, np.inf)
    r2 = e_a * (2.0 * xa - xa / xb - 1.0)
    return np.where(r1 < edge, r1, np.maximum(edge, r2))


def spec_key(spec: JobSpec, per_job: bool = False) -> tuple:
    """What a performance model reads of a job's spec (two jobs with the same key and allocation
    run and share alike); per_job: the model answers per job id (OnlineModel's measurements)."""
    key = (spec.job_type, spec.num_gpus, spec.batch_size, spec.plan, spec.phase, spec.gpu_fraction,
           spec.gpu_types, spec.cpus, spec.mem_gb, spec.min_gpus, spec.max_gpus,
           spec.reference_gpu, spec.type_drawn)
    return key + (spec.job_id,) if per_job else key


class _Group:
    """Running jobs that could host, all alike (type, GPUs, spec key); sorted by (remaining time,
    submit, row) for sjf-bsbf, by (submit, row) for sjf-ffs."""
    __slots__ = ("gid", "items", "key", "n", "plan", "spec", "t")

    def __init__(self, gid: int, key: tuple, t: int, n: int, spec: JobSpec, plan):
        self.gid, self.key, self.t, self.n, self.spec, self.plan = gid, key, t, n, spec, plan
        self.items: list[tuple] = []


class HostPool:
    """The hosts available in one pass, by group, and the GPUs each can still give."""

    def __init__(self, benefit: bool, per_job: bool):
        self.benefit = benefit
        self.per_job = per_job
        self.groups: list[_Group] = []
        self.by_key: dict[tuple, _Group] = {}
        self.by_t: dict[int, list[int]] = {}
        self.by_n: dict[int, list[int]] = {}
        self.first_e = np.full(16, np.inf)
        self.last_e = np.full(16, np.inf)
        self.where: dict[int, tuple[_Group, tuple]] = {}
        self.avail: dict[int, int] = {}
        self.gpus_of_t: dict[int, int] = {}

    def add(self, row: int, t: int, n: int, spec: JobSpec, e: float, submit: float,
            avail: int, plan=None) -> None:
        key = (t, n, spec_key(spec, self.per_job), plan)
        g = self.by_key.get(key)
        if g is None:
            g = _Group(len(self.groups), key, t, n, spec, plan)
            self.groups.append(g)
            self.by_key[key] = g
            self.by_t.setdefault(t, []).append(g.gid)
            self.by_n.setdefault(n, []).append(g.gid)
            if g.gid >= len(self.first_e):
                self.first_e = np.concatenate([self.first_e, np.full(len(self.first_e), np.inf)])
                self.last_e = np.concatenate([self.last_e, np.full(len(self.last_e), np.inf)])
        item = (e, submit, row) if self.benefit else (submit, row)
        bisect.insort(g.items, item)
        self.where[row] = (g, item)
        self.avail[row] = avail
        self._ends(g)
        self.gpus_of_t[t] = self.gpus_of_t.get(t, 0) + avail

    def remove(self, row: int) -> None:
        got = self.where.pop(row, None)
        if got is None:
            return
        g, item = got
        del g.items[bisect.bisect_left(g.items, item)]
        self._ends(g)
        self.gpus_of_t[g.t] -= self.avail.pop(row)

    def take(self, row: int, c: int) -> None:
        """Host `row` gives c GPUs to a guest (it leaves the pool once it has none left)."""
        if self.avail[row] == c:
            self.remove(row)
        else:
            self.avail[row] -= c
            self.gpus_of_t[self.where[row][0].t] -= c

    def _ends(self, g: _Group) -> None:
        if self.benefit:
            self.first_e[g.gid] = g.items[0][0] if g.items else np.inf
            self.last_e[g.gid] = g.items[-1][0] if g.items else np.inf


class ShareOptions:
    """Option rows (group, k) of one waiting job's kind against some groups, as arrays, with what
    the screen needs (all linear in e_a): the benefit threshold at e_a = 1 and t_con's pieces."""
    __slots__ = (
        "a1",
        "b1",
        "b2",
        "gid",
        "k",
        "kord",
        "mono",
        "ngroups",
        "sa",
        "ustar",
        "xa",
        "xab",
        "xb",
    )

    def __init__(self, rows: list[tuple[int, int, int, float, float, float]], ngroups: int):
        self.ngroups = ngroups
        if rows:
            gid, k, kord, xa, xb, sa = zip(*rows)
        else:
            gid = k = kord = xa = xb = sa = ()
        self.gid = np.array(gid, dtype=np.int64)
        self.k = list(k)
        self.kord = list(kord)
        self.xa = xa = np.array(xa, dtype=float)
        self.xb = xb = np.array(xb, dtype=float)
        self.sa = sa = np.array(sa, dtype=float)
        # bisection needs s_a >= 1 (sharing never beneficial at e_b = 0) and t_con rising in e_b
        self.mono = (sa >= 1.0) & (sa / xa < 2.0) if rows else np.zeros(0, bool)
        if len(self.gid) >= SCREEN_ROWS:
            # t_con(e_b) = e_b a1 + e_a b1 while xi_b e_b <= xi_a e_a, else e_b / 2 + e_a b2
            self.ustar = benefit_threshold(1.0, xa, xb, sa)
            self.a1 = xb * (2.0 - sa / xa) / 2.0
            self.b1 = sa / 2.0
            self.b2 = (2.0 * xa - xa / xb) / 2.0
            self.xab = xa / xb
