"""Accuracy of the Rubick plan model (quanta.perf.plan) on the bundled Rubick artifact data.

Fits every model family on its profile runs (DP family) and a quarter of its 3D rows (3D), then
predicts (a) the held-out rows of placements/<model>.csv and (b) the 99 measured validation points,
and prints mean / max relative error of the iteration time per (model, plan family) next to the
paper's table-2 errors. Also times one PlanPerf.rate query.

    python bench/accuracy_plan.py [--markdown] [--pp-traffic boundaries|artifact]

--pp-traffic artifact fits and predicts with the artifact's pipeline-traffic term instead of
Quanta's (quanta.perf.plan.PP_TRAFFIC).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from quanta.model.job import JobSpec
from quanta.perf.plan import RUBICK_DIR, read_csv
from quanta.perf.plan_perf import PlanPerf
from quanta.perf.plan_fit import (
    FAMILIES,
    fitted_models,
    placement_samples,
    predict_ms,
    sample_3d,
    validation_samples,
)

PAPER_NAME = {"vit": "ViT", "roberta": "RoBERTa", "bert": "BERT", "t5": "T5", "gpt2": "GPT-2",
              "llama7": "LLaMA-2-7B", "llama30": "LLaMA-30B"}


def family_of(sample) -> str:
    if sample.source.startswith("validation:"):
        return sample.source.split(":", 1)[1]
    p = sample.plan
    if p.is_3d:
        return "DP+TP+PP" if p.dp > 1 else "TP+PP"
    return p.family()


def table(samples, models):
    pred = predict_ms(samples, models)
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for s, p in zip(samples, pred):
        groups[(s.model, family_of(s))].append(abs(p - s.iter_ms) / s.iter_ms)
    return groups, np.abs(pred - [s.iter_ms for s in samples]) / [s.iter_ms for s in samples]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--markdown", action="store_true", help="print markdown tables")
    ap.add_argument("--pp-traffic", choices=("boundaries", "artifact"), default="boundaries",
                    help="3D plans' pipeline traffic term (quanta.perf.plan.PP_TRAFFIC)")
    args = ap.parse_args()
    import quanta.perf.plan as plan_model
    plan_model.PP_TRAFFIC = args.pp_traffic
    t0 = time.perf_counter()
    models = fitted_models()
    fit_s = time.perf_counter() - t0
    paper = {(r["model"], r["execution_plan"]): r for r in
             read_csv(RUBICK_DIR / "perf_model_validation_table2.csv")}

    held, fit3 = [], 0
    for fam in FAMILIES:
        rows = placement_samples(fam)
        f3, h3 = sample_3d(rows)
        fit3 += len(f3)
        held += [s for s in rows if not s.plan.is_3d] + h3
    valid = validation_samples()
    g_place, e_place = table(held, models)
    g_valid, e_valid = table(valid, models)

    keys = sorted(set(g_place) | set(g_valid), key=lambda k: (FAMILIES.index(k[0]), k[1]))
    md = args.markdown
    fmt = "{:<8} {:<16} {:>5} {:>7} {:>7} {:>5} {:>7} {:>7} {:>7} {:>7}"
    head = ("model", "plan family", "placements n", "mean %", "max %", "validation n", "mean %",
            "max %", "paper mean %", "paper max %")
    if md:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
    else:
        print(fmt.format(*head))

    def cell(v):
        return ("-", "-", "-") if not v else (str(len(v)), f"{100 * np.mean(v):.1f}",
                                              f"{100 * np.max(v):.1f}")

    for k in keys:
        pr = paper.get((PAPER_NAME[k[0]], k[1]), {})
        row = (k[0], k[1], *cell(g_place.get(k)), *cell(g_valid.get(k)),
               pr.get("avg_error_pct") or "-", pr.get("max_error_pct") or "-")
        print(("| " + " | ".join(row) + " |") if md else
              fmt.format(*row))
    for name, e in (("placements (held out)", e_place), ("validation (99)", e_valid)):
        line = f"{name}: n={len(e)} mean {100 * e.mean():.1f}% median {100 * np.median(e):.1f}% " \
               f"max {100 * e.max():.1f}%"
        print(("\n" if md else "") + line)
    multi = np.array([len(s.nodes) > 1 for s in held])
    vit = np.array([s.model == "vit" for s in held])
    print(f"placements, one node: mean {100 * e_place[~multi].mean():.1f}%; several nodes: "
          f"mean {100 * e_place[multi].mean():.1f}%; without vit: mean "
          f"{100 * e_place[~vit].mean():.1f}%")
    print(f"fit: {fit_s:.1f} s for {len(FAMILIES)} families ({fit3} 3D rows used for fitting)")

    perf = PlanPerf(models)
    job = JobSpec("q", 0.0, 48, "llama30", plan="344", cpus=384)
    t = time.perf_counter()
    perf.rate(job, "a800", 48, 6)
    first = time.perf_counter() - t
    n = 100_000
    t = time.perf_counter()
    for _ in range(n):
        perf.rate(job, "a800", 48, 6)
    cached = (time.perf_counter() - t) / n
    print(f"rate query: first {first * 1e6:.0f} us, cached {cached * 1e6:.2f} us")


if __name__ == "__main__":
    main()
