"""Choose one configuration per job by integer programming (shared by Sia and Pollux).

Candidates are (job, GPU type, GPU count) triples with a cost each; the programme picks at most
one per job, within each type's GPUs, minimising total cost (a job left out costs 0, so a
negative cost means "worth admitting"). The LP relaxation is solved first and kept when it is
integral (then it is the ILP optimum); otherwise HiGHS' MILP, to a 1e-4 relative gap.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import LinearConstraint, milp
from scipy.sparse import coo_matrix

from quanta.solver_output import silent_stdout


def choose_configs(n_jobs: int, cand_j: np.ndarray, cand_t: np.ndarray, cand_n: np.ndarray,
                   cost: np.ndarray, capacity: np.ndarray, time_limit: float = 10.0
                   ) -> np.ndarray | None:
    """Indexes of the chosen candidates, or None if the solver found nothing."""
    m = len(cand_j)
    if m == 0:
        return np.empty(0, dtype=np.int64)
    per_job = coo_matrix((np.ones(m), (cand_j, np.arange(m))), shape=(n_jobs, m)).tocsr()
    per_type = coo_matrix((cand_n.astype(float), (cand_t, np.arange(m))),
                          shape=(len(capacity), m)).tocsr()
    cons = [LinearConstraint(per_job, -np.inf, 1.0),
            LinearConstraint(per_type, -np.inf, capacity.astype(float))]
    with silent_stdout():
        res = milp(cost, integrality=np.zeros(m), bounds=(0, 1), constraints=cons)
        if res.x is None or np.any(np.abs(res.x - np.round(res.x)) > 1e-7):
            res = milp(cost, integrality=np.ones(m), bounds=(0, 1), constraints=cons,
                       options={"mip_rel_gap": 1e-4, "time_limit": time_limit})
    if res.x is None:
        return None
    return np.flatnonzero(res.x > 0.5)
