"""The queues file: one-line errors naming file, line and field; a trace's users and queues
resolved against it; the bundled example loads. (Split from test_queues.py.)"""

import math

import pytest

from quanta.errors import QuantaError
from quanta.model import JobSpec
from quanta.queues import load_queues, parse_queues

from test_queues import job

# -- the file ------------------------------------------------------------------------------------------
def write(tmp_path, text):
    p = tmp_path / "q.yaml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("text, line, field, words", [
    ("queues:\n  - name: a\n    parent: b\n  - name: b\n    parent: c\n  - name: c\n    parent: a\n",
     7, "queues[c].parent", "cycle"),
    ("queues:\n  - name: a\n    quota:\n      v100: -4\n", 4, "queues[a].quota.v100.nominal",
     "greater than or equal to 0"),
    ("queues:\n  - name: a\n    quota:\n      v100: {nominal: 2, borrowing_limit: -1}\n", 4,
     "queues[a].quota.v100.borrowing_limit", "greater than or equal to 0"),
    ("queues:\n  - name: a\n    quota:\n      v100: 4\n      tpu9: 2\n", 5, "queues[a].quota.tpu9",
     "unknown GPU type 'tpu9'"),
    # fair-share weights of an unknown type, or negative: accepted unsaid
    ("fairshare:\n  speed: {h900: 2}\nqueues:\n  - name: a\n", 2, "fairshare.speed.h900",
     "unknown GPU type 'h900'"),
    ("fairshare:\n  speed:\n    v100: -2\nqueues:\n  - name: a\n", 3, "fairshare.speed.v100",
     "must be a usage weight, 0 or more, got -2"),
    ("users: [alice]\nqueues:\n  - name: a\n    users: [bob]\n", 1, "users.alice",
     "user 'alice' is in no queue"),
    ("queues:\n  - name: a\n    parent: nope\n", 3, "queues[a].parent", "not a queue"),
    ("queues:\n  - name: a\n  - name: a\n", 3, "queues[a].name", "defined twice"),
    ("queues:\n  - name: a\n    qouta: {}\n", 3, "queues[a].qouta", "Extra inputs"),
    ("queues:\n  - name: a\n    quota: {v100: 2}\n  - name: b\n    parent: a\n    users: [x]\n"
     "  - name: c\n    parent: b\n", 6, "queues[b].users", "cohort"),
    # aliases: on a cohort its jobs went to the default queue; twice or a queue's name, one won
    ("queues:\n  - name: a\n    aliases: [vc1]\n  - name: b\n    parent: a\n", 3,
     "queues[a].aliases", "give the aliases to one of its leaf queues"),
    ("queues:\n  - name: a\n    aliases: [vc1]\n  - name: b\n    aliases: [vc2, vc1]\n", 5,
     "queues[b].aliases.1", "alias 'vc1' is also an alias of queue 'a'"),
    ("queues:\n  - name: a\n  - name: b\n    aliases: [a]\n", 4, "queues[b].aliases.0",
     "alias 'a' is the name of queue 'a'"),
    ("queues:\n  - name: a\n    quota:\n      v100: eight\n", 4, "queues[a].quota.v100",
     "want a number of GPUs or {nominal: N"),           # (was pydantic's 'instance of QuotaEntry')
    ("queues: [\n", 2, None, "not valid YAML"),
    # an infinite weight: NaN fair shares and numpy warnings
    ("queues:\n  - name: a\n    weight: .inf\n  - name: b\n", 3, "queues[a].weight",
     "finite number"),
    ("fairshare:\n  weight_age: .inf\nqueues:\n  - name: a\n", 2, "fairshare.weight_age",
     "finite number"),                                  # (NaN scores within a queue)
    ("fairshare:\n  weight_fairshare: .nan\nqueues:\n  - name: a\n", 2,
     "fairshare.weight_fairshare", "finite number"),
    # a line break in the file's name split the title of `quanta queues` in two
    ('name: "lab\\nx"\nqueues:\n  - name: a\n', 1, "name", "no control characters"),
])
def test_bad_files_name_file_line_and_field(tmp_path, text, line, field, words):
    p = write(tmp_path, text)
    with pytest.raises(QuantaError) as err:
        load_queues(p)
    msg = str(err.value)
    assert msg.startswith(f"{p}:{line}:"), msg
    if field:
        assert f"field '{field}'" in msg
    assert words in msg
    assert "\n" not in msg


def test_trace_user_in_no_queue_names_the_trace_line():
    t = parse_queues({"queues": [{"name": "a", "users": ["alice"]}]})
    specs = [job(0, "a", 1, user="alice"), JobSpec("j1", 1.0, 1, "", queue="a", user="eve",
                                                    source_line=17)]
    with pytest.raises(QuantaError) as err:
        t.check_jobs(specs, "trace.csv")
    assert str(err.value).startswith("trace.csv:17: field 'user': job j1: queue 'a' of <queues> "
                                     "does not admit user 'eve' (its users: alice)")
    # a job of no user in a queue of named users (it was "queue 'a' matches no queue")
    with pytest.raises(QuantaError, match="field 'user': job j1: queue 'a' of <queues> does not "
                       "admit a job with no user"):
        t.check_jobs([JobSpec("j1", 1.0, 1, "", queue="a", source_line=17)], "trace.csv")
    with pytest.raises(QuantaError, match="field 'user': job j1: user 'eve' is in no queue"):
        t.check_jobs([JobSpec("j1", 1.0, 1, "", queue="zz", user="eve", source_line=17)], "t.csv")


def test_example_file_loads():
    from pathlib import Path
    import quanta
    p = Path(quanta.__file__).parent / "examples" / "queues" / "teams.yaml"
    t = load_queues(p)
    assert t.num_leaves == 4 and set(t.flavors) == {"v100", "p100", "k80"}
    comp = t.compile(("v100", "p100", "k80"))
    top = t.names.index("cluster")
    assert comp.nominal_total[top].tolist() == [36.0, 36.0, 36.0]
    assert math.isinf(comp.cap[t.names.index("speech"), 0])


def test_a_leading_zero_is_decimal_not_octal(tmp_path):
    """YAML 1.1 reads `012` as octal (ten): `v100: 012` gave a quota of 10 GPUs, and `08` was
    text (refused as no number). Read as YAML 1.2 reads them, both are decimal; `0o12` is octal."""
    from quanta.specfile import parse_yaml
    assert parse_yaml("a: 012\nb: 08\nc: -07\nd: +012\ne: 0o12\nf: 0x1F\ng: 0b11\nh: 1_0\n"
                      "i: 010.5\nj: '012'\n", "x") == \
        {"a": 12, "b": 8, "c": -7, "d": 12, "e": 10, "f": 31, "g": 3, "h": 10, "i": 10.5,
         "j": "012"}
    t = load_queues(write(tmp_path, "queues:\n  - name: a\n    quota:\n      v100: 012\n"
                                    "      k80: {nominal: 08, borrowing_limit: 0o10}\n"))
    comp = t.compile(("v100", "k80"))
    assert comp.nominal_total[0].tolist() == [12.0, 8.0]
