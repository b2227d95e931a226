"""The command line's pydantic-free option conversion (quanta/cli_options.py) against typer's own
pydantic conversion, on every parameter of every `quanta` command it covers."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer._click import Context
from typer._click.exceptions import BadParameter
from typer._coercion import build_runtime_param

from quanta import cli_options
from quanta.cli import app

ROOT = Path(__file__).resolve().parent.parent


def _covered():
    """(command, parameter, ours, typer's) for every parameter cli_options converts."""
    group = typer.main.get_command(app)
    out = []
    for name, cmd in sorted(group.commands.items()):
        for p in cmd.params:
            ours = cli_options.converter(p)
            if ours is not None:
                out.append((cmd, p, ours, build_runtime_param(p.type_descriptor)))
    return out


COVERED = _covered()


def _result(conv, value, cmd, p):
    try:
        v = conv.coerce(value, param=p, ctx=Context(cmd))
        return ("ok", type(v).__name__, repr(v))      # (repr: nan equals nan)
    except BadParameter as e:
        return ("error", e.format_message())


def _same(ours, theirs, value, cmd, p):
    """Our conversion of `value` is typer's, but for an empty path: an error here, deliberately
    (typer reads it as the working folder)."""
    got = _result(ours, value, cmd, p)
    one = value[0] if isinstance(value, (tuple, list)) else value
    if ours.kind is Path and isinstance(one, str) and not one.strip():
        assert got[0] == "error" and "is empty: name a file or folder" in got[1], got
        return
    assert got == _result(theirs, value, cmd, p), (cmd.name, p.name, value)


def test_every_plain_parameter_is_covered():
    """Every option of `simulate` is covered, and so is every int, float, str and Path
    parameter of every command (the others keep typer's own conversion)."""
    names = {(c.name, p.name) for c, p, _o, _t in COVERED}
    group = typer.main.get_command(app)
    sim = group.commands["simulate"]
    assert {("simulate", p.name) for p in sim.params if p.type_descriptor.annotation is not bool} \
        <= names
    for cmd in group.commands.values():
        for p in cmd.params:
            if p.type_descriptor.annotation in (int, float, str, Path):
                assert (cmd.name, p.name) in names, (cmd.name, p.name)
    assert len(COVERED) > 40


NUMBERS = ["5", "5.0", "0_.", "1_.5", "1e_5", " 1_0 ", "1_e5", "__1", "5.00", "5.", "5.5",
           " 7 ", "+5", "-1", "-0", "0", "00012", "1_000", "1__0", "_1", "1_", "0x10", "0b1",
           "1e3", "1e400", "inf", "-inf", "nan", "infinity", "", " ", "abc", "1,5", "\u0663",
           "\uff11\uff12", "99999999999999999999999", "10000", "10001", "0.5", "-0.0",
           "5.0000000001", "+-5", 5, 5.0, 5.5, -3, 0.0, True]


@pytest.mark.parametrize("value", NUMBERS, ids=[repr(v) for v in NUMBERS])
def test_same_values_and_errors_as_typer(value):
    for cmd, p, ours, theirs in COVERED:
        v = value
        if ours.many:
            v = (value, value)
        _same(ours, theirs, v, cmd, p)


# pydantic-core reads an integer's leading zeros and underscores loosely: "0-5" is -5 and
# "0__3" is 3 there; cli_options rejects both, deliberately (test below)
_ZERO_QUIRK = re.compile(r"\s*[+-]?(0[0_]*)(.*)", re.S)


def _zero_quirk(text: str) -> bool:
    m = _ZERO_QUIRK.match(text)
    return bool(m) and ("__" in m.group(1) or m.group(2)[:1] in ("+", "-"))


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet="0123456789+-._eEinfa x", max_size=8))
def test_same_as_typer_on_numeric_looking_text(text):
    for cmd, p, ours, theirs in COVERED:
        if ours.kind is int and _zero_quirk(text):
            continue
        _same(ours, theirs, (text,) if ours.many else text, cmd, p)


@pytest.mark.parametrize("text", ["0-5", "+0-3", "0__3", "0_-58"])
def test_integers_after_leading_zeros_are_read_as_written(text):
    """pydantic-core turns "0-5" into -5; here it is an error, as it reads."""
    for cmd, p, ours, _theirs in COVERED:
        if ours.kind is int:
            assert _result(ours, text, cmd, p)[0] == "error", (cmd.name, p.name)


def test_a_simulation_imports_no_pydantic_and_bad_values_say_so_in_one_line(tmp_path):
    """As typed: a whole `quanta simulate` parses its options without importing pydantic; a bad
    value is still one line naming the option, exit 2."""
    env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "quanta.cli", "simulate",
                        "--trace", "synthetic:3:5", "--cluster", "v100:1x4", "--policy", "fifo",
                        "--max-jobs", "5", "--load-scale", "1.5", "--out", str(tmp_path / "o"),
                        "--no-plots", "--quiet"],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    loaded = {ln.rsplit("|", 1)[1].strip() for ln in r.stderr.splitlines()
              if ln.startswith("import time:")}
    assert "quanta.runner" in loaded and not any(m.split(".")[0] == "pydantic" for m in loaded)
    assert (tmp_path / "o" / "fifo" / "jobs.csv").is_file()
    for args, msg in ((["--max-jobs", "0"], "Invalid value for '--max-jobs': Input should be "
                       "greater than or equal to 1"),
                      (["--load-scale", "x"], "Invalid value for '--load-scale': Input should "
                       "be a valid number, unable to parse string as a number"),
                      (["--seed", "5.5"], "Invalid value for '--seed': Input should be a valid "
                       "integer, unable to parse string as an integer")):
        r = subprocess.run([sys.executable, "-m", "quanta.cli", "simulate", *args, "--out",
                            str(tmp_path / "bad")], capture_output=True, text=True, cwd=ROOT,
                           env=env, timeout=300)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert r.returncode == 2 and len(lines) == 1 and msg in lines[0], r.stderr
    assert not (tmp_path / "bad").exists()
