"""Accuracy of the table model's estimates against Gavel's measurements.

    python bench/accuracy_table.py

The table model answers measured points exactly; this measures the three places it estimates:
1. another GPU type: V100 measurement x generic speed ratio (model/gpu.py), vs measured P100/K80;
2. another GPU count: the nearest measured count x (n/n0)**0.9, vs measured scale factors 2/4/8
   (predicted from the 1-GPU measurement);
3. an unmeasured co-located pair: the default slowdown (median of measured pairs), vs each
   measured pair.
Prints mean and max relative error per job family and overall, as a markdown table.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from quanta.model.gpu import gpu_type
from quanta.perf.gavel_table import gavel_table
from quanta.perf.table import PACK_FACTOR, SCALING_EXPONENT


def family(job_type: str) -> str:
    return job_type.split(" (")[0]


def report(title: str, errors: dict[str, list[float]]) -> None:
    print(f"\n### {title}\n\n| family | points | mean error | max error |\n|---|---|---|---|")
    allv = []
    for fam in sorted(errors):
        e = np.array(errors[fam])
        allv += errors[fam]
        print(f"| {fam} | {len(e)} | {100 * e.mean():.1f}% | {100 * e.max():.1f}% |")
    a = np.array(allv)
    print(f"| **all** | {len(a)} | {100 * a.mean():.1f}% | {100 * a.max():.1f}% |")


def main() -> None:
    g = gavel_table()
    cross: dict[str, list[float]] = defaultdict(list)
    for (jt, sf, gpu), rate in g.alone.items():
        if gpu == "v100" or rate <= 0:
            continue
        ref = g.alone.get((jt, sf, "v100"), 0.0)
        if ref > 0:
            pred = ref * gpu_type(gpu).speed / gpu_type("v100").speed
            cross[f"{family(jt)} on {gpu}"].append(abs(pred - rate) / rate)
    report("1. Other GPU type from the V100 measurement (generic speed ratio)", cross)
    scale: dict[str, list[float]] = defaultdict(list)
    for (jt, sf, gpu), rate in g.alone.items():
        if sf == 1 or rate <= 0:
            continue
        one = g.alone.get((jt, 1, gpu), 0.0)
        if one > 0:
            pred = one * sf ** SCALING_EXPONENT
            scale[f"{family(jt)} x{sf}"].append(abs(pred - rate) / rate)
    report(f"2. Other GPU count from 1 GPU (exponent {SCALING_EXPONENT})", scale)
    pairs: dict[str, list[float]] = defaultdict(list)
    for (a, b, gpu), (ra, _rb) in g.pairs.items():
        alone = g.alone.get((a, 1, gpu), 0.0)
        if alone > 0 and ra > 0:
            pairs[family(a)].append(abs(PACK_FACTOR * alone - ra) / ra)
    report(f"3. Unmeasured pair: default slowdown {PACK_FACTOR}", pairs)


if __name__ == "__main__":
    main()
