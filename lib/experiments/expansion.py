"""Settings that two chapters share: the check of a small-init expansion at init.

Kept apart from the package's ``__init__`` so that editing them re-executes only the
chapters that use them (Chapters 3 and 4).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import ChapterConfig


@dataclass(frozen=True)
class ExpansionCheck(ChapterConfig):
    """The check of a small-init gradient expansion against autograd at initialization,
    shared by Chapters 3 (the Emb-MLP) and 4 (attention).

    init_gammas: the grid of init rates γ (every weight drawn with std fan_in^-γ) at which
        the expansion's terms are compared with the true embedding gradient.
    n_init_seeds: initializations per γ (each instance has its own seed).
    scale_factors: the factors t by which the weights of a γ = 1 init are scaled in the
        scaling test of the orders (a term of order n must scale as t^n).
    slope_tol: how far a fitted log-log power may be from the predicted one.
    cos_target: the cosine with the true gradient asked of a leading term.
    """

    init_gammas: tuple[float, ...] = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
    n_init_seeds: int = 4
    scale_factors: tuple[float, ...] = (1.0, 0.5, 0.25, 0.125)
    slope_tol: float = 0.35
    cos_target: float = 0.99


# The check's ci scale, shared by both chapters' ``OVERRIDES["ci"]``: fewer seeds and
# scale factors (the fitted powers stay within ``slope_tol`` at ci).
CI_OVERRIDES = dict(n_init_seeds=2, scale_factors=(1.0, 0.5, 0.25))
