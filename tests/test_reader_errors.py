"""Trace readers on bad input: every problem with a user's file is one QuantaError naming the
file, the line and the column (the file's own name for it), never a traceback and never a job
lost or a time misread without a word. Reading good files: test_readers.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_readers import ALL_FORMATS, FIXTURES, PHILLY_HEAD, write

from quanta.errors import QuantaError
from quanta.workloads.formats import detect_format, load_trace
from quanta.workloads.samples import sample_path

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
