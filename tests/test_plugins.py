"""A user's own policy without editing Quanta: docs/write-a-policy.md's example, saved as the page
says, runs in `quanta simulate`, `quanta sweep` (a real process pool) and `quanta serve` (a
real service over HTTP); an installed package's `quanta.policies` entry point works like a
built-in name; re-running a notebook cell that registers a policy never fails."""

import csv
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from quanta.errors import QuantaError

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "write-a-policy.md").read_text()
ENV = {**os.environ, "OMP_NUM_THREADS": "1",
       "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def blocks(lang):
    return re.findall(rf"```{lang}\n(.*?)```", DOC, re.S)


def run_cli(*args, cwd, env=None):
    return subprocess.run([sys.executable, "-m", "quanta.cli", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300, env=env or ENV)


@pytest.fixture
def tutorial(tmp_path):
    """The page's module, saved where it says (the folder quanta is run from)."""
    code = blocks("python")[0]
    assert len(code.strip().splitlines()) <= 20, "the example is meant to be 20 lines"
    (tmp_path / "my_policies.py").write_text(code)
    return tmp_path


@pytest.mark.parametrize("which", ["simulate", "sweep"])
def test_tutorial_policy_runs_in_simulate_and_sweep_verbatim(tutorial, which):
    cmds = [ln.strip() for ln in blocks("bash")[0].splitlines() if ln.strip()]
    line = next(c for c in cmds if c.startswith(f"quanta {which} "))
    r = subprocess.run(["bash", "-c", line + " --quiet"], cwd=tutorial, env=ENV,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (line, r.stderr)
    if which == "simulate":
        summary = list(csv.DictReader(open(tutorial / "quanta-out/mine/summary.csv")))
        assert [s["policy"] for s in summary] == ["my_policies:FewestGpusFirst", "fifo"]
        assert all(s["finished"] == s["jobs"] == "100" for s in summary)
        assert int(summary[0]["preemptions"]) > 0 == int(summary[1]["preemptions"])  # it decided
        return
    res = list(csv.DictReader(open(tutorial / "quanta-out/mine-sweep/results.csv")))
    assert len(res) == 2 * 2 * 2                      # rates x policies x seeds, a process pool
    mine = [r for r in res if r["policy"] == "my_policies:FewestGpusFirst:keep_running=true"]
    assert len(mine) == 4 and {r["params"] for r in mine} == {"keep_running=true"}
    assert {r["policy_name"] for r in mine} == {"my_policies:FewestGpusFirst"}


def test_tutorial_python_block_with_policy_objects(tutorial, monkeypatch):
    monkeypatch.chdir(tutorial)
    monkeypatch.syspath_prepend(str(tutorial))
    ns: dict = {}
    exec(blocks("python")[1], ns)                     # the page's notebook cell
    run = ns["run"]
    assert list(run.summary["policy"]) == ["FewestGpusFirst", "fifo"]
    assert (run.summary["finished"] == 100).all()
    cli = run_cli("simulate", "--trace", "synthetic:3:100", "--cluster", "v100:2x4", "--policy",
                 "my_policies:FewestGpusFirst", "--quiet", "--no-plots", "--out", "o",
                 cwd=tutorial)
    assert cli.returncode == 0, cli.stderr
    row = next(csv.DictReader(open(tutorial / "o" / "summary.csv")))
    assert float(row["avg_jct_s"]) == pytest.approx(float(run.summary["avg_jct_s"][0]), rel=1e-6)
    # objects go to worker processes too (cloudpickle): a 2-process sweep
    import quanta
    mod = __import__("my_policies")
    sw = quanta.sweep(rates=[3], jobs=40, clusters="v100:2x4",
                      policies=[mod.FewestGpusFirst(keep_running=True)], seeds=[0, 1], workers=2,
                      out=tutorial / "sw", progress=False)
    # labelled as `quanta.simulate` labels it (it was the class's name: two settings of one
    # class were one policy in aggregate.csv)
    assert list(sw.results["policy"]) == ["FewestGpusFirst:keep_running=true"] * 2
    assert list(sw.results["params"]) == ["keep_running=true"] * 2
    assert (sw.results["finished"] == 40).all()


def test_tutorial_policy_runs_in_serve(tutorial):
    serve_line = [ln for ln in blocks("bash")[0].splitlines() if "quanta serve" in ln][0]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    env = {**ENV, "QUANTA_URL": url}
    env.pop("QUANTA_TOKEN", None)
    cmd = serve_line.rstrip("&").strip() + " --cluster cpu:1x2"
    proc = subprocess.Popen(["bash", "-c", "exec " + cmd], cwd=tutorial, env=env,
                            stdout=open(tutorial / "serve.log", "wb"), stderr=subprocess.STDOUT)
    import httpx
    from quanta.service.client import wait_until_up
    try:
        assert wait_until_up(url, proc), (tutorial / "serve.log").read_text()
        token = (tutorial / "quanta-state" / "admin.token").read_text().strip()
        h = {"Authorization": f"Bearer {token}"}
        assert httpx.get(url + "/v1/cluster", headers=h).json()["policy"] == \
            "my_policies:FewestGpusFirst"
        ids = [httpx.post(url + "/v1/jobs", headers=h, json={
            "name": f"j{g}", "gpus": g, "command": [sys.executable, "-c", "pass"]}).json()["id"]
            for g in (2, 1)]
        end = time.time() + 60
        while {httpx.get(f"{url}/v1/jobs/{i}", headers=h).json()["state"] for i in ids} != \
                {"finished"}:
            assert time.time() < end, [httpx.get(f"{url}/v1/jobs/{i}", headers=h).json()
                                       for i in ids]
            time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_entry_point_plugin_of_an_installed_package(tutorial):
    """A package installed with a `quanta.policies` entry point (its dist-info on the path)."""
    dist = tutorial / "site"
    info = dist / "my_policies_pkg-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-policies-pkg\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[quanta.policies]\nfewest-gpus = my_policies:FewestGpusFirst\n"
        "broken = my_policies:Nope\n")
    (tutorial / "my_policies.py").rename(dist / "my_policies.py")
    env = {**ENV, "PYTHONPATH": str(dist)}
    r = run_cli("policies", cwd=tutorial, env=env)
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("fewest-gpus"))
    assert "Fewest GPUs first" in line and "plugin" in line
    assert "does not load" in next(ln for ln in r.stdout.splitlines() if ln.startswith("broken"))
    r = run_cli("simulate", "--trace", "synthetic:3:40", "--cluster", "v100:2x4", "--policy",
               "fewest-gpus:keep_running=true", "--quiet", "--no-plots", "--out", "o",
               cwd=tutorial, env=env)
    assert r.returncode == 0, r.stderr
    assert next(csv.DictReader(open(tutorial / "o/summary.csv")))["policy"] == \
        "fewest-gpus:keep_running=true"


@pytest.mark.parametrize("module, spec, needle", [
    (None, "no_such_mod:Cls", "no module 'no_such_mod'"),
    ("x = 1\n", "plug_a:Missing", "module 'plug_a' has no 'Missing'"),
    ("class NotAPolicy: pass\n", "plug_b:NotAPolicy", "is not a subclass of"),
    ("def broken(:\n", "plug_c:X", "SyntaxError"),
    ("import not_installed_dep\n", "plug_d:X", "No module named 'not_installed_dep'"),
    # a constructor that raises (a traceback before)
    ("from quanta.policies.baselines import Fifo\nclass Broken(Fifo):\n"
     "    def __init__(self, **kw):\n        raise RuntimeError('bad config')\n", "plug_e:Broken",
     "building it raised RuntimeError: bad config (")
])
def test_bad_plugin_is_one_line_exit_2(tmp_path, module, spec, needle):
    if module is not None:
        (tmp_path / f"{spec.split(':')[0]}.py").write_text(module)
    r = run_cli("simulate", "--trace", "synthetic:3:20", "--policy", spec, "--quiet", "--out", "o",
               cwd=tmp_path)
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.stderr, r.stderr


CELL = '''
from dataclasses import dataclass
import quanta
from quanta.policies.baselines import Fifo

@quanta.register("notebook-fifo", "FIFO defined in a notebook cell")
@dataclass
class NotebookFifo(Fifo):
    pass
'''


def test_rerunning_a_notebook_cell_that_registers_a_policy(tmp_path):
    import quanta
    from quanta.policies import POLICIES
    for _ in range(2):                                 # the same cell, run twice
        ns = {"__name__": "__main__"}
        exec(CELL, ns)
    assert POLICIES["notebook-fifo"].cls is ns["NotebookFifo"]
    try:
        run = quanta.simulate(trace="synthetic:3:30", cluster="v100:2x4",
                              policies=["notebook-fifo", ns["NotebookFifo"](), "fifo"])
        assert list(run.summary["policy"]) == ["notebook-fifo", "NotebookFifo", "fifo"]
        assert len(set(run.summary["avg_jct_s"])) == 1          # all three are FIFO
        with pytest.raises(QuantaError, match="registered twice"):
            exec(CELL, {"__name__": "another_module"})
    finally:
        POLICIES.pop("notebook-fifo", None)


TYPED = '''
from __future__ import annotations
import enum
from dataclasses import dataclass, field
from typing import Literal, Optional
from quanta.policies.baselines import Fifo

class Mode(enum.Enum):
    FAST = "fast"
    SLOW = "slow"

@dataclass
class Typed(Fifo):
    """FIFO with parameters of every kind a plugin may annotate."""
    limit: Optional[int] = None
    cap: float | None = 2.0
    order: Literal["arrival", "size"] = "arrival"
    mode: Mode = Mode.FAST
    steps: tuple[int, ...] = ()
    weights: tuple[float, ...] = ()
    names: list = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    words: tuple[str, ...] = ()
'''


@pytest.fixture
def typed(tmp_path, monkeypatch):
    (tmp_path / "typed_plugin.py").write_text(TYPED)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("typed_plugin", None)


def test_plugin_parameters_take_their_annotated_types(typed):
    """Optional[X] and X | None (none), Literal (one of its values), an Enum (a member's name or
    value), tuples of ints or floats: each read as its annotation says (Optional[int] and the
    Enum were text before, a Literal took any text, X | None could not be None)."""
    from quanta.policies import make_policy
    p = make_policy("typed_plugin:Typed:limit=3,cap=none,order=size,mode=slow,steps=1/2,"
                    "weights=0.5/1")
    mode = type(p.mode)
    assert (p.limit, p.cap, p.order, p.mode, p.steps, p.weights) == \
        (3, None, "size", mode.SLOW, (1, 2), (0.5, 1.0))
    assert type(p.limit) is int and all(type(s) is int for s in p.steps)
    q = make_policy("typed_plugin:Typed:limit=None,cap=1.5,mode=FAST")
    assert (q.limit, q.cap, q.mode) == (None, 1.5, mode.FAST)
    # lists and tuples of text: a/b/c (a list was its characters, a list[int] the raw text)
    r = make_policy("typed_plugin:Typed:names=v100/k80,ids=1/2,words=a/b")
    assert (r.names, r.ids, r.words) == (["v100", "k80"], [1, 2], ("a", "b"))
    for spec, needle in [
            ("limit=x", "parameter 'limit' wants int, got 'x'"),
            ("order=random", "parameter 'order' wants one of arrival, size, got 'random'"),
            ("mode=medium", "parameter 'mode' wants one of FAST, SLOW, got 'medium'"),
            ("steps=1/x", "parameter 'steps' wants numbers separated by '/', got '1/x'"),
            ("ids=1/x", "parameter 'ids' wants numbers separated by '/', got '1/x'"),
            ("names=a//b", "parameter 'names' wants words separated by '/', got 'a//b'"),
            ("cap=nan", "parameter 'cap' wants a number, got 'nan'")]:
        with pytest.raises(QuantaError, match=re.escape(needle)):
            make_policy(f"typed_plugin:Typed:{spec}")


def test_plugin_typed_parameters_on_the_command_line(typed):
    """What the user types: the run's config.yaml records the values as read (the Enum by
    name, None as null); a value outside a Literal is one line, exit 2."""
    import yaml
    r = run_cli("simulate", "--trace", "synthetic:3:20", "--cluster", "v100:2x4", "--policy",
                "typed_plugin:Typed:limit=none,order=size,mode=slow,steps=4/5", "--quiet",
                "--no-plots", "--out", "o", cwd=typed)
    assert r.returncode == 0, r.stderr
    params = yaml.safe_load((typed / "o" / "config.yaml").read_text())["policies"][0]["parameters"]
    assert (params["limit"], params["order"], params["mode"], params["steps"]) == \
        (None, "size", "SLOW", [4, 5])
    r = run_cli("simulate", "--trace", "synthetic:3:20", "--policy",
                "typed_plugin:Typed:order=random", "--quiet", "--out", "o2", cwd=typed)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "wants one of arrival, size" in lines[0], \
        r.stderr


BAD_POLICY = '''
import numpy as np
from dataclasses import dataclass
from quanta.policies import Policy
from quanta.core.decision import Decision

@dataclass
class Mode(Policy):
    mode: str = "shape"

    def decide(self, snap):
        d = Decision.empty(snap)
        if self.mode == "shape":
            d.gpus = np.zeros(5, dtype=d.gpus.dtype)
        elif self.mode == "none":
            return None
        elif self.mode == "raise":
            raise ValueError("boom inside")
        elif self.mode == "over":
            d.gpus[:] = 1000
            d.gpu_type[:] = 0
        elif self.mode == "type":
            d.gpus[:] = snap.jobs.req
            d.gpu_type[:] = 99
        elif self.mode == "neg":
            d.gpus[:] = -1
            d.gpu_type[:] = 0
        elif self.mode == "nan":
            d.gpus = np.full(len(snap.jobs), np.nan)
        elif self.mode == "order":
            d.order = np.array([10 ** 6])
        elif self.mode == "exact":
            d.exact[0] = np.array([10 ** 7])
        elif self.mode == "exact_row":
            d.exact[10 ** 6] = np.array([0])
        elif self.mode == "share":
            d.share[0] = (999, "pack")
        elif self.mode == "defrag":
            d.defrag = {10 ** 6, -5}
        elif self.mode == "plans":
            d.plans[10 ** 6] = "x"
        elif self.mode == "wake":
            d.wake_at = "soon"
        elif self.mode == "cpus":
            d.gpus[:] = 1
            d.gpu_type[:] = 0
            d.cpus = np.full(len(snap.jobs), np.nan)
        return d


class TextInterval(Mode):
    interval = "360"
'''


@pytest.mark.parametrize("mode, says", [
    ("shape", "gave GPU counts and types of shapes (5,) and (1,) for 1 jobs"),
    ("none", "returned NoneType, not a Decision"),
    ("raise", "raised ValueError: boom inside (at "),
    ("over", "made a decision the cluster cannot hold: decision asks for 1000 v100 GPUs"),
    ("type", "gave a negative GPU count, or GPUs of a type the cluster does not have"),
    ("neg", "gave a negative GPU count, or GPUs of a type the cluster does not have"),
    ("nan", "gave GPU counts or types that are not integers"),
])
def test_a_plugins_failure_or_bad_decision_is_one_line_naming_it(tmp_path, mode, says):
    """(A traceback, exit 1, the policy not named; -1 and NaN GPUs were taken for 0.)"""
    (tmp_path / "bad.py").write_text(BAD_POLICY)
    r = run_cli("simulate", "--trace", "synthetic:3:30", "--cluster", "v100:2x4,k80:2x4",
                "--no-plots", "--quiet", "--out", "o", "-p", f"bad:Mode:mode={mode}",
                cwd=tmp_path, env={**ENV, "PYTHONPATH": str(tmp_path)})
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"error: field '--policy': policy 'bad:Mode:mode={mode}' {says}" in r.stderr


@pytest.mark.parametrize("mode, says", [
    ("order", "gave an order that is not distinct snapshot rows"),
    ("exact", "gave exact GPUs for row 0 that are not distinct GPU ids (0 to 15)"),
    ("exact_row", "gave exact whose keys are not snapshot rows"),
    ("share", "gave a share for row 0 that is not (host row, mode)"),
    ("defrag", "gave defrag whose keys are not snapshot rows"),
    ("plans", "gave plans whose keys are not snapshot rows"),
    ("wake", "asked to wake at 'soon', not a time in seconds"),
    ("cpus", "gave cpus that is not 1 finite numbers, one per job"),
])
def test_a_plugins_other_decision_fields_are_checked(tmp_path, monkeypatch, mode, says):
    """(Each was an IndexError or TypeError from Quanta's insides, exit 1; NaN CPUs ran, every job
    re-placed at every decision.)"""
    import quanta
    (tmp_path / "bad.py").write_text(BAD_POLICY)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(QuantaError) as err:
        quanta.simulate(trace="synthetic:3:30", cluster="v100:2x4,k80:2x4",
                        policies=[f"bad:Mode:mode={mode}"])
    assert str(err.value).startswith(f"field 'policies': policy 'bad:Mode:mode={mode}' {says}")
    assert "\n" not in str(err.value)
    with pytest.raises(QuantaError, match="policy 'bad:TextInterval': interval must be a number "
                       "of seconds, got '360'"):
        quanta.simulate(trace="synthetic:3:30", cluster="v100:2x4", policies=["bad:TextInterval"])
    sys.modules.pop("bad", None)


def test_two_settings_of_one_policy_class_run_side_by_side_from_python():
    """(Las() and Las(backfill=False), both labelled 'Las', were refused as one given twice.)"""
    import quanta
    from quanta.policies.baselines import Las
    run = quanta.simulate(trace="synthetic:3:10", cluster="v100:2x4",
                          policies=[Las(), Las(backfill=False)], seed=0)
    assert list(run.summary["policy"]) == ["Las", "Las:backfill=false"]


def test_a_plugins_failure_in_the_runtime_is_one_line_said_once(tmp_path, monkeypatch, capsys):
    """Under `quanta serve` a plugin that raises is the simulator's one line naming it, in the
    service's log once while it repeats (a traceback was printed at every poll, 4 a second), and
    /v1/health's error clears once a step runs again."""
    import sys
    import time
    from quanta.model.presets import resolve_cluster
    from quanta.perf.catalog_model import CatalogModel
    from quanta.policies import make_policy
    from quanta.runtime.backends.local import LocalBackend
    from quanta.runtime.controller import Runtime
    from quanta.runtime.spec import parse_submission
    from quanta.service.store import Store
    (tmp_path / "bad.py").write_text(BAD_POLICY)
    monkeypatch.syspath_prepend(str(tmp_path))
    pol = make_policy("bad:Mode:mode=raise")
    store = Store(tmp_path / "q.db")
    rt = Runtime(store, LocalBackend(), resolve_cluster("cpu:1x1"), pol, CatalogModel(),
                 tmp_path / "jobs", poll_s=0.01)
    sub = parse_submission({"name": "a", "steps": 5, "command": [sys.executable, "-c", "pass"]})
    store.add_job("u", sub.name, sub.queue, sub.model_dump(), sub.steps, time.time())
    rt.start()
    try:
        deadline = time.time() + 20
        while not rt.error and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)                      # (some 30 polls more, each raising again)
        assert rt.error.startswith("QuantaError: field '--policy': policy 'bad:Mode:mode=raise' "
                                   "raised ValueError: boom inside (at ")
        pol.mode = "shape_ok"                # the plugin recovers: a step runs, the error clears
        deadline = time.time() + 20
        while rt.error and time.time() < deadline:
            time.sleep(0.05)
        assert rt.error == ""
    finally:
        rt.close()
        for rec in store.jobs(states=["pending", "running"]):
            store.request(rec.id, cancel=True)
    err = capsys.readouterr().err
    assert err.count("raised ValueError: boom inside") == 1 and "Traceback" not in err, err
