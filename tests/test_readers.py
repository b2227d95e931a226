"""Trace readers: every format on real (bundled) data or hand-made fixtures, detection, errors."""

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


# -- bad input -----------------------------------------------------------------------------------

NORMALIZED_HEAD = "job_id,submit_time_s,num_gpus,duration_s\n"

BAD_FILES = [
    # (format, file name, content, line, field)
    ("normalized", "n.csv", NORMALIZED_HEAD + "a,0,1,10\nb,5,two,10\n", 3, "num_gpus"),
    ("normalized", "n.csv", NORMALIZED_HEAD + "a,0,1,10\nb,5,1\n", 3, "duration_s"),
    ("normalized", "n.csv", NORMALIZED_HEAD + "a,0,1,10\n\nb,5,1,-4\n", 4, "duration_s"),
    ("normalized", "n.csv", "job_id,submit_time_s,duration_s\na,0,10\n", 1, "num_gpus"),
    ("normalized", "n.csv", "job_id,submit_time_s,num_gpus,duration_s,num_gpus\na,0,1,10,2\n", 1,
     "num_gpus"),                                            # a column twice: it used the first
    ("philly", "p.csv", PHILLY_HEAD + "2017-13-45 07:33:10,1896.0,1,1896.0,6c71a0\n", 6, "timestamp"),
    ("philly", "p.csv", PHILLY_HEAD + "2017-11-08 07:33:10,-1.0,1,1896.0,6c71a0\n", 6, "duration"),
    ("philly", "p.csv", PHILLY_HEAD + "2017-11-08 07:33:10,1.0,x,1896.0,6c71a0\n", 6, "num_gpus"),
    ("gavel", "g.trace", "LM (batch size 5)\tcmd\tlm\t-n\t1\t100\t1\t1\t-1\t0\n"
                         "LM (batch size 5)\tcmd\tlm\t-n\t1\t100\tfour\t1\t-1\t0\n", 2, "scale_factor"),
    ("gavel", "g.trace", "LM (batch size 5)\tcmd\t-n\t1\t100\t0\t1\n"
                         "LM (batch size 5)\tcmd\t-n\t1\t100\n", 2, "arrival_time"),
    ("pollux", "w.csv", "name,time,application,num_replicas,batch_size\nx,1,bert,abc,32\n", 2,
     "num_replicas"),
    ("tiresias", "t.csv", "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
                          "0,1,0,606,vgg19,-164,30\n", 2, "duration"),
    ("openb", "o.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
                       "creation_time,deletion_time,scheduled_time\n"
                       "p0,1000,1024,1,1000,,LS,Running,0,5,10\n", 2, "deletion_time"),
    ("helios", "h.csv", "job_id,user,vc,jobname,gpu_num,cpu_num,node_num,state,submit_time,"
                        "start_time,end_time,duration,queue\n"
                        "1,u,vc,j,1,8,1,COMPLETED,yesterday,,,60,0\n", 2, "submit_time"),
    ("itp", "i.csv", "job_id,submission_time,duration,num_gpu\nx,10,60,1\ny,20,60,1.5\n", 3, "num_gpu"),
    ("rubick", "r.csv", "name,submission_time,duration,application,num_gpus,num_cpus,bandwidth,"
                        "exec_plan,steps,is_sla\nj,0,100,vit,1,4,0,warp-drive,0,0\n", 2, "exec_plan"),
    ("rubick", "r.csv", "name,submission_time,duration,application,num_gpus,num_cpus,bandwidth,"
                        "exec_plan,steps,is_sla\nj,0,100,vit,1,4,0,,0,1\nk,0,100,vit,1,4,0,,0,2\n", 3,
     "is_sla"),                                   # (2 ran as best-effort, unsaid)
    ("pai", "pai.csv", "j1,worker,1,Terminated,100.0,50.0,600.0,29.0,100.0,V100\n", 1, "end_time"),
    ("pai", "pai.csv", "j1,worker,1,Terminated,100.0,500.0,600.0,29.0,lots,V100\n", 1, "plan_gpu"),
]


@pytest.mark.parametrize("fmt,filename,content,line,field", BAD_FILES)
def test_bad_rows_name_file_line_and_field(tmp_path, fmt, filename, content, line, field):
    p = write(tmp_path, filename, content)
    for how in (fmt, "auto"):
        with pytest.raises(QuantaError) as e:
            load_trace(p, how)
        msg = str(e.value)
        assert f"{p}:{line}" in msg, msg
        assert f"'{field}'" in msg, msg
        assert (e.value.source, e.value.line, e.value.field) == (str(p), line, field)


