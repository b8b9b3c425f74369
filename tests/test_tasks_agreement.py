"""lib/data/tasks.py, the subject-verb-agreement grammar: labels, attractors and padding."""

from __future__ import annotations

import pytest
import torch

from lib.data import tasks


def test_agreement_grammar_labels():
    A = tasks.Agreement
    b = tasks.agreement_batch(300, generator=torch.Generator().manual_seed(3))
    sing, plur = set(A.SING), set(A.PLUR)
    assert b.X.shape[1] == A.max_len(2, 3) and (b.X[:, -1] == A.PAD).all()
    for x, y, s, k, mm in zip(
        b.X.tolist(),
        b.y.tolist(),
        b.subject_pos.tolist(),
        b.n_attractors.tolist(),
        b.n_mismatched.tolist(),
        strict=True,
    ):
        nouns = [(i, t) for i, t in enumerate(x) if t in sing or t in plur]
        assert x[0] == A.THE and nouns[0][0] == s  # the subject is the first noun
        number = lambda t: int(t in plur)
        assert number(x[s]) == y  # the label is the subject's number
        assert len(nouns) == 1 + k
        assert sum(number(t) != y for _, t in nouns[1:]) == mm
        real = [t for t in x if t != A.PAD]
        assert x[: len(real)] == real  # right-padded
    assert set(b.n_attractors.tolist()) == {0, 1, 2, 3}
    with pytest.raises(ValueError):
        tasks.agreement_batch(2, p_mismatch=2.0)


def test_agreement_batch_is_reproducible_and_respects_its_limits():
    a = tasks.agreement_batch(
        50, max_adj=0, max_attractors=1, generator=torch.Generator().manual_seed(0)
    )
    b = tasks.agreement_batch(
        50, max_adj=0, max_attractors=1, generator=torch.Generator().manual_seed(0)
    )
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x, y)
    assert a.X.shape == (50, tasks.Agreement.max_len(0, 1))
    assert int(a.n_attractors.max()) <= 1 and (a.n_mismatched <= a.n_attractors).all()
    never = tasks.agreement_batch(50, p_mismatch=0.0, generator=torch.Generator().manual_seed(1))
    assert int(never.n_mismatched.sum()) == 0
