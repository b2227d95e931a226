"""Values derived from files and kept beside them while the files' stats hold
(quanta/statmemo.py): Gavel's throughput table read back from its memo is the parsed one."""

import marshal
import os
import sys
import time

import pytest

from quanta.statmemo import SETTLE_NS, derived


def _age(path, seconds=10.0):
    old = time.time_ns() - int(seconds * 1e9)
    os.utime(path, ns=(old, old))


@pytest.fixture
def source(tmp_path):
    src = tmp_path / "data.txt"
    src.write_text("1 2 3")
    _age(src)
    return src


def memo_of(src, name="v"):
    return src.parent / "__pycache__" / f"{name}.{sys.implementation.cache_tag}.marshal"


def test_kept_while_the_stats_hold_and_rebuilt_when_they_change(source):
    calls = []

    def build():
        calls.append(1)
        return {"sum": sum(map(int, source.read_text().split()))}

    assert derived([source], "v", build) == {"sum": 6} and len(calls) == 1
    assert derived([source], "v", build) == {"sum": 6} and len(calls) == 1    # read back
    # a memo that lies is believed while the stats hold: the proof that it is what answers
    stamp, _value = marshal.loads(memo_of(source).read_bytes())
    memo_of(source).write_bytes(marshal.dumps((stamp, {"sum": -1})))
    assert derived([source], "v", build) == {"sum": -1}
    source.write_text("1 2 3 4")                   # another size: rebuilt
    _age(source)
    assert derived([source], "v", build) == {"sum": 10} and len(calls) == 2
    source.write_text("9 2 3 4")                   # the same size, another mtime: rebuilt
    _age(source, 5.0)
    assert derived([source], "v", build) == {"sum": 18} and len(calls) == 3


def test_not_kept_while_a_source_is_young_nor_where_it_cannot_be_written(source, tmp_path):
    young = tmp_path / "young.txt"
    young.write_text("x")                          # changed just now: racily clean
    assert time.time_ns() - young.stat().st_mtime_ns < SETTLE_NS
    assert derived([source, young], "v", lambda: 1) == 1
    assert not memo_of(source).exists()
    (tmp_path / "__pycache__").write_text("a file where the folder would go")
    assert derived([source], "v", lambda: 2) == 2                     # still answers
    assert derived([source], "v", lambda: 3) == 3                     # (each time)


@pytest.mark.parametrize("junk", [b"", b"not marshal", marshal.dumps(5)])
def test_an_unreadable_memo_is_rebuilt(source, junk):
    memo_of(source).parent.mkdir()
    memo_of(source).write_bytes(junk)
    assert derived([source], "v", lambda: [1, 2]) == [1, 2]
    assert marshal.loads(memo_of(source).read_bytes())[1] == [1, 2]


def test_gavels_table_from_its_memo_is_the_parsed_one():
    from quanta.paths import PROFILES_DIR
    from quanta.perf import gavel_table as gt
    parsed = gt._parse(PROFILES_DIR / "gavel" / "simulation_throughputs.json")
    got = gt.gavel_table.__wrapped__()             # (memo written by now, or not writable)
    again = gt.gavel_table.__wrapped__()
    for table in (got, again):
        assert (table.alone, table.unconsolidated, table.pairs) == parsed
        assert list(table.alone) == list(parsed[0])                    # same order
