"""When events come on logged curves (lib/measure/onsets.py)."""

from __future__ import annotations

import numpy as np

from lib.measure import onsets


def test_onset_moves_count_logging_steps_and_read_missing_stairs():
    steps = np.array([0, 1, 2, 4, 8, 16])
    moves = onsets.onset_moves(steps, [4, np.nan, np.nan, 16], [2, np.nan, 8, 4])
    assert moves.tolist() == [1, 0, np.inf, 2]
