"""lib/style.py: standard figure sizes."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from lib import style  # noqa: E402


def test_standard_sizes_grow_with_columns_and_rows_and_stop_at_the_page_width():
    widths = [style.figsize(n)[0] for n in range(1, 7)]
    assert widths == sorted(widths) and widths[-1] == max(style.WIDTHS.values())
    assert style.figsize(2, 3)[1] == 3 * style.ROW_HEIGHT
    with pytest.raises(ValueError, match="at least one row"):
        style.figsize(0)


def test_subplots_uses_the_standard_size():
    fig, axes = style.subplots(2, 3)
    assert tuple(fig.get_size_inches()) == pytest.approx(style.figsize(3, 2))
    assert axes.shape == (2, 3)


def test_band_draws_the_seeds_and_nothing_for_an_empty_selection():
    import numpy as np

    fig, ax = style.subplots(1)
    style.band(ax, [1, 2, 4], np.arange(6.0).reshape(3, 2), "C0")
    assert len(ax.lines) == 1 and len(ax.collections) == 1
    style.band(ax, [], np.zeros((0, 2)), "C1")  # no counted point: nothing, no error
    assert len(ax.lines) == 1 and len(ax.collections) == 1
    with pytest.raises(ValueError):
        style.band(ax, [1, 2], np.zeros(3), "C2")  # a shape that does not fit still raises


def test_log_axes_only_where_the_data_have_a_positive_value():
    import matplotlib.pyplot as plt

    from lib.style import log_axes

    fig, (a, b, c) = plt.subplots(1, 3)
    a.plot([0.3, 0.5], [10.0, np.inf], "o")  # one event came, one never did
    b.plot([0.3, 0.5], [np.nan, np.nan], "o")  # no event came: nothing to log
    c.plot([1.0, 10.0], [2.0, 3.0])
    log_axes(a)
    log_axes(b)
    log_axes(c, x=True)
    assert a.get_yscale() == "log" and a.get_xscale() == "linear" and not a.texts
    assert b.get_yscale() == "linear" and [t.get_text() for t in b.texts] == ["no finite value"]
    assert c.get_xscale() == c.get_yscale() == "log" and not c.texts
    fig.canvas.draw()  # a log axis with no positive value would fail here
    plt.close(fig)
