"""Defining behaviour of the baseline policies and of the shared greedy walk, on hand-built snapshots."""

import numpy as np
import pytest

from quanta.core.decision import Decision
from quanta.core.jobtable import PENDING, JobTable
from quanta.core.snapshot import Snapshot
from quanta.model import Cluster, JobSpec, NodeSpec
from quanta.placement import Occupancy
from quanta.policies import POLICIES, make_policy
from quanta.policies.greedy import KEEP_RATIO, _fill_many_types, _fill_one_type, _fill_uncontended
from quanta.errors import QuantaError

from conftest import homogeneous


def snapshot(specs, cluster, perf, now=0.0, running=(), attained=None, executed=None, waiting=None,
             state=None):
    """A snapshot where `running` maps job index -> (type index, gpus) already held; attained,
    executed and waiting(-since) override those columns (arrays over all jobs); `state` is the
    policy state handed in."""
    t = JobTable(specs, cluster, perf)
    occ = Occupancy(cluster)
    t.state[:] = PENDING
    for row, (tidx, n) in dict(running).items():
        gpus, _ = occ.place(tidx, n)
        occ.assign(row, gpus)
        t.hold(row, 0.0, "start", tidx, gpus, 1.0, 0.0)
    if attained is not None:
        t.att0[:] = attained
    if executed is not None:
        t.run0[:] = executed
    if waiting is not None:
        t.waiting_since[:] = waiting
    rows = np.arange(len(specs))
    return Snapshot(now, cluster, perf, t.view(rows, now), occ.up_capacity(), occ.node_free.copy(),
                    occ.node_up.copy(), state=state or {}), t


def jobs(*sizes, steps=None, submit=None):
    out = []
    for i, g in enumerate(sizes):
        s = float(steps[i]) if steps else 100.0
        out.append(JobSpec(f"j{i}", float(submit[i]) if submit else float(i), g, "", total_steps=s))
    return out


def test_fifo_is_strict_without_backfill_and_fills_with_it(perf):
    c = homogeneous(1, 8)
    specs = jobs(4, 8, 2, 2)
    snap, _ = snapshot(specs, c, perf)
    strict = make_policy("fifo:backfill=false").decide(snap)
    assert list(strict.gpus) == [4, 0, 0, 0]          # the 8-GPU job blocks the rest
    bf = make_policy("fifo").decide(snap)
    assert list(bf.gpus) == [4, 0, 2, 2]               # backfill skips it


def test_fifo_never_preempts_running_jobs(perf):
    c = homogeneous(1, 8)
    specs = jobs(8, 1, submit=[5.0, 0.0])              # job 1 is older but job 0 holds the node
    snap, _ = snapshot(specs, c, perf, running={0: (0, 8)})
    dec = make_policy("fifo").decide(snap)
    assert list(dec.gpus) == [8, 0]


def test_sjf_picks_shortest_first(perf):
    c = homogeneous(1, 4)
    specs = jobs(4, 4, 4, steps=[500, 100, 300])
    snap, _ = snapshot(specs, c, perf)
    assert list(make_policy("sjf").decide(snap).gpus) == [0, 4, 0]


def test_srtf_preempts_for_shorter_remaining(perf):
    c = homogeneous(1, 4)
    specs = jobs(4, 4, steps=[1000, 10])
    snap, _ = snapshot(specs, c, perf, running={0: (0, 4)})
    assert list(make_policy("srtf").decide(snap).gpus) == [0, 4]


def test_las_prefers_least_attained_service(perf):
    c = homogeneous(1, 4)
    specs = jobs(2, 2, 2)
    snap, _ = snapshot(specs, c, perf, running={0: (0, 2), 1: (0, 2)},
                       attained=np.array([500.0, 100.0, 0.0]))
    dec = make_policy("las").decide(snap)
    assert list(dec.gpus) == [0, 2, 2]                 # the most-served job is preempted


def test_heterogeneous_walk_prefers_fastest_type_and_keeps_current(perf):
    c = Cluster((NodeSpec("v", "v100", 1), NodeSpec("k", "k80", 1)))
    specs = [JobSpec("a", 0, 1, "ResNet-50 (batch size 64)", total_steps=10),
             JobSpec("b", 1, 1, "ResNet-50 (batch size 64)", total_steps=10)]
    snap, _ = snapshot(specs, c, perf, running={1: (1, 1)})   # b holds the K80
    dec = make_policy("fifo").decide(snap)
    assert dec.gpu_type[1] == 1 and dec.gpu_type[0] == 0      # b keeps K80, a gets the V100


