"""The Python API (`quanta.simulate`, `quanta.sweep`) gives the same numbers as the CLI."""

import csv
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import quanta
from quanta.report.output import _fmt

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
# pandas 2 (the last that installs on Python 3.10) reads some floats one digit off by default
# (90770.3169987388 for 90770.31699873881); pandas 3 reads them exactly and deprecates the switch
EXACT_FLOATS = {"float_precision": "round_trip"} if int(pd.__version__.split(".")[0]) < 3 else {}


def cli(*args):
    return subprocess.run([sys.executable, "-m", "quanta.cli", *args], capture_output=True,
                          text=True, timeout=300, env=ENV)


def test_import_quanta_is_light():
    r = subprocess.run([sys.executable, "-c", "import sys, quanta; print(quanta.__version__); "
                        "print(sorted(m for m in ('numpy', 'pandas', 'torch') if m in sys.modules))"],
                       capture_output=True, text=True, env=ENV)
    assert r.stdout.split("\n")[1] == "[]", r.stdout


def test_simulate_api_matches_the_cli(tmp_path):
    args = dict(trace="synthetic:4:60", cluster="v100:2x4,k80:1x4",
                policies=["las", "fifo:backfill=false"], seed=3, window="10:50")
    run = quanta.simulate(**args)
    r = cli("simulate", "--trace", args["trace"], "--cluster", args["cluster"], "--policy", "las",
            "--policy", "fifo:backfill=false", "--seed", "3", "--window", "10:50", "--quiet",
            "--no-plots", "--out", str(tmp_path / "o"))
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(open(tmp_path / "o" / "summary.csv")))
    assert list(run.summary["policy"]) == [x["policy"] for x in rows]
    for col in rows[0]:                                  # the CLI's numbers, as it prints them
        api = [_fmt(v.item() if hasattr(v, "item") else v) for v in run.summary[col]]
        assert api == [x[col] for x in rows], col
    for pol in ("las", "fifo_backfill=false"):
        jobs = list(csv.DictReader(open(tmp_path / "o" / pol / "jobs.csv")))
        mine = run.jobs[run.jobs["policy"] == pol.replace("_", ":")]
        assert list(mine["job_id"]) == [j["job_id"] for j in jobs]
        assert [_fmt(float(v)) for v in mine["jct_s"]] == [j["jct_s"] for j in jobs]
        assert mine["in_window"].sum() == 40
        assert sorted(mine["arrival"]) == list(range(60))
    assert any("window" in n for n in run.notes)


def test_simulate_api_under_queues_matches_the_cli(tmp_path):
    """`quanta.simulate(queues=FILE)`: per-queue results (`Simulation.queues`) as the CLI's
    queues.csv, and the summary as the CLI's under the same file."""
    teams = "quanta/examples/queues/teams.yaml"
    run = quanta.simulate(trace="philly", cluster="gavel-108", policies=["las"], seed=0,
                          max_jobs=120, queues=teams)
    r = cli("simulate", "--trace", "philly", "--cluster", "gavel-108", "--policy", "las",
            "--max-jobs", "120", "--queues", teams, "--quiet", "--no-plots",
            "--out", str(tmp_path / "o"))
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(open(tmp_path / "o" / "queues.csv")))
    assert list(run.queues.columns) == list(rows[0])
    assert list(run.queues["queue"]) == [x["queue"] for x in rows]
    for col in ("jobs", "gpu_hours", "borrowed_gpu_hours", "reclaim_preemptions"):
        assert [_fmt(v.item() if hasattr(v, "item") else v) for v in run.queues[col]] == \
            [x[col] for x in rows], col
    assert run.queues["borrowed_gpu_hours"].sum() > 0        # the layer's state reached it
    summary = list(csv.DictReader(open(tmp_path / "o" / "summary.csv")))
    assert _fmt(run.summary["avg_jct_s"][0].item()) == summary[0]["avg_jct_s"]
    assert quanta.simulate(trace="synthetic:4:20", policies="fifo").queues is None


def test_sweep_api_matches_the_cli_exactly(tmp_path):
    """(Run again in a fresh folder if Quanta's own files change mid-test: an edit in the
    checkout rightly changes the code version, a column and part of every cell's key.)"""
    from quanta.cellstore import code_version
    for i in range(3):
        code_version.cache_clear()
        before = code_version()
        try:
            return check_sweep_api(tmp_path / f"try{i}")
        except AssertionError:
            if code_version.__wrapped__() == before or i == 2:
                raise


