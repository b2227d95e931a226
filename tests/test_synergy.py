"""Synergy's CPU/host-memory sensitivity profiles, on the bundled data."""

import pytest

from quanta.perf.synergy import CPUS, MEM_GB, PROPORTIONAL, cpu_mem_factor, grids, model_of


def test_grid_points_are_reproduced_relative_to_the_proportional_share():
    g = grids()["res18"]
    base = g[list(CPUS).index(PROPORTIONAL[0]), list(MEM_GB).index(PROPORTIONAL[1])]
    for i, c in enumerate(CPUS):
        for k, m in enumerate(MEM_GB):
            assert cpu_mem_factor("ResNet-18 (batch size 64)", c, m) == pytest.approx(g[i, k] / base)


def test_proportional_share_is_one_and_more_cpu_never_hurts():
    for job_type in ("ResNet-18 (batch size 32)", "ResNet-50 (batch size 64)", "imagenet", "bert"):
        assert cpu_mem_factor(job_type, *PROPORTIONAL) == pytest.approx(1.0)
        factors = [cpu_mem_factor(job_type, c, 125.0) for c in (1, 2, 3, 4.5, 6, 9, 12, 24, 48)]
        assert factors == sorted(factors)


def test_image_models_are_cpu_sensitive_language_models_are_not():
    assert cpu_mem_factor("ResNet-18 (batch size 32)", 12, 62.5) > 2.0
    assert cpu_mem_factor("ResNet-18 (batch size 32)", 1, 62.5) < 0.5
    assert cpu_mem_factor("Transformer (batch size 64)", 12, 62.5) == pytest.approx(1.0)
    assert cpu_mem_factor("A3C", 1, 20.8) == 1.0                       # not profiled: insensitive


def test_family_mapping():
    assert model_of("ResNet-50 (batch size 128)") == "res50"
    assert model_of("LM (batch size 20)") == "lstm"
    assert model_of("cifar10") == "res18"
    assert model_of("CycleGAN") is None
