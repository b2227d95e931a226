"""sia-sim's job agents: each Sia or Pollux job runs at the batch its own learned model picks
(quanta/worlds/sia_agents.py; sia-simulator job.py:317-412)."""

import numpy as np

from quanta.model.presets import resolve_cluster
from quanta.perf.base import ADAPTIVE_BATCH
from quanta.model.job import JobSpec
from quanta.perf.catalog_model import CatalogModel
from quanta.perf.pollux_online import MERGED, fit_points, pollux_batch
from quanta.runner import build_policy, load_any_trace
from quanta.sim.engine import Simulator
from quanta.workloads.builder import build_workload
from quanta.worlds import get_world
from quanta.worlds.sia_agents import LearningJobs


def _world_perf():
    return get_world("sia-sim").perf(CatalogModel())


def _cifar(job_id="c0"):
    return JobSpec(job_id=job_id, submit_time=0.0, job_type="cifar10", num_gpus=4, batch_size=2048)


def test_a_job_runs_at_the_default_batch_until_it_has_trained_then_at_its_models_choice():
    perf = _world_perf()
    agents = LearningJobs(perf, merged=True)
    job = _cifar()
    p = perf.base.base.goodput.catalog["cifar10"].profile("t4")
    # no model yet: max(M0, K x min_local) split over the 4 GPUs (job.py:355-358)
    first = agents.running_rate(job, "t4", 4, 1)
    default = perf.base.split("cifar10", "t4", (4,), max(p.init_batch, 4 * p.min_local))
    assert agents.pending["c0"][1] == (1, 4, default[0])
    # a segment spent restoring teaches nothing
    agents.segment_end(job, trained=False)
    assert agents.learned(job) is None
    agents.running_rate(job, "t4", 4, 1)
    agents.segment_end(job, trained=True)
    profiles, grad = agents.learned(job)
    assert list(profiles) == [MERGED] and len(profiles[MERGED]) == 1
    # now the fitted model picks the batch, within the placement's largest atomic batch
    fit = fit_points(profiles[MERGED])
    most = perf.base._table("cifar10", "t4").max_local((4,))
    m, s = pollux_batch(fit, p.init_batch, 1, 4, p.max_batch, p.min_local, most, grad)
    tuned = agents.running_rate(job, "t4", 4, 1)
    assert agents.pending["c0"][1] == (1, 4, m)
    # and runs at the measured step time of that batch, at its gradient statistics' gain,
    # slowed by cifar10's calibration factor (1.8)
    step, sync = perf.base.step_sync("cifar10", "t4", (4,), m)
    gain, _ = perf.base.gain(job, "cifar10", 4 * m * (s + 1))
    assert tuned == gain / (step + (step - sync) * s) / 1.8
    assert first > 0
    # what an agent runs at never beats the world's best batch by more than rounding
    best = perf.rate_with(job, "t4", 4, 1, True, ADAPTIVE_BATCH)
    assert tuned <= best * 1.02


def test_under_sia_a_job_keeps_one_profile_per_gpu_type():
    perf = _world_perf()
    agents = LearningJobs(perf, merged=False)
    job = _cifar()
    agents.running_rate(job, "t4", 4, 1)
    agents.segment_end(job, trained=True)
    assert list(agents.learned(job)[0]) == ["t4"]
    # its first run on A100s: no model there, the default batch again (job.py:337-338)
    agents.running_rate(job, "a100", 4, 1)
    p = perf.base.base.goodput.catalog["cifar10"].profile("a100")
    default = perf.base.split("cifar10", "a100", (4,), max(p.init_batch, 4 * p.min_local))
    assert agents.pending["c0"][1] == (1, 4, default[0])
    # under Pollux the T4 profile stands for every type
    merged = LearningJobs(perf, merged=True)
    merged.running_rate(job, "t4", 4, 1)
    merged.segment_end(job, trained=True)
    merged.running_rate(job, "a100", 4, 1)
    profiles, grad = merged.learned(job)
    most = perf.base._table("cifar10", "a100").max_local((4,))
    m, _s = pollux_batch(fit_points(profiles[MERGED]), p.init_batch, 1, 4, p.max_batch,
                         p.min_local, most, grad)
    assert merged.pending["c0"][1] == (1, 4, m)


def _simulate(tmp_path, rows, policy, until=None, cluster="t4:1x4"):
    w = get_world("sia-sim")
    p = tmp_path / "w.csv"
    p.write_text("name,time,application,num_replicas,batch_size\n" + "".join(f"{r}\n" for r in rows))
    perf = w.perf(CatalogModel())
    wl = build_workload(load_any_trace(str(p), "auto", 0), perf, keep_clock=True)
    run_perf = w.perf_for_run(perf, policy)
    sim = Simulator(w.jobs_for(policy, wl.specs), resolve_cluster(cluster),
                    build_policy(policy, w, 0), run_perf, restart=w.restart(30.0), until=until,
                    **w.engine_options())
    return sim.run(), run_perf


def test_the_engine_teaches_each_agent_after_every_round_and_the_scheduler_reads_it(tmp_path):
    res, agents = _simulate(tmp_path, ["cifar10-0,0,cifar10,4,2048"], "pollux")
    assert res.table.state[0] != 0 and np.isfinite(res.table.end[0])
    prof = agents.points["cifar10-0"][MERGED]
    # the batch is re-tuned on a placement it keeps: several atomic batches on one (nodes, GPUs)
    per_shape: dict[tuple, set] = {}
    for nodes, gpus, m in prof:
        per_shape.setdefault((nodes, gpus), set()).add(m)
    assert max(len(v) for v in per_shape.values()) >= 2
    # Pollux's scheduler knows the job through exactly the profile the job learned
    assert res.policy_state["points"][(0, MERGED)] == prof


def test_a_segment_spent_restoring_adds_no_point(tmp_path):
    # bert starts at the round at 60 s (none at 0 under sia-sim, as in Sia's simulator) and
    # restores for 120 s (rounds every 60 s):
    # the rounds at 120 and 180 s end segments without training, the one at 240 s one with
    res, agents = _simulate(tmp_path, ["bert-0,0,bert,1,384"], "pollux", until=230.0)
    assert res.table.first_start[0] == 60.0
    assert "bert-0" not in agents.points
    _res, agents = _simulate(tmp_path, ["bert-0,0,bert,1,384"], "pollux", until=250.0)
    assert len(agents.points["bert-0"][MERGED]) == 1


def test_runs_with_agents_are_repeatable(tmp_path):
    rows = ["cifar10-0,0,cifar10,4,2048", "deepspeech2-1,30,deepspeech2,6,320",
            "bert-2,90,bert,8,384"]
    a, _ = _simulate(tmp_path, rows, "sia", cluster="t4:6x4,rtx:3x8,a100:2x8")
    b, _ = _simulate(tmp_path, rows, "sia", cluster="t4:6x4,rtx:3x8,a100:2x8")
    assert np.array_equal(a.table.end, b.table.end)
