"""What the Rubick plan model has measurements for: per model family and plan class, the largest
GPU count and node count among the artifact's measured runs (quanta/data/profiles/rubick: the
profile runs the DP-family parameters are fitted on, the placement rows (the 3D fitting quarter and
the held-out rest) and the 99 validation points; docs/perf-plan.md).

Beyond that range the fitted model extrapolates: its multi-node error is already ~20% where it was
measured (docs/perf-plan.md, "several nodes"), and nothing checks it further out. Rubick's curves
use this to cap scale-out (quanta/policies/rubick.py, `scale_cap`).

On the bundled data (plan class "dp" = DP, ZeRO, ZeRO-Offload, GA, GC; "3d" = Megatron PP x TP x DP):

| family | dp: GPUs / nodes | 3d: GPUs / nodes |
|---|---|---|
| vit, roberta, bert | 8 / 8 | none |
| t5 | 8 / 8 | 64 / 8 |
| gpt2 | 8 / 8 | 40 / 8 |
| llama7 | 8 / 1 | 64 / 8 |
| llama30 | none | 64 / 8 |

(the DP-family runs over several nodes all hold at most 8 GPUs, e.g. bert `ga` on 1+1+1+1+2+2).
"""

from __future__ import annotations

from functools import cache

PLAN_CLASSES = ("dp", "3d")


@cache
def measured_range(family: str) -> dict[str, tuple[int, int]]:
    """{"dp": (GPUs, nodes), "3d": (GPUs, nodes)}: the largest of each among the family's measured
    runs of that plan class; a class with no measured run is absent."""
    from quanta.perf.plan_fit import placement_samples, profile_samples, validation_samples
    samples = list(profile_samples(family))
    try:
        samples += placement_samples(family)
    except FileNotFoundError:
        pass
    samples += [s for s in validation_samples() if s.model == family]
    out: dict[str, tuple[int, int]] = {}
    for s in samples:
        cls = "3d" if s.plan.is_3d else "dp"
        g, n = out.get(cls, (0, 0))
        out[cls] = (max(g, int(sum(s.nodes))), max(n, len(s.nodes)))
    return out


def plan_perf_of(perf, job):
    """The PlanPerf that answers for `job` inside `perf` (PlanPerf itself, a CatalogModel's plan
    model, or either behind wrappers that expose `base`); None if no plan model does."""
    from quanta.perf.plan_perf import PlanPerf
    seen = 0
    while perf is not None and seen < 8:
        if isinstance(perf, PlanPerf):
            return perf if perf.family(job.job_type) is not None else None
        model_for = getattr(type(perf), "model_for", None)
        if model_for is not None:
            m = perf.model_for(job)
            return m if isinstance(m, PlanPerf) and m.family(job.job_type) is not None else None
        perf = perf.__dict__.get("base") if hasattr(perf, "__dict__") else None
        seen += 1
    return None


def evidence_for(perf, job) -> tuple[str, dict[str, tuple[int, int]]] | None:
    """(family, measured range) of a job the plan model answers for; None otherwise (no cap)."""
    pp = plan_perf_of(perf, job)
    if pp is None:
        return None
    fam = pp.family(job.job_type)
    return fam, measured_range(fam)


def describe(family: str, rng: dict[str, tuple[int, int]]) -> str:
    parts = []
    for cls in PLAN_CLASSES:
        g_n = rng.get(cls)
        name = "DP-family" if cls == "dp" else "3D"
        parts.append(f"{name} <= {g_n[0]} GPUs on <= {g_n[1]} nodes" if g_n else f"{name}: none")
    return f"{family}: " + ", ".join(parts) + " (measured)"