@pytest.mark.parametrize("fmt,content,line,why", [
    # a quote never closed took every later line into one field: with it in a column no job
    # reads, the later jobs were lost without a word (exit 0, 2 jobs of 4)
    ("normalized", "job_id,submit_time_s,num_gpus,duration_s,vc\na,0,1,10,x\nb,5,1,10,\"x\n"
     "c,6,1,10,y\nd,7,1,10,y\n", 3, "a quoted field is never closed"),
    ("normalized", NORMALIZED_HEAD + "a,0,1,10\n\"b,5,1,10\nc,6,1,10\nd,7,1,10\n", 3,
     "a quoted field is never closed"),
    ("philly", PHILLY_HEAD + '2017-11-08 07:33:10,1896.0,1,1896.0,"6c71a0\n'
     "2017-11-08 07:34:10,1896.0,1,1896.0,6c71a0\n", 6, "a quoted field is never closed"),
    ("normalized", NORMALIZED_HEAD + 'a,0,1,10\n"b"c,5,1,10\n', 3, "',' expected after '\"'"),
])
def test_quotes_that_do_not_close_name_their_line(tmp_path, fmt, content, line, why):
    p = write(tmp_path, "t.csv", content)
    for how in (fmt, "auto"):
        with pytest.raises(QuantaError) as e:
            load_trace(p, how)
        assert str(e.value) == f"{p}:{line}: malformed CSV: " + why + \
            (" (its quote opens the row on this line)" if "never" in why else "")


def test_a_byte_that_is_no_text_names_its_line(tmp_path):
    """The decoder reads ahead of the rows: the line is found again in the file's bytes."""
    p = tmp_path / "n.csv"
    p.write_bytes((NORMALIZED_HEAD + "a,0,1,10\n" * 3).encode() + b"b,5,1,1\xff0\nc,6,1,10\n")
    with pytest.raises(QuantaError, match="not a text file") as e:
        load_trace(p, "normalized")
    assert (e.value.source, e.value.line) == (str(p), 5)


def test_rows_without_a_job_id_are_named_and_noted(tmp_path):
    tr = load_trace(write(tmp_path, "n.csv", NORMALIZED_HEAD + ",0,1,10\nb,5,1,10\n"), "normalized")
    assert [j.job_id for j in tr.jobs] == ["normalized-000000", "b"]
    assert "1 jobs without a job_id: named normalized-NNNNNN by their row" in tr.notes


def test_a_row_longer_than_the_header_is_refused_trailing_empty_fields_are_not(tmp_path):
    p = write(tmp_path, "n.csv", NORMALIZED_HEAD + "a,0,1,10\nb,5,1,10,7\n")
    with pytest.raises(QuantaError) as e:        # (the 7 was dropped without a word)
        load_trace(p, "normalized")
    assert f"{p}:3" in str(e.value) and "row has 5 fields, the header 4" in str(e.value)
    p = write(tmp_path, "m.csv", NORMALIZED_HEAD + "a,0,1,10,\nb,5,1,10,,\n")
    assert len(load_trace(p, "normalized").jobs) == 2


def _corrupted_variants(path: Path):
    """The file with each field of its second data row replaced by junk, one at a time."""
    lines = path.read_text().splitlines()
    header = 0 if path.suffix == ".trace" or path.name.startswith("pai_task") else 1
    target = header + 1
    sep = "\t" if "\t" in lines[target] else ","
    fields = lines[target].split(sep)
    for i in range(len(fields)):
        for junk in ("abc", "-5", "", "nan"):
            bad = fields.copy()
            bad[i] = junk
            yield lines[:target] + [sep.join(bad)] + lines[target + 1:]
    yield lines[:target] + [sep.join(fields[:2])] + lines[target + 1:]


@pytest.mark.parametrize("path", [
    sample_path("tiresias-60"), sample_path("gavel-small"), sample_path("sia-philly-1"),
    FIXTURES / "helios_cluster_log.csv", FIXTURES / "itp_elasticflow.csv",
    FIXTURES / "pai_task_table.csv", FIXTURES / "pai_with_header.csv",
], ids=lambda p: p.name)
def test_junk_fields_give_quanta_errors_only(tmp_path, path):
    fmt = detect_format(path)
    for n, lines in enumerate(_corrupted_variants(path)):
        p = write(tmp_path, f"bad{n}{path.suffix}", "\n".join(lines) + "\n")
        try:
            load_trace(p, fmt)
        except QuantaError as e:
            assert str(p) in str(e)


def test_openb_and_normalized_junk(tmp_path):
    for name in ("openb", "philly"):
        lines = sample_path(name).read_text().splitlines()[:6]
        fields = lines[2].split(",")
        for i in range(len(fields)):
            bad = fields.copy()
            bad[i] = "abc"
            p = write(tmp_path, f"{name}{i}.csv", "\n".join(lines[:2] + [",".join(bad)] + lines[3:]))
            try:
                load_trace(p)
            except QuantaError as e:
                assert f"{p}:3" in str(e)


