"""`quanta reproduce`: the references' recorded runs replayed beside Quanta's, seed means and
spreads, the two-sample verdict against the issue's target, and its command line (the replay
worlds themselves: test_worlds.py)."""

import subprocess
import sys

import numpy as np
import pytest

def test_seed_means_average_the_runs_of_a_workload_recorded_with_several_seeds():
    from quanta.reproduce import seed_means

    def run(workload, variant, ref, rep, app_ref, app_rep):
        side = {"avg_jct_s": rep, "makespan_s": 2 * rep, "avg_jct_matched_s": rep, "matched": 3,
                "dropped": 0, "median_abs_err": 0.1, "by_app": {"a": app_rep}, "world": "sia-sim"}
        return {"workload": workload, "policy": "pollux", "variant": variant,
                "quanta_policy": "pollux", "jobs": 3, "ref_avg_jct_s": ref,
                "ref_makespan_s": 2 * ref, "ref_by_app": {"a": app_ref}, "ref_command": "c",
                "ref_commit": "x", "replay": side, "quanta": side}
    rows = [run("w", "", 100.0, 90.0, 10.0, 8.0), run("w", "seed 1", 300.0, 330.0, 30.0, 40.0),
            run("v", "", 5.0, 5.0, 1.0, 1.0),                       # one seed: no mean
            run("u", "", 5.0, 5.0, 1.0, 1.0), run("u", "solver highs", 9.0, 9.0, 1.0, 1.0)]
    (m,) = seed_means(rows)
    assert (m["workload"], m["variant"], m["seeds"]) == ("w", "mean of 2 seeds", 2)
    assert (m["ref_avg_jct_s"], m["replay"]["avg_jct_s"], m["replay"]["makespan_s"]) == \
        (200.0, 210.0, 420.0)
    assert m["ref_by_app"] == {"a": 20.0} and m["replay"]["by_app"] == {"a": 24.0}
    assert m["replay"]["median_abs_err"] != m["replay"]["median_abs_err"]   # none: NaN


def test_two_samples_interval_agrees_with_welchs_test():
    """The replay's runs against the reference's as two samples: the 95% interval of the
    difference of the means excludes 0 exactly when Welch's t-test rejects at 5%."""
    from scipy.stats import ttest_ind

    from quanta.reproduce import _two_samples
    rng = np.random.default_rng(3)
    for _ in range(40):
        ref = rng.normal(100.0, 10.0, size=int(rng.integers(2, 5)))
        rep = rng.normal(100.0 + rng.uniform(-25, 25), 15.0, size=int(rng.integers(2, 9)))
        c = _two_samples(list(ref), list(rep))
        assert c["diff"] == pytest.approx(rep.mean() / ref.mean() - 1)
        assert c["ref_sd"] == pytest.approx(ref.std(ddof=1))
        p = ttest_ind(rep, ref, equal_var=False).pvalue
        assert (c["lo"] > 0 or c["hi"] < 0) == (p < 0.05)
    one = _two_samples([100.0], [90.0, 110.0])     # one reference run: no spread, no interval
    assert one["diff"] == 0.0 and np.isnan(one["ref_sd"]) and np.isnan(one["lo"])


def test_seed_spread_replays_only_the_seeds_not_yet_run(monkeypatch):
    import quanta.reproduce as rp
    calls = []

    def fake_compare(ref, adapter, world, seed=None):
        calls.append(seed)
        return {"avg_jct_s": 10.0 * (seed + 1), "makespan_s": 100.0, "avg_jct_matched_s":
                10.0 * (seed + 1), "matched": 3, "dropped": 0, "median_abs_err": 0.1,
                "by_app": {"a": 1.0 + seed}, "world": world}
    monkeypatch.setattr(rp, "compare", fake_compare)

    def run(variant, seed, ref):
        side = dict(fake_compare(None, None, "sia-sim", seed), seed=seed)
        return {"workload": "w", "policy": "pollux", "variant": variant,
                "quanta_policy": "pollux", "jobs": 3, "ref_avg_jct_s": ref,
                "ref_makespan_s": 100.0, "ref_by_app": {"a": 2.0, "b": 5.0},
                "ref_command": "c", "ref_commit": "x", "replay": side,
                "quanta": dict(side, world="quanta")}
    rows = [run("", 0, 12.0), run("seed 1", 1, 18.0), run("solver highs", 0, 99.0)]
    assert rp.spread_needs(rows, 4) == [(("w", "pollux"), 2), (("w", "pollux"), 3)]
    calls.clear()
    (row,) = rp.seed_spread(rows, {("w", "pollux"): object()}, rp.ADAPTERS["pollux"], 4)
    assert calls == [2, 3]                          # seeds 0 and 1 were replayed already
    sp = row["spread"]
    assert row["variant"] == "2 reference / 4 replay seeds"
    assert (sp["avg_jct"]["ref_mean"], sp["avg_jct"]["replay_mean"]) == (15.0, 25.0)
    assert sp["avg_jct"]["replay_runs"] == [10.0, 20.0, 30.0, 40.0]
    assert list(sp["by_app"]) == ["a"]              # only applications both sides have
    assert row["replay"]["by_app"] == {"a": 2.5} and row["replay"]["seeds"] == [0, 1, 2, 3]
    # judged against the targets for Pollux (10%, 10%, 15% an application) ...
    assert [sp["avg_jct"]["target"], sp["makespan"]["target"], sp["by_app"]["a"]["target"]] == \
        [0.10, 0.10, 0.15] and sp["avg_jct"]["verdict"] == "undecided"
    # ... and only where the issue sets one (Gavel's: the average JCT within 2%)
    calls.clear()
    (row,) = rp.seed_spread(rows, {("w", "pollux"): object()}, rp.ADAPTERS["gavel"], 4)
    assert row["spread"]["avg_jct"]["target"] == 0.02
    assert "verdict" not in row["spread"]["makespan"]


