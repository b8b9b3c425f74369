"""lib/book/style.py: standard figure sizes."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from lib.book import style  # noqa: E402


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

    from lib.book.style import log_axes

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


def test_a_figure_records_the_size_of_its_smallest_drawn_text():
    """figure_png writes, in the PNG's own pixels, the smallest text drawn: a planted 6-pt
    label is found, a hidden one is not, and a figure with no text records nothing."""
    import io

    import matplotlib.pyplot as plt
    from PIL import Image

    fig, ax = style.subplots(1)
    ax.plot([0, 1], [0, 1])
    ax.set_title("title", fontsize=12)
    ax.tick_params(labelsize=9)
    ax.text(0.5, 0.5, "hidden", fontsize=3, visible=False)
    ax.set_xlabel("x", fontsize=10)

    def recorded(f):
        with Image.open(io.BytesIO(style.figure_png(f))) as im:
            return im.info.get(style.MIN_FONT_KEY)

    assert float(recorded(fig)) == pytest.approx(9 * style.DPI / 72, abs=0.01)
    ax.text(0.2, 0.2, "small", fontsize=6)
    assert float(recorded(fig)) == pytest.approx(6 * style.DPI / 72, abs=0.01)
    bare = plt.figure()
    bare.add_axes((0, 0, 1, 1)).set_axis_off()
    assert recorded(bare) is None
    plt.close("all")


def test_the_column_figure_shows_the_smallest_font_at_ten_css_px():
    """The design rule behind the sizes: a column-wide figure shown in the 770-px column
    has its smallest allowed font at 10 CSS px or more."""
    column_px = 770
    scale = column_px / (style.COLUMN * style.DPI)
    assert style.MIN_FONT_PT * style.DPI / 72 * scale >= 10
    assert max(style.WIDTHS.values()) == style.COLUMN
