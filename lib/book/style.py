"""The book's one figure style.

The same quantity has the same colour in every chapter: each signature order, the
QK and OV circuits, small vs large initialization. Similarity matrices use one
diverging colour map centred at 0; learning dynamics use a log time axis; seeds
are drawn as a band (mean and min-max), never as separate lines.
"""

from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

# One colour per quantity, fixed across the book (colour-blind safe: seaborn "colorblind").
_CB = sns.color_palette("colorblind", 10)
COLORS = {
    # signature orders
    "order0": _CB[0],  # label signature phi^y (context-free)
    "contextual": _CB[2],  # co-occurrence signature phi^X
    "order1": _CB[3],  # joint (context token, label) signature phi^{X|y}
    "order2": _CB[4],
    "traceback": _CB[7],  # psi^X, the output layer's signature
    # language-model signatures
    "next": _CB[0],  # next-token = the LM's order 0
    "skip2": _CB[1],
    "skip3": _CB[8],
    "skip4": _CB[5],
    "window": _CB[3],
    "previous": _CB[7],
    # circuits
    "qk": _CB[1],
    "ov": _CB[9],
    # initialization
    "small": _CB[0],
    "large": _CB[3],
    "theory": (0.15, 0.15, 0.15),
    "reference": (0.0, 0.0, 0.0),  # zero lines, bin edges, marked cells
    "null": (0.6, 0.6, 0.6),
}
# The four QK/OV parameterizations (Chapter 7): the factorized-QK one in the QK colour, the
# factorized-OV one in the OV colour, the other two in colours used for nothing else.
_DARK = sns.color_palette("dark", 10)
PARAMETERIZATION_COLORS = {
    "FACO": COLORS["qk"],
    "CAFO": COLORS["ov"],
    "FAFO": _DARK[4],
    "CACO": _DARK[5],
}
# The statuses of a claim (lib.book.claims.STATUSES), on the reproduction report.
STATUS_COLORS = {
    "check": (0.45, 0.45, 0.45),  # lib.book.claims.CHECK: identities and equations, asserted
    "reproduced": _CB[2],
    "new result": _CB[0],
    "partly": _CB[8],
    "not reproduced": _CB[3],
    "measured": (0.82, 0.82, 0.82),  # lib.book.claims.REPORTED: shown, never asserted
}
SIMILARITY_CMAP = "RdBu_r"
# Percentages of samples in 2-D histograms: the map of the official QK/OV code's Fig 2.
HISTOGRAM_CMAP = "coolwarm"
# Figures are drawn for the page's column. At 1400 x 900 the text column is about 770 CSS
# px wide; a figure of COLUMN inches saved at DPI is shown at most that wide, so one point
# of text is at least 770 / (COLUMN * 72) = 1.5 CSS px, and the book's smallest font
# (MIN_FONT_PT) at least 10 px. A figure that needs more room is drawn FULL_WIDTH inches
# wide and its cell is tagged ``full-width`` (the column plus the margin, about 1100 px).
# Every PNG records the size, in its own pixels, of the smallest text drawn on it
# (MIN_FONT_KEY), from which the page test reads the size a reader sees.
DPI = 150
COLUMN = 7.0
FULL_WIDTH = 10.0
MIN_FONT_PT = 8.0
MIN_FONT_KEY = "book-min-font-px"
FIGSIZE = (4.6, 3.0)
# The book's standard figure widths (inches) by number of panel columns, and the height of
# one row of panels: every multi-panel figure is drawn at one of these sizes (subplots).
WIDTHS = {1: 4.6, 2: COLUMN, 3: COLUMN, 4: COLUMN}
ROW_HEIGHT = 2.6


