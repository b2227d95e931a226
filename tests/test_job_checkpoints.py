"""The job SDK's checkpoints when their bookkeeping is damaged: a corrupt or missing manifest is
recovered from the checkpoint files themselves, a job whose checkpoints vanished fails with a clear
message (and says so to the scheduler in checkpoint-error.json), never a silent restart from step 0;
a bad progress report is refused by the SDK."""

import json

import pytest
import torch

from quanta.job import CHECKPOINT_ERROR, Allocation, CheckpointError, Job, read_json


def _model_opt(seed=0):
    torch.manual_seed(seed)
    m = torch.nn.Linear(4, 2)
    return m, torch.optim.SGD(m.parameters(), lr=0.1)


def _saved(tmp_path):
    job = Job(Allocation("j", tmp_path))
    m, opt = _model_opt()
    job.save(m, opt, 10)
    with torch.no_grad():
        m.weight.add_(1.0)
    job.save(m, opt, 20)
    return job, m.weight.detach().clone()


@pytest.mark.parametrize("damage", ["garbage", "missing", "empty", "not entries", "bad entry"])
def test_a_damaged_manifest_is_recovered_from_the_files(tmp_path, capsys, damage):
    job, w20 = _saved(tmp_path)
    manifest = tmp_path / "checkpoints" / "manifest.json"
    if damage == "missing":
        manifest.unlink()
    else:
        manifest.write_text({"garbage": "{not json", "empty": "[]", "not entries": '{"a": 1}',
                             "bad entry": '[{"file": "../../etc/passwd", "step": 1}]'}[damage])
    m2, opt2 = _model_opt(1)
    assert job.restore(m2, opt2) == 20 and torch.equal(m2.weight, w20)
    assert "recovering from the 2 checkpoint file(s)" in capsys.readouterr().err


def test_without_the_manifest_a_corrupt_file_is_still_detected(tmp_path, capsys):
    job, _ = _saved(tmp_path)
    ck = tmp_path / "checkpoints"
    (ck / "manifest.json").unlink()
    (ck / "step-000000020.pt").write_bytes((ck / "step-000000020.pt").read_bytes()[:-10])
    m2, opt2 = _model_opt(1)
    assert job.restore(m2, opt2) == 10                    # its digest file told
    (ck / "step-000000010.pt.sha256").unlink()           # no digest: verified by loading it
    assert job.restore(m2, opt2) == 10
    (ck / "step-000000010.pt").write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match="every checkpoint"):
        job.restore(m2, opt2)
    assert "every checkpoint" in read_json(tmp_path / CHECKPOINT_ERROR)["message"]


def test_vanished_checkpoints_fail_clearly_never_restart_from_0(tmp_path):
    job, _ = _saved(tmp_path)
    ck = tmp_path / "checkpoints"
    for f in ck.glob("step-*"):
        f.unlink()
    m2, opt2 = _model_opt(1)
    with pytest.raises(CheckpointError, match="unreadable|every checkpoint"):
        job.restore(m2, opt2)          # a manifest without files
    (ck / "manifest.json").unlink()
    assert job.restore(m2, opt2) == 0  # nothing at all, and the scheduler knew of nothing
    told = Job(Allocation("j", tmp_path, checkpoint_step=20))
    with pytest.raises(CheckpointError, match="saved a checkpoint at step 20"):
        told.restore(m2, opt2)
    assert "step 20" in read_json(tmp_path / CHECKPOINT_ERROR)["message"]


def test_progress_reports_only_finite_steps_and_the_last_checkpoint(tmp_path, capsys):
    job = Job(Allocation("j", tmp_path, report_every_s=0.0))
    m, opt = _model_opt()
    job.save(m, opt, 7)
    for bad in (float("nan"), float("inf"), -1, "12", None):
        job.report(bad, force=True)
        assert not (tmp_path / "progress.json").exists()
    assert capsys.readouterr().err.count("ignored") == 5
    job.report(9, force=True)
    prog = json.loads((tmp_path / "progress.json").read_text())
    assert prog["step"] == 9 and prog["checkpoint_step"] == 7
