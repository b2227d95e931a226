"""Worlds: how the simulator models everything that is not the policy.

A comparison is only as good as the world it runs in. Quanta's default world (`quanta`) is its
own best model: measured or fitted throughputs from the catalog, a checkpoint-restore delay per
restart (`--restart-delay`), every arrival seen at once by event-driven policies. A *replay
profile* is the world of a reference simulator instead (Gavel's, Sia's, Tiresias'): its restart
and first-start costs, throughput source and slowdowns, round lengths, job preparation and
policy-side semantics, each read from that simulator's code and cited in its module, so that
Quanta's policies can be checked against the authors' own numbers on the authors' own workloads
(`quanta simulate --world sia-sim`, `quanta reproduce sia`). docs/fidelity.md lists every
difference between the worlds with its measured effect.

A world module registers itself with `@world` on a function returning a `World`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from quanta.errors import QuantaError
from quanta.model.job import JobSpec
from quanta.sim.engine import RestartCost
from quanta.sim.rounds import FailedRounds, RoundClock


@dataclass(frozen=True)
class World:
    name: str
    description: str
    # the restart cost model, given the user's --restart-delay (None: the world's own, fixed)
    restart: Callable[[float], RestartCost] = lambda delay: RestartCost(delay)
    # wraps the catalog performance model (e.g. the reference's per-application slowdowns)
    perf: Callable[[object], object] = lambda base: base
    # policy name -> parameters the reference runs that policy with ("k=v,..."), or a function of
    # the run's seed giving them (a reference whose policies draw random numbers); the user's own
    # parameters win
    policy_params: Mapping[str, str] | Callable[[int], Mapping[str, str]] = \
        field(default_factory=dict)
    # what the reference does to a job before it runs it under a policy (name -> specs)
    prepare: Callable[[str, Sequence[JobSpec]], list[JobSpec]] | None = None
    notes: tuple[str, ...] = ()
    restart_fixed: bool = False   # the world sets restart costs itself (--restart-delay ignored)
    # round-based policies decide from the first arrival on, every interval (the reference's
    # rounds), instead of at the multiples of the interval
    rounds_from_first_arrival: bool = False
    # a round at time 0 (the first arrival, or the trace's time 0 with keep_clock); False where
    # the reference's first policy call is one interval in (Sia's simulator: its step at t = 0
    # runs nothing)
    round_at_zero: bool = True
    # the arrival of a job that can never run triggers a decision as any arrival does
    impossible_arrivals_decide: bool = False
    # arrivals keep the trace's own clock (the reference's rounds fall at multiples of the
    # interval from the trace's time 0) instead of the first arrival becoming time 0
    keep_clock: bool = False
    # the run's cluster when the user names none: the reference's own (sia-sim, gavel-sim), else
    # Quanta's default
    cluster: str = "gavel-108"
    # one run's performance model, given the world's (`perf`) and the policy's name: where the
    # reference's jobs learn for themselves (sia-sim's job agents), a fresh one per run
    run_perf: Callable[[object, str], object] | None = None
    # rounds in which a job holds GPUs and makes no progress, and when the reference drops a job
    # for them (gavel-sim's failed multi-GPU leases); None: every round a job runs progresses
    failed_rounds: FailedRounds | None = None
    # a job whose partner leaves mid-round keeps the pair's rate to the round's end (Simulator's
    # `round_leases`)
    round_leases: bool = False
    # makes the reference's round clock (sim/rounds.py): its rounds' lengths from the jobs'
    # leases, and when a job finishing in a pair is recorded as ending; a new one for every run
    # (a clock holds its run's last round); None: rounds exactly `interval` long
    new_round_clock: Callable[[], RoundClock] | None = None

    def engine_options(self) -> dict:
        """The Simulator's keyword arguments that this world sets (its rounds, arrivals, failed
        rounds, pair leases and round clock): every driver of a run in this world passes them."""
        return {"rounds_from_first_arrival": self.rounds_from_first_arrival,
                "round_at_zero": self.round_at_zero,
                "impossible_arrivals_decide": self.impossible_arrivals_decide,
                "failed_rounds": self.failed_rounds, "round_leases": self.round_leases,
                "round_clock": self.new_round_clock and self.new_round_clock()}

    def perf_for_run(self, perf, policy_name: str):
        return perf if self.run_perf is None else self.run_perf(perf, policy_name)

    def policy_spec(self, spec: str, seed: int = 0) -> str:
        """`spec` with the world's parameters for that policy put before the user's own, less
        those the user gives (theirs win; one given twice by the user stays so, for
        make_policy to refuse)."""
        name, _, params = spec.strip().partition(":")
        table = self.policy_params(seed) if callable(self.policy_params) else self.policy_params
        mine = table.get(name, "")
        if not mine:
            return spec
        from quanta.policies.registry import param_items
        theirs = param_items(params)
        given = {p.partition("=")[0].strip() for p in theirs}
        kept = [p for p in param_items(mine) if p.partition("=")[0].strip() not in given]
        return f"{name}:{','.join(kept + theirs)}"

    def jobs_for(self, policy_name: str, specs: Sequence[JobSpec]) -> list[JobSpec]:
        return list(specs) if self.prepare is None else self.prepare(policy_name, specs)


ONE_NODE = 1 << 30       # GPUs per node for a placement-free rate: any request fits on one


class PlacementFree:
    """A performance model in which placement never slows a job down: every allocation runs at
    the base model's consolidated rate (reference simulators that count GPUs, or give a job its
    measured throughput wherever its GPUs are). Everything else is the base model's."""

    per_node_rates = False        # (its own rate_matrix below: nodes never matter)

    def __init__(self, base):
        self.base = base

    def rate(self, job, gpu_type, num_gpus, num_nodes=1, consolidated=None):
        return self.base.rate(job, gpu_type, num_gpus, 1, True)

    def rate_with(self, job, gpu_type, num_gpus, num_nodes=1, consolidated=None, plan=None,
                  cpus=0.0, mem_gb=0.0, net_gbps=0.0):
        from quanta.perf.base import rate_with
        return rate_with(self.base, job, gpu_type, num_gpus, 1, True, plan, cpus, mem_gb, net_gbps)

    def shared_rate(self, job, other, gpu_type, num_gpus, num_nodes=1, consolidated=None,
                    mode="pack", **kw):
        return self.base.shared_rate(job, other, gpu_type, num_gpus, 1, True, mode, **kw)

    def rate_matrix(self, jobs, types):
        """The base model's rates on one node, as `rate` gives them (a model that rates
        multi-node jobs apart was asked on its own node size: a 16-GPU goodput job ran slower
        on its request, consolidated, than spread)."""
        from quanta.perf.base import rates_on
        return rates_on(self.base, jobs, types, [ONE_NODE] * len(types))

    def __getattr__(self, name):          # rate_matrix, provenance, phase_fractions, ...
        return getattr(self.base, name)


WORLDS: dict[str, Callable[[], World]] = {}


def world(name: str):
    def wrap(fn: Callable[[], World]) -> Callable[[], World]:
        WORLDS[name] = fn
        return fn
    return wrap


def get_world(name: str) -> World:
    if name not in WORLDS:
        _load(name)
    fn = WORLDS.get(name)
    if fn is None:
        raise QuantaError(f"unknown world '{name}' (known: {', '.join(sorted(WORLDS))})",
                          field="--world")
    return fn()


def world_names() -> list[str]:
    _load()
    return sorted(WORLDS)


@world("quanta")
def quanta_world() -> World:
    return World("quanta", "Quanta's own model: catalog throughputs (measured, fitted or "
                           "estimated), --restart-delay per restart, first start free")


# the module that registers each replay world (imported when asked for: a run loads its own)
WORLD_MODULES = {"gavel-sim": "gavel_sim", "sia-sim": "sia_sim", "tiresias-sim": "tiresias_sim"}


def _load(name: str | None = None) -> None:
    """Register the world `name` (every world: None, or a name no module registers)."""
    import importlib
    for module in [WORLD_MODULES[name]] if name in WORLD_MODULES else WORLD_MODULES.values():
        importlib.import_module(f"quanta.worlds.{module}")