def test_unknown_format(tmp_path):
    p = write(tmp_path, "n.csv", NORMALIZED_HEAD + "a,0,1,10\n")
    with pytest.raises(QuantaError) as e:
        load_trace(p, "slurm")
    assert "slurm" in str(e.value) and "philly" in str(e.value) and "normalized" in str(e.value)


def test_undetectable_file(tmp_path):
    p = write(tmp_path, "mystery.csv", "a,b,c\n1,2,3\n")
    with pytest.raises(QuantaError) as e:
        detect_format(p)
    msg = str(e.value)
    assert str(p) in msg and all(f in msg for f in ALL_FORMATS)
    with pytest.raises(QuantaError):
        load_trace(p)


@pytest.mark.parametrize("fmt", sorted(ALL_FORMATS) + ["auto"])
def test_empty_file(tmp_path, fmt):
    p = write(tmp_path, "empty.csv", "")
    with pytest.raises(QuantaError, match="empty") as e:
        load_trace(p, fmt)
    assert str(p) in str(e.value)
    blank = write(tmp_path, "blank.csv", "\n  \n")
    with pytest.raises(QuantaError, match="empty"):
        load_trace(blank, fmt)


def test_header_only_and_missing_file(tmp_path):
    p = write(tmp_path, "h.csv", NORMALIZED_HEAD)
    with pytest.raises(QuantaError, match="no jobs"):
        load_trace(p)
    with pytest.raises(QuantaError, match="no such trace file") as e:
        load_trace(tmp_path / "missing.csv", "philly")
    assert "missing.csv" in str(e.value) and "tiresias-60" in str(e.value)
    with pytest.raises(QuantaError, match="not a file"):
        load_trace(tmp_path, "philly")


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


HELIOS_HEAD = "job_id,user,vc,jobname,gpu_num,cpu_num,node_num,state,submit_time,start_time," \
              "end_time,duration,queue\n"
PAI_ROW = "j1,t1,1,Terminated,1000,1100,600,29.3,100,V100\n"
GAVEL_ROW = "ResNet-18 (batch size 16)\t1\t1\t1\t1\t1000\t1\t1\t-1\t0\n"


@pytest.mark.parametrize("fmt,content,line,field,message", [
    # a column's times given two ways were taken both ways: seconds among dates counted from
    # 1970, a time zone among naive times shifted by it (makespans of decades, no word)
    ("philly", PHILLY_HEAD + "-5,1896.0,1,1896.0,6c71a0\n", 6, "timestamp",
     "'-5' is seconds, but the column's first value (line 2) is a date-time"),
    ("helios", HELIOS_HEAD + "1,u,v,j,1,4,1,COMPLETED,2020-04-01 00:00:07,2020-04-01 00:00:08,"
     "2020-04-01 02:10:08,7800,1\n2,u,v,j,1,4,1,COMPLETED,2020-04-01 00:01:00+05:00,"
     "2020-04-01 00:01:01,2020-04-01 00:05:31,240,1\n", 3, "submit_time",
     "is a date-time with a time zone, but the column's first value (line 2) is a date-time"),
    ("pai", "j1,t1,1,Terminated,1000,2020-01-01 00:00:00,600,29.3,100,V100\n", 1, "end_time",
     "'2020-01-01 00:00:00' is a date-time, but the first start_time/end_time (line 1) is "
     "seconds: give every time one way"),
    ("helios", HELIOS_HEAD + "1,u,v,j,1,4,1,COMPLETED,2020-04-01 00:00:07,100,"
     "2020-04-01 02:10:08,,1\n", 2, "start_time", "'100' is seconds, but the first "
     "start_time/end_time (line 2) is a date-time"),
    # a GPU request beyond int64 was a traceback (OverflowError); half an instance was taken
    ("pai", "j1,t1,10000000,Terminated,1000,1100,600,29.3,1e15,V100\n", 1, "plan_gpu",
     "is 1e+20 GPUs, above the maximum 1e+15"),
    ("pai", "j1,t1,0.5,Terminated,1000,1100,600,29.3,100,V100\n", 1, "inst_num",
     "'0.5' is not a whole number"),
    # a headerless row with more fields than the format's was read
    ("pai", PAI_ROW + PAI_ROW.replace("V100\n", "V100,extra\n"), 2, None,
     "row has 11 fields, the pai format's columns 10"),
    # the fast path for Gavel's rows took a weight or an SLO of 1e308 (the field-by-field
    # path refuses numbers above 1e15)
    ("gavel", GAVEL_ROW.replace("\t1\t-1\t0", "\t1e308\t-1\t0"), 1, "priority_weight",
     "1e308 is above the maximum 1e+15"),
    ("gavel", GAVEL_ROW.replace("\t-1\t0", "\t1e308\t0"), 1, "SLO", "1e308 is above the maximum"),
    # a bad GPU share on a multi-GPU pod was never read
    ("openb", "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
     "deletion_time,scheduled_time\np,1000,1024,2,abc,,BE,Running,0,100,10\n", 2, "gpu_milli",
     "'abc' is not a number"),
    # an empty application drew a model, unsaid (Pollux's reader refuses it)
    ("rubick", "name,submission_time,duration,application,num_gpus\nj,0,100,,1\n", 2,
     "application", "empty application"),
    # a NUL or other control character in a job id went into every output file
    ("normalized", NORMALIZED_HEAD + "a,0,1,10\nb\x01c,5,1,10\n", 3, "job_id",
     "job id 'b\\x01c' holds a control character"),
    ("pollux", "name,time,application,num_replicas,batch_size\nj\x00k,0,bert,1,128\n", 2, "name",
     "holds a control character"),
    # a 3D plan of 48 GPUs on a 3-GPU job ran on 3, unsaid
    ("rubick", "name,submission_time,duration,application,num_gpus,num_cpus,bandwidth,exec_plan,"
     "steps,is_sla\nt5-1,0,3312,t5,3,32,0,344,8109,0\n", 2, "exec_plan",
     "plan 344 (PP 3 x TP 4 x DP 4) uses 48 GPUs, the job asks for 3"),
])
def test_values_a_reader_took_or_crashed_on_are_one_line_errors(tmp_path, fmt, content, line,
                                                                field, message):
    p = write(tmp_path, "t.trace" if fmt == "gavel" else "t.csv", content)
    with pytest.raises(QuantaError) as e:
        load_trace(p, fmt)
    assert message in str(e.value), str(e.value)
    assert (e.value.source, e.value.line, e.value.field) == (str(p), line, field)


