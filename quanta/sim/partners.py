"""The simulator's part for jobs that leave GPUs they shared (a mixin of sim.engine.Simulator,
as sim/rounds.py's ReferenceRounds is): each partner still running runs alone there from then
on, or, a spanning guest that still shares other hosts' GPUs, is re-rated with those. The
rates come from core.sharing.tenancy_rate and the performance model, as every driver's do."""

from __future__ import annotations

import numpy as np

from quanta.core.jobtable import KIND_CODES, SHARE_MODES
from quanta.core.sharing import tenancy_rate


class PartnersLeft:
    """The Simulator's handling of a partner's departure: see the module's docstring."""

    def _tenancy_rate(self, row: int, gtype: int, count: int, nodes: int, cons: bool, mode: str,
                      plan=None, plan_now=None) -> float:
        """Rate of a spanning guest or of one of its hosts (core.sharing.tenancy_rate)."""
        t = self.table
        return tenancy_rate(self.perf, t.specs, self.cluster.types, self.occ, row, gtype, count,
                            nodes, cons, mode, plan,
                            lambda m: plan_now.get(m, t.plan[m]) if plan_now else t.plan[m])

    def _left(self, mates, now: float, version: np.ndarray, push) -> None:
        """A job left GPUs it shared with `mates` (driver rows): each one still running runs
        alone there now (`_unpair`), or, a spanning guest that still shares GPUs of other hosts,
        is re-rated with those (its partner: one of them)."""
        t, occ = self.table, self.occ
        for m in mates:
            if m not in occ.held:
                continue
            if not occ.spans:
                self._unpair(m, now, version, push)
                continue
            others, _alone = occ.tenants(m)
            if not others:
                self._unpair(m, now, version, push)
                continue
            p = int(t.partner[m]) if int(t.partner[m]) in others else min(others)
            gpus = occ.held[m]
            g, cons = int(t.gtype[m]), bool(t.consolidated[m])
            mode = {v: k for k, v in SHARE_MODES.items()}[int(t.share_mode[m])] or "pack"
            rate = self._tenancy_rate(m, g, len(gpus), occ.nodes_of(gpus), cons, mode, t.plan[m])
            more = {"plan": [t.plan[m]], "cpus": np.array([t.cpus[m]]),
                    "mem_gb": np.array([t.mem_gb[m]]),
                    "net_gbps": np.array([t.net_gbps[m]])} if t.extras_seen else {}
            t.apply_transitions(now, np.array([m]), np.array([KIND_CODES["reshare"]]),
                                np.array([g]), [gpus], np.array([rate]),
                                np.array([max(t.t0[m] - now, 0.0)]), np.array([p]),
                                np.array([SHARE_MODES[mode]], dtype=np.int8),
                                np.array([bool(t.is_guest[m])]), np.array([cons]),
                                goes_on=np.array([True]), **more)
            version[m] += 1
            self._push_next(np.array([m]), version, push)

    def _unpair(self, row: int, now: float, version: np.ndarray, push) -> None:
        """`row`'s partner left its GPUs: it runs alone there from now on (its owner now)."""
        t = self.table
        gpus = t.placement[row]
        g, cons = int(t.gtype[row]), bool(t.consolidated[row])
        plan, cpus, mem = t.plan[row], float(t.cpus[row]), float(t.mem_gb[row])
        net = float(t.net_gbps[row])
        rate = self._rate(row, g, len(gpus), self.occ.nodes_of(gpus), cons, -1, "", plan, cpus, mem,
                          net_gbps=net)
        # (a lease fixed for the round: alone from the next round, at the rate a start on these
        # GPUs gets where the allocation is plain, as _apply gives it)
        rate = self._lease_rate(row, rate, len(gpus) == t.req.item(row) and cons and plan is None
                                and not cpus and not mem and not net)
        more = {"plan": [plan], "cpus": np.array([cpus]), "mem_gb": np.array([mem]),
                "net_gbps": np.array([net])} if t.extras_seen else {}
        t.apply_transitions(now, np.array([row]), np.array([KIND_CODES["reshare"]]), np.array([g]),
                            [gpus], np.array([rate]), np.array([max(t.t0[row] - now, 0.0)]),
                            consolidated=np.array([cons]), goes_on=np.array([True]), **more)
        if self.phased:
            self.alloc_args[row] = (g, len(gpus), self.occ.nodes_of(gpus), cons, -1, "", plan, cpus,
                                    mem, None, None, None, net)
        version[row] += 1
        self._push_next(np.array([row]), version, push)
