"""Interactive figures for the static book: a slider over precomputed curves.

The page needs no kernel and loads nothing: the curves are computed when the chapter
runs, embedded as JSON, and drawn as SVG by a few lines of inline JavaScript, so the
figure works offline like the rest of the book. Moving the slider picks the parameter
value whose curves are shown; a faint copy of every curve stays behind for context.
"""

from __future__ import annotations

import html
import json
import uuid
from collections.abc import Mapping, Sequence

import numpy as np

from .style import COLORS


def _hex(color) -> str:
    if isinstance(color, str):
        return color
    red, green, blue = (int(round(255 * c)) for c in color[:3])
    return f"#{red:02x}{green:02x}{blue:02x}"


def slider_figure(
    x: Sequence[float],
    values: Sequence[float],
    curves: Mapping[str, np.ndarray],
    *,
    param: str,
    xlabel: str,
    ylabel: str,
    colors: Mapping[str, object] | None = None,
    log_x: bool = True,
    ylim: tuple[float, float] | None = None,
    value_format: str = "{:.3g}",
    title: str = "",
    hlines: Mapping[str, Sequence[float]] | None = None,
    start: int | None = None,
) -> str:
    """HTML of a figure whose curves follow a slider over ``values``.

    ``curves[name]`` has shape ``(len(values), len(x))``: one curve per slider position.
    ``hlines[name]`` (one value per slider position) draws a dashed horizontal line in the
    colour of curve ``name`` (a noise floor, a uniform baseline). ``start``: the position
    shown first (default: the middle). Returns an HTML string for ``IPython.display.HTML``.
    """
    x = np.asarray(x, dtype=float)
    values = list(map(float, values))
    if not curves:
        raise ValueError("slider_figure needs at least one curve")
    for name, c in curves.items():
        if np.shape(c) != (len(values), len(x)):
            raise ValueError(
                f"curve {name!r} has shape {np.shape(c)}, expected (len(values), len(x)) = "
                f"({len(values)}, {len(x)})"
            )
    if log_x and (x <= 0).any():
        raise ValueError(
            "log_x needs positive x values; shift x (e.g. 1 + step) or set log_x=False"
        )
    hlines = {n: [float(v) for v in vals] for n, vals in (hlines or {}).items()}
    for name, vals in hlines.items():
        if name not in curves or len(vals) != len(values):
            raise ValueError(
                f"hline {name!r} needs a curve of that name and one value per position"
            )
    ys = np.concatenate([np.asarray(c, float).ravel() for c in curves.values()])
    lo, hi = ylim if ylim is not None else (float(np.nanmin(ys)), float(np.nanmax(ys)))
    palette = dict(colors or {})
    default = [COLORS["order0"], COLORS["order1"], COLORS["qk"], COLORS["ov"], COLORS["order2"]]
    data = {
        "x": x.tolist(),
        "values": values,
        "labels": [value_format.format(v) for v in values],
        "curves": {n: np.round(np.asarray(c, float), 5).tolist() for n, c in curves.items()},
        "colors": {
            n: _hex(palette.get(n, default[i % len(default)])) for i, n in enumerate(curves)
        },
        "logx": bool(log_x),
        "ylim": [lo, hi],
        "hlines": hlines,
    }
    fid = "fig-" + uuid.uuid5(uuid.NAMESPACE_OID, json.dumps(data)[:2000]).hex[:10]
    start = len(values) // 2 if start is None else int(start)
    legend = " ".join(
        f'<span style="color:{data["colors"][n]};font-weight:bold">&#9644; {html.escape(n)}</span>'
        for n in curves
    )
    return f"""
<div id="{fid}" class="book-slider-figure" style="max-width:640px;font-family:sans-serif">
<div style="font-weight:bold">{html.escape(title)}</div>
<svg viewBox="0 0 600 330" width="100%" role="img" aria-label="{html.escape(title or ylabel)}"></svg>
<div>{legend}</div>
<label>{html.escape(param)} = <output>{data["labels"][start]}</output>
<input type="range" min="0" max="{len(values) - 1}" value="{start}" step="1" style="width:60%"></label>
</div>
<script>
(function() {{
  const D = {json.dumps(data)};
  const root = document.getElementById("{fid}");
  const svg = root.querySelector("svg"), out = root.querySelector("output");
  const slider = root.querySelector("input");
  const L = 60, R = 585, T = 10, B = 290, NS = "http://www.w3.org/2000/svg";
  const fx = D.logx ? Math.log10 : (v => v);
  const x0 = fx(D.x[0]), x1 = fx(D.x[D.x.length - 1]);
  const sx = v => L + (fx(v) - x0) / (x1 - x0) * (R - L);
  const sy = v => B - (v - D.ylim[0]) / ((D.ylim[1] - D.ylim[0]) || 1) * (B - T);
  function el(tag, attrs, text) {{
    const e = document.createElementNS(NS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    svg.appendChild(e); return e;
  }}
  function path(ys) {{
    return ys.map((y, i) => (i ? "L" : "M") + sx(D.x[i]).toFixed(1) + " " + sy(y).toFixed(1)).join(" ");
  }}
  el("rect", {{x: L, y: T, width: R - L, height: B - T, fill: "none", stroke: "#888"}});
  for (let k = 0; k <= 4; k++) {{
    const v = D.ylim[0] + k / 4 * (D.ylim[1] - D.ylim[0]);
    el("text", {{x: L - 6, y: sy(v) + 4, "text-anchor": "end", "font-size": 11}}, v.toPrecision(2));
  }}
  const ticks = D.logx ? [] : [D.x[0], D.x[D.x.length - 1]];
  if (D.logx) for (let p = Math.ceil(x0); p <= Math.floor(x1); p++) ticks.push(Math.pow(10, p));
  for (const t of ticks) el("text", {{x: sx(t), y: B + 16, "text-anchor": "middle", "font-size": 11}}, String(t));
  el("text", {{x: (L + R) / 2, y: B + 34, "text-anchor": "middle", "font-size": 12}}, {json.dumps(xlabel)});
  el("text", {{x: 14, y: (T + B) / 2, "text-anchor": "middle", "font-size": 12,
              transform: "rotate(-90 14 " + (T + B) / 2 + ")"}}, {json.dumps(ylabel)});
  const live = {{}};
  for (const name in D.curves) {{
    for (const ys of D.curves[name]) el("path", {{d: path(ys), fill: "none", stroke: D.colors[name], "stroke-opacity": 0.08}});
  }}
  for (const name in D.curves) live[name] = el("path", {{fill: "none", stroke: D.colors[name], "stroke-width": 2.5}});
  const floors = {{}};
  for (const name in D.hlines) floors[name] = el("line", {{x1: L, x2: R, stroke: D.colors[name],
    "stroke-dasharray": "5 4", "stroke-width": 1.2}});
  function show(i) {{
    for (const name in D.curves) live[name].setAttribute("d", path(D.curves[name][i]));
    for (const name in D.hlines) {{
      const y = sy(D.hlines[name][i]).toFixed(1);
      floors[name].setAttribute("y1", y); floors[name].setAttribute("y2", y);
    }}
    out.textContent = D.labels[i];
  }}
  slider.addEventListener("input", () => show(+slider.value));
  show({start});
}})();
</script>
"""
