"""The simulator's performance model sends each job to the model that knows its type."""

import pytest

from quanta.model import JobSpec
from quanta.perf.base import Provenance
from quanta.perf.catalog_model import CatalogModel


def test_dispatch_by_job_type_and_plan():
    m = CatalogModel()
    assert m.model_for(JobSpec("a", 0, 1, "cifar10")) is m.goodput
    assert m.model_for(JobSpec("b", 0, 1, "bert")) is m.goodput              # Pollux's BERT
    assert m._plan is None                                                    # not built yet
    assert m.model_for(JobSpec("c", 0, 8, "bert", plan="zero-dp")) is m.plan  # Rubick's BERT
    assert m.model_for(JobSpec("d", 0, 8, "gpt2")) is m.plan                  # only Rubick has it
    assert m.model_for(JobSpec("e", 0, 1, "ResNet-18 (batch size 32)")) is m.table
    assert m.model_for(JobSpec("f", 0, 1, "vgg19")) is m.table                # unknown: estimated
    assert m.provenance(JobSpec("f", 0, 1, "vgg19"), "v100") is Provenance.ESTIMATED


def test_rates_come_from_the_chosen_model_and_never_zero_on_known_types():
    m = CatalogModel()
    jobs = [JobSpec("a", 0, 2, "cifar10"), JobSpec("e", 0, 1, "ResNet-18 (batch size 32)"),
            JobSpec("r", 0, 8, "gpt2", plan="zero-dp", reference_gpu="a800")]
    mat = m.rate_matrix(jobs, ["v100", "a800"])
    assert mat[0, 0] == pytest.approx(m.goodput.rate(jobs[0], "v100", 2))
    assert mat[1, 0] == pytest.approx(m.table.rate(jobs[1], "v100", 1))
    assert mat[2, 1] == pytest.approx(m.plan.rate(jobs[2], "a800", 8))
    assert (mat > 0).all()


def test_only_table_jobs_share_gpus():
    m = CatalogModel()
    a, b = JobSpec("a", 0, 1, "cifar10"), JobSpec("b", 0, 1, "ResNet-18 (batch size 32)")
    assert m.shared_rate(a, b, "v100", 1) == 0.0 and m.shared_rate(b, a, "v100", 1) == 0.0
    c = JobSpec("c", 0, 1, "ResNet-18 (batch size 16)")
    assert m.shared_rate(b, c, "v100", 1) == pytest.approx(m.table.shared_rate(b, c, "v100", 1))


def test_pollux_jobs_get_their_work_from_the_validation_profile():
    import csv

    from quanta.paths import PROFILES_DIR
    from quanta.workloads.builder import build_workload
    from quanta.workloads.formats import load_trace
    m = CatalogModel()
    trace = load_trace("sia-philly-1")
    wl = build_workload(trace, m, seed=0)
    cifar = next(s for s in wl.specs if s.job_type == "cifar10")
    # Sia's end of training: the last epoch boundary common to every validation run (the least
    # progress any run reports there; applications.py get_progress)
    last = min(float(list(csv.DictReader(open(f)))[-1]["progress"])
               for f in (PROFILES_DIR / "sia_pollux" / "cifar10").glob("validation-*.csv"))
    assert cifar.total_steps == pytest.approx(last)   # ~100 epochs of M0
    assert cifar.duration_s == 0.0
    assert any("work to the target metric" in n for n in wl.notes)
    assert m.work_steps(JobSpec("x", 0, 1, "ResNet-18 (batch size 32)")) is None


def test_asking_about_a_job_without_a_goodput_model_fits_none():
    """goodput_profile / observe / atomic_throughput of a Gavel-catalog job answer None without
    fitting the goodput model's 30 profiles (~1.7 s: Sia's replica cap asked it of every job
    type and ran 35% slower on synthetic:3:300)."""
    from quanta.model import JobSpec
    from quanta.perf.catalog_model import CatalogModel
    cm = CatalogModel()
    job = JobSpec("a", 0.0, 1, "ResNet-50 (batch size 32)", total_steps=100.0)
    assert cm.goodput_profile(job, "v100") is None and cm.atomic_throughput(job, "v100") is None
    assert cm.observe(job, "v100", 1) is None
    assert cm._goodput is None
    assert cm.goodput_profile(JobSpec("b", 0.0, 1, "cifar10", total_steps=100.0), "v100") is not None
