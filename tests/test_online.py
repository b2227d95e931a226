"""Online refinement: measurements replace predictions and correct nearby ones."""

import pytest

from quanta.model import JobSpec
from quanta.perf.base import Provenance
from quanta.perf.online import OnlineModel
from quanta.perf.table import TableModel

JOB = JobSpec("j1", 0.0, 2, "ResNet-50 (batch size 64)")


def test_measurement_replaces_the_prediction_and_is_smoothed():
    base = TableModel()
    m = OnlineModel(base)
    predicted = base.rate(JOB, "v100", 2, 1)
    assert m.rate(JOB, "v100", 2, 1) == predicted
    m.observe(JOB, "v100", 2, 1, 0.8 * predicted)
    assert m.rate(JOB, "v100", 2, 1) == pytest.approx(0.8 * predicted)
    m.observe(JOB, "v100", 2, 1, 0.6 * predicted)
    assert m.rate(JOB, "v100", 2, 1) == pytest.approx(0.7 * predicted)      # EMA, alpha 0.5


def test_ratio_corrects_other_allocations_of_the_same_type_only():
    base = TableModel()
    m = OnlineModel(base)
    m.observe(JOB, "v100", 2, 1, 0.8 * base.rate(JOB, "v100", 2, 1))
    assert m.rate(JOB, "v100", 4, 1) == pytest.approx(0.8 * base.rate(JOB, "v100", 4, 1))
    assert m.rate(JOB, "k80", 2, 1) == pytest.approx(base.rate(JOB, "k80", 2, 1))
    other = JobSpec("j2", 0.0, 2, JOB.job_type)                      # per job, not per type
    assert m.rate(other, "v100", 2, 1) == pytest.approx(base.rate(other, "v100", 2, 1))


def test_provenance_turns_measured_only_where_observed():
    base = TableModel()
    m = OnlineModel(base)
    unknown = JobSpec("u", 0.0, 1, "vgg19")                           # the table only estimates it
    assert m.provenance(unknown, "v100") is Provenance.ESTIMATED
    m.observe(unknown, "v100", 1, 1, 2.5)
    assert m.provenance(unknown, "v100") is Provenance.MEASURED
    assert m.provenance(unknown, "k80") is Provenance.ESTIMATED


def test_rate_matrix_uses_measurements():
    base = TableModel()
    m = OnlineModel(base)
    m.observe(JOB, "p100", 2, 1, 3.0)
    mat = m.rate_matrix([JOB], ["v100", "p100"])
    assert mat[0, 1] == pytest.approx(3.0)
    assert mat[0, 0] == pytest.approx(base.rate(JOB, "v100", 2, 1))


def test_bad_measurements_are_ignored():
    m = OnlineModel(TableModel())
    m.observe(JOB, "v100", 2, 1, 0.0)
    m.observe(JOB, "v100", 0, 1, 5.0)
    assert m.measured(JOB, "v100", 2, 1) is None
