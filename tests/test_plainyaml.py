"""config.yaml written without PyYAML (quanta/report/plainyaml.py) is PyYAML's text, byte for byte,
or nothing (then PyYAML writes it)."""

from __future__ import annotations

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from quanta.report.outdir import plain
from quanta.report.plainyaml import dump
from quanta.runner import SimulationRequest, run_config, run_simulations


def pyyaml(data) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


TRICKY = ["5318563-dirty", "5318563", "a1b2-dirty", "", "0.1.0+6e258afdc235", "53e8563", "1e5",
          "0b7d209", "0B1", "0X7d2", "0xzz", "0b1e5", "0x1e5", "0x_1", "0b", "0x1.5",
          "089", "0x1f", "0o17", "0b101", "12:30", "1.5", "1.5e+3", "v100:36x1,p100:36x1", "a,b",
          "a@b", "x=1", "1_000", "2001-12-14", "2001-12-14t21:59:43.10-05:00", "9abc-dirty",
          "1-2", "yes", "No", "ON", "null", "Null", "nULL", "~", "y", "n", "true", "False",
          "off", "0", "00", "07", "0.0.1", "1:2:3", "1,000", "-1", "+1", ".5", "/tmp/a b",
          "a: b", "a:", "a #b", "a  b", " a", "a ", "quanta simulate --trace x --policy las",
          "émile", "tab\there", "line\nbreak", "it's", 'say "hi"', "1.0", "1.", "3.14.15", "_x",
          "/abs/path.trace", "gavel-las:agnostic=true", "a=b,c=d", "2:10", "4000:5000",
          "0:10", "1:60", "12:", "1::2", "0123489", "0800", "0_8"]

WORDS = st.sampled_from(TRICKY) | st.text(alphabet="0123456789abcdefxEtTzZ_.:/,=+@- ",
                                           max_size=14)
SCALARS = (st.none() | st.booleans() | st.integers(-10**6, 10**12)
           | st.floats(allow_nan=True, allow_infinity=True) | WORDS)
KEYS = st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True) | st.sampled_from(["yes", "on", "n"])
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(KEYS, inner, max_size=4), max_leaves=12)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(KEYS, VALUES, max_size=6))
def test_same_text_as_pyyaml_or_none(data):
    text = dump(data)
    if text is not None:
        assert text == pyyaml(data)
        assert yaml.safe_load(text) == yaml.safe_load(pyyaml(data))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["quanta", "simulate", "--trace", "/tmp/some/where/a.trace",
                                 "--policy", "gavel-las", "v100:36x1,p100:36x1,k80:36x1",
                                 "--seed", "1", "x" * 40, "--no-plots"]), max_size=40))
def test_long_command_lines_fold_as_pyyaml_folds_them(words):
    data = {"command": " ".join(["quanta"] + words), "after": {"x": 1}}
    text = dump(data)
    assert text is not None and text == pyyaml(data)


def test_each_tricky_string_alone():
    for s in TRICKY:
        for data in ({"k": s}, {"k": {"j": s}}, {"k": [s, {"j": s}]}):
            text = dump(data)
            assert text is None or text == pyyaml(data), (s, data)
    # the strings a run's config holds most are written without PyYAML
    for s in ["5318563-dirty", "0.1.0+6e258afdc235", "53e8563", "5318563", "", "0b7d209", "0x7d2",
              "v100:36x1,p100:36x1", "/tmp/a.trace", "quanta simulate --trace x --policy las",
              "0123489", "0123489-dirty"]:
        assert dump({"k": s}) is not None, s


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789abcdef", min_size=7, max_size=7), st.booleans())
def test_every_short_commit_hash_is_written_without_pyyaml(h, dirty):
    # the config's git field (`git describe --always --dirty`): any hash, so that a clone's
    # commit never sends a real run's config to PyYAML (0b7d209 once did)
    data = {"git": h + ("-dirty" if dirty else "")}
    text = dump(data)
    assert text is not None and text == pyyaml(data), h


def test_real_configs_are_written_without_pyyaml(tmp_path):
    """The configs of real runs (several worlds, policies with parameters, a queues file) take
    the fast path, with PyYAML's text."""
    cases = [dict(trace="synthetic:3:20", cluster="v100:1x8", policies=["fifo", "las"]),
             dict(trace="synthetic:3:20", cluster=None, policies=["gavel-las", "sia"],
                  world="gavel-sim"),
             dict(trace="synthetic:3:20", cluster="gavel-108", policies=["tiresias-las", "gavel-ftf"],
                  window="2:10")]
    for i, case in enumerate(cases):
        req = SimulationRequest(**case, seed=3, out=tmp_path / str(i), plots=False)
        run_simulations(req)
        text = (tmp_path / str(i) / "config.yaml").read_text()
        body = text.split("\n", 1)[1]
        data = yaml.safe_load(body)
        assert body == pyyaml(data)
        assert dump(data) == body


class _Opaque:
    pass


def test_plain_is_the_same_in_every_process():
    from quanta.policies.hadar import exponential_price
    assert plain(exponential_price) == "quanta.policies.hadar_dual.exponential_price"
    assert plain(_Opaque) == f"{__name__}._Opaque"
    assert plain(frozenset({"b", "a", "c"})) == ["a", "b", "c"]
    assert plain({"s": {3, 1, 2}}) == {"s": [1, 2, 3]}
    assert plain(_Opaque()) == f"<{__name__}._Opaque>"          # (no memory address)
    assert plain(range(2)) == "range(0, 2)"


def test_config_yaml_is_the_same_under_another_hash_seed(tmp_path):
    # every input of a Hadar run (its price and schedule functions among them), written by two
    # processes with different string hashes: the same text but for the --out each was given
    import os
    import subprocess
    import sys
    texts = []
    for seed in ("1", "2"):
        out = tmp_path / f"run{seed}"
        r = subprocess.run([sys.executable, "-m", "quanta.cli", "simulate", "--trace",
                            "synthetic:5:8", "--cluster", "v100:1x4,k80:1x4", "--policy", "hadar",
                            "--quiet", "--no-plots", "--out", str(out)],
                           capture_output=True, text=True,
                           env={**os.environ, "PYTHONHASHSEED": seed, "OMP_NUM_THREADS": "1"})
        assert r.returncode == 0, r.stderr
        texts.append((out / "config.yaml").read_text().replace(str(out), "OUT"))
    assert "price: quanta.policies.hadar_dual.exponential_price" in texts[0]
    assert texts[0] == texts[1]
