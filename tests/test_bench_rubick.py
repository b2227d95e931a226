"""bench/repro_rubick.py's `--artifact` with a policy's own parameters: each key once, the user's
value in place of the artifact's (a policy spec that names a key twice is refused)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from repro_rubick import ARTIFACT_PARAMS, with_params  # noqa: E402

from quanta.policies import make_policy  # noqa: E402


def test_artifact_parameters_with_the_users_own():
    spec = "rubick:" + with_params(ARTIFACT_PARAMS, "fill_node=false,release_3d=0")
    pol = make_policy(spec)                     # (refused before: fill_node given twice)
    assert pol.fill_node is False and pol.release_3d == 0 and pol.sla_admit == 1.5
    assert with_params(ARTIFACT_PARAMS, "") == ARTIFACT_PARAMS
