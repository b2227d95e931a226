"""The figures at paper size (issue 14), checked on the drawn matplotlib figures rather than on
pixels: titles wrap instead of running off the figure, the legend sits outside the axes (never
over the data) and within the figure's width, the utilisation figure keeps to the arrival window,
confidence bands never go below zero, every colour shows on white, markers of coinciding lines do
not stack, and the per-type bars stay readable with many policies."""

import numpy as np
import pytest

from quanta.report import plots

POLICIES = ["fifo", "sjf", "srtf", "las", "gavel-las", "tiresias-las", "gavel-fifo", "sjf-bsbf"]
LONG = ("/home/someone/experiments/traces/philly_2017_vc_0e4a51_first_3000_jobs_cleaned_and_"
        "filtered.csv on v100:4x8,p100:4x8,k80:4x8,a100:2x8,h100:2x8,t4:8x4")


@pytest.fixture(scope="module")
def results():
    from quanta.api import simulate
    return simulate("synthetic:6:40", "v100:1x8,k80:1x8", POLICIES).results


@pytest.fixture
def drawn(monkeypatch, tmp_path):
    """Calls a figure function and returns its figures, drawn (layout done), instead of saving."""
    figs = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: figs.append(fig))

    def draw(fn, *args, **kw):
        figs.clear()
        fn(*args, tmp_path / "f.png", **kw)
        for f in figs:
            f.canvas.draw()
        return list(figs)
    yield draw
    import matplotlib.pyplot as plt
    plt.close("all")


def _inside(inner, outer, tol=1.0) -> bool:
    return (inner.x0 >= outer.x0 - tol and inner.x1 <= outer.x1 + tol
            and inner.y0 >= outer.y0 - tol and inner.y1 <= outer.y1 + tol)


@pytest.mark.parametrize("name", list(plots.RUN_FIGURES))
def test_long_titles_wrap_inside_the_figure_and_the_legend_stays_off_the_axes(results, drawn,
                                                                               name):
    (fig,) = drawn(plots.RUN_FIGURES[name], results, title=LONG)
    renderer = fig.canvas.get_renderer()
    whole = fig.bbox
    title = fig._suptitle
    assert title is not None and "\n" in title.get_text()
    assert _inside(title.get_window_extent(renderer), whole), name     # wrapped, not cut
    assert "".join(title.get_text().split()).endswith("".join(LONG.split()))   # nothing lost
    (legend,) = fig.legends
    box = legend.get_window_extent(renderer)
    assert _inside(box, whole), name
    assert {t.get_text() for t in legend.get_texts()} >= set(POLICIES)
    for ax in fig.axes:
        assert not box.overlaps(ax.get_window_extent(renderer)), name     # not over the data
        assert ax.get_legend() is None


def test_utilisation_keeps_to_the_arrival_window_with_an_arrivals_end_marker(results, drawn):
    (fig,) = drawn(plots.plot_utilisation, results)
    sub = results[0].table.submit
    a, b = float(sub.min()), float(sub.max())
    for ax in fig.axes:
        lo, hi = ax.get_xlim()
        assert lo * 3600 == pytest.approx(a) and hi * 3600 <= b + max(0.1 * (b - a), 1.0) + 1e-6
        assert ax.get_ylim() == (0.0, 1.05)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels[-1] == "arrivals end"


def test_queue_stops_where_the_last_queue_empties(results, drawn):
    (fig,) = drawn(plots.plot_queue, results)
    (ax,) = fig.axes
    assert ax.get_xlim()[1] * 3600 <= max(float(r.times[-1]) for r in results) + 1e-6


def test_binned_mean_is_time_weighted_and_exact():
    t = np.array([0.0, 10.0, 20.0])
    v = np.array([1.0, 3.0, 0.0])
    got = plots._binned_mean(t, v, np.array([0.0, 5.0, 15.0, 25.0]))
    assert np.allclose(got, [1.0, 2.0, 1.5])


def test_jct_by_type_shows_fewer_types_with_many_policies(results, drawn):
    (few,) = drawn(plots.plot_jct_by_type, results[:2])
    (many,) = drawn(plots.plot_jct_by_type, results)
    assert len(many.axes[0].get_yticks()) <= 6 < len(few.axes[0].get_yticks())
    for fig in (few, many):
        assert all(len(t.get_text().split("\n")) <= 2 for t in fig.axes[0].get_yticklabels())


def _rows(policies=("fifo", "las"), ci=5e5):
    return [{"cluster": "v100:1x8", "trace": f"synthetic:{r}:20", "rate": r, "load_scale": 1.0,
             "policy": p, "seeds": 2, "avg_jct_s_mean": 3600.0 * (i + r),
             "avg_jct_s_ci95": ci, "p99_jct_s_mean": 7200.0 * (i + r), "p99_jct_s_ci95": ci}
            for i, p in enumerate(policies) for r in (2.0, 4.0, 6.0)]


def test_sweep_bands_stop_at_zero_and_the_legend_is_below(drawn):
    from matplotlib.collections import PolyCollection
    (fig,) = drawn(lambda rows, path: plots.sweep_figures(rows, path.parent, "png"),
                   _rows(POLICIES))
    renderer = fig.canvas.get_renderer()
    (legend,) = fig.legends
    assert _inside(legend.get_window_extent(renderer), fig.bbox)
    for ax in fig.axes[:2]:
        assert ax.get_ylim()[0] == 0.0
        assert list(ax.get_xticks()) == [2.0, 4.0, 6.0]
        bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
        assert len(bands) == len(POLICIES)
        assert all(p.vertices[:, 1].min() >= 0.0 for c in bands for p in c.get_paths())
        assert not legend.get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))


def test_every_colour_shows_on_white_and_markers_of_coinciding_lines_do_not_stack():
    def luminance(hex_colour):
        c = np.array([int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)])
        c = np.where(c <= 0.03928, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
        return float(c @ [0.2126, 0.7152, 0.0722])
    assert all(1.05 / (luminance(c) + 0.05) >= 2.0 for c in plots.COLOURS)   # not yellow
    assert len({plots._markevery(300, i, 8)[0] for i in range(8)}) == 8


def test_wrap_breaks_long_names_at_commas_slashes_or_anywhere():
    text = "gavel-poisson-3ph on " + ",".join(f"v{i}00:4x8" for i in range(12))
    lines = plots._wrap(text, plots.WIDTH).split("\n")
    assert len(lines) > 1 and all(len(ln) <= 51 for ln in lines)
    assert "".join(lines).replace(" ", "") == text.replace(" ", "")
    assert plots._wrap("x" * 130, plots.WIDTH).count("\n") == 2
    assert plots._wrap("JCT CDF\ntrace on cluster", plots.WIDTH) == "JCT CDF\ntrace on cluster"


@pytest.mark.parametrize("fmt", ["svg", "pdf", "png"])
def test_a_seed_gives_the_same_figure_files_byte_for_byte(results, tmp_path, fmt):
    """SVGs took a random salt for their ids and a date, PDFs a date: every run's figures
    differed (a seed promises the same files)."""
    made = []
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        made.append(sorted(plots.run_figures(results[:2], tmp_path / d, fmt)))
    assert len(made[0]) == len(plots.RUN_FIGURES)
    for a, b in zip(*made):
        assert a.read_bytes() == b.read_bytes(), a.name
