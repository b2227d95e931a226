"""Time `quanta simulate` spends in the cyclic collector's passes, in one fresh process.

    python bench/gc_passes.py [-- SIMULATE ARGS...]

Runs `quanta.cli.main()` (as the `quanta` console script does) with a `gc.callbacks` timer
installed before Quanta is imported, and prints the passes per generation and their total time
(docs/benchmarks.md, "Forty-first session"). Default arguments: a tiny synthetic run; the
figures recorded there used Gavel's 600-job trace (see that section), e.g.
`python bench/gc_passes.py -- --trace ~/.cache/anchors/gavel/speed/single_r30_n600_s1.trace
--format gavel --cluster v100:36x1,p100:36x1,k80:36x1 --policy gavel-las --seed 1 --world
gavel-sim --quiet --no-plots --out /tmp/gc_out --force`. `PYTHONPATH=OTHER_CHECKOUT` times
another version.
"""

import gc
import sys
import time

passes = [0, 0, 0]
seconds = [0.0, 0.0, 0.0]
started = [0.0]


def _timer(phase: str, info: dict) -> None:
    if phase == "start":
        started[0] = time.perf_counter()
    else:
        g = info["generation"]
        passes[g] += 1
        seconds[g] += time.perf_counter() - started[0]


def main() -> None:
    args = sys.argv[1:]
    if args and args[0] == "--":
        args = args[1:]
    if not args:
        args = ["--trace", "synthetic:3:20", "--cluster", "v100:1x8", "--policy", "fifo",
                "--quiet", "--no-plots", "--out", "/tmp/gc_passes_out", "--force"]
    gc.callbacks.append(_timer)
    from quanta import cli
    sys.argv = ["quanta", "simulate", *args]
    try:
        cli.main()
    finally:
        print(f"collector passes per generation {passes}, "
              f"{1000 * sum(seconds):.1f} ms ({', '.join(f'{1000 * s:.1f}' for s in seconds)})",
              file=sys.stderr)


if __name__ == "__main__":
    main()
