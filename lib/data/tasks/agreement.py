"""Subject-verb agreement with attractors: an offline stand-in for the SVA data of
Vashisht and Ramaswamy (Chapter 8, ``sec-qkov-beyond``).
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class Agreement:
    """Vocabulary of the agreement grammar (ids), see :func:`agreement_batch`."""

    PAD, THE = 0, 1
    ADJ = tuple(range(2, 10))
    SING = tuple(range(10, 30))  # singular nouns; SING[i] and PLUR[i] are one lemma
    PLUR = tuple(range(30, 50))
    PREP = tuple(range(50, 55))
    VOCAB = 55

    @staticmethod
    def max_len(max_adj: int, max_attractors: int) -> int:
        """Longest sentence plus the final PAD at which the model reads out."""
        return (2 + max_adj) + max_attractors * (3 + max_adj) + 1


class AgreementBatch(NamedTuple):
    """Unpacks as ``X, y, subject_pos, n_attractors, n_mismatched``."""

    X: torch.Tensor  # (n, L) int64, right-padded with PAD; the last position is always PAD
    y: torch.Tensor  # (n,) the number of the subject (0 singular, 1 plural) = the verb's
    subject_pos: torch.Tensor  # (n,) position of the subject noun (the rationale)
    n_attractors: torch.Tensor  # (n,) nouns after the subject
    n_mismatched: torch.Tensor  # (n,) attractors whose number differs from the subject's


def agreement_batch(
    n: int,
    max_adj: int = 2,
    max_attractors: int = 3,
    p_mismatch: float = 0.5,
    generator: torch.Generator | None = None,
) -> AgreementBatch:
    """Sentences ``the ADJ* N_subj (PREP the ADJ* N_attr)^k`` from a small grammar.

    The label is the number of the subject, i.e. of the verb that would follow. The
    numbers of the ``k`` attractor nouns (k uniform in 0..max_attractors) differ from the
    subject's independently with probability ``p_mismatch``, so counting nouns does not
    work: the model must find the subject. Sentences are right-padded with PAD to
    ``Agreement.max_len(...)``; the last position is PAD and is where the model reads out.
    """
    if max_adj < 0 or max_attractors < 0 or not 0 <= p_mismatch <= 1:
        raise ValueError("need max_adj >= 0, max_attractors >= 0 and p_mismatch in [0, 1]")
    A = Agreement
    L = A.max_len(max_adj, max_attractors)
    gen = generator

    def ri(hi, size):
        return torch.randint(0, hi, size, generator=gen)

    X = torch.full((n, L), A.PAD, dtype=torch.int64)
    y = ri(2, (n,))
    subj = torch.zeros(n, dtype=torch.int64)
    k = ri(max_attractors + 1, (n,))
    mism = torch.zeros(n, dtype=torch.int64)
    nouns, n_lemma = A.SING + A.PLUR, len(A.SING)
    for i, (number, n_attr) in enumerate(zip(y.tolist(), k.tolist(), strict=True)):
        # sentences are short; a loop keeps the grammar readable
        toks = [A.THE] + [A.ADJ[j] for j in ri(len(A.ADJ), (int(ri(max_adj + 1, (1,))),)).tolist()]
        subj[i] = len(toks)
        toks.append(nouns[int(ri(n_lemma, (1,))) + n_lemma * number])
        for _ in range(n_attr):
            flip = bool(torch.rand(1, generator=gen) < p_mismatch)
            num = number ^ int(flip)
            mism[i] += int(flip)
            toks += [A.PREP[int(ri(len(A.PREP), (1,)))], A.THE]
            toks += [A.ADJ[j] for j in ri(len(A.ADJ), (int(ri(max_adj + 1, (1,))),)).tolist()]
            toks.append(nouns[int(ri(n_lemma, (1,))) + n_lemma * num])
        X[i, : len(toks)] = torch.tensor(toks)
    return AgreementBatch(X, y, subj, k, mism)