def test_one_type_fast_path_matches_general_walk(perf):
    rng = np.random.default_rng(0)
    for trial in range(200):
        n = int(rng.integers(1, 60))
        req = rng.choice([1, 2, 4, 8, 16], size=n)
        order = rng.permutation(n)
        cap = int(rng.integers(0, 64))
        for backfill in (False, True):
            a = Decision(np.zeros(n, np.int64), np.full(n, -1, np.int64))
            _fill_one_type(req, order, cap, backfill, a)

            class J:  # the general walk's view of the same jobs, one type
                pass
            j = J()
            j.req, j.allowed, j.rates, j.gtype = req, np.ones((n, 1), bool), np.ones((n, 1)), np.full(n, -1)

            class S:
                jobs = j
            b = Decision(np.zeros(n, np.int64), np.full(n, -1, np.int64))
            _fill_many_types(S, order, np.array([cap]), backfill, False, b)
            assert np.array_equal(a.gpus, b.gpus), (trial, backfill)


def _walk_oracle(req, allowed, rates, cur, order, free, backfill, migrate):
    """The several-types walk as it was written on numpy rows (before it moved to Python
    scalars): the oracle the faster walk must equal."""
    gpus, gtype = np.zeros(len(req), np.int64), np.full(len(req), -1, np.int64)
    min_rest = np.minimum.accumulate(req[order][::-1])[::-1]
    for pos, row in enumerate(order):
        if free.max() < min_rest[pos]:
            break
        need = req[row]
        room = allowed[row] & (free >= need)
        if not room.any():
            if not backfill:
                break
            continue
        t = cur[row]
        if t < 0 or not room[t]:
            t = int(np.argmax(np.where(room, rates[row], -1.0)))
        elif migrate:
            best = int(np.argmax(np.where(room, rates[row], -1.0)))
            if rates[row, t] < KEEP_RATIO * rates[row, best]:
                t = best
        free[t] -= need
        gpus[row], gtype[row] = need, t
    return gpus, gtype


def test_several_types_walk_matches_the_numpy_walk():
    rng = np.random.default_rng(1)
    at_once = 0
    for trial in range(400):
        n, K = int(rng.integers(1, 80)), int(rng.integers(2, 5))
        req = rng.choice([1, 2, 4, 8], size=n)
        allowed = rng.random((n, K)) < 0.8
        # ties in rate on purpose (the first of equals wins), a running job's type held or not
        rates = np.where(allowed, rng.choice([0.5, 1.0, 1.0, 2.0, 2.1], size=(n, K)), 0.0)
        cur = np.where(rng.random(n) < 0.4, rng.integers(0, K, n), -1)
        order = rng.permutation(n)
        # contended, or room for everyone (where the walk is skipped: _fill_uncontended)
        cap = rng.integers(0, 40, K) if trial % 2 else rng.integers(0, 400, K)
        for backfill in (False, True):
            for migrate in (False, True):
                want = _walk_oracle(req, allowed, rates, cur, order, cap.copy(), backfill, migrate)

                class J:
                    pass
                j = J()
                j.req, j.allowed, j.rates, j.gtype = req, allowed, rates, cur

                class S:
                    jobs = j
                got = Decision(np.zeros(n, np.int64), np.full(n, -1, np.int64))
                free = cap.copy()
                _fill_many_types(S, order, free, backfill, migrate, got)
                assert np.array_equal(got.gpus, want[0]), (trial, backfill, migrate)
                assert np.array_equal(got.gpu_type, want[1]), (trial, backfill, migrate)
                assert free.sum() == cap.sum() - got.gpus.sum()
                at_once += _fill_uncontended(
                    order, req[order], allowed[order], rates[order], cur[order], cap.copy(),
                    migrate, Decision(np.zeros(n, np.int64), np.full(n, -1, np.int64)))
    assert 200 < at_once < 1600          # both ways taken


def test_built_in_table_names_the_module_that_registers_each_policy():
    from quanta.policies.registry import BUILT_IN
    built_in = {n: i.cls.__module__ for n, i in POLICIES.items() if not i.origin}
    assert built_in == {n: f"quanta.policies.{m}" for n, m in BUILT_IN.items()}


LAZY = """
import sys
from quanta.policies import POLICIES, make_policy
def loaded():
    return sorted(m.rpartition(".")[2] for m in sys.modules if m.count(".") == 2
                  and m.startswith("quanta.policies.") and m.rpartition(".")[2] in BUILT)
from quanta.policies.registry import BUILT_IN
BUILT = set(BUILT_IN.values())
assert loaded() == [], loaded()
assert "sia" in POLICIES and "nope" not in POLICIES and loaded() == []
assert make_policy("gavel-fifo").name == "gavel-fifo" and loaded() == ["gavel"], loaded()
assert make_policy("tiresias-las").name == "tiresias-las"
assert loaded() == ["gavel", "tiresias"], loaded()
assert sorted(POLICIES) == sorted(BUILT_IN) and loaded() == sorted(BUILT), loaded()
"""

CLASH = """
from dataclasses import dataclass
import quanta
from quanta.errors import QuantaError
from quanta.policies.baselines import Fifo
try:
    @quanta.register("gavel-fifo", "a user's policy under a built-in name")
    @dataclass
    class Mine(Fifo):
        pass
except QuantaError as e:
    assert "registered twice" in str(e) and "quanta.policies.gavel" in str(e), e
else:
    raise AssertionError("a built-in name taken over")
"""