def test_reference_runs_of_other_seeds_are_told_apart():
    """Pollux's reference is recorded with several seeds (its genetic search draws from them):
    each is its own row, labelled, and `ref_seed` keeps one."""
    from quanta.errors import QuantaError
    from quanta.reproduce import ADAPTERS, recorded, reproduce, variant_of
    runs = [r for r in recorded(ADAPTERS["pollux"])
            if r.summary["workload"] == "sia_newtrace_workload-1_first60"]
    assert sorted(variant_of(r.summary) for r in runs) == ["", "seed 1", "seed 2"]
    assert variant_of({"command": "python bench/anchors/sia.py --seed 2 --solver highs"}) \
        == "seed 2, solver highs"
    with pytest.raises(QuantaError, match="seed 7"):
        reproduce("pollux", workload="sia_newtrace_workload-1_first60", ref_seed=7)


def test_reproduce_in_worker_processes_gives_the_rows_of_one_process():
    """`quanta reproduce` runs its replays in local processes (-j N; default every core): the
    rows are those of one process, in the same order; how many runs is said at the start and
    each run once as it finishes. The command as typed, with -j 2, prints the same JSON."""
    import json

    from quanta.reproduce import reproduce
    seen: list[str] = []
    one = reproduce("tiresias", workers=1)
    two = reproduce("tiresias", workers=2, progress=seen.append)
    assert json.dumps(two) == json.dumps(one)
    per_row = [f"{r['workload']} / {r['policy']}" + (f" ({r['variant']})" if r["variant"] else "")
               for r in one if r["replay"].get("seed") is not None and "spread" not in r]
    assert seen[0] == f"replaying {2 * len(per_row)} runs, 2 at a time"
    assert sorted(seen[1:]) == sorted(f"replayed {w}" for w in per_row + [f"{w}, Quanta's world"
                                                                            for w in per_row])
    cli = subprocess.run([sys.executable, "-m", "quanta.cli", "reproduce", "tiresias", "-j", "2",
                          "--json"], capture_output=True, text=True)
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout) == json.loads(json.dumps(one))
    bad = subprocess.run([sys.executable, "-m", "quanta.cli", "reproduce", "tiresias", "-j", "0"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "-j" in bad.stderr and "Traceback" not in bad.stderr


def test_reproduce_command_line():
    run = subprocess.run([sys.executable, "-m", "quanta.cli", "reproduce", "sia", "--policy", "gavel",
                          "--workload", "sia_philly_workload-1_first30", "--json"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    import json
    rows = json.loads(run.stdout)
    assert rows and all(r["policy"] == "gavel" for r in rows)
    bad = subprocess.run([sys.executable, "-m", "quanta.cli", "reproduce", "nosuch"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "no recorded references for 'nosuch'" in bad.stderr


@pytest.mark.parametrize("cmd", ["quanta worlds", "quanta reproduce tiresias",
                                 pytest.param("quanta reproduce sia --workload sia_philly_workload-1_first30",
                                              marks=pytest.mark.slow)])
def test_readme_reproduce_and_worlds_commands_run_verbatim(cmd):
    """The README's `quanta worlds` and `quanta reproduce` lines, from the repository root."""
    import os
    import re
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text()
    assert re.search(rf"^{re.escape(cmd)}\s", readme, re.M), cmd
    run = subprocess.run([sys.executable, "-m", "quanta.cli", *cmd.split()[1:]], cwd=root,
                         capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    assert run.returncode == 0, run.stderr
    expect = {"quanta worlds": "tiresias-sim", "quanta reproduce tiresias": "dlas-gpu_count",
              "quanta reproduce sia --workload sia_philly_workload-1_first30": "sia_philly"}[cmd]
    assert expect in run.stdout


def test_two_samples_give_a_verdict_against_the_target():
    """`--replay-seeds` judges the means against the issue's target as two one-sided tests would:
    within where the 90% interval of the difference lies inside +-target (a difference shown but
    smaller than the target is within), differs where the 95% interval leaves out 0 (outside
    where that is beyond the target too), else undecided."""
    from scipy.stats import ttest_ind

    from quanta.reproduce import _two_samples, verdict
    ref = [100.0, 101.0, 99.0, 100.5, 99.5]
    close = _two_samples(ref, [100.2, 99.8, 100.9, 99.4, 100.1, 100.3], 0.10)
    assert close["verdict"] == "within" and -0.10 < close["lo90"] < close["hi90"] < 0.10
    assert close["lo"] < close["lo90"] < close["hi90"] < close["hi"]   # 90% inside 95%
    t = ttest_ind([100.2, 99.8, 100.9, 99.4, 100.1, 100.3], ref, equal_var=False)
    assert close["lo90"] == pytest.approx(t.confidence_interval(0.90).low / np.mean(ref))
    assert _two_samples(ref, [130.0, 131.0, 129.0], 0.10)["verdict"] == "outside"
    assert _two_samples(ref, [104.0, 105.0, 104.5, 103.5], 0.03)["verdict"] == "outside"
    assert _two_samples(ref, [104.0, 105.0, 104.5, 103.5], 0.10)["verdict"] == "within"
    assert _two_samples(ref, [108.0, 109.0, 108.5, 107.5], 0.10)["verdict"] == "within"  # +8.5%
    assert _two_samples(ref, [106.0, 114.0, 110.0, 108.0, 112.0], 0.10)["verdict"] == "differs"
    wide = _two_samples([80.0, 120.0, 100.0], [70.0, 140.0, 95.0], 0.10)
    assert wide["verdict"] == "undecided"
    assert _two_samples([100.0], [90.0, 110.0], 0.10)["verdict"] == "-"   # no interval
    assert "verdict" not in _two_samples(ref, ref)                        # no target given
    assert verdict({"lo": -0.2, "hi": 0.2, "lo90": -0.05, "hi90": 0.05}, 0.10) == "within"


def test_the_spread_table_prints_both_intervals_and_the_verdict(capsys):
    """What `quanta reproduce ... --replay-seeds N` prints under the per-run tables: each
    measure's two intervals and its verdict with the target it was judged against."""
    from quanta.cli import _print_spread
    from quanta.reproduce import SIA_TARGETS as TARGETS
    from quanta.reproduce import _two_samples
    ref, close, far = [3600.0, 3636.0, 3564.0], [3610.0, 3590.0, 3620.0, 3600.0], [5000.0, 5050.0]
    spread = {"avg_jct": _two_samples(ref, close, TARGETS["avg_jct"]),
              "makespan": _two_samples(ref, [3000.0, 4300.0], TARGETS["makespan"]),
              "by_app": {"cifar10": _two_samples(ref, far, TARGETS["by_app"])}}
    _print_spread([{"workload": "w", "spread": spread}])
    out = capsys.readouterr().out
    assert "90% interval" in out and "verdict" in out
    lines = {ln.split()[0] if ln.split()[0] != "w" else ln.split()[1]: ln
             for ln in out.splitlines() if ln.strip()}
    assert "within ±10%" in lines["average"] and "-1.4..+1.7%" in lines["average"]
    assert "undecided ±10%" in lines["makespan"]
    assert "outside ±15%" in lines["cifar10"]


def test_replay_seeds_from_the_command_line():
    """`quanta reproduce ... --replay-seeds N` as typed: the spread table with both intervals and
    the verdict column (one Tiresias reference run: no interval, so no verdict)."""
    import os
    run = subprocess.run([sys.executable, "-m", "quanta.cli", "reproduce", "tiresias", "--workload",
                          "tiresias_60_job_1x1x4", "--policy", "dlas-gpu_count", "--replay-seeds",
                          "2"], capture_output=True, text=True,
                         env={**os.environ, "COLUMNS": "200"})
    assert run.returncode == 0, run.stderr
    head = next(x for x in run.stdout.splitlines() if "95% interval" in x)
    assert "90% interval" in head and "verdict" in head
    row = next(x for x in run.stdout.splitlines() if "average JCT" in x and "(2)" in x)
    assert row.split()[-3:] == ["-", "-", "-"]
