"""lib.env.in_fresh_process: a run on another thread count in a spawned process gives what the
same run gives in this process on that thread count, and OpenMP there is told not to spin."""

import os

import numpy as np
import pytest
import torch

from lib.env import FRESH_PROCESS_ENV, cpu_threads, in_fresh_process
from lib.experiments import ch05_real_language_models as ex
from lib.models import build


def _env_and_threads():
    return {k: os.environ.get(k) for k in FRESH_PROCESS_ENV}, torch.get_num_threads()


def _fail():
    raise ValueError("raised in the child")


def test_child_environment_and_threads_restored():
    before = {k: os.environ.get(k) for k in FRESH_PROCESS_ENV}
    env, threads = in_fresh_process(_env_and_threads, threads=2)
    assert env == FRESH_PROCESS_ENV and threads == 2
    assert {k: os.environ.get(k) for k in FRESH_PROCESS_ENV} == before


def test_child_exception_is_raised_here():
    with pytest.raises(ValueError, match="raised in the child"):
        in_fresh_process(_fail)


def _forwards(model, params, Xs):
    return [model.forward(params, X) for X in Xs]


def test_forward_matches_in_process():
    """The decoder's forward on (B, L) and (K, B, L) tokens, on 2 threads, here and there."""
    cfg = ex.Config(d_model=8, context_len=6, n_layers=1, d_mlp=16)
    model = ex.decoder(cfg, 11)
    params = {n: p.detach() for n, p in build(model, [0, 1], gamma=1.0).items()}
    gen = torch.Generator().manual_seed(0)
    Xs = [
        torch.randint(0, 11, (4, 6), generator=gen),
        torch.randint(0, 11, (2, 4, 6), generator=gen),
    ]
    with torch.no_grad(), cpu_threads(2):
        here = _forwards(model, params, Xs)
    there = in_fresh_process(_forwards, model, params, Xs, threads=2)
    for a, b in zip(here, there, strict=True):
        assert a.shape == b.shape == (2, 4, 6, 11)
        assert torch.equal(a, b)


def test_ch05_threads_rerun_matches_in_process():
    """Chapter 5's rerun on another thread count: the history from the fresh process is the
    one the same run gives in this process on that thread count, bit for bit."""
    cfg = ex.Config(d_model=8, context_len=6, n_layers=1, d_mlp=16, batch_size=4, steps=6,
                    n_logs=3, seeds=(0,))  # fmt: skip
    V, tracked = 11, [0, 1, 2, 3]
    stream = torch.randint(0, V, (400,), generator=torch.Generator().manual_seed(1))
    sweep = ex.instances(cfg)

    def params():
        return build(ex.decoder(cfg, V), sweep["seed"], gamma=ex.gammas(cfg, sweep))

    args = (cfg, V, stream, tracked, sweep, "cpu", "t")
    with cpu_threads(2):
        here = ex._history(*args, params())
    there = in_fresh_process(ex._history, *args, params(), threads=2)
    assert np.array_equal(here.steps, there.steps)
    for name in ("loss", "S_E", "S_U"):
        assert np.array_equal(here[name], there[name]), name
