"""Trace readers: every format on real (bundled) data or hand-made fixtures, detection (bad
input: test_reader_errors.py)."""

from __future__ import annotations

import csv
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from quanta.errors import QuantaError
from quanta.model.job import Trace
from quanta.workloads.formats import FORMATS, detect_format, load_trace
from quanta.workloads.samples import OPENB_NODES, SAMPLES, sample_path

FIXTURES = Path(__file__).parent / "fixtures"
ALL_FORMATS = {"normalized", "philly", "gavel", "pollux", "tiresias", "openb", "helios", "itp", "pai",
               "rubick"}

# The first data rows of the real Philly file (petuum/adaptdl simulator/traces/philly.csv).
PHILLY_HEAD = """timestamp,duration,num_gpus,gpu_time,cluster
2017-10-09 07:01:55,66.0,1,66.0,11cb48
2017-10-09 06:13:03,2951.0,1,2951.0,6214e9
2017-09-29 07:58:32,860662.0,1,860662.0,6c71a0
2017-11-08 07:33:10,1896.0,1,1896.0,6c71a0
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def assert_sorted_and_rebased(trace: Trace) -> None:
    times = [j.submit_time for j in trace.jobs]
    assert times == sorted(times)
    assert times[0] == 0.0
    assert len({j.job_id for j in trace.jobs}) == len(trace.jobs)
    assert all(j.num_gpus >= 1 and j.duration_s >= 0 for j in trace.jobs)


# -- registry and samples ----------------------------------------------------------------------

def test_registry_has_every_format():
    assert set(FORMATS) == ALL_FORMATS
    for name, info in FORMATS.items():
        assert info.name == name and info.description and callable(info.read)


def test_samples_exist_and_are_small():
    total = 0
    for name, (filename, fmt, desc) in SAMPLES.items():
        path = sample_path(name)
        assert path.is_file() and path.name == filename and desc
        total += path.stat().st_size
    nodes = sample_path(OPENB_NODES)
    total += nodes.stat().st_size
    assert total < 1_500_000
    assert (nodes.parent / "PROVENANCE.md").is_file()
    assert (nodes.parent / "LICENSE.gavel").is_file()
    with pytest.raises(QuantaError, match="no bundled trace"):
        sample_path("nope")


@pytest.mark.parametrize("name", [n for n, v in SAMPLES.items() if v[1] in ALL_FORMATS])
def test_samples_detect_and_load(name):
    filename, fmt, _ = SAMPLES[name]
    path = sample_path(name)
    assert detect_format(path) == fmt
    trace = load_trace(path)
    assert trace.format == fmt and trace.source == str(path) and len(trace) > 0
    assert_sorted_and_rebased(trace)
    by_name = load_trace(name)
    assert [j.job_id for j in by_name.jobs] == [j.job_id for j in trace.jobs]


# -- normalized ----------------------------------------------------------------------------------

def test_normalized_philly_sample():
    t = load_trace(sample_path("philly"), "normalized")
    assert len(t) == 2000 and t.format == "normalized"
    first, last = t.jobs[0], t.jobs[-1]
    assert (first.job_id, first.submit_time, first.num_gpus, first.duration_s, first.queue) == \
        ("philly-048000", 0.0, 1, 9.0, "11cb48")
    assert (last.job_id, last.submit_time, last.num_gpus, last.duration_s) == \
        ("philly-049999", 106286.0, 2, 37.0)
    assert max(j.num_gpus for j in t.jobs) == 32
    assert len({j.queue for j in t.jobs}) == 9
    assert all(j.job_type == "" and j.total_steps == 0 for j in t.jobs)
    assert first.source_line == 2 and last.source_line == 2001
    assert not any("catalog" in n for n in t.notes)   # the builder reports model draws


def test_normalized_optional_columns(tmp_path):
    p = write(tmp_path, "n.csv",
              "job_id,submit_time_s,num_gpus,duration_s,status,gpu_fraction,qos,censored\n"
              "a,100,1,50,Running,0.46,LS,1\n"
              "b,130,8,20,Failed,8.0,BE,0\n")
    t = load_trace(p)
    a, b = t.jobs
    assert (a.submit_time, a.gpu_fraction, a.guaranteed) == (0.0, 0.46, True)
    assert (b.submit_time, b.gpu_fraction, b.guaranteed) == (30.0, 1.0, False)
    assert any("1 jobs censored" in n for n in t.notes)


# -- philly --------------------------------------------------------------------------------------

def test_philly_real_rows(tmp_path):
    p = write(tmp_path, "philly.csv", PHILLY_HEAD)
    assert detect_format(p) == "philly"
    t = load_trace(p)
    assert [j.job_id for j in t.jobs] == ["philly-000002", "philly-000001", "philly-000000",
                                          "philly-000003"]
    # 2017-09-29 07:58:32 is the earliest; the others are whole wall-clock seconds after it.
    base = datetime(2017, 9, 29, 7, 58, 32)
    expect = (datetime(2017, 10, 9, 6, 13, 3) - base).total_seconds()
    assert t.jobs[1].submit_time == expect
    assert t.jobs[0].duration_s == 860662.0 and t.jobs[0].queue == "6c71a0"
    assert t.jobs[-1].submit_time == (datetime(2017, 11, 8, 7, 33, 10) - base).total_seconds()


def test_philly_matches_normalized_sample(tmp_path):
    """The bundled normalized window, written back in the raw Philly layout (shuffled), reads the same."""
    norm = load_trace(sample_path("philly"))
    start = datetime(2017, 10, 25, 6, 0, 0)
    rows = [((start + timedelta(seconds=j.submit_time)).strftime("%Y-%m-%d %H:%M:%S"),
             f"{j.duration_s:.1f}", j.num_gpus, f"{j.duration_s * j.num_gpus:.1f}", j.queue)
            for j in norm.jobs]
    rows = rows[1::2] + rows[::2]
    p = tmp_path / "philly.csv"
    with open(p, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["timestamp", "duration", "num_gpus", "gpu_time", "cluster"])
        w.writerows(rows)
    raw = load_trace(p)
    assert raw.format == "philly" and len(raw) == len(norm)
    key = lambda j: (j.submit_time, j.num_gpus, j.duration_s, j.queue)  # noqa: E731
    assert sorted(map(key, raw.jobs)) == sorted(map(key, norm.jobs))
    assert_sorted_and_rebased(raw)
    head = load_trace(p, max_jobs=10)
    assert len(head) == 10 and [key(j) for j in head.jobs] == [key(j) for j in raw.jobs[:10]]


def test_philly_full_size(tmp_path):
    """82k rows (the size of the full Philly trace); its speed is measured in bench/, not here."""
    lines = PHILLY_HEAD.splitlines()
    body = lines[1:] * 20_562
    p = write(tmp_path, "big.csv", "\n".join([lines[0]] + body) + "\n")
    t = load_trace(p, "philly")
    assert len(t) == 82_248


# -- gavel ---------------------------------------------------------------------------------------

def test_gavel_new_layout():
    t = load_trace(sample_path("gavel-small"))
    assert t.format == "gavel" and len(t) == 20
    assert any("new 10-column" in n for n in t.notes)
    j0 = t.jobs[0]
    assert (j0.job_id, j0.job_type, j0.total_steps, j0.num_gpus, j0.batch_size) == \
        ("gavel-000000", "Transformer (batch size 128)", 346.0, 2, 128)
    assert j0.duration_s == 0 and j0.weight == 1.0 and j0.deadline == 0.0
    last = [j for j in t.jobs if j.job_id == "gavel-000019"][0]
    assert (last.job_type, last.total_steps, last.num_gpus) == ("ResNet-18 (batch size 16)", 1817.0, 1)
    cyclegan = [j for j in t.jobs if j.job_type == "CycleGAN"][0]
    assert cyclegan.batch_size == 0
    assert all(j.submit_time == 0 for j in t.jobs)


def test_gavel_old_layout():
    t = load_trace(sample_path("gavel-msr"))
    assert len(t) == 300 and any("old 7-column" in n for n in t.notes)
    first, last = t.jobs[0], t.jobs[-1]
    assert (first.job_type, first.total_steps, first.num_gpus, first.submit_time) == \
        ("Transformer (batch size 128)", 95121.0, 1, 0.0)
    assert (last.job_id, last.job_type, last.total_steps, last.submit_time) == \
        ("gavel-000299", "ResNet-50 (batch size 64)", 281846.0, 1838046.0)
    assert len({j.job_type for j in t.jobs}) == 26


def test_gavel_slo_and_weight(tmp_path):
    line = "ResNet-50 (batch size 64)\tpython3 main.py\timagenet\t--num_steps\t1\t500\t4\t2.5\t{slo}\t{t}\n"
    p = write(tmp_path, "x.trace", line.format(slo="-1.000000", t=100) + line.format(slo="3600", t=160))
    t = load_trace(p)
    a, b = t.jobs
    assert (a.submit_time, a.deadline, a.weight, a.num_gpus) == (0.0, 0.0, 2.5, 4)
    assert (b.submit_time, b.deadline) == (60.0, 3660.0)


def test_gavel_fast_path_reads_what_the_field_by_field_path_reads(tmp_path, monkeypatch):
    """Each well-formed line is read by a fast path (readers/gavel.py `_plain_row`); with it off,
    every line goes field by field: the same jobs, notes and notes' counts, on the bundled
    traces of both layouts and on lines the fast path hands over (a scale factor "2.0", spaces
    around numbers, an SLO, a zero SLO)."""
    from quanta.workloads.readers import gavel
    odd = write(tmp_path, "odd.trace",
                "ResNet-50 (batch size 64)\tpy\td\t-n\t1\t500\t2.0\t2.5\t3600\t100\n"
                "LM (batch size 5)\tpy\td\t-n\t1\t 70 \t1\t1\t0\t 160.5\n"
                "LM (batch size 5)\tpy\td\t-n\t1\t70\t4\t1e0\t-1\t161\n"
                "Transformer\tpy\td\t-n\t1\t1e3\t1\t1\t7.5\t162\n")
    paths = [sample_path("gavel-small"), sample_path("gavel-msr"), odd,
             *sorted(Path(gavel.__file__).parents[2].glob("data/traces/gavel_gen/*.trace"))[:3]]
    fast = [gavel.read(p) for p in paths]
    calls = []
    monkeypatch.setattr(gavel, "_plain_row", lambda *a: calls.append(1))
    slow = [gavel.read(p) for p in paths]
    assert len(calls) == sum(len(t) for t in fast)
    for a, b in zip(fast, slow):
        assert a.jobs == b.jobs and a.notes == b.notes and a.origin == b.origin
    assert [j.num_gpus for j in fast[2].jobs] == [2, 1, 4, 1]
    assert fast[2].notes[-1].startswith("2 jobs with an SLO")


# -- pollux / sia --------------------------------------------------------------------------------

def test_pollux_sia_workload():
    t = load_trace(sample_path("sia-philly-1"))
    assert t.format == "pollux" and len(t) == 160
    first, last = t.jobs[0], t.jobs[-1]
    assert (first.job_id, first.submit_time, first.job_type, first.num_gpus, first.batch_size) == \
        ("cifar10-0", 0.0, "cifar10", 6, 2048)
    assert (last.job_id, last.submit_time) == ("cifar10-159", 27695.0 - 107.0)
    assert all(j.total_steps == 0 and j.duration_s == 0 for j in t.jobs)
    assert {j.job_type for j in t.jobs} == {"cifar10", "deepspeech2", "bert", "imagenet", "yolov3"}
    assert any("catalog" in n for n in t.notes)


# -- tiresias ------------------------------------------------------------------------------------

def test_tiresias_60_jobs():
    t = load_trace(sample_path("tiresias-60"))
    assert t.format == "tiresias" and len(t) == 60
    first, last = t.jobs[0], t.jobs[-1]
    assert (first.job_id, first.num_gpus, first.job_type, first.duration_s) == ("0", 1, "vgg19", 164.0)
    assert (last.job_id, last.submit_time, last.job_type, last.duration_s) == \
        ("59", 1779.0, "inception3", 122.0)
    assert t.jobs[1].num_gpus == 8 and t.jobs[1].submit_time == 30.0


# -- openb ---------------------------------------------------------------------------------------

def test_openb_sample():
    t = load_trace(sample_path("openb"))
    assert t.format == "openb" and len(t) == 805
    assert any("dropped 116 CPU-only pods and 79 never-scheduled" in n for n in t.notes)
    j0 = t.jobs[0]
    assert (j0.job_id, j0.submit_time, j0.duration_s, j0.cpus, j0.mem_gb, j0.guaranteed) == \
        ("openb-pod-0000", 0.0, 12537496.0, 12.0, 16.0, True)
    j1 = t.jobs[1]
    assert (j1.job_id, j1.gpu_fraction, j1.duration_s, j1.submit_time) == \
        ("openb-pod-0001", 0.46, 12902960.0 - 427061.0, 427061.0)
    multi = [j for j in t.jobs if j.num_gpus > 1]
    assert multi and all(j.gpu_fraction == 1.0 for j in multi)
    ids = {j.job_id for j in t.jobs}
    assert "openb-pod-0016" not in ids  # CPU-only pod


def test_openb_gpu_spec_and_filters(tmp_path):
    head = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
            "creation_time,deletion_time,scheduled_time\n")
    p = write(tmp_path, "pods.csv", head +
              "p0,16000,32768,1,1000,V100M16|V100M32,LS,Running,10,500,12\n"
              "p1,4000,15258,1,220,,BE,Running,20,300,20\n"
              "p2,4000,15258,0,0,,BE,Running,25,300,25\n"
              "p3,4000,15258,1,500,,BE,Pending,30,40,\n"
              "p4,88000,327680,8,1000,,Burstable,Succeeded,40,200,41\n")
    t = load_trace(p)
    assert [j.job_id for j in t.jobs] == ["p0", "p1", "p4"]
    p0, p1, p4 = t.jobs
    assert p0.gpu_types == ("v100m16", "v100m32") and p0.guaranteed and p0.duration_s == 488.0
    assert p1.gpu_fraction == 0.22 and not p1.guaranteed and p1.submit_time == 10.0
    assert p4.num_gpus == 8 and p4.gpu_fraction == 1.0 and p4.cpus == 88.0 and p4.mem_gb == 320.0
    assert any("1 pods censored" in n for n in t.notes)


def test_openb_node_list_is_bundled():
    rows = list(csv.DictReader(open(sample_path(OPENB_NODES))))
    assert len(rows) == 1213 and sum(int(r["gpu"]) for r in rows) == 6212


# -- helios --------------------------------------------------------------------------------------

def test_helios_datetime_fixture():
    p = FIXTURES / "helios_cluster_log.csv"
    assert detect_format(p) == "helios"
    t = load_trace(p)
    assert [j.job_id for j in t.jobs] == ["6164347", "6164352", "6164360", "6164375", "6164380",
                                          "6164391"]
    j = t.jobs
    assert (j[0].submit_time, j[0].num_gpus, j[0].duration_s, j[0].queue, j[0].user, j[0].cpus) == \
        (0.0, 8, 7800.0, "vc6YE", "u0021", 64.0)
    assert j[1].submit_time == 113.0  # 00:02:00 - 00:00:07
    assert j[3].duration_s == 3600.0  # empty duration -> end - start
    assert j[-1].submit_time == 592.0
    assert any("skipped 1 CPU-only jobs" in n and "1 jobs that never ran" in n for n in t.notes)


def test_helios_epoch_fixture():
    t = load_trace(FIXTURES / "helios_epoch.csv")
    assert [j.job_id for j in t.jobs] == ["101", "102", "104", "105"]
    assert [j.submit_time for j in t.jobs] == [0.0, 93.0, 293.0, 393.0]
    assert t.jobs[2].num_gpus == 8 and t.jobs[2].duration_s == 60.0


# -- itp -----------------------------------------------------------------------------------------

def test_itp_raw_fixture():
    p = FIXTURES / "itp_raw.csv"
    assert detect_format(p) == "itp"
    t = load_trace(p)
    assert len(t) == 6
    assert (t.jobs[0].job_id, t.jobs[0].submit_time, t.jobs[0].num_gpus, t.jobs[0].duration_s) == \
        ("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", 0.0, 1, 600.0)
    assert (t.jobs[-1].submit_time, t.jobs[-1].duration_s) == (19880.0, 1200.0)
    assert all(j.job_type == "" and j.deadline == 0 for j in t.jobs)


def test_itp_elasticflow_fixture():
    t = load_trace(FIXTURES / "itp_elasticflow.csv", "itp")
    bert = [j for j in t.jobs if j.job_type == "bert"][0]
    assert (bert.submit_time, bert.deadline, bert.batch_size, bert.num_gpus, bert.duration_s) == \
        (16566.0 - 120.0, 21347.0 - 120.0, 64, 4, 3890.0)
    assert bert.total_steps == 0


# -- pai -----------------------------------------------------------------------------------------

def test_pai_headerless_task_table():
    p = FIXTURES / "pai_task_table.csv"
    assert detect_format(p) == "pai"
    t = load_trace(p)
    assert [j.job_id for j in t.jobs] == ["6d0b44bc1d9f5d1e9a6c3d7a/worker",
                                          "a9c0ee5c21a3f8d7b6e5a4c3/PyTorchWorker",
                                          "4f057009a5d481acec67b088/tensorflow",
                                          "c3e4f5a6b7c8d9e0f1a2b3c4/tensorflow"]
    worker, torch, tf_half, tf_quarter = t.jobs
    assert (worker.num_gpus, worker.gpu_types, worker.duration_s, worker.cpus, worker.mem_gb) == \
        (2, ("v100",), 3600.0, 16.0, 80.0)
    assert (torch.num_gpus, torch.gpu_types, torch.submit_time) == (8, ("v100m32",), 1500.0)
    assert (tf_half.num_gpus, tf_half.gpu_fraction, tf_half.gpu_types) == (1, 0.5, ())
    assert (tf_quarter.num_gpus, tf_quarter.gpu_fraction, tf_quarter.gpu_types) == (1, 1.0, ("p100",))
    assert any("2 rows without a GPU and 2 without start and end times" in n for n in t.notes)


def test_pai_with_header():
    t = load_trace(FIXTURES / "pai_with_header.csv")
    assert t.format == "pai" and [j.job_id for j in t.jobs] == \
        ["j01/worker", "j02/worker", "j03/tensorflow", "j05/worker"]
    j01, j02, j03, j05 = t.jobs
    assert j01.user == "u7a1" and j01.gpu_types == ("v100",) and j01.duration_s == 300.0
    assert j02.gpu_fraction == 0.5 and j02.gpu_types == ("t4",)
    assert j03.num_gpus == 8 and j03.gpu_types == ()
    assert j05.num_gpus == 2  # ceil(50 * 3 / 100)


def test_pai_job_table_is_explained():
    p = FIXTURES / "pai_job_table.csv"
    assert detect_format(p) == "pai"
    with pytest.raises(QuantaError, match="pai_job_table") as e:
        load_trace(p)
    assert "pai_job_table.csv:1" in str(e.value)


# -- max_jobs ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["philly", "gavel-msr", "sia-philly-1", "tiresias-60", "openb"])
def test_max_jobs_keeps_the_earliest(name):
    full = load_trace(sample_path(name))
    head = load_trace(sample_path(name), max_jobs=7)
    assert len(head) == 7
    assert [j.job_id for j in head.jobs] == [j.job_id for j in full.jobs[:7]]
    assert head.jobs[0].submit_time == 0.0
    assert any("max_jobs" in n for n in head.notes)
    assert len(load_trace(sample_path(name), max_jobs=10**6)) == len(full)


@pytest.mark.parametrize("bad", [0, -3, 2.5])
def test_max_jobs_must_be_positive(bad):
    with pytest.raises(QuantaError, match="max_jobs"):
        load_trace(sample_path("tiresias-60"), max_jobs=bad)


def test_rubick_base_workload():
    t = load_trace(sample_path("rubick-base"))
    assert t.format == "rubick" and len(t) == 406
    first = t.jobs[0]
    assert (first.job_id, first.num_gpus, first.job_type, first.plan) == ("vit-0", 2, "vit", "zero-dp")
    assert first.duration_s == pytest.approx(3163.091667) and first.reference_gpu == "a800"
    assert first.cpus == 16 and not first.guaranteed
    assert {j.job_type for j in t.jobs} == {"gpt2", "bert", "t5", "roberta", "llama7", "llama30", "vit"}
    assert_sorted_and_rebased(t)


def test_rubick_sla_flag(tmp_path):
    p = write(tmp_path, "w.csv", "name,submission_time,duration,application,num_gpus,num_cpus,bandwidth,"
              "exec_plan,steps,is_sla\na,0,10,bert,2,16,0,ga,100,1\nb,5,10,bert,x,16,0,ga,100,0\n")
    with pytest.raises(QuantaError) as e:
        load_trace(p)
    assert "w.csv:3" in str(e.value) and "num_gpus" in str(e.value)


def test_jobspec_with_is_dataclasses_replace():
    """JobSpec.with_ sets the slots directly (speed); it gives what dataclasses.replace gives,
    stays frozen and refuses a field the spec does not have."""
    import dataclasses

    from quanta.model.job import JobSpec
    j = JobSpec("a", 1.0, 2, "resnet50", gpu_types=("v100",), batch_size=64)
    for ch in ({}, {"submit_time": 5.0}, {"job_type": "bert", "total_steps": 9.0, "phase": 2}):
        got, want = j.with_(**ch), dataclasses.replace(j, **ch)
        assert got == want and hash(got) == hash(want) and repr(got) == repr(want)
    with pytest.raises(dataclasses.FrozenInstanceError):
        j.with_(submit_time=2.0).submit_time = 3.0
    with pytest.raises(TypeError, match="no field 'bogus'"):
        j.with_(bogus=1)


def test_repeated_job_ids_get_a_suffix_no_job_has(tmp_path):
    """('a', 'a', 'a#2': the second 'a' became 'a#2' too, and the run stopped on a traceback.)"""
    p = write(tmp_path, "t.csv", "job_id,submit_time_s,num_gpus,duration_s\n"
                                 "a,0,1,10\na,5,1,20\na#2,7,1,30\na,9,1,5\nb,9,1,5\nb,9,1,5\n")
    tr = load_trace(p)
    assert [j.job_id for j in tr.jobs] == ["a", "a#3", "a#2", "a#4", "b", "b#2"]
    assert "3 repeated job ids made unique with a '#<n>' suffix" in tr.notes


def test_a_run_cut_by_max_jobs_says_so_and_that_the_traces_notes_count_all(tmp_path):
    """A 20-job run of a 160-job Pollux workload listed the applications of all 160 and never
    said it was cut."""
    from quanta.perf.catalog_model import CatalogModel
    from quanta.workloads.builder import build_workload
    p = write(tmp_path, "w.csv", "name,time,application,num_replicas,batch_size\n" +
              "".join(f"j{i},{i},{'bert' if i < 2 else 'cifar10'},1,128\n" for i in range(5)))
    tr = load_trace(p)
    wl = build_workload(tr, CatalogModel(), max_jobs=2)
    assert len(wl.specs) == 2 and "application: cifar10 3, bert 2" in tr.notes
    assert "kept the first 2 of the trace's 5 jobs by submit time (max jobs); the notes above " \
           "count all 5" in wl.notes
    assert not any("kept the first" in n for n in build_workload(tr, CatalogModel()).notes)


def test_jobs_submitted_together_keep_the_traces_order(tmp_path):
    """Ties in submit time in the trace's order (docs/sweeps.md: arrival ranks, ties by trace
    order), as the reference simulators' stable sorts leave them: by job id as text, job "10"
    went before job "9", and FIFO ran them so."""
    import quanta
    p = tmp_path / "t.csv"
    p.write_text("job_id,submit_time_s,num_gpus,duration_s\n9,0,1,100\n10,0,1,100\n2,0,1,100\n"
                 "1,50,1,100\n")
    tr = load_trace(p, "normalized")
    assert [j.job_id for j in tr.jobs] == ["9", "10", "2", "1"]
    assert [j.job_id for j in load_trace(p, "normalized", max_jobs=2).jobs] == ["9", "10"]
    sim = quanta.simulate(str(p), "v100:1x1", ["fifo"])
    starts = sim.jobs.sort_values("start_s")["job_id"].astype(str).tolist()
    assert starts == ["9", "10", "2", "1"]
