"""Sweep files and sweep flags: one-line errors naming file, line and field (or the flag); what a
sweep file's values mean (split from test_sweep.py)."""

import csv

import pytest

from test_sweep import quanta


BAD_YAML = [
    ("rates: [2]\njobs: 10\npolicies:\n  - las\n  - nope\n", "sweep.yaml:5", "policies.1",
     "unknown policy 'nope'"),
    ("rates: [2]\njobs: ten\n", "sweep.yaml:2", "jobs", "want an integer"),
    ("rates: [2]\nwindow: 5:2\n", "sweep.yaml:2", "window", "bad window '5:2'"),
    ("rates: [2]\nclusterz: x\n", "sweep.yaml:2", "clusterz", "unknown field"),
    ("rates: [2\n", "sweep.yaml:2", None, "not valid YAML"),
    ("rates: [2]\nclusters:\n  - gavel-108\n  - v100:2y4\n", "sweep.yaml:4", "clusters.1",
     "bad cluster spec"),
    ("rates: [2]\npolicies:\n  - {name: las, params: {backfil: false}}\n", "sweep.yaml:3",
     "policies.0", "unknown parameter 'backfil'"),
    ("rates: [2]\nseeds: 3-1\n", "sweep.yaml:2", "seeds", "bad seeds"),
    ("rates: [2]\nworld: nowhere\n", "sweep.yaml:2", "world", "unknown world"),
    # a null in a number list: a TypeError's traceback
    ("rates: [~]\n", "sweep.yaml:1", "rates.0", "want a number, got nothing"),
    ("rates: [2]\nseeds:\n", "sweep.yaml:2", "seeds", "want a number, got nothing"),
    ("rates: [2]\nload_scales: ~\n", "sweep.yaml:2", "load_scales", "want a number, got nothing"),
    ("rates: [2]\nmax_jobs: 0\n", "sweep.yaml:2", "max_jobs", "max_jobs 0 is not positive"),
    # jobs with no rates sized nothing: the traces ran whole (as --jobs alone, refused)
    ("traces: [philly]\njobs: 10\n", "sweep.yaml:2", "jobs", "sizes the synthetic traces of rates"),
    ("rates: [2]\njobs: -10\n", "sweep.yaml:2", "jobs", "jobs -10 is not positive"),
    ("rates: [2]\njobs: 100000000000\n", "sweep.yaml:2", "jobs",        # (named --trace)
     "jobs 100,000,000,000 is past the 10,000,000"),
    ("rate: [2, .nan]\n", "sweep.yaml:1", "rate", "rate nan is not a positive number"),
    ("rates: [2]\nrestart_delay: -5\n", "sweep.yaml:2", "restart_delay", "0 or more, got -5"),
    # a repair time without failures is ignored (--repair-h alone was refused, the file's not)
    ("rates: [2]\nrepair_h: 1\n", "sweep.yaml:2", "repair_h", "give node_mtbf_h too"),
    # a value's ',' added parameters ("360,backfill=false": two)
    ("rates: [2]\npolicies:\n  - {name: gavel-las, params: {interval: '360,backfill=false'}}\n",
     "sweep.yaml:3", "policies.0.params", "a value holds no ',' or '='"),
    ("", "sweep.yaml", None, "the sweep file is empty"),
    # a file the sweep file names that is not there: named at the sweep file's line
    ("rates: [2]\nqueues: nope.yaml\n", "sweep.yaml:2", "queues", "nope.yaml: cannot read it"),
    ("rates: [2]\nclusters: [nope.yaml]\n", "sweep.yaml:2", "clusters.0",
     "nope.yaml: cluster file not found"),
    ("rates: [2]\nseeds: 0-1000000000\n", "sweep.yaml:2", "seeds",
     "0-1000000000 makes more than the 100,000 values a list of ranges may give"),
    ("rates: [2]\nseeds: 0-99999,100000-100001\n", "sweep.yaml:2", "seeds",   # (in all)
     "100000-100001 makes more than the 100,000 values"),
    # one policy written two ways (it ran as two cells, the same results twice)
    ("rates: [2]\npolicies:\n  - las\n  - las:backfill=False\n  - las:backfill=0\n",
     "sweep.yaml:5", "policies.2", "'las:backfill=False' and 'las:backfill=0' are the same policy"),
    # a trace, format or window no cell can read was named by a flag never given, or by no line
    ("traces: [phily]\n", "sweep.yaml:1", "traces.0", "phily: no such trace file, nor a bundled"),
    ("traces: ['synthetic:6:0']\n", "sweep.yaml:1", "traces.0", "bad synthetic trace"),
    ("rates: [2]\nformat: csvv\n", "sweep.yaml:2", "format", "unknown trace format 'csvv'"),
    ("rates: [2]\njobs: 10\nwindow: '20:30'\n", "sweep.yaml:3", "window",
     "window 20:30 starts past the last of synthetic:2:10's 10 jobs"),
    # a huge cap ran every cell, then the tables' int64 column overflowed (a traceback)
    ("rates: [2]\nmax_jobs: 10000000000000000000\n", "sweep.yaml:2", "max_jobs",
     "is past 9223372036854775807 (2^63 - 1)"),
    ("rates: [2]\npolicies: [{name: fifo, parms: {}}]\n", "sweep.yaml:2", "policies.0.parms",
     "unknown key (a policy is {name: ..., params: {...}})"),
]


