"""Chapter 8, sharper attention: fixed attention, the ratio sweep, real text.

The chapter's package, one module per job. The package itself holds only the settings:
the shared runs (:mod:`lib.experiments.qkov_training`) read them, and the other modules
read the shared runs, so the page imports each module by name.

- ``settings``: the chapter's :class:`Config` (every scientific choice named once),
  ``OVERRIDES``, and the ratios the sweep is read at;
- ``runs``: the training runs (the Scan-and-Snap runs with the CACO ratio sweep, fixed
  attention, the agreement stand-in, Shakespeare);
- ``readings``: the baselines, attention at the matched loss, the Fig 2 panels, the
  fixed-attention readings and the projection onto the reduced model;
- ``ratios``: attention against the ratio r, and the headline check with its control;
- ``beyond``: what is read from the agreement and Shakespeare runs;
- ``figures``: the chapter's figures;
- ``ledger``: the chapter's claims, checked in the page's order.

The chapter shares its machinery with Chapter 7
(:mod:`lib.experiments.ch07_rescaling_and_reduced_dynamics`):
:mod:`lib.experiments.qkov_official` (the official code's saved outputs),
:mod:`lib.experiments.qkov_training` (the Scan-and-Snap runs with weight snapshots, the
Shakespeare data) and :mod:`lib.experiments.qkov_readings` (what is read from the runs).
The model is :mod:`lib.training.qkov`, the reduced two-scalar theory
:mod:`lib.theory.reduced`, the Scan-and-Snap data and the agreement grammar
:mod:`lib.data.tasks`, the corpus :mod:`lib.data.corpora`, and the matched-loss reading and
the faithfulness scores :mod:`lib.measure.metrics`.
"""

from .settings import (
    CHAPTER,
    CODE_PANEL,
    CODE_RATIO,
    CORPORA,
    EQUAL_RATE,
    OVERRIDES,
    Config,
    code_panel_rows,
    nearest_ratio,
    picks,
    shades,
    sweep_ratios,
)

__all__ = [
    "CHAPTER",
    "CODE_PANEL",
    "CODE_RATIO",
    "CORPORA",
    "EQUAL_RATE",
    "OVERRIDES",
    "Config",
    "code_panel_rows",
    "nearest_ratio",
    "picks",
    "shades",
    "sweep_ratios",
]