def test_an_eight_digit_number_of_seconds_is_not_read_as_a_date(tmp_path):
    """20000101 in a Philly timestamp column of seconds was read as 1 January 2000 (Python
    3.11's fromisoformat takes the ISO basic form): seconds, as the column's other values."""
    p = write(tmp_path, "t.csv", "timestamp,duration,num_gpus\n0,100,1\n10000000,100,1\n"
                                 "20000101,100,1\n")
    assert [j.submit_time for j in load_trace(p, "philly").jobs] == [0.0, 1e7, 20000101.0]


@pytest.mark.parametrize("fmt,content,field", [
    ("tiresias", "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
                 "1,1000,0,10,resnet50,100,10\n", "num_gpu"),
    ("pollux", "name,time,application,num_replicas,batch_size\nj,0,cifar10,1000,128\n",
     "num_replicas"),
    ("gavel", GAVEL_ROW.replace("\t1\t1\t-1\t0", "\t1000\t1\t-1\t0"), "scale_factor"),
    ("tiresias", "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
                 "1,1,0,10,resnet50,1e300,10\n", "duration"),
])
def test_errors_after_reading_name_the_files_own_column(tmp_path, fmt, content, field):
    """A job too big for the cluster, or a duration past the maximum, found after the reader:
    the error named the JobSpec's field (num_gpus, duration_s), not the file's column."""
    import quanta
    p = write(tmp_path, "t.trace" if fmt == "gavel" else "t.csv", content)
    with pytest.raises(QuantaError) as e:
        quanta.simulate(str(p), "v100:4x8", ["fifo"], format=fmt)
    assert (e.value.source, e.value.line, e.value.field) == (str(p), 2 - (fmt == "gavel"), field)


def test_a_tab_separated_header_of_seven_columns_is_not_taken_for_gavel(tmp_path):
    """Any first line of 7 or 10 tab-separated fields was Gavel's: a TSV tiresias file failed
    with "field 'arrival_time': 'duration' is not a number". A Gavel line's numbers must be."""
    p = write(tmp_path, "t.txt", "job_id\tnum_gpu\tsubmit_time\titerations\tmodel_name\tduration"
                                 "\tinterval\n1\t1\t0\t10\tresnet50\t100\t10\n")
    with pytest.raises(QuantaError, match="cannot tell the trace format from the first line"):
        load_trace(p)
    p = write(tmp_path, "g.txt", GAVEL_ROW)                   # Gavel's own, named otherwise
    assert detect_format(p) == "gavel" and len(load_trace(p).jobs) == 1


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
