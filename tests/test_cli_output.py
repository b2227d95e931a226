"""`quanta simulate` and `quanta sweep` as a user types them (real processes from the repository
root, real files): a light start, help that fits 80 columns, plain error text, one-line refusals
of nonsensical values, self-describing output folders (config.yaml, no stale files, --force),
report.md's units and notes, and the figures."""

import csv
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "120"}
TINY = ["--trace", "synthetic:3:20", "--cluster", "v100:1x8", "--quiet"]


def quanta(*args, env=None, pre=()):
    return subprocess.run([sys.executable, *pre, "-m", "quanta.cli", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=300, env=env or ENV)


def one_line_error(r) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return lines[0]


HEAVY = ("numpy", "scipy", "pandas", "matplotlib", "pydantic", "pyarrow", "typer.rich_utils",
         "rich.markdown")


@pytest.mark.parametrize("args", [["simulate", "--help"], ["--help"], ["--version"]])
def test_help_and_version_import_nothing_heavy(args):
    """What a command does not need is not imported (issue 13: start-up well under 1 s)."""
    r = quanta(*args, pre=("-X", "importtime"))
    assert r.returncode == 0, r.stderr
    loaded = {ln.rsplit("|", 1)[1].strip() for ln in r.stderr.splitlines()
              if ln.startswith("import time:")}
    assert {"typer", "quanta.cli_jobs"} <= loaded          # the output is what we think it is
    heavy = sorted(m for m in loaded if m.split(".")[0] in HEAVY or m in HEAVY)
    assert not heavy, heavy


def test_a_command_alone_reads_and_helps_as_under_the_whole_app():
    """`quanta CMD ...` builds only CMD's click command (quanta.cli._app_for); its help, its
    errors and its run are those of the whole app, for every command."""
    from typer.testing import CliRunner

    from quanta.cli import _app_for, app
    names = [i.name or i.callback.__name__.replace("_", "-") for i in app.registered_commands]
    assert len(names) >= 20 and {"simulate", "sweep", "add-user", "queues"} <= set(names)
    runner = CliRunner()
    for name in names:
        for args in ([name, "--help"], [name, "--no-such-option"]):
            one = _app_for(["quanta", *args])
            assert [i.name or i.callback.__name__.replace("_", "-")
                    for i in one.registered_commands] == [name]
            alone, whole = runner.invoke(one, args), runner.invoke(app, args)
            assert (alone.exit_code, alone.output) == (whole.exit_code, whole.output), args
    for argv in (["quanta"], ["quanta", "--version"], ["quanta", "simulat"]):
        assert _app_for(argv) is app
    assert len(app.registered_commands) == len(names)                  # the app is untouched


@pytest.mark.parametrize("cmd, hints", [
    ("simulate", ["synthetic:JOBS_PER_HOUR:NUM_JOBS", "TYPE:NODESxGPUS[,...]",
                  "NAME[:key=value,...]", "--window A:B", "--fig-format png|pdf|svg", "--force"]),
    ("sweep", ["synthetic:JOBS_PER_HOUR:NUM_JOBS", "module.path:Class[:k=v,...]",
               "--window A:B", "--fig-format png|pdf|svg"]),
])
def test_help_fits_80_columns_with_whole_syntax_hints(cmd, hints):
    r = quanta(cmd, "--help", env={**ENV, "COLUMNS": "80"})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert max(len(ln) for ln in lines) <= 80, max(lines, key=len)
    text = r.stdout
    for h in hints:
        assert h in text, h
    assert "…" not in text and "🅱" not in text and "│" not in text


def test_error_and_listing_text_is_printed_as_is():
    line = one_line_error(quanta("simulate", "--trace", "synthetic:-1:10", "--out",
                                 "/nonexistent/never-written"))
    assert "'synthetic:-1:10'" in line                      # not an emoji
    assert line.isascii()
    r = quanta("traces")
    assert r.returncode == 0
    assert re.search(r"^\s+philly\s+\[normalized\] ", r.stdout, re.M), r.stdout   # [fmt] kept


def test_listings_piped_are_a_whole_line_per_row():
    """(Rows longer than 120 columns went on at column 0 on the next line: grep missed them.)"""
    from quanta.policies import POLICIES
    from quanta.workloads.formats import FORMATS
    r = quanta("policies")
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert [ln.split()[0] for ln in lines] == sorted(POLICIES)
    for name, info in POLICIES.items():
        assert f"{name:24s} {info.description}" in lines
    r = quanta("traces")
    for name, info in FORMATS.items():
        assert f"  {name:14s} {info.description}" in r.stdout.splitlines()


@pytest.mark.parametrize("args, flag", [
    (["--until-h", "-5"], "--until-h"), (["--until-h", "0"], "--until-h"),
    (["--seed", "-1"], "--seed"), (["--load-scale", "0"], "--load-scale"),
    (["--load-scale", "inf"], "--load-scale"),
    (["--fig-format", "jpg"], "--fig-format"), (["--restart-delay", "-1"], "--restart-delay"),
])
def test_nonsensical_values_are_one_line_exit_2(args, flag, tmp_path):
    line = one_line_error(quanta("simulate", *TINY, "--out", str(tmp_path / "o"), *args))
    assert flag in line
    assert not (tmp_path / "o").exists()                   # nothing written


@pytest.mark.parametrize("policies, says", [
    (["gavel-las:interval=-360"], "interval must be 0.001 to 1e+15 seconds"),  # used to spin forever
    (["gavel-las:interval=inf"], "interval must be 0.001 to 1e+15 seconds"),
    (["sia:interval=1e-14"], "interval must be 0.001 to 1e+15 seconds"),   # (the clock stood still)
    (["gavel-las:interval=1e300"], "interval must be 0.001 to 1e+15 seconds"),   # (300-digit JCTs)
    (["pollux:restart_delay=1e300"], "pollux: restart_delay must be a number of seconds from 0 "
                                     "to 1e15"),                 # (no job finished, exit 0)
    (["gandiva:quantum=1e300"], "gandiva: quantum must be a positive number of seconds, at most"),
    (["hadar:horizon=100000000000"], "horizon must be a number of rounds from 1 to 4096 or "
                                     "'full'"),                  # (a MemoryError traceback)
    (["gavel-las:interval=nan"], "parameter 'interval' wants a number"),
    (["fifo:backfill"], "parameter 'backfill' wants a value (backfill=VALUE)"),
    (["tiresias-las:thresholds=-5/3"], "thresholds must be positive"),
    (["tiresias-las:thresholds=nan/3"], "wants numbers separated by '/'"),
    (["las", "las"], "policy 'las' is given twice"),                          # one folder, two rows
    # each policy's own values (tracebacks, or runs that finished no job, before)
    (["hadar:horizon=0"], "horizon must be a number of rounds from 1 to 4096"),
    (["hadar:eta=-1"], "hadar: eta must be a positive number, got -1"),
    (["pollux:p=inf"], "pollux: p must be a power from -100 to -0.01 or 0.01 to 100, got inf"),
    (["pollux:search=ga,population=0"], "pollux: population must be 1 or more"),
    (["sia:decimals=400"], "sia: decimals must be -1 (off) to 15, got 400"),
    (["sia:max_gpus=0"], "sia: max_gpus must be 1 or more"),
    (["sia:lambda_n=-1"], "sia: lambda_n must be a number of the sign opposite to p's"),
    (["gandiva:quantum=0"], "gandiva: quantum must be a positive number of seconds"),
    (["rubick:max_restarts=-1"], "rubick: max_restarts must be 0 or more"),
    (["tiresias-las:pack_limit=-1"], "tiresias: pack_limit must be a share in [0, 1]"),
    (["gavel-las:decimals=99"], "gavel: decimals must be -1 (off) to 15"),
    # a policy's own seed, bounded as --seed is (ran; an int past a float's range: a traceback)
    (["gavel-las:seed=99999999999999999999999"], "gavel: seed must be 0 to 2^63 - 1, got "
                                                 "99999999999999999999999"),
    (["pollux:seed=-1" + "0" * 400], "pollux: seed must be 0 to 2^63 - 1, got -10000000000... "
                                     "(402 digits)"),
    # tracebacks before: an option no run can use, a field that is no parameter
    (["gavel-hierarchical:entity=usr"], "gavel entity 'usr' unknown (known: queue, user)"),
    (["gavel-las:tie_types=foo/v100"], "gavel tie_types: unknown GPU type 'foo'"),   # (passed over)
    (["gavel-ftf:packed=true"], "gavel packed=true is max-min fairness with space sharing: it "
                                "needs objective max_min, not 'ftf'"),        # (an AttributeError)
    (["hadar:interval=0"], "hadar: interval must be a positive number of seconds"),
    (["hadare:interval=0"], "interval must be a positive number of seconds"),
    (["hadar:price=abc"], "parameter 'price' is a function: give it from Python"),
    (["rubick:_memo=x"], "unknown parameter '_memo'"),           # a cache
    # quoted as typed: the run's seed= the CLI adds was in the quote
    (["pollux:nokey=1"], "policy 'pollux:nokey=1': unknown parameter 'nokey'"),
    # given twice, as one policy (the last one won) or as two (the same run twice)
    (["las:backfill=false,backfill=true"], "parameter 'backfill' is given twice"),
    (["las:backfill=False", "las:backfill=0"], "'las:backfill=False' and 'las:backfill=0' are the "
                                               "same policy"),
    (["tiresias-las:thresholds=3250/7200", "tiresias-las:thresholds=7200/3250"],
     "are the same policy"),                      # (the queues take them in order: ran twice)
])
def test_policy_values_no_run_can_use_are_one_line_exit_2(policies, says, tmp_path):
    args = [a for p in policies for a in ("--policy", p)]
    line = one_line_error(quanta("simulate", *TINY, *args, "--out", str(tmp_path / "o")))
    assert says in line and "field '--policy'" in line
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("trace, says", [
    ("synthetic:nan:30", "rate must be a positive number"),
    ("synthetic:inf:30", "rate must be a positive number"),
    ("synthetic:3:30:5", "want synthetic:JOBS_PER_HOUR[:NUM_JOBS]"),
    ("synthetic:3:30 --format philly", "a synthetic trace has no file format"),   # was ignored
    ("rows:j2,10,99999999999999999999,100", "'num_gpus': 99999999999999999999 is above the maximum"),
    ("rows:j2,10,1,100,99999999999999999999", "'priority': 99999999999999999999 is above"),
    # digits past a float's range: "not a finite number", quoting all 5,000 of them
    ("rows:j2,10," + "9" * 5000 + ",100", "'num_gpus': 9999999999999999...99999999 (5,000 "
                                         "characters) is above the maximum"),
])
def test_trace_values_no_run_can_use_are_one_line_exit_2(trace, says, tmp_path):
    if trace.startswith("rows:"):
        row = trace[5:]
        f = tmp_path / "t.csv"
        f.write_text("job_id,submit_time_s,num_gpus,duration_s" + (",priority" if row.count(",") == 4
                                                                      else "") + f"\n{row}\n")
        trace = str(f)
    trace, *more = trace.split(" ")
    line = one_line_error(quanta("simulate", "--trace", trace, *more, "--cluster", "v100:1x8",
                                 "-q", "--out", str(tmp_path / "o")))
    assert says in line and ("t.csv:2" in line or "field '--" in line)
    assert not (tmp_path / "o").exists()


GAVEL_ROWS = ("ResNet-18 (batch size 256)\tpython3 main.py\timage_classification/cifar10\t"
              "--num_steps\t1\t{steps}\t1\t1\t-1.000000\t{arrival}\n")


@pytest.mark.parametrize("args, says", [
    # times past 1e15 s (inf, or 300 digits) ran and were reported as such, or never arrived
    (["--trace", "synthetic:1e-320:40"], "job syn-000001 would arrive at inf s"),
    (["--trace", "synthetic:3:40", "--load-scale", "1e-308"],
     "field '--load-scale': job syn-000001 would arrive at inf s"),
    # (the reader refuses them, as its field-by-field path always did: the fast path took any
    # finite number, and the error came later naming the JobSpec's field)
    (["--trace", "G:steps=1e300", "--format", "gavel"],
     "g.trace:1: field 'total_steps': 1e300 is above the maximum 1e+15"),
    (["--trace", "G:arrival=1e300", "--format", "gavel"],
     "g.trace:2: field 'arrival_time': 1e300 is above the maximum 1e+15"),
    # sizes no machine holds: memory ran out (a traceback, or the kernel's kill) or a long hang
    (["--trace", "synthetic:3:20000000"], "job count a positive integer up to 10,000,000"),
    (["--cluster", "v100:1000000x1000"], "1,000,000,000 GPUs is more than the 10,000,000"),
    (["--cluster", "v100:600000x1,k80:600000x1"], "1,200,000 nodes is more than the 1,000,000"),
    # a node failing every 3.6 us ran for ever; repairs and restarts past the longest run were
    # taken (JCTs of 1.5e17 s)
    (["--node-mtbf-h", "1e-9"], "field '--node-mtbf-h': must be 0 (no failures) or at least 0.01 h"),
    (["--node-mtbf-h", "1", "--repair-h", "1e12"],
     "field '--repair-h': 1e+12 h is past the 1e+15 s a run may last"),
    (["--restart-delay", "1e16"], "field '--restart-delay': 1e+16 s is past the 1e+15 s"),
])
def test_sizes_no_run_can_hold_are_one_line_exit_2(args, says, tmp_path):
    if args[1].startswith("G:"):
        key, value = args[1][2:].split("=")
        rows = [dict(steps=100, arrival=0), dict(steps=100, arrival=10)]
        rows[0 if key == "steps" else 1][key] = value
        (tmp_path / "g.trace").write_text("".join(GAVEL_ROWS.format(**r) for r in rows))
        args = [args[0], str(tmp_path / "g.trace"), *args[2:]]
    flags = {"--trace": "synthetic:3:20", "--cluster": "v100:1x8", **dict(zip(args[::2], args[1::2]))}
    line = one_line_error(quanta("simulate", *(a for kv in flags.items() for a in kv), "-q",
                                 "--out", str(tmp_path / "o")))
    assert says in line, line
    assert not (tmp_path / "o").exists()


def test_a_range_of_seeds_no_machine_can_hold_is_one_line_exit_2(tmp_path):
    """`--seeds 0-1000000000` built a list of a billion seeds (MemoryError); --replay-seeds the
    same (a run that did not end)."""
    line = one_line_error(quanta("sweep", "--rate", "3", "--jobs", "20", "-p", "las", "--seeds",
                                 "0-1000000000", "--out", str(tmp_path / "s"), "-q"))
    assert "0-1000000000 makes more than the 100,000 values a list of ranges may give" in line
    line = one_line_error(quanta("sweep", "--rate", "3", "--jobs", "20", "-p", "las", "--seeds",
                                 "0-60000", "--seeds", "60001-120000", "--out", str(tmp_path / "s"),
                                 "-q"))
    assert "60001-120000 makes more than the 100,000 values" in line            # (in all)
    line = one_line_error(quanta("reproduce", "tiresias", "--replay-seeds", "99999999999"))
    assert "--replay-seeds" in line


def test_sweep_rejects_a_negative_until_h(tmp_path):
    line = one_line_error(quanta("sweep", "--rate", "3", "--jobs", "10", "--policy", "fifo",
                                 "--until-h", "-5", "--out", str(tmp_path / "s"), "-q"))
    assert "until_h" in line


def test_output_to_a_pipe_starts_with_the_table_not_progress_bar_blank_lines(tmp_path):
    r = quanta("simulate", "--trace", "synthetic:3:20", "--cluster", "v100:1x8", "--policy", "las",
               "--policy", "fifo", "--no-plots", "--out", str(tmp_path / "o"))
    assert r.returncode == 0 and r.stdout.startswith("Quanta: trace:"), r.stdout[:200]
    r = quanta("sweep", "--rate", "3", "--jobs", "10", "--policy", "fifo", "--workers", "1",
               "--out", str(tmp_path / "s"))
    assert r.returncode == 0 and r.stdout.startswith("Quanta sweep:"), r.stdout[:200]


def test_report_headers_carry_units_and_notes_say_what_to_know(tmp_path):
    trace = tmp_path / "t.csv"          # a Tiresias-format trace with a model no catalog knows
    trace.write_text("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
                     "1,1,0,100,mystery_net,600,0\n2,1,60,100,mystery_net,900,0\n"
                     "3,1,120,100,mystery_net,300,0\n4,8,130,100,mystery_net,50000,0\n")
    out = tmp_path / "o"
    r = quanta("simulate", "--trace", str(trace), "--format", "tiresias", "--cluster",
               "v100:1x8,k80:1x8,h100:1x8", "--policy", "fifo", "--until-h", "2",
               "--node-mtbf-h", "100", "--no-plots", "--quiet", "--out", str(out))
    assert r.returncode == 0, r.stderr
    report = (out / "report.md").read_text()
    header = next(ln for ln in report.splitlines() if ln.startswith("| policy"))
    for col in ("avg JCT (h)", "p50 JCT (h)", "p95 JCT (h)", "p99 JCT (h)", "avg queue (h)",
                "makespan (h)", "unfair (ρ > 1)", "max FTF ρ", "GPU-hours"):
        assert col in header, col
    assert "_s |" not in header                             # no seconds-named column in hours
    row = next(ln for ln in report.splitlines() if ln.startswith("| fifo"))
    cells = dict(zip([c.strip() for c in header.strip("|").split("|")],
                     [c.strip() for c in row.strip("|").split("|")]))
    summ = next(csv.DictReader(open(out / "summary.csv")))
    assert float(cells["avg JCT (h)"]) == pytest.approx(float(summ["avg_jct_s"]) / 3600, abs=0.006)
    assert float(cells["p95 JCT (h)"]) == pytest.approx(float(summ["p95_jct_s"]) / 3600, abs=0.006)
    notes = report.split("## Notes", 1)[1].split("\n## ", 1)[0]
    assert "not in the catalog" in notes and "mystery_net" in notes
    assert "fifo never used" in notes
    assert "speeds on h100 are estimates" not in notes      # no known job type: nothing to say
    assert "injected node failures" in notes and "100 h" in notes
    assert "--until-h 2 h" in notes and "fifo 1" in notes   # the 50,000 s job is cut
    assert "note: " not in r.stdout                         # --quiet


def test_estimated_speeds_are_noted(tmp_path):
    r = quanta("simulate", "--trace", "synthetic:3:20", "--cluster", "v100:1x8,h100:1x8",
               "--policy", "fifo", "--no-plots", "--out", str(tmp_path / "o"))
    assert r.returncode == 0, r.stderr
    assert re.search(r"note: speeds on h100 are estimates .* for \d+ of \d+ known job types",
                     r.stdout), r.stdout
    assert "speeds on v100" not in r.stdout                 # measured there


def test_figures_in_the_format_asked_with_trace_and_cluster_in_titles(tmp_path):
    out = tmp_path / "o"
    r = quanta("simulate", *TINY, "--policy", "las", "--policy", "fifo", "--fig-format", "svg",
               "--out", str(out))
    assert r.returncode == 0, r.stderr
    names = ["jct_cdf", "ftf_cdf", "jct_by_type", "utilisation", "queue"]
    for n in names:
        svg = (out / f"{n}.svg").read_text()
        assert "gavel-poisson-3ph on v100:1x8" in svg, n    # the title, as text
        assert "fifo" in svg and "las" in svg, n            # a legend entry per policy
    assert "arrivals end" in (out / "utilisation.svg").read_text()
    assert not list(out.glob("*.png"))
    cfg = yaml.safe_load((out / "config.yaml").read_text())
    assert {f"{n}.svg" for n in names} <= set(cfg["files"])
    assert all(f"({n}.svg)" in (out / "report.md").read_text() for n in names)


def test_policy_styles_differ_in_greyscale():
    from quanta.report.plots import style
    styles = [style(i) for i in range(8)]
    assert len({(s["linestyle"] if isinstance(s["linestyle"], str) else repr(s["linestyle"]),
                 s["marker"]) for s in styles}) == 8
    assert len({s["marker"] for s in styles}) == 8 and len({s["color"] for s in styles}) == 8


def test_sweep_writes_jct_vs_load_with_ci_bands(tmp_path):
    out = tmp_path / "s"
    r = quanta("sweep", "--rate", "2,4", "--jobs", "12", "--cluster", "v100:1x8", "--policy",
               "fifo", "--policy", "las", "--seeds", "0-1", "--workers", "1", "--fig-format",
               "pdf", "--out", str(out))
    assert r.returncode == 0, r.stderr
    pdf = out / "jct_vs_load.pdf"
    assert pdf.read_bytes().startswith(b"%PDF") and pdf.stat().st_size > 5_000
    assert "jct_vs_load.pdf" in r.stdout


def test_no_arguments_prints_the_help():
    r = quanta()
    assert r.returncode == 2 and r.stderr == ""
    lines = r.stdout.splitlines()
    assert lines[0].startswith("Usage:") and any(ln.strip().startswith("simulate ") for ln in lines)


def test_main_freezes_what_is_left_so_that_exit_skips_the_collector(monkeypatch, capsys):
    """The collector's last passes at exit cost ~25 ms of a small simulate (issue 13): main()
    freezes every object left, on success and on error alike."""
    import gc

    from quanta import cli
    for argv in (["quanta", "traces"], ["quanta", "simulate", "--seed", "x"]):
        monkeypatch.setattr(sys, "argv", argv)
        gc.unfreeze()
        try:
            try:
                cli.main()
            except SystemExit as e:
                assert e.code == 2 and argv[1] == "simulate"
            assert gc.get_freeze_count() > 0
        finally:
            gc.unfreeze()
    assert "philly" in capsys.readouterr().out


def test_start_up_imports_run_without_the_collector_and_freeze_only_in_quantas_process(tmp_path):
    """Start-up imports run with the collector off (issue 13: its passes over what they make cost
    11-15 ms of a 0.5 s simulate); what they made is frozen only in `quanta`'s own process
    (main()): a simulate called inside another program (CliRunner here) freezes nothing, and
    the collector is on after it as before it."""
    import gc

    from typer.testing import CliRunner

    from quanta import cli
    for was in (True, False):
        (gc.enable if was else gc.disable)()
        try:
            count = gc.get_freeze_count()
            with cli._imports_without_gc(freeze=False):
                assert not gc.isenabled()
            assert gc.isenabled() == was and gc.get_freeze_count() == count
        finally:
            gc.enable()
    gc.unfreeze()
    try:
        with cli._imports_without_gc(freeze=True):
            kept = [object()]
        assert gc.get_freeze_count() > 0 and gc.isenabled() and kept
    finally:
        gc.unfreeze()
    r = CliRunner().invoke(cli.app, ["simulate", *TINY, "--policy", "fifo", "--no-plots",
                                     "--out", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    assert gc.isenabled() and gc.get_freeze_count() == 0 and not cli._PROCESS


def test_a_format_the_file_is_not_says_what_the_file_looks_like(tmp_path):
    """`--format gavel` on a normalized CSV named the trace's line and a Gavel line's fields, not
    that the format given was the mistake; now it says what auto would read it as, from the
    command line and from a sweep file's `format:` alike."""
    says = "(read as 'gavel', the format asked for; the file looks like 'normalized'"
    line = one_line_error(quanta("simulate", "--trace", "philly", "--format", "gavel", "-q",
                                 "--out", str(tmp_path / "o")))
    assert "philly_sample.csv:1: a Gavel trace line has" in line and says in line, line
    (tmp_path / "sw.yaml").write_text("traces: [philly]\nformat: gavel\npolicies: [fifo]\n")
    line = one_line_error(quanta("sweep", str(tmp_path / "sw.yaml"), "-q", "--out",
                                 str(tmp_path / "s")))
    assert says in line, line
    # a file no format recognises keeps its reader's own message
    (tmp_path / "odd.csv").write_text("a,b\n1,2\n")
    line = one_line_error(quanta("simulate", "--trace", str(tmp_path / "odd.csv"), "--format",
                                 "gavel", "-q", "--out", str(tmp_path / "o")))
    assert "looks like" not in line and "odd.csv:1" in line, line


def test_a_misspelt_key_is_named_not_only_the_field_it_left_missing(tmp_path):
    """`nodez:` in a cluster file said only "field 'nodes': Field required": the key the user
    wrote was never named."""
    (tmp_path / "c.yaml").write_text("nodez: []\n")
    line = one_line_error(quanta("simulate", "--cluster", str(tmp_path / "c.yaml"), "-q",
                                 "--out", str(tmp_path / "o")))
    assert line.endswith("c.yaml:1: field 'nodez': unknown key (a misspelt 'nodes'?); missing: nodes")
    (tmp_path / "c.yaml").write_text("nodes:\n  - {name: a, gpu_typ: v100, gpus: 4}\n")
    line = one_line_error(quanta("simulate", "--cluster", str(tmp_path / "c.yaml"), "-q",
                                 "--out", str(tmp_path / "o")))
    assert line.endswith("field 'nodes.0.gpu_typ': unknown key (a misspelt 'gpu_type'?); "
                         "missing: gpu_type")


def test_a_folder_named_as_a_cluster_file_is_called_a_folder(tmp_path):
    """(It said "cluster file not found" of a folder that is there.)"""
    (tmp_path / "c.yaml").mkdir()
    line = one_line_error(quanta("simulate", "--cluster", str(tmp_path / "c.yaml"), "-q",
                                 "--out", str(tmp_path / "o")))
    assert line.endswith("c.yaml: is a folder, not a cluster file"), line


def test_a_key_that_does_not_print_is_named_escaped(tmp_path):
    """A key with a newline or tab in it was named as typed: the one-line error broke in two."""
    (tmp_path / "c.yaml").write_text('nodes: [{name: a, gpu_type: v100, gpus: 4}]\n"x\\ty": 1\n')
    line = one_line_error(quanta("simulate", "--cluster", str(tmp_path / "c.yaml"), "-q",
                                 "--out", str(tmp_path / "o")))
    assert "field 'x\\x09y'" in line, line


def test_policies_name_lists_its_parameters_with_their_defaults():
    """The parameters `NAME:key=value` takes appeared nowhere but in an unknown-parameter error."""
    from quanta.policies import make_policy
    r = quanta("policies", "sia")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("sia: ")
    rows = dict(ln.split()[:2] for ln in lines[1:])
    assert rows["p=-0.5"] == "float" and rows["ties=search"] == "str"
    # every default listed is what the policy takes, written back as a spec
    spec = "sia:" + ",".join(k for k in rows)
    assert make_policy(spec) == make_policy("sia")
    r = quanta("policies", "las")
    assert r.stdout.splitlines()[1].split() == ["backfill=true", "bool"]
    assert quanta("policies", "las:backfill=false").stdout == r.stdout    # as --policy takes it
    r = quanta("policies", "hadar")
    assert "from Python only" in r.stdout          # (a function: not a key=value)
    r = quanta("policies", "nope")
    assert r.returncode == 2 and "unknown policy 'nope'" in r.stderr


def test_a_blank_unknown_key_beside_a_missing_field_still_names_a_field():
    """(The misspelt-key message took a blank key for the field: the service's 422 named none;
    found by the service fuzz test, body {"": None}.)"""
    from quanta.errors import QuantaError
    from quanta.runtime.spec import JobSubmission
    from quanta.specfile import validated
    with pytest.raises(QuantaError) as e:
        validated(JobSubmission, {"": None})
    assert e.value.field == "name" and "Field required" in str(e.value)


def test_a_folder_named_like_a_bundled_trace_does_not_hide_it(tmp_path):
    """`--trace philly --out philly`: the run's own output folder, in the working folder, hid
    the bundled sample, so the command config.yaml records failed there ('philly: not a file')."""
    cmd = [sys.executable, "-m", "quanta.cli", "simulate", "--trace", "philly", "--max-jobs",
           "20", "-p", "fifo", "--no-plots", "-q", "--out", "philly"]
    for extra in ([], ["--force"]):
        r = subprocess.run(cmd + extra, capture_output=True, text=True, cwd=tmp_path,
                           timeout=300, env=ENV)
        assert r.returncode == 0, r.stderr
    assert (tmp_path / "philly" / "fifo" / "jobs.csv").is_file()


def test_a_job_of_almost_no_time_gives_well_formed_figures(tmp_path):
    """(A job of 1e-300 s: numpy's 'invalid value' warning on stderr, an empty Jain index, and
    ftf_rho_max written with one decimal: 300 digits.)"""
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time_s,num_gpus,duration_s\na,0,1,1e-300\nb,0,1,3600\n")
    r = quanta("simulate", "--trace", str(trace), "--cluster", "v100:1x8", "-p", "gavel-las",
               "--no-plots", "--quiet", "--out", str(tmp_path / "o"),
               pre=("-W", "error::RuntimeWarning"))
    assert r.returncode == 0 and not r.stderr.strip(), r.stderr
    row = next(csv.DictReader(open(tmp_path / "o" / "summary.csv")))
    assert 0 < float(row["jain"]) <= 1 and len(row["ftf_rho_max"]) < 30, row


def test_a_cluster_files_mistake_names_its_line(tmp_path):
    """A cluster file's mistakes named the file and the field but not the line (a queues file's,
    a sweep file's and a job spec's did): the line of the field's value now."""
    (tmp_path / "c.yaml").write_text("name: c\nnodes:\n  - gpu_type: v100\n    count: 2\n"
                                     "    gpus: -8\n  - {gpu_type: tpu9, count: 1, gpus: 8}\n")
    line = one_line_error(quanta("simulate", "--cluster", str(tmp_path / "c.yaml"), "-q",
                                 "--out", str(tmp_path / "o")))
    assert line.endswith("c.yaml:5: field 'nodes.0.gpus': Input should be greater than 0"), line
    (tmp_path / "c.yaml").write_text("name: c\nnodes:\n  - gpu_type: v100\n    count: 2\n"
                                     "    gpus: 8\n  - {gpu_type: tpu9, count: 1, gpus: 8}\n")
    line = one_line_error(quanta("simulate", "--cluster", str(tmp_path / "c.yaml"), "-q",
                                 "--out", str(tmp_path / "o")))
    assert "c.yaml:6: field 'nodes.1.gpu_type': unknown GPU type 'tpu9'" in line, line
