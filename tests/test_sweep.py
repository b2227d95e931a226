"""`quanta sweep` as a user runs it (a real subprocess, a real process pool): the product of the
axes, the tidy tables, confidence intervals over seeds, reuse of finished cells, a killed sweep
resumed, the steady-state window, and one-line errors."""

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
SWEEP = ["sweep", "--rate", "2,4", "--jobs", "30", "--cluster", "v100:2x4", "--policy", "las",
         "--policy", "fifo:backfill=false", "--seeds", "0-2"]


def quanta(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "quanta.cli", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300, env=ENV)


def rows(path):
    return list(csv.DictReader(open(path)))


def retry_if_code_changed(check, tmp_path, tries=3):
    """Run `check(folder)`; if it fails while Quanta's own files changed under it (cells are keyed
    by the code version, so an edit in the checkout mid-test rightly re-runs them), run it again
    in a fresh folder."""
    from quanta.cellstore import code_version
    for i in range(tries):
        before = code_version.__wrapped__()
        try:
            return check(tmp_path / f"try{i}")
        except AssertionError:
            if code_version.__wrapped__() == before or i == tries - 1:
                raise


def test_2x2x3_sweep_tables_rerun_skips_and_workers_agree(tmp_path):
    retry_if_code_changed(check_2x2x3, tmp_path)