@pytest.mark.parametrize("code", [LAZY, CLASH], ids=["lazy", "clash"])
def test_a_process_imports_only_the_policy_modules_it_looks_up(code):
    """A run imports the modules of the policies it names (all of them cost ~20 ms a process);
    listing imports them all, and a user's class under a built-in name is refused as before,
    though the built-in module was not imported yet."""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_registry_parameters_and_errors():
    assert {"fifo", "sjf", "srtf", "las"} <= set(POLICIES)
    assert make_policy("las:backfill=false").backfill is False
    with pytest.raises(QuantaError, match="unknown policy 'nope'"):
        make_policy("nope")
    with pytest.raises(QuantaError, match="unknown parameter 'x'"):
        make_policy("fifo:x=1")
    with pytest.raises(QuantaError, match="wants true/false"):
        make_policy("fifo:backfill=maybe")
    # a policy's parameters (config.yaml's, the command line's) are what a user sets: not a
    # private field (rubick's cache of plans); a function only from Python (hadar's price)
    from quanta.policies.registry import parameters
    assert "_memo" not in {f.name for f in parameters(POLICIES["rubick"].cls)}
    assert "price" in {f.name for f in parameters(POLICIES["hadar"].cls)}
    with pytest.raises(QuantaError, match="parameter 'price' is a function: give it from Python"):
        make_policy("hadar:price=abc")


def test_preemptive_walk_moves_a_squeezed_job_back_to_the_fast_type(perf):
    c = Cluster((NodeSpec("v", "v100", 1), NodeSpec("k", "k80", 1)))
    specs = [JobSpec("a", 0, 1, "ResNet-50 (batch size 64)", total_steps=1000)]
    snap, _ = snapshot(specs, c, perf, running={0: (1, 1)})          # on the K80, V100 idle
    assert make_policy("las").decide(snap).gpu_type[0] == 0           # preemptive: moves back
    assert make_policy("fifo").decide(snap).gpu_type[0] == 1          # non-preemptive: stays


@pytest.mark.parametrize("spec,says", [
    # p = 1000 overflowed speedup ** p to inf: a scipy traceback (exit 1); p near 0 makes every
    # configuration worth 1: the run scheduled nothing (exit 0, 0 of 40 finished)
    ("pollux:p=1000", "pollux: p must be a power from -100 to -0.01 or 0.01 to 100, got 1000"),
    ("pollux:p=0", "pollux: p must be a power"),
    ("sia:p=0", "sia: p must be a power from -100 to -0.01 or 0.01 to 100, got 0"),
    ("sia:p=1e-9", "sia: p must be a power"),
    # negative threads per GPU: a PolicyError traceback; none, or inf: nothing ran
    ("rubick:cpu_options=-1", "rubick: cpu_options must be CPU threads per GPU to try"),
    ("rubick:cpu_options=", "got 'nothing'"),
    ("rubick:cpu_options=inf", "got 'inf'"),
    # an unknown GPU type was passed over unsaid
    ("sia:learn=true,project_order=bogus", "sia project_order: unknown GPU type 'bogus'"),
    # (these named the parameter as the field; every other policy error names --policy)
    ("rubick:scale_cap=bogus", "rubick: scale_cap must be one of"),
    ("pollux:search=x", "pollux: search must be ilp or ga"),
    ("sia:ties=x", "sia: ties must be search or milp"),
])
def test_policy_parameters_no_run_can_use_are_refused_naming_the_policy(spec, says):
    with pytest.raises(QuantaError) as e:
        make_policy(spec)
    assert says in str(e.value) and e.value.field == "--policy", str(e.value)


def test_spaces_around_a_parameters_equals_sign_are_read_and_the_label_is_canonical():
    """`las:backfill = false` was 'unknown parameter 'backfill '' while `las: backfill=false`
    was taken (and labelled with its spaces: the two were not seen as one policy)."""
    for spec in ("las:backfill = false", "las: backfill=false", "las:backfill= false,"):
        p = make_policy(spec)
        assert p.backfill is False and p.label() == "las:backfill=false"
    p = make_policy("sia:learn=true,project_order=A100/RTX/T4")
    assert p.project_order == "a100/rtx/t4"          # (upper case was passed over unsaid)


def test_every_policys_listed_defaults_written_back_are_its_defaults():
    """`quanta policies NAME` lists key=default: each, given back as a spec, builds the policy
    its name alone builds (so the listing says what a run takes)."""
    from quanta.policies.registry import policy_parameters
    for name in POLICIES:
        items = [f"{k}={d}" for k, kind, d in policy_parameters(name)
                 if kind != "from Python only" and d != "(none)"]
        assert make_policy(f"{name}:{','.join(items)}" if items else name) == make_policy(name), \
            name