def use_book_style() -> None:
    """Set the book's matplotlib defaults (call once per chapter), and, in a notebook,
    show every figure as a PNG that records its smallest text (:func:`figure_png`)."""
    sns.set_theme(context="paper", style="ticks")
    mpl.rcParams.update(
        {
            "figure.figsize": FIGSIZE,
            "figure.dpi": 100,
            "savefig.dpi": DPI,
            "font.size": 9.0,
            "axes.titlesize": 9.5,
            "axes.labelsize": 9.0,
            "xtick.labelsize": 8.5,
            "ytick.labelsize": 8.5,
            "legend.fontsize": 8.5,
            "legend.title_fontsize": 8.5,
            "figure.titlesize": 10.0,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "legend.frameon": False,
            "image.cmap": SIMILARITY_CMAP,
        }
    )
    _register_png_formatter()


class _TextSizes:
    """The sizes (points) of the texts a renderer draws while it is recorded."""

    def __init__(self):
        self.points: list[float] = []

    def __enter__(self):
        from matplotlib.backends.backend_agg import RendererAgg

        self._cls, self._orig = RendererAgg, RendererAgg.draw_text
        points = self.points
        orig = self._orig

        def draw_text(renderer, gc, x, y, s, prop, angle, ismath=False, mtext=None):
            if str(s).strip():
                points.append(float(prop.get_size_in_points()))
            return orig(renderer, gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)

        RendererAgg.draw_text = draw_text
        return self

    def __exit__(self, *exc):
        self._cls.draw_text = self._orig


def figure_png(fig) -> bytes:
    """``fig`` as the book shows it: a PNG at :data:`DPI`, cropped to its content, whose
    text chunk :data:`MIN_FONT_KEY` is the size, in the PNG's pixels, of the smallest text
    drawn on it (absent when it has none). The figure is drawn once: the sizes are recorded
    while it is saved, and the chunk is added to the saved PNG."""
    import io

    buf = io.BytesIO()
    with _TextSizes() as sizes:
        fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    png = buf.getvalue()
    if not sizes.points:
        return png
    return _png_with_text(png, MIN_FONT_KEY, f"{min(sizes.points) * DPI / 72:.2f}")


def _png_with_text(png: bytes, key: str, value: str) -> bytes:
    """``png`` with a ``tEXt`` chunk ``key: value`` after its header chunk (PNG spec 11.3.4)."""
    import struct
    import zlib

    body = b"tEXt" + key.encode("latin-1") + b"\0" + value.encode("latin-1")
    chunk = struct.pack(">I", len(body) - 4) + body + struct.pack(">I", zlib.crc32(body))
    end_of_header = 8 + 4 + 4 + 13 + 4  # signature, then IHDR: length, type, data, CRC
    return png[:end_of_header] + chunk + png[end_of_header:]


def _register_png_formatter() -> None:
    """In IPython, figures (shown or glued) are displayed through :func:`figure_png`."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    ip = get_ipython()
    if ip is None or "inline" not in mpl.get_backend():
        return
    import matplotlib_inline.backend_inline  # noqa: F401  (selects its formats once, first)
    from matplotlib.figure import Figure

    def png_base64(fig):
        import base64

        return base64.b64encode(figure_png(fig)).decode("ascii")

    ip.display_formatter.formatters["image/png"].for_type(Figure, png_base64)


def ordered_colors(values, base=None) -> dict:
    """One colour per value of an ordered parameter (a δ, a mode index, a rate r), light to
    dark: viridis, or shades of ``base`` (e.g. ``COLORS["qk"]`` for QK rates)."""
    values = list(values)
    if base is None:
        shades = plt.cm.viridis(np.linspace(0, 0.85, len(values)))
    else:
        shades = sns.light_palette(base, n_colors=len(values) + 2)[2:]
    return {v: tuple(c) for v, c in zip(values, shades, strict=True)}


def seed_colors(n: int) -> list:
    """One categorical colour per seed, for the few figures that draw seeds apart."""
    return [tuple(c) for c in plt.cm.tab10(np.arange(n) % 10)]


def figsize(ncols: int = 1, nrows: int = 1, row_height: float = ROW_HEIGHT):
    """The book's size for a figure of ``nrows`` x ``ncols`` panels: one of the standard
    widths (four columns and more share the widest) and ``row_height`` per row."""
    if ncols < 1 or nrows < 1:
        raise ValueError(f"a figure needs at least one row and one column, got {nrows}x{ncols}")
    return (WIDTHS[min(ncols, max(WIDTHS))], row_height * nrows)


def subplots(nrows: int = 1, ncols: int = 1, row_height: float = ROW_HEIGHT, **kw):
    """``plt.subplots`` at the book's standard size for that many panels."""
    return plt.subplots(nrows, ncols, figsize=figsize(ncols, nrows, row_height), **kw)


