"""`tiresias-sim`: the world of Tiresias' simulator (SymbioticLab/Tiresias @ 959f9b0,
simulator/run_sim.py under Python 2.7), as bench/anchors/tiresias.md (section 5) reads it.

- No restart and no first-start cost: a resumed job continues its executed time at once
  (run_sim.py:1037-1039, 1207-1208).
- No placement slowdown: once started, a job needs `duration - executed` more seconds wherever
  its GPUs are (run_sim.py:1207-1208; its README, section 4). A job's work is its trace duration
  at its GPU count (jobs.py:185), which Quanta's Tiresias reader already does.
- Placement counts GPUs only (run_sim.py:1107, 1404; cluster.py:94-95): the Tiresias policies
  never wait for a consolidated placement (`pack_limit=0`).
- The policies' two quirks (tiresias.md 2.2-2.3): whole-second jump times (`authors_timing`)
  and, for Gittins, the authors' index (`authors_index`). The authors' `dlas-gpu-N` is
  `tiresias-las:promote_knob=N`.
- A job that can never fit still triggers a scheduling pass at its arrival (run_sim.py:1025-1032)
  and never finishes (run_sim.py:975-977): use --drop-impossible to report it.
"""

from __future__ import annotations

from quanta.sim.engine import RestartCost
from quanta.worlds import PlacementFree, World, world


@world("tiresias-sim")
def tiresias_sim() -> World:
    return World(
        "tiresias-sim", "Tiresias' simulator: no restart cost, no placement slowdown, GPUs "
                        "counted only (no consolidation waits), the authors' timing and index",
        restart=lambda _delay: RestartCost(0.0),
        perf=PlacementFree,
        policy_params={"tiresias-las": "pack_limit=0,authors_timing=true",
                       "tiresias-gittins": "pack_limit=0,authors_timing=true,authors_index=true"},
        restart_fixed=True,
        impossible_arrivals_decide=True,
        notes=("world tiresias-sim: no restart cost; every placement at the consolidated rate; "
               "Tiresias policies with pack_limit=0 and the authors' timing (and Gittins index)",))