def check_2x2x3(tmp_path):
    r = quanta(*SWEEP, "--workers", "2", "--out", str(tmp_path / "a"), "-q")
    assert r.returncode == 0, r.stderr
    a = tmp_path / "a"
    res = rows(a / "results.csv")
    assert len(res) == 12
    got = [(x["trace"], x["rate"], x["cluster"], x["policy"], x["policy_name"], x["params"],
            x["seed"], x["load_scale"]) for x in res]
    want = [(f"synthetic:{rate}:30", f"{rate}.0", "v100:2x4", pol, name, params, str(seed), "1.0")
            for rate in (2, 4)
            for pol, name, params in (("las", "las", ""),
                                      ("fifo:backfill=false", "fifo", "backfill=false"))
            for seed in (0, 1, 2)]
    assert got == want
    from quanta import __version__
    assert {x["quanta_version"] for x in res} == {__version__}
    assert len({x["cell"] for x in res}) == 12
    assert all(int(x["finished"]) == int(x["jobs"]) == 30 for x in res)
    pq = pd.read_parquet(a / "results.parquet")
    assert list(pq["policy"]) == [x["policy"] for x in res]
    assert list(pq["avg_jct_s"]) == [float(x["avg_jct_s"]) for x in res]     # exact round trip
    agg = rows(a / "aggregate.csv")
    assert len(agg) == 4 and all(x["seeds"] == "3" and x["seed_list"] == "0,1,2" for x in agg)
    las2 = [float(x["avg_jct_s"]) for x in res[:3]]
    mean = sum(las2) / 3
    assert abs(float(agg[0]["avg_jct_s_mean"]) - mean) < 1e-6 * mean
    assert float(agg[0]["avg_jct_s_ci95"]) > 0                               # seeds differ
    assert len(pd.read_parquet(a / "jobs.parquet")) == 12 * 30
    cells = sorted((a / "cells").glob("*.json"))
    assert len(cells) == 12
    before = {p.name: p.stat().st_mtime_ns for p in cells}

    again = quanta(*SWEEP, "--workers", "2", "--out", str(a))          # a re-run runs nothing
    assert again.returncode == 0, again.stderr
    assert "12 cells (0 run, 12 reused)" in again.stdout
    assert {p.name: p.stat().st_mtime_ns for p in (a / "cells").glob("*.json")} == before

    one = quanta(*SWEEP, "--workers", "1", "--out", str(tmp_path / "b"), "-q")   # in-process
    assert one.returncode == 0, one.stderr
    for f in ("results.csv", "results.parquet", "aggregate.csv", "aggregate.parquet",
              "jobs.parquet"):
        assert (a / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f


def test_identical_seeds_give_zero_confidence_interval(tmp_path):
    """A trace with every job's type and duration fixed draws nothing from the seed: every seed
    gives the same numbers, and the interval over them is exactly zero."""
    trace = tmp_path / "fixed.csv"
    lines = ["job_id,submit_time_s,num_gpus,duration_s,job_type"]
    for i in range(24):
        lines.append(f"j{i},{i * 400},{(1, 2, 1, 4)[i % 4]},{2000 + 1500 * (i % 5)},"
                     f"{('A3C', 'CycleGAN', 'LM (batch size 20)')[i % 3]}")
    trace.write_text("\n".join(lines) + "\n")
    r = quanta("sweep", "--trace", str(trace), "--cluster", "v100:2x4", "--policy", "las",
               "--seeds", "0,1,2", "--workers", "2", "--out", str(tmp_path / "o"), "-q")
    assert r.returncode == 0, r.stderr
    res = rows(tmp_path / "o" / "results.csv")
    assert len({x["avg_jct_s"] for x in res}) == 1 and len(res) == 3
    (agg,) = rows(tmp_path / "o" / "aggregate.csv")
    assert agg["rate"] == ""
    for m in ("avg_jct_s", "p99_jct_s", "gpu_util", "makespan_s", "jain", "preemptions"):
        assert float(agg[f"{m}_ci95"]) == 0.0, m
        assert float(agg[f"{m}_mean"]) == float(res[0][m]), m


def test_killed_sweep_resumes(tmp_path):
    retry_if_code_changed(check_kill_resume, tmp_path)


def check_kill_resume(tmp_path):
    out = tmp_path / "o"
    args = [sys.executable, "-m", "quanta.cli", "sweep", "--rate", "3", "--jobs", "120",
            "--cluster", "v100:2x4", "--policy", "las", "--policy", "srtf", "--seeds", "0-3",
            "--workers", "1", "--out", str(out), "-q"]
    p = subprocess.Popen(args, env=ENV, start_new_session=True, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    end = time.time() + 60
    while len(list((out / "cells").glob("*.json"))) < 2:
        assert p.poll() is None, p.stderr.read().decode()
        assert time.time() < end
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    kept = {c.name: c.stat().st_mtime_ns for c in (out / "cells").glob("*.json")}
    assert 2 <= len(kept) < 8, "the sweep finished before it was killed"
    assert not (out / "results.csv").exists()
    r = quanta(*args[3:-1])
    assert r.returncode == 0, r.stderr
    assert f"8 cells ({8 - len(kept)} run, {len(kept)} reused)" in r.stdout
    assert len(rows(out / "results.csv")) == 8
    assert all((out / "cells" / n).stat().st_mtime_ns == t for n, t in kept.items())
    # the resumed sweep has the numbers of one run from scratch
    fresh = quanta(*args[3:-3], "--out", str(tmp_path / "fresh"), "-q")
    assert fresh.returncode == 0, fresh.stderr
    assert (out / "results.csv").read_bytes() == (tmp_path / "fresh" / "results.csv").read_bytes()


def test_a_garbled_cell_file_runs_again(tmp_path):
    retry_if_code_changed(check_garbled_cells, tmp_path)


def check_garbled_cells(tmp_path):
    """A cell file that is JSON but lacks a value the tables take, or holds one of another
    kind (edited by hand, written by something else), runs again as an unreadable one does (a
    KeyError or ValueError stopped the resumed sweep before); the tables as at first."""
    out = tmp_path / "o"
    args = ["sweep", "--rate", "3", "--jobs", "20", "--cluster", "v100:2x4", "--policy", "las",
            "--policy", "fifo", "--seeds", "0-1", "--workers", "1", "--out", str(out)]
    assert quanta(*args, "-q").returncode == 0
    first = (out / "results.csv").read_bytes()
    cells = sorted((out / "cells").glob("*.json"))
    for f, garble in zip(cells, [lambda d: d.pop("summary"), lambda d: d["jobs"][3].__setitem__(0, "x"),
                                 lambda d: d.__setitem__("events", None),
                                 lambda d: d["jobs"].pop()]):     # (a job fewer: was reused)
        d = json.loads(f.read_text())
        garble(d)
        f.write_text(json.dumps(d))
    r = quanta(*args)
    assert r.returncode == 0, r.stderr
    assert "4 cells (4 run, 0 reused)" in r.stdout
    assert (out / "results.csv").read_bytes() == first


def test_window_metrics_are_over_the_window_jobs(tmp_path):
    r = quanta("simulate", "--trace", "synthetic:4:80", "--cluster", "v100:2x4", "--policy", "las",
               "--window", "20:50", "--quiet", "--no-plots", "--out", str(tmp_path / "o"))
    assert r.returncode == 0, r.stderr
    (s,) = rows(tmp_path / "o" / "summary.csv")
    jobs = rows(tmp_path / "o" / "las" / "jobs.csv")
    by_arrival = sorted(jobs, key=lambda j: float(j["submit_s"]))       # stable: ties by row
    inside = by_arrival[20:50]
    assert int(s["jobs"]) == 30 and int(s["finished"]) == 30
    mean = sum(float(j["jct_s"]) for j in inside) / 30
    assert abs(float(s["avg_jct_s"]) - mean) < 1e-5 * mean
    assert "window" in (tmp_path / "o" / "report.md").read_text()
    full = quanta("simulate", "--trace", "synthetic:4:80", "--cluster", "v100:2x4", "--policy",
                  "las", "--quiet", "--no-plots", "--out", str(tmp_path / "f"))
    assert full.returncode == 0
    assert rows(tmp_path / "f" / "summary.csv")[0]["avg_jct_s"] != s["avg_jct_s"]
    sw = quanta("sweep", "--rate", "4", "--jobs", "80", "--cluster", "v100:2x4", "--policy", "las",
                "--window", "20:50", "--workers", "1", "--out", str(tmp_path / "s"), "-q")
    assert sw.returncode == 0, sw.stderr
    (row,) = rows(tmp_path / "s" / "results.csv")
    assert row["window"] == "20:50"
    assert abs(float(row["avg_jct_s"]) - float(s["avg_jct_s"])) < 1e-5 * mean   # summary: 6 digits
    assert int(row["jobs"]) == 30


def test_an_empty_out_is_refused_not_the_working_folder(tmp_path):
    """(`--out ''` wrote the sweep's files into the working folder: Path('') is '.')"""
    r = quanta("sweep", "--rate", "3", "--jobs", "10", "--out", "", "--quiet", cwd=tmp_path)
    assert r.returncode == 2 and "field '--out': is empty" in r.stderr, r.stderr
    assert list(tmp_path.iterdir()) == []


def test_sweep_json_records_the_spec(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("traces: [synthetic:3:20]\nclusters: v100:2x4\npolicies:\n"
                 "  - {name: fifo, params: {backfill: false}}\nseeds: [1]\nrestart_delay: 0\n")
    r = quanta("sweep", str(f), "--load-scale", "1,2", "--workers", "1", "--out",
               str(tmp_path / "o"), "-q")
    assert r.returncode == 0, r.stderr
    spec = json.loads((tmp_path / "o" / "sweep.json").read_text())
    assert spec["policies"] == ["fifo:backfill=false"] and spec["load_scales"] == [1.0, 2.0]
    assert spec["restart_delay"] == 0.0 and spec["seeds"] == [1]
    res = rows(tmp_path / "o" / "results.csv")
    assert [x["load_scale"] for x in res] == ["1.0", "2.0"]
    assert {x["restart_delay"] for x in res} == {"0.0"}


def test_a_failing_sweep_leaves_the_earlier_spec_and_tables_together(tmp_path):
    out = tmp_path / "o"
    r = quanta("sweep", "--rate", "3", "--jobs", "10", "--cluster", "v100:1x8", "--policy", "fifo",
               "--workers", "1", "--out", str(out), "-q")
    assert r.returncode == 0, r.stderr
    before = {f: (out / f).read_bytes() for f in ("sweep.json", "results.csv")}
    bad = tmp_path / "nofit.csv"
    bad.write_text("job_id,submit_time_s,num_gpus,duration_s\nj1,0,1,100\nj2,10,99,100\n")
    r = quanta("sweep", "--trace", str(bad), "--cluster", "v100:1x8", "--policy", "fifo",
               "--restart-delay", "5", "--workers", "1", "--out", str(out), "-q")
    assert r.returncode == 2 and "num_gpus" in r.stderr, r.stderr
    assert {f: (out / f).read_bytes() for f in before} == before
    (tmp_path / "afile").write_text("x")
    for where, says in ((tmp_path / "afile", "is a file"), (tmp_path / "afile" / "x", "cannot write")):
        r = quanta("sweep", "--rate", "3", "--jobs", "10", "--policy", "fifo", "--out", str(where),
                   "-q")
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert r.returncode == 2 and len(lines) == 1 and says in lines[0], r.stderr


def test_a_replay_worlds_sweep_runs_on_its_references_cluster(tmp_path):
    """`quanta sweep --world sia-sim` without --cluster sweeps Sia's simulator's cluster, as
    `quanta simulate` does (quanta's own world: gavel-108); sweep.json and the results say so."""
    r = quanta("sweep", "--trace", "sia-philly-1", "--max-jobs", "4", "--policy",
               "fifo", "--world", "sia-sim", "--workers", "1", "--out", str(tmp_path / "o"), "-q")
    assert r.returncode == 0, r.stderr
    spec = json.loads((tmp_path / "o" / "sweep.json").read_text())
    assert spec["clusters"] == ["t4:6x4,rtx:3x8,a100:2x8"] and spec["world"] == "sia-sim"
    assert {x["cluster"] for x in rows(tmp_path / "o" / "results.csv")} == \
        {"t4:6x4,rtx:3x8,a100:2x8"}
    from quanta.sweeps import SweepSpec, expand
    assert {c.cluster for c in expand(SweepSpec(traces=("philly",)))} == {"gavel-108"}


def test_a_script_without_a_main_guard_gets_a_clear_error_not_a_pool_traceback(tmp_path):
    """Worker processes start by importing the script that asked for them; one that calls
    quanta.sweep (or reproduce) with several workers outside `if __name__ == "__main__":` asks
    again from each worker. The worker says so in one line and the call raises QuantaError,
    instead of multiprocessing's bootstrapping traceback and a BrokenProcessPool; under the
    guard the same call runs."""
    body = (f"import quanta\n{{indent}}quanta.sweep(rates=[3, 4], jobs=10, out={str(tmp_path / 'o')!r}, "
            f"workers=2, progress=False)\n{{indent}}print('swept')\n")
    bare = tmp_path / "bare.py"
    bare.write_text(body.format(indent=""))
    run = subprocess.run([sys.executable, str(bare)], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path)
    assert run.returncode != 0 and "swept" not in run.stdout
    assert 'must call it under `if __name__ == "__main__":`' in run.stderr
    assert "QuantaError: a worker process ended abruptly" in run.stderr
    assert "BrokenProcessPool" not in run.stderr and "bootstrapping phase" not in run.stderr
    guarded = tmp_path / "guarded.py"
    guarded.write_text(body.format(indent="    ").replace("import quanta\n    ",
                                                           "import quanta\nif __name__ == '__main__':\n    "))
    ok = subprocess.run([sys.executable, str(guarded)], capture_output=True, text=True, timeout=300,
                        cwd=tmp_path)
    assert ok.returncode == 0 and "swept" in ok.stdout, ok.stderr


def test_a_policy_objects_cells_have_the_same_key_in_every_process():
    # a sweep of Policy objects (the Python API) keys each cell by the object's field values:
    # Hadar's price and schedule functions by their names, not their addresses, so that a
    # second sweep finds the first one's cells
    code = ("import json; from quanta.policies.hadar import Hadar; "
            "from quanta.cellstore import policy_config; print(json.dumps(policy_config(Hadar())))")
    keys = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={**ENV, "PYTHONHASHSEED": seed}, timeout=120).stdout
            for seed in ("1", "2")]
    assert "hadar_dual.exponential_price" in keys[0]
    assert keys[0] == keys[1]



def test_two_settings_of_one_policy_class_are_two_policies_of_a_sweep(tmp_path):
    """(Both were labelled 'Las': aggregate.csv took the mean over the two as one policy.)"""
    import quanta
    from quanta.policies.baselines import Las
    sw = quanta.sweep(rates=[3], jobs=20, clusters="v100:2x4", policies=[Las(), Las(backfill=False)],
                      seeds=[0, 1], out=tmp_path / "s", workers=1, progress=False)
    assert list(sw.results["policy"]) == ["Las", "Las", "Las:backfill=false", "Las:backfill=false"]
    assert list(sw.results["params"]) == ["", "", "backfill=false", "backfill=false"]
    assert sorted(sw.aggregate["policy"]) == ["Las", "Las:backfill=false"]



def test_a_sweep_stopped_by_a_cell_leaves_no_empty_folder_it_made(tmp_path):
    """(A cell's error, found as it ran, left the empty output folder behind.)"""
    r = quanta("sweep", "--rate", "1e-300", "--jobs", "20", "-p", "fifo", "--out",
               str(tmp_path / "r"), "-q", "--no-plots", "-j", "1")
    assert r.returncode == 2 and "would arrive at" in r.stderr, r.stderr
    assert not (tmp_path / "r").exists()
    (tmp_path / "mine").mkdir()                         # a folder the user made stays
    r = quanta("sweep", "--rate", "1e-300", "--jobs", "20", "-p", "fifo", "--out",
               str(tmp_path / "mine"), "-q", "--no-plots", "-j", "1")
    assert r.returncode == 2 and (tmp_path / "mine").is_dir()


def test_a_folder_another_sweep_writes_or_no_sweep_can_write_is_one_line(tmp_path):
    """(Two sweeps into one folder at once could leave one's results.csv beside the other's
    jobs.parquet and sweep.json; a file where `cells` goes, a folder where a table goes: a
    traceback, exit 1.)"""
    import fcntl
    busy = tmp_path / "busy"
    busy.mkdir()
    with open(busy / ".quanta-sweep.lock", "a") as held:       # a sweep running there
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        r = quanta("sweep", "--rate", "3", "--jobs", "10", "-p", "fifo", "--out", str(busy), "-q",
                   "--no-plots", "-j", "1")
    assert r.returncode == 2 and "is in use by another sweep" in r.stderr, r.stderr
    assert not (busy / "results.csv").exists()
    for name, make in (("cells", Path.touch), ("sweep.json", Path.mkdir)):
        out = tmp_path / name.replace(".", "_")
        out.mkdir()
        make(out / name)
        r = quanta("sweep", "--rate", "3", "--jobs", "10", "-p", "fifo", "--out", str(out), "-q",
                   "--no-plots", "-j", "1")
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert r.returncode == 2 and len(lines) == 1 and "cannot write the output folder" in \
            lines[0] and "Traceback" not in r.stderr, r.stderr

NOTEBOOK_CLASS = """
from dataclasses import dataclass
import quanta
from quanta.policies import Policy
from quanta.policies.greedy import greedy_fill, priority_order

@dataclass
class Mine(Policy):
    newest: bool = False
    def decide(self, snap):
        j = snap.jobs
        return greedy_fill(snap, priority_order((j.rows, KEY), None), backfill=True, migrate=True)

sw = quanta.sweep(rates=[4], jobs=30, clusters="v100:2x4", policies=[Mine()], seeds=[0],
                  out="nb", workers=1, progress=False)
run = quanta.simulate(trace="synthetic:4:30", cluster="v100:2x4", policies=[Mine(), Mine(newest=True)])
print(sw.ran, sw.reused, list(run.summary["policy"]))
"""


def test_a_class_without_a_source_file_keys_its_cells_by_its_code(tmp_path):
    """A class of `python -` (or a notebook's): editing it and sweeping again reused the cells of
    its old code (its module's digest was None); and the sweep in this process (workers=1)
    rebuilt the very class from its pickle, without its dataclass fields, so two settings of it
    were one policy 'given twice' to quanta.simulate afterwards."""
    def run(key: str) -> str:
        r = subprocess.run([sys.executable, "-"], input=NOTEBOOK_CLASS.replace("KEY", key),
                           capture_output=True, text=True, cwd=tmp_path, env=ENV, timeout=300)
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()
    assert run("j.submit") == "1 0 ['Mine', 'Mine:newest=true']"
    assert run("-j.submit") == "1 0 ['Mine', 'Mine:newest=true']"    # edited: run afresh
    assert run("j.submit") == "0 1 ['Mine', 'Mine:newest=true']"     # as first: its cell

def test_a_ray_address_no_one_answers_at_is_one_line_at_once(tmp_path):
    """Ray retries an address no one answers at for minutes (a typo of --ray sat there); a
    first connection that fails says so at once."""
    import socket
    pytest.importorskip("ray")
    from quanta.executors import unreachable
    with socket.socket() as closed, socket.socket() as open_:
        closed.bind(("127.0.0.1", 0))                    # bound, not listening: refused
        open_.bind(("127.0.0.1", 0))
        open_.listen()
        assert unreachable(f"127.0.0.1:{open_.getsockname()[1]}") is None
        assert unreachable("auto") is None
        port = closed.getsockname()[1]
        t0 = time.time()
        r = quanta("sweep", "--rate", "3", "--jobs", "5", "-p", "fifo", "--ray", f"127.0.0.1:{port}",
                   "-q", "--out", str(tmp_path / "s"))
    assert r.returncode == 2 and time.time() - t0 < 60
    assert f"field '--ray': cannot connect to a Ray cluster at '127.0.0.1:{port}': Connection " \
           f"refused" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_rate_names_its_synthetic_trace_exactly():
    """(:g kept six digits: 2.5000001 merged with 2.5, 1234567.8 ran as 1234570.)"""
    from quanta.sweeps import SweepSpec
    spec = SweepSpec(rates=(3.0, 2.5, 2.5000001, 1234567.8), jobs=20)
    assert spec.all_traces() == ["synthetic:3:20", "synthetic:2.5:20", "synthetic:2.5000001:20",
                                 "synthetic:1234567.8:20"]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_sweeps_workers_end_with_it(tmp_path, sig):
    """(`kill` or `kill -9` of a `--workers 2` sweep left both workers idle for ever, holding
    the sweep's standard output: a `| tee` never ended.)"""
    p = subprocess.Popen([sys.executable, "-m", "quanta.cli", "sweep", "--rate", "4,8,12",
                          "--jobs", "200", "--policy", "gavel-las", "--seeds", "0-3",
                          "--workers", "2", "--out", str(tmp_path / "o"), "-q"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)

    def children() -> list[int]:
        out = []
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open(f"/proc/{d}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if int(fields[1]) == p.pid and fields[0] != "Z":
                    out.append(int(d))
        return out
    deadline = time.time() + 60
    while len(children()) < 2:
        assert time.time() < deadline and p.poll() is None
        time.sleep(0.1)
    workers = children()
    time.sleep(1.0)                 # (their watches started)
    os.kill(p.pid, sig)
    p.wait(timeout=30)
    deadline = time.time() + 10
    for w in workers:
        while os.path.exists(f"/proc/{w}"):
            with open(f"/proc/{w}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
            if time.time() > deadline:
                os.kill(w, signal.SIGKILL)
                raise AssertionError(f"worker {w} outlived the sweep")
            time.sleep(0.1)


def test_work_in_flight_when_stopped_is_given_not_dropped():
    """Ctrl-C waited for the cells in flight and dropped their results (rerun next time)."""
    from quanta.executors import run_local
    got = []

    def on_result(i, res):
        got.append(i)
        if len(got) == 1:
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        run_local(time.sleep, [0.1, 1.0] + [2.0] * 6, 2, on_result)
    assert got[:2] == [0, 1]          # the second, running when stopped, kept


def test_one_trace_file_named_three_ways_keeps_its_cells(tmp_path):
    retry_if_code_changed(check_trace_named_three_ways, tmp_path)


def check_trace_named_three_ways(tmp_path):
    """A cell's key held the trace's path text: `t.csv`, `./t.csv` and its absolute path, the
    same bytes, ran the cell three times. Keyed by the file's content now; the rows name the
    trace as given."""
    tmp_path.mkdir()
    lines = (Path(__file__).parents[1] / "quanta/data/traces/philly_sample.csv").read_text()
    (tmp_path / "t.csv").write_text("".join(lines.splitlines(keepends=True)[:31]))
    base = ["sweep", "--cluster", "v100:2x8", "--policy", "fifo", "--seeds", "0", "--workers",
            "1", "--out", "o"]
    said = []
    for name in ("t.csv", "./t.csv", str(tmp_path / "t.csv")):
        r = quanta(*base, "--trace", name, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        said.append(r.stdout)
        assert rows(tmp_path / "o" / "results.csv")[0]["trace"] == name
    assert "1 cell (1 run, 0 reused)" in said[0]
    assert all("1 cell (0 run, 1 reused)" in s for s in said[1:])
    (tmp_path / "t.csv").write_text("".join(lines.splitlines(keepends=True)[:21]))
    r = quanta(*base, "--trace", "t.csv", cwd=tmp_path)        # other bytes: run again
    assert "1 cell (1 run, 0 reused)" in r.stdout
    (tmp_path / "t.trace").write_bytes((tmp_path / "t.csv").read_bytes())
    r = quanta(*base, "--trace", "t.trace", cwd=tmp_path)      # another extension: its own
    assert "1 cell (1 run, 0 reused)" in r.stdout, r.stdout + r.stderr   # (.trace may be Gavel's)


def test_aggregates_do_not_depend_on_the_order_the_seeds_are_listed():
    """`--seeds 0-5` and `--seeds 5,3,1,4,2,0` are one set of cells, but the means and
    intervals summed them in the order given and differed in their last bits."""
    from quanta.report.tables import GROUP_COLUMNS, METRIC_COLUMNS, aggregate
    vals = [0.09252126264436357, 0.1, 0.30000000000000004, 1e-3, 7.7, 0.123456789]
    rows = [{**{c: "" for c in GROUP_COLUMNS}, "seed": s,
             **{m: v * (1 + s) for m in METRIC_COLUMNS}} for s, v in enumerate(vals)]
    a = aggregate(rows)
    b = aggregate([rows[i] for i in (5, 3, 1, 4, 2, 0)])
    assert a == b and a[0]["seed_list"] == "0,1,2,3,4,5"