def similarity_heatmap(ax, S, labels=None, title=None, vmax=1.0, colorbar=True):
    """A similarity matrix on the book's diverging map, centred at 0 (range [-vmax, vmax])."""
    S = np.asarray(S, dtype=float)
    im = ax.imshow(S, cmap=SIMILARITY_CMAP, vmin=-vmax, vmax=vmax, interpolation="nearest")
    if labels is not None:
        step = max(1, len(labels) // 12)
        ticks = np.arange(0, len(labels), step)
        ax.set_xticks(ticks, [labels[i] for i in ticks], rotation=90, fontsize=MIN_FONT_PT)
        ax.set_yticks(ticks, [labels[i] for i in ticks], fontsize=MIN_FONT_PT)
    else:
        ax.set_xticks([])
        ax.set_yticks([])
    if title:
        ax.set_title(title)
    if colorbar:
        plt.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return im


def log_axes(ax, x: bool = False, y: bool = True):
    """Put the chosen axes of ``ax`` on a log scale where the data drawn on it have a
    positive value. Where they have none (every event of a run that learned nothing is
    ``inf``) the axis stays linear and the panel says so, instead of the draw failing."""
    empty = []
    for on, minpos, name in ((x, ax.dataLim.minposx, "x"), (y, ax.dataLim.minposy, "y")):
        if not on:
            continue
        if np.isfinite(minpos) and minpos > 0:
            getattr(ax, f"set_{name}scale")("log")
        else:
            empty.append(name)
    if empty:
        ax.text(0.5, 0.5, "no finite value", transform=ax.transAxes, ha="center",
                color=COLORS["null"])  # fmt: skip
    return ax


def band(ax, x, Y, color, label=None, log_x=True, alpha=0.25, **kw):
    """Seeds as a band: the mean line and the min-max range of Y (n_points, n_seeds).
    No points (an empty selection): nothing is drawn."""
    x = np.asarray(x, dtype=float)
    if len(x) == 0:
        return ax
    Y = np.asarray(Y, dtype=float).reshape(len(x), -1)
    if log_x:
        x = np.where(x <= 0, np.nan, x)  # step 0 cannot sit on a log axis
        ax.set_xscale("log")
    ax.plot(x, np.nanmean(Y, 1), color=color, label=label, **kw)
    if Y.shape[1] > 1:
        ax.fill_between(x, np.nanmin(Y, 1), np.nanmax(Y, 1), color=color, alpha=alpha, lw=0)
    return ax


def curve_bands(
    ax, steps, curves: dict, rows, names, colors: dict, labels: dict, null=None, ls: str = "-"
) -> None:
    """Alignment curves over training, one band per target in ``names`` (its ``R`` over the
    instances ``rows``: seeds as a band), from step 1 (an increment is zero at step 0), with
    the permutation null of target ``null`` in grey and a line at 0."""
    s = np.asarray(steps)[1:]
    for n in names:
        band(ax, s, curves[n]["R"][1:, rows], colors[n], label=labels[n], ls=ls)
    if null is not None:
        c = curves[null]
        ax.fill_between(
            s, c["null_lo"][1:], c["null_hi"][1:], color=COLORS["null"], alpha=0.3, lw=0
        )
    ax.axhline(0, color=COLORS["reference"], lw=0.5)


def median_lines(ax, onsets: dict, rows, names, colors: dict) -> None:
    """A dotted line at the median onset (over ``rows``) of each stair in ``names`` that has
    one in some instance."""
    for n in names:
        on = onsets[n][rows]
        if np.isfinite(on).any():
            ax.axvline(np.nanmedian(on), color=colors[n], ls=":", lw=1.2)
