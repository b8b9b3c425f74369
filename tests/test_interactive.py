"""lib/book/interactive.py: the slider figure is self-contained HTML and refuses bad shapes."""

import numpy as np
import pytest

from lib.book.interactive import slider_figure


def _fig(**kw):
    x = np.geomspace(1, 100, 20)
    values = [0.5, 1.0, 2.0]
    curves = {"alpha": np.stack([1 - np.exp(-x / (10 * v)) for v in values])}
    return slider_figure(x, values, curves, param="r", xlabel="step", ylabel="alpha", **kw)


def test_slider_figure_is_self_contained():
    h = _fig()
    assert "<script>" in h and 'type="range"' in h
    assert "src=" not in h and "http://" not in h.replace("http://www.w3.org/2000/svg", "")
    assert h.count('"labels": ["0.5", "1", "2"]') == 1


def test_slider_figure_refuses_bad_input():
    x = np.geomspace(1, 100, 20)
    with pytest.raises(ValueError, match="expected"):
        slider_figure(x, [1.0, 2.0], {"a": np.zeros((3, 20))}, param="r", xlabel="", ylabel="")
    with pytest.raises(ValueError, match="log_x"):
        slider_figure(x - 1, [1.0], {"a": np.zeros((1, 20))}, param="r", xlabel="", ylabel="")