def check_sweep_api(tmp_path):
    r = cli("sweep", "--rate", "3,5", "--jobs", "30", "--cluster", "v100:2x4", "--policy", "srtf",
            "--seeds", "0,1", "--load-scale", "1,1.5", "--workers", "2", "--out",
            str(tmp_path / "cli"), "-q")
    assert r.returncode == 0, r.stderr
    # seeds=range(...), as docs/sweeps.md writes it, and an array (both were refused)
    sw = quanta.sweep(rates=[3, 5], jobs=30, clusters="v100:2x4", policies="srtf", seeds=range(2),
                      load_scales=np.array([1, 1.5]), workers=2, out=tmp_path / "api",
                      progress=False)
    assert sw.ran == 8 and sw.reused == 0 and len(sw.results) == 8
    from_csv = pd.read_csv(tmp_path / "cli" / "results.csv", **EXACT_FLOATS)
    assert list(from_csv.columns) == list(sw.results.columns)
    def norm(v):
        if v is None or v == "" or (isinstance(v, float) and np.isnan(v)):
            return None
        return v.item() if hasattr(v, "item") else v

    for col in from_csv.columns:
        a = [norm(v) for v in from_csv[col]]
        b = [norm(v) for v in sw.results[col]]
        if from_csv[col].dtype.kind in "fi" and any(x is not None for x in a):
            kind = type(next(x for x in a if x is not None))
            assert a == [None if x is None else kind(x) for x in b], col   # exact
        else:
            assert [None if x is None else str(x) for x in a] == \
                [None if x is None else str(x) for x in b], col
    agg = pd.read_csv(tmp_path / "cli" / "aggregate.csv", **EXACT_FLOATS)
    assert np.array_equal(agg["avg_jct_s_ci95"], sw.aggregate["avg_jct_s_ci95"])
    assert len(sw.jobs) == 8 * 30
    again = quanta.sweep(rates=[3, 5], jobs=30, clusters="v100:2x4", policies="srtf",
                         seeds=[0, 1], load_scales=[1, 1.5], out=tmp_path / "cli",
                         progress=False)
    assert again.ran == 0 and again.reused == 8        # the CLI's cells, reused by the API


def test_api_errors_are_quanta_errors(tmp_path):
    with pytest.raises(quanta.QuantaError, match="unknown policy 'nope'"):
        quanta.simulate(trace="synthetic:3:10", policies=["nope"])
    with pytest.raises(quanta.QuantaError, match="bad window"):
        quanta.simulate(trace="synthetic:3:10", window="x")
    with pytest.raises(quanta.QuantaError, match="unknown option 'colour'"):
        quanta.sweep(rates=[3], jobs=10, colour=1, out=tmp_path, progress=False)
    # the way out a message gives is Python's, not the command line's ("use --force")
    quanta.simulate(trace="synthetic:3:10", cluster="v100:2x4", policies=["fifo"], out=tmp_path / "o")
    with pytest.raises(quanta.QuantaError) as err:
        quanta.simulate(trace="synthetic:3:10", cluster="v100:2x4", policies=["fifo"],
                        out=tmp_path / "o")
    assert "use force=True to replace them, or another out" in str(err.value) and \
        "--" not in str(err.value)
    with pytest.raises(quanta.QuantaError, match="field 'repair_h': is the repair time of "
                       "failing nodes: give node_mtbf_h too"):      # (it was ignored)
        quanta.sweep(rates=[3], jobs=10, repair_h=2, out=None, progress=False)
    with pytest.raises(quanta.QuantaError, match=r"use drop_impossible=True to report them"):
        quanta.simulate(trace="synthetic:3:40", cluster="v100:1x1", policies=["fifo"])


SIM_BAD = [   # (arguments, field, message): AttributeErrors, numpy's errors, silent slicing before
    (dict(trace=5), "trace", "want text, got int 5"),
    (dict(trace=None), "trace", "want a value, got None"),
    (dict(format=None), "format", "want a value, got None"),
    (dict(policies=1), "policies", "want a policy name, a Policy object or a list of them"),
    (dict(policies={"las": 1}), "policies", "got dict"),        # (ran its keys)
    (dict(policies=b"las"), "policies", "got bytes"),
    (dict(cluster=["gavel-108"]), "cluster", "want text or a path, got list"),
    (dict(seed=1.5), "seed", "want an integer, got float 1.5"),
    (dict(seed=2**63), "seed", "must be 0 to 9223372036854775807"),     # (pyarrow, later)
    # the checks shared with the command line name the argument, not the flag (was '--seed')
    (dict(seed=-1), "seed", "must be 0 to"),
    (dict(load_scale=0), "load_scale", "must be a positive number, got 0"),
    (dict(policies=["nope"]), "policies", "unknown policy 'nope'"),
    (dict(load_scale="2"), "load_scale", "want a number, got str '2'"),
    (dict(max_jobs=0), "max_jobs", "want 1 or more, got 0"),       # (ran every job)
    (dict(max_jobs=-3), "max_jobs", "want 1 or more, got -3"),     # (ran all but 3)
    (dict(max_jobs=True), "max_jobs", "want an integer, got bool True"),
    (dict(out=""), "out", "is empty: name a folder"),             # (wrote into the current one)
    (dict(plots="yes"), "plots", "want True or False"),
]


