"""Random windows of a token stream: the batches a language model trains on.

:func:`window_sampler` returns ``data(step) -> (X, y)`` for :func:`lib.training.engine.train`:
one batch of windows per instance, each a function of the instance's seed and the step
alone, so that a run is reproducible however it is resumed, instances that share a seed
see the same windows, and a real-text model and its controls (streams of one length) train
in one batched run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

__all__ = ["window_sampler"]


def window_sampler(
    stream: torch.Tensor,
    context_len: int,
    batch_size: int,
    seeds: Sequence[int] | int,
    device: torch.device | str = "cpu",
    stream_of: Sequence[int] | None = None,
) -> Callable[[int], tuple[torch.Tensor, torch.Tensor]]:
    """``data(step) -> (X, y)`` of random windows of ``stream`` for :func:`lib.training.engine.train`.

    ``X`` is ``(K, batch_size, context_len)`` and ``y`` the same windows shifted by one
    token (next-token targets), with ``K = len(seeds)``. Instance ``k``'s batch at
    ``step`` depends only on ``(seeds[k], step)``: each draw uses a generator seeded with
    ``hash((seed, step))``, so instances that share a seed see the same data (e.g. a small
    and a standard initialization of the same seed), and a batched run equals the same
    instances run one by one.

    With ``stream_of``, ``stream`` is ``(S, N)``, ``S`` streams of one length (a corpus and
    the Markov chains fitted to it), and instance ``k`` draws its windows from stream
    ``stream_of[k]``, at the same starts as any instance of the same seed: so a real-text
    model and its controls train in one batched run.
    """
    stream = torch.as_tensor(stream, dtype=torch.long)
    seeds = [seeds] if isinstance(seeds, int) else [int(s) for s in seeds]
    if stream_of is None:
        stream = stream.reshape(1, -1)
        stream_of = [0] * len(seeds)
    elif stream.dim() != 2 or len(stream_of) != len(seeds):
        raise ValueError(
            f"stream_of needs a (S, N) stream and one index per seed; got {tuple(stream.shape)} "
            f"and {len(stream_of)} indices for {len(seeds)} seeds"
        )
    elif not all(0 <= int(i) < stream.shape[0] for i in stream_of):
        raise ValueError(f"stream_of has an index outside [0, {stream.shape[0]})")
    if not seeds:
        raise ValueError("window_sampler needs at least one seed")
    if context_len < 1 or batch_size < 1:
        raise ValueError(f"need context_len, batch_size >= 1, got {context_len}, {batch_size}")
    n_starts = stream.shape[1] - context_len
    if n_starts < 1:
        raise ValueError(
            f"a stream of {stream.shape[1]} tokens is too short for windows of {context_len} + 1"
        )
    offsets = torch.arange(context_len + 1)
    stream_dev = stream.to(device)
    which = torch.as_tensor([int(i) for i in stream_of], device=device)[:, None, None]

    def data(step: int):
        starts = torch.stack(
            [
                torch.randint(
                    0,
                    n_starts,
                    (batch_size,),
                    generator=torch.Generator().manual_seed(
                        int(np.random.SeedSequence([s, int(step)]).generate_state(1)[0])
                    ),
                )
                for s in seeds
            ]
        )
        idx = (starts[..., None] + offsets).to(device)  # (K, B, L+1)
        win = stream_dev[which, idx]
        return win[..., :-1], win[..., 1:]

    return data
