"""What running jobs report (`progress.json` in each job's folder: step, steps/s, time, world
size, checkpoint step): read and checked every iteration of the runtime, put into the job table
(policies see real progress and rates), the online performance model and the store. A part of
`Runtime` (quanta/runtime/controller.py)."""

from __future__ import annotations

import math
import sys

from quanta.core.jobtable import RUNNING
from quanta.job import read_json

# progress.json fields the runtime reads: a value of the wrong type is ignored (and logged)
PROGRESS_FIELDS = ("step", "steps_per_s", "time", "world_size", "checkpoint_step")


# a running job's measured rate moved by more than this (relative): waiting jobs' estimated
# starts are computed again when next asked for
RATE_MOVED = 0.1


class RuntimeProgress:
    """Progress reports of a Runtime's jobs (its attributes: procs, table, store, ids, warned,
    reported, perf, cluster, occ, positions_at; `_attained`, `workdir`)."""

    def _read_progress(self, now: float) -> None:
        rows = [r for r in self.procs if self.procs[r].stopping == ""]
        updates = []
        for row in rows:
            cols = self._read_one(row, now)
            if cols:
                updates.append((self.ids[row], cols))
        self.store.update_many(updates)

    def _progress(self, row: int) -> dict:
        """The job's progress.json, its fields checked: a value of the wrong type (a string step,
        NaN, a negative rate) is the job's problem: ignored, and logged once per launch (as an
        event and on the service's stderr); never an exception here."""
        try:
            prog = read_json(self.workdir(self.ids[row]) / "progress.json")
        except Exception:   # noqa: BLE001 - e.g. nested too deep to parse
            prog = "unparsable"
        if prog is None:
            return {}
        out, bad = {}, []
        if not isinstance(prog, dict):
            bad.append(("progress.json", prog))
            prog = {}
        for key in PROGRESS_FIELDS:
            if key not in prog:
                continue
            v = prog[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                    or v < 0:
                bad.append((key, v))
            else:
                out[key] = float(v)
        if bad and row not in self.warned:
            self.warned.add(row)
            what = ", ".join(f"{k}={v!r}"[:80] for k, v in bad)
            print(f"quanta: job {self.ids[row]}: ignored bad progress.json values: {what}",
                  file=sys.stderr, flush=True)
            self.store.update(self.ids[row], ("bad-progress", f"ignored in progress.json: {what}"))
        return out

    def _read_one(self, row: int, now: float) -> dict:
        t = self.table
        if t.state[row] != RUNNING:
            return {}
        prog = self._progress(row)
        if "step" not in prog:
            return {}
        step = prog["step"]
        rate = prog.get("steps_per_s", 0.0)
        proc = self.procs.get(row)
        if proc is not None and not proc.training and prog.get("time", 0.0) >= proc.launched_at:
            proc.training = True     # restored and training: the end of a (re)start
            self.store.update(self.ids[row], ("training", f"from step {int(step)}"),
                              at=prog.get("time"))
        self.reported[row] = step
        t.mark(row, now)
        t.prog0[row] = min(step, t.total[row])
        t.set_phase(row)          # the model's rates for the training phase it has reached
        if rate > 0:
            old = float(t.rate[row])
            if abs(rate - old) > RATE_MOVED * max(rate, old):
                # waiting jobs' estimated starts came from the old rate (the model's, before a
                # first measurement): computed again when next asked for (current_positions)
                self.positions_at = -math.inf
            t.rate[row] = rate
            g = int(t.gtype[row])
            gpus = t.placement.get(row)
            if g >= 0 and gpus is not None and int(prog.get("world_size", 0)) == len(gpus):
                self.perf.observe(t.specs[row], self.cluster.types[g], len(gpus),
                                  self.occ.nodes_of(gpus), rate)
        cols = {"steps_done": float(t.prog0[row]), "steps_per_s": rate,
                **self._attained(row, now)}
        if "checkpoint_step" in prog:
            cols["checkpoint_step"] = int(prog["checkpoint_step"])
        return cols