@pytest.mark.parametrize("kw, field, says", SIM_BAD)
def test_simulate_refuses_arguments_of_the_wrong_kind_naming_them(kw, field, says, tmp_path,
                                                                   monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(quanta.QuantaError) as e:
        quanta.simulate(**{"trace": "synthetic:3:20", "cluster": "v100:2x4", **kw})
    assert f"field '{field}'" in str(e.value) and says in str(e.value), str(e.value)
    assert list(tmp_path.iterdir()) == []                     # nothing written


def test_simulate_takes_a_path_and_a_policy_class_gets_a_hint():
    from pathlib import Path
    from quanta.policies.baselines import Las
    trace = Path(quanta.__file__).parent / "data" / "traces" / "philly_sample.csv"
    assert len(quanta.simulate(trace=trace, cluster="v100:4x8", policies="fifo",
                               max_jobs=20).jobs) == 20
    with pytest.raises(quanta.QuantaError, match=r"give a policy object \(Las\(\)\), not its"):
        quanta.simulate(trace="synthetic:3:10", policies=Las)
    with pytest.raises(quanta.QuantaError, match=r"each policy is Las\(\), not its class"):
        quanta.simulate(trace="synthetic:3:10", policies=["fifo", Las])


SWEEP_BAD = [   # an empty axis ran the 2,000-job Philly default; 1.5 ran seed 1; 2.7 jobs ran 2
    (dict(rates=[]), "rates", "is an empty list"),
    (dict(traces=[]), "traces", "is an empty list"),
    (dict(load_scales=[]), "load_scales", "is an empty list"),        # (0 cells, no error)
    (dict(seeds=[1.5]), "seeds", "want integers, got float 1.5"),
    (dict(seeds=[True]), "seeds", "want integers, got bool True"),
    (dict(seeds=[2**63]), "seeds", "is past 9223372036854775807"),   # (pyarrow after the cells)
    (dict(jobs=2.7), "jobs", "want an integer, got float 2.7"),
    (dict(workers=0), "workers", "want 1 or more, got 0"),
    (dict(drop_impossible="no"), "drop_impossible", "want True or False"),   # (after the cells)
    (dict(traces=[None]), "traces", "want names or paths, got NoneType None"),
    (dict(rates=["3"]), "rates", "want numbers, got str '3'"),
    (dict(until_h="x"), "until_h", "want a number, got str 'x'"),
    (dict(out=""), "out", "is empty: name a folder"),
    (dict(rates=None, traces=["philly"]), "jobs", "sizes the synthetic traces of rates"),
    (dict(policies=["nope"]), "policies", "unknown policy 'nope'"),        # (was '--policy')
    (dict(clusters=["v100:0x1"]), "clusters", "bad cluster spec 'v100:0x1'"),   # ('--cluster')
]


@pytest.mark.parametrize("kw, field, says", SWEEP_BAD)
def test_sweep_refuses_arguments_of_the_wrong_kind_before_running(kw, field, says, tmp_path,
                                                                  monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = {"rates": [3], "jobs": 10, "clusters": "v100:2x4", "policies": "las", "out": "sw",
            "progress": False, **kw}
    with pytest.raises(quanta.QuantaError) as e:
        quanta.sweep(**args)
    assert f"field '{field}'" in str(e.value) and says in str(e.value), str(e.value)
    assert list(tmp_path.iterdir()) == []                     # no cell ran


def test_the_run_seed_reaches_a_policys_own_random_stream():
    """--seed is "the seed for everything random", but in Quanta's world a policy's own seed
    (Gavel's agnostic FIFO type draws, Pollux's genetic search) stayed 0 whatever the run's:
    three seeds gave one result. Now the run's seed, unless the user gives the policy one."""
    from quanta.api import simulate

    def jobs(seed, spec="gavel-fifo-agnostic"):
        res = simulate("tiresias-60", "gavel-108", [spec], seed=seed).results[0]
        return res.table.end.tolist()
    runs = [jobs(s) for s in (0, 1, 2)]
    assert runs[0] != runs[1] and runs[1] != runs[2] and runs[0] != runs[2]
    assert jobs(0, "gavel-fifo-agnostic:seed=1") == runs[1]     # the policy's own seed wins
    assert jobs(2, "gavel-fifo-agnostic:seed=0") == runs[0]
