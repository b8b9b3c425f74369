"""Instance isolation and devices, for every batched model that ``lib`` defines.

The models are found, not listed: every class in a ``lib`` module that has both ``specs``
and ``forward`` is a batched model, and must provide ``example(K)`` (a tiny instance).
A model added later is covered without editing this file.

Isolation means that a batched run of K instances is K separate runs: for shared
``(B, L)`` tokens and for per-instance ``(K, B, L)`` tokens, instance k's output, loss
gradient and optimizer step depend on instance k's weights and data alone.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
import torch

import lib
from lib.training import engine
from lib.training.init import init_params

K, B = 3, 4


def batched_models() -> list[type]:
    found = {}
    for info in pkgutil.walk_packages(lib.__path__, "lib."):
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__:
                continue
            if callable(getattr(cls, "specs", None)) and callable(getattr(cls, "forward", None)):
                found[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return [found[n] for n in sorted(found)]


MODELS = batched_models()
IDS = [c.__qualname__ for c in MODELS]


def _setup(cls, device="cpu", dtype=torch.float64):
    if not callable(getattr(cls, "example", None)):
        pytest.fail(f"{cls.__module__}.{cls.__qualname__} has no classmethod example(K)")
    model = cls.example(K)
    params = init_params(model.specs(), [11, 12, 13], gamma=0.5, device=device, dtype=dtype)
    L = getattr(model, "context_len", 6)
    g = torch.Generator().manual_seed(0)
    X2 = torch.randint(0, model.vocab_size, (B, L), generator=g).to(device)
    X3 = torch.randint(0, model.vocab_size, (K, B, L), generator=g).to(device)
    return model, params, X2, X3


def test_the_library_has_the_models_the_book_uses():
    names = set(IDS)
    assert {
        "EmbMLP",
        "AttnEmbMLP",
        "LinearEmb",
        "Transformer",
        "SingleQueryAttention",
        "FixedAttentionOV",
    } <= names


@pytest.mark.parametrize("cls", MODELS, ids=IDS)
def test_output_is_per_instance_for_both_token_layouts(cls):
    model, params, X2, X3 = _setup(cls)
    out2, out3 = model.forward(params, X2), model.forward(params, X3)
    assert out2.shape[:2] == (K, B) and out3.shape == out2.shape
    # The two layouts are one function: (K, B, L) tokens that repeat X2 give X2's output.
    same = model.forward(params, X2.expand(K, *X2.shape).contiguous())
    torch.testing.assert_close(same, out2)


@pytest.mark.parametrize("layout", ["shared", "per_instance"])
@pytest.mark.parametrize("cls", MODELS, ids=IDS)
def test_loss_of_one_instance_has_zero_gradient_for_every_other(cls, layout):
    model, params, X2, X3 = _setup(cls)
    X = X2 if layout == "shared" else X3
    out = model.forward(params, X)
    names = list(params)
    for k in range(K):
        loss_k = out[k].square().sum()
        grads = torch.autograd.grad(
            loss_k, [params[n] for n in names], retain_graph=True, allow_unused=True
        )
        grads = [
            torch.zeros_like(params[n]) if g is None else g
            for n, g in zip(names, grads, strict=True)
        ]
        own = sum(float(g[k].abs().sum()) for g in grads)
        assert own > 0, f"instance {k}'s loss has no gradient at all: the check would be vacuous"
        for n, g in zip(names, grads, strict=True):
            others = torch.cat([g[:k], g[k + 1 :]])
            assert torch.count_nonzero(others) == 0, (
                f"{cls.__qualname__}: the loss of instance {k} moves other instances' {n}"
            )


def _unused(model, params, X) -> list[str]:
    """Weights that the forward pass does not differentiate (e.g. a detached attention)."""
    names = list(params)
    grads = torch.autograd.grad(model.forward(params, X).sum(), [params[n] for n in names],
                                allow_unused=True)  # fmt: skip
    return [n for n, g in zip(names, grads, strict=True) if g is None]


def _one_step(model, params, X, y):
    p = {n: w.detach().clone().requires_grad_(True) for n, w in params.items()}
    engine.train(
        model, p, lambda step: (X, y), 1, optimizer="adam", lr=[1e-2, 2e-2, 3e-2], clip=1.0,
        log_at=[0], frozen=_unused(model, p, X),
    )  # fmt: skip
    return {n: w.detach() for n, w in p.items()}


@pytest.mark.parametrize("layout", ["shared", "per_instance"])
@pytest.mark.parametrize("cls", MODELS, ids=IDS)
def test_an_engine_step_on_one_instance_changes_no_other(cls, layout):
    """Change instance k's data alone: after one step (Adam, per-instance clipping), every
    other instance's weights are bit-identical, and instance k's are not."""
    model, params, X2, X3 = _setup(cls)
    X = (X2.expand(K, *X2.shape) if layout == "shared" else X3).contiguous()
    C = model.forward(params, X).shape[-1]
    g = torch.Generator().manual_seed(1)
    y = torch.randint(0, C, model.forward(params, X).shape[:-1], generator=g)
    base = _one_step(model, params, X, y)
    for k in range(K):
        X_alt, y_alt = X.clone(), y.clone()
        X_alt[k] = X[k].flip(0).roll(1, -1)
        y_alt[k] = (y[k] + 1) % C
        alt = _one_step(model, params, X_alt, y_alt)
        moved = 0.0
        for n in params:
            for j in range(K):
                if j != k:
                    assert torch.equal(alt[n][j], base[n][j]), (
                        f"{cls.__qualname__}: changing instance {k}'s data changed instance {j}'s {n}"
                    )
            moved += float((alt[n][k] - base[n][k]).abs().sum())
        assert moved > 0, f"instance {k}'s own step ignored its data: the check would be vacuous"


@pytest.mark.parametrize("cls", MODELS, ids=IDS)
def test_one_engine_step_on_the_cpu_given_explicitly(cls):
    model, params, X2, X3 = _setup(cls, device=torch.device("cpu"), dtype=torch.float32)
    y = torch.zeros(model.forward(params, X3).shape[:-1], dtype=torch.long)
    after = _one_step(model, params, X3, y)
    unused = _unused(model, params, X3)
    for n, w in after.items():
        assert w.device.type == "cpu"
        assert torch.equal(w, params[n].detach()) == (n in unused), f"{n} did not train"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("cls", MODELS, ids=IDS)
def test_a_cuda_step_matches_the_cpu_step(cls):
    out = {}
    for dev in ("cpu", "cuda"):
        model, params, X2, X3 = _setup(cls, device=torch.device(dev))
        y = torch.zeros(model.forward(params, X3).shape[:-1], dtype=torch.long, device=dev)
        out[dev] = _one_step(model, params, X3, y)
    for n, w in out["cpu"].items():
        assert out["cuda"][n].device.type == "cuda"
        torch.testing.assert_close(out["cuda"][n].cpu(), w, rtol=1e-6, atol=1e-8)