@pytest.mark.parametrize("text, where, field, needle", BAD_YAML)
def test_bad_sweep_file_is_one_line_naming_file_line_field(tmp_path, text, where, field, needle):
    f = tmp_path / "sweep.yaml"
    f.write_text(text)
    r = quanta("sweep", str(f), "--out", str(tmp_path / "o"), "-q")
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert where in lines[0] and needle in lines[0], lines[0]
    if field:
        assert f"field '{field}'" in lines[0], lines[0]


def test_a_sweep_files_jobs_size_the_rates_the_command_line_gives(tmp_path):
    f = tmp_path / "sweep.yaml"
    f.write_text("jobs: 6\nclusters: [v100:1x4]\npolicies: [fifo]\n")
    r = quanta("sweep", str(f), "--rate", "3", "--out", str(tmp_path / "o"), "-q", "--no-plots")
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(open(tmp_path / "o" / "results.csv")))
    assert [row["trace"] for row in rows] == ["synthetic:3:6"], rows


@pytest.mark.parametrize("args, needle", [
    (["sweep", "--rate", "2", "--jobs", "10", "--window", "abc"], "bad window 'abc'"),
    (["sweep", "--rate", "2", "--jobs", "10", "--window", "30:40"], "starts past"),
    (["sweep", "--rate", "2", "--jobs", "10", "--policy", "nope"], "unknown policy 'nope'"),
    (["sweep", "--rate", "2", "--jobs", "10", "--policy", "las:backfill=False", "--policy",
      "las:backfill=0"], "'las:backfill=False' and 'las:backfill=0' are the same policy"),
    (["sweep", "--rate", "2", "--jobs", "10", "--seeds", "x"], "field '--seed'"),
    (["sweep", "--rate", "-1", "--jobs", "10"], "rate -1.0 is not a positive number"),
    (["sweep", "--rate", "3,,6", "--jobs", "10"], "'3,,6' has an empty item"),
    (["sweep", "--rate", "3", "--jobs", "10", "--load-scale", "0"], "field '--load-scale'"),
    (["sweep", "--rate", "3", "--jobs", "10", "--repair-h", "1"], "give --node-mtbf-h H too"),
    (["sweep", "--rate", "3", "--jobs", "20000000"], "field '--jobs': jobs 20,000,000 is past"),
    (["sweep", "--rate", "3", "--jobs", "10", "--max-jobs", "9223372036854775808"],
     "field '--max-jobs': max_jobs 9223372036854775808 is past"),
    (["simulate", "--trace", "synthetic:2:10", "--window", "7:3"], "bad window '7:3'"),
    (["simulate", "--trace", "synthetic:2:10", "--window", "10:20"], "starts past"),
])
def test_bad_flags_are_one_line_exit_2(tmp_path, args, needle):
    r = quanta(*args, "--out", str(tmp_path / "o"), "--quiet")
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.stderr, r.stderr


def test_names_with_spaces_and_a_seed_past_53_bits_are_taken_as_meant(tmp_path):
    """`--cluster ' v100:2x4'` beside `v100:2x4` made two cells of one cluster; a seed in a sweep
    file went through a float (9007199254740993 ran as ...992)."""
    from quanta.sweepfile import load_sweep_file
    from quanta.sweeps import SweepSpec, expand
    spec = SweepSpec(rates=(2.0,), jobs=10, clusters=("v100:2x4", " v100:2x4 "),
                     policies=(" las", "las"))
    assert spec.clusters == ("v100:2x4", "v100:2x4")
    assert len(expand(spec)) == 1
    f = tmp_path / "s.yaml"
    f.write_text("rates: [2]\nseeds: [9007199254740993]\nmax_jobs: 9007199254740993\n")
    got = load_sweep_file(f)
    assert got.seeds == (9007199254740993,) and got.max_jobs == 9007199254740993


def test_a_cells_key_holds_the_library_versions(monkeypatch):
    """A cell computed with another numpy, scipy or ecos (random streams, solvers) is not reused."""
    from quanta import cellstore, sweeps
    spec = sweeps.SweepSpec(rates=(2.0,), jobs=10, clusters=("v100:2x4",), policies=("las",))
    (cell,) = sweeps.expand(spec)
    assert cell.config["libraries"] == cellstore.library_versions()
    assert set(cell.config["libraries"]) == {"numpy", "scipy", "ecos"}
    monkeypatch.setattr(sweeps, "library_versions", lambda: {"numpy": "0.0", "scipy": None,
                                                             "ecos": None})
    (other,) = sweeps.expand(spec)
    assert other.key != cell.key
