"""The summary's JCT percentiles (quanta.report.metrics.percentile) are numpy.percentile's, to
the bit, without numpy's quantile machinery (which imports numpy.ma)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from quanta.report.metrics import percentile

finite = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False, allow_infinity=False)


@settings(max_examples=3000, deadline=None)
@given(st.lists(finite, min_size=1, max_size=80),
       st.one_of(st.sampled_from([0.0, 50.0, 95.0, 99.0, 100.0]),
                 st.floats(min_value=0.0, max_value=100.0)))
def test_equals_numpys_percentile(values, q):
    assert percentile(sorted(values), q) == float(np.percentile(np.array(values), q))


def test_on_job_completion_times():
    # repeated values (jobs finishing together) and the quantiles the summary reports
    rng = np.random.default_rng(3)
    for n in (1, 2, 3, 7, 100, 1001):
        jct = np.round(rng.exponential(7200.0, n), 3)
        jct[: n // 3] = jct[0]
        for q in (50, 95, 99):
            assert percentile(np.sort(jct).tolist(), q) == float(np.percentile(jct, q))
