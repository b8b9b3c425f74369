"""The chapters' experiment configs: one table that maps (chapter, scale) to constants.

The runtime half (scale, device, quietness, ``ConfigError``) lives in :mod:`lib.env` and
is re-exported here; :func:`announce` starts every chapter.
"""

from __future__ import annotations

import platform
from types import MappingProxyType
from typing import Any

import torch

from .env import SCALES, ConfigError, get_device, get_scale, quiet, scale_warning

__all__ = [
    "SCALES",
    "ConfigError",
    "get_device",
    "get_scale",
    "quiet",
    "scale_warning",
    "CONFIGS",
    "chapter_config",
    "announce",
]


# ---------------------------------------------------------------------------
# The experiment configs. One entry per chapter, one dict per scale; every
# constant a chapter uses lives here, so `ci` vs `book` vs `paper` is one table.
# ---------------------------------------------------------------------------
CONFIGS: dict[str, dict[str, dict[str, Any]]] = {
    "01_signatures": {
        "ci": dict(t1_reps=1, t3_reps=2, corpus_chars=400_000, bpe_vocab=512, top_tokens=60),
        "book": dict(t1_reps=2, t3_reps=4, corpus_chars=None, bpe_vocab=1024, top_tokens=100),
        "paper": dict(t1_reps=4, t3_reps=8, corpus_chars=None, bpe_vocab=4096, top_tokens=200),
    },
    "07_qk_ov_sharpening": {
        # seq_len 128 as in the code's CACO runs; SGD rates far above the code's 0.01 so that
        # training reaches a near-zero loss in a few thousand steps (ci/book). r_control: QK
        # slower than OV, the negative control of the headline check. faco_steps: FACO trains
        # until its training loss reaches the code's stopping rule (1e-3). fixed_*: Fig 3 at
        # the code's seq_len and batch, for fixed_steps * lr = the code's 500 * 250 * 0.01. shk_*: the
        # character-level Shakespeare LM of Section 7 (Adam; each multiplier scales only the
        # qk group's rate; paired seeds across multipliers).
        "ci": dict(
            seq_len=128,
            batch=32,
            lr=2.0,
            steps=2500,
            faco_steps=4000,
            seeds=[0, 1],
            r_grid=[1.0, 3.0, 5.0, 10.0],
            r_control=[0.3],
            eval_n=1024,
            fixed_alphas=[0.2, 0.4, 0.6, 0.8, 1.0],
            fixed_steps=625,
            fixed_seq_len=64,
            fixed_batch=128,
            fixed_eval_n=8192,
            balance_lr=[0.01, 0.1, 1.0],
            balance_steps=300,
            sva_train=4000,
            sva_test=1000,
            sva_steps=300,
            sva_lr=1e-3,
            sva_mult=10.0,
            shk_d_model=32,
            shk_context=64,
            shk_layers=1,
            shk_mlp=128,
            shk_batch=16,
            shk_steps=500,
            shk_lr=3e-3,
            shk_mults=[1.0, 10.0, 30.0],
            shk_val=64,
            shk_logs=24,
        ),
        "book": dict(
            seq_len=128,
            batch=32,
            lr=1.0,
            steps=5000,
            faco_steps=8000,
            seeds=[0, 1, 2],
            r_grid=[1.0, 2.0, 3.0, 5.0, 10.0],
            r_control=[0.3],
            eval_n=4096,
            fixed_alphas=[0.2, 0.4, 0.6, 0.8, 1.0],
            fixed_steps=1250,
            fixed_seq_len=64,
            fixed_batch=128,
            fixed_eval_n=32768,
            balance_lr=[0.01, 0.1, 1.0],
            balance_steps=1500,
            sva_train=20000,
            sva_test=4000,
            sva_steps=1500,
            sva_lr=1e-3,
            sva_mult=10.0,
            shk_d_model=32,
            shk_context=64,
            shk_layers=1,
            shk_mlp=128,
            shk_batch=16,
            shk_steps=1500,
            shk_lr=3e-3,
            shk_mults=[1.0, 10.0, 30.0],
            shk_val=64,
            shk_logs=30,
        ),
        "paper": dict(
            seq_len=128,
            batch=32,
            lr=0.01,
            steps=625_000,
            faco_steps=625_000,
            seeds=[1234, 1235, 1236, 1237, 1238],
            r_grid=[1.0, 2.0, 3.0, 4.0, 5.0, 10.0],
            r_control=[0.3],
            eval_n=16000,
            fixed_alphas=[0.2, 0.4, 0.6, 0.8, 1.0],
            fixed_steps=125_000,
            fixed_seq_len=64,
            fixed_batch=128,
            fixed_eval_n=128_000,
            balance_lr=[0.001, 0.01, 0.1],
            balance_steps=20000,
            sva_train=160000,
            sva_test=40000,
            sva_steps=20000,
            sva_lr=1e-3,
            sva_mult=10.0,
            shk_d_model=128,
            shk_context=128,
            shk_layers=2,
            shk_mlp=512,
            shk_batch=64,
            shk_steps=20000,
            shk_lr=1e-3,
            shk_mults=[1.0, 10.0, 30.0],
            shk_val=256,
            shk_logs=60,
        ),
    },
    "03_ffn_flow": {
        # Emb-MLP expansion checks (init, across gamma), the GD hand-over at gamma=1, the
        # T3 escape from the symmetric saddle at gamma=0.5 (clipped full-batch GD in
        # float64; seeds x seeded asymmetry delta in one run; stair 2 within ~2000 steps)
        # and the linear model's modes. esc_tol: the tolerance stated for the
        # linearized escape prediction (predicted / measured within 1 +- esc_tol).
        "ci": dict(
            t3_reps=1,
            activation="silu",
            d_model=32,
            d_hidden=128,
            init_gammas=(0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0),
            init_seeds=2,
            scale_factors=(1.0, 0.5, 0.25),
            gd_hidden=64,
            gd_seeds=2,
            gd_logs=30,
            handover_gamma=1.0,
            handover_steps=800,
            handover_lr=20.0,
            handover_clip=0.005,
            esc_seeds=2,
            esc_deltas=(0.0, 0.01, 1.0),
            esc_steps=2400,
            esc_every=25,
            esc_tol=0.25,
            gd_gamma=0.5,
            gd_lr=100.0,
            gd_clip=0.01,
            lin_d=32,
            lin_gamma=1.0,
            lin_seeds=3,
            lin_lr=1.0,
            lin_steps=1000,
            lin_modes=6,
            lin_theta=0.5,
        ),
        "book": dict(
            t3_reps=1,
            activation="silu",
            d_model=32,
            d_hidden=128,
            init_gammas=(0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0),
            init_seeds=4,
            scale_factors=(1.0, 0.5, 0.25, 0.125),
            gd_hidden=64,
            gd_seeds=4,
            gd_logs=40,
            handover_gamma=1.0,
            handover_steps=1000,
            handover_lr=20.0,
            handover_clip=0.005,
            esc_seeds=3,
            esc_deltas=(0.0, 0.001, 0.01, 0.1, 1.0),
            esc_steps=2800,
            esc_every=20,
            esc_tol=0.25,
            gd_gamma=0.5,
            gd_lr=100.0,
            gd_clip=0.01,
            lin_d=32,
            lin_gamma=1.0,
            lin_seeds=6,
            lin_lr=1.0,
            lin_steps=1500,
            lin_modes=6,
            lin_theta=0.5,
        ),
        "paper": dict(
            t3_reps=1,
            activation="silu",
            d_model=64,
            d_hidden=256,
            init_gammas=(0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0),
            init_seeds=8,
            scale_factors=(1.0, 0.5, 0.25, 0.125),
            gd_hidden=128,
            gd_seeds=8,
            gd_logs=60,
            handover_gamma=1.0,
            handover_steps=2000,
            handover_lr=20.0,
            handover_clip=0.005,
            esc_seeds=8,
            esc_deltas=(0.0, 0.0001, 0.001, 0.01, 0.1, 1.0),
            esc_steps=6000,
            esc_every=10,
            esc_tol=0.25,
            gd_gamma=0.5,
            gd_lr=100.0,
            gd_clip=0.01,
            lin_d=64,
            lin_gamma=1.0,
            lin_seeds=16,
            lin_lr=1.0,
            lin_steps=2000,
            lin_modes=8,
            lin_theta=0.5,
        ),
    },
    "04_attention_flow": {
        # 1-layer attention (no LayerNorm, no MLP, readout at the last token) on T3.
        # cos_target: the cosine with the true gradient we ask of a "leading term".
        "ci": dict(
            t3_reps=1,
            d_model=32,
            init_gammas=(0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0),
            init_seeds=2,
            gd_gammas=(0.5, 0.8),
            gd_seeds=1,
            gd_steps=1200,
            gd_lr=2.0,
            gd_clip=0.01,
            gd_logs=25,
            delta=0.1,
            cos_target=0.99,
            scale_factors=(1.0, 0.5, 0.25),
        ),
        "book": dict(
            t3_reps=1,
            d_model=32,
            init_gammas=(0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0),
            init_seeds=4,
            gd_gammas=(0.5, 0.8),
            gd_seeds=2,
            gd_steps=2000,
            gd_lr=2.0,
            gd_clip=0.01,
            gd_logs=35,
            delta=0.1,
            cos_target=0.99,
            scale_factors=(1.0, 0.5, 0.25, 0.125),
        ),
        "paper": dict(
            t3_reps=1,
            d_model=64,
            init_gammas=(0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0),
            init_seeds=8,
            gd_gammas=(0.5, 0.8),
            gd_seeds=8,
            gd_steps=10000,
            gd_lr=2.0,
            gd_clip=0.01,
            gd_logs=60,
            delta=0.1,
            cos_target=0.99,
            scale_factors=(1.0, 0.5, 0.25, 0.125),
        ),
    },
    "02_context_staircase": {
        # The gated-parity-bit task (lib.tasks.gated_parity_bits): Emb-MLP (SiLU) and a
        # 1-layer attention + MLP model, d = 128, full-batch Adam at lr 1e-2 (issue 12).
        "ci": dict(
            n_keys=12,
            n_keys_three=12,
            h_weights=(3, 2),
            d_model=128,
            d_hidden=128,
            seeds=(0, 1, 2),
            n_logs=36,
            floor_samples=2000,
            grad_gammas=(1.0, 0.8, 0.5, 0.3),
            gamma_small=1.0,
            gamma_large=0.3,
            gamma_large_attn=0.5,
            sweep_gammas=(0.3, 0.5, 0.75, 1.0),
            lr=1e-2,
            qk_rate=0.1,
            two_steps=600,
            attn_steps=500,
            three_steps=900,
            three_gammas=(1.0,),
        ),
        "book": dict(
            n_keys=12,
            n_keys_three=12,
            h_weights=(3, 2),
            d_model=128,
            d_hidden=128,
            seeds=(0, 1, 2, 3, 4),
            n_logs=48,
            floor_samples=4000,
            grad_gammas=(1.0, 0.8, 0.5, 0.3),
            gamma_small=1.0,
            gamma_large=0.3,
            gamma_large_attn=0.5,
            sweep_gammas=(0.3, 0.4, 0.5, 0.6, 0.75, 0.9, 1.0, 1.25),
            lr=1e-2,
            qk_rate=0.1,
            two_steps=1000,
            attn_steps=800,
            three_steps=1200,
            three_gammas=(1.0, 0.3),
        ),
        "paper": dict(
            n_keys=24,
            n_keys_three=24,
            h_weights=(3, 2),
            d_model=256,
            d_hidden=512,
            seeds=(0, 1, 2, 3, 4, 5, 6, 7),
            n_logs=60,
            floor_samples=4000,
            grad_gammas=(1.0, 0.8, 0.5, 0.3),
            gamma_small=1.0,
            gamma_large=0.3,
            gamma_large_attn=0.5,
            sweep_gammas=(0.3, 0.4, 0.5, 0.6, 0.75, 0.9, 1.0, 1.25, 1.5),
            lr=1e-2,
            qk_rate=0.1,
            two_steps=4000,
            attn_steps=4000,
            three_steps=6000,
            three_gammas=(1.0, 0.3),
        ),
    },
    "05_real_language_models": {
        # One-layer attention-only decoder (the model of the small-init theory) on real text.
        # Instances = seeds x {small, standard} init, one batched run per (corpus, tokens,
        # optimizer). ci runs only Shakespeare characters (both optimizers); book runs all.
        "ci": dict(
            d_model=32,
            context_len=32,
            n_layers=1,
            d_mlp=0,
            batch=16,
            seeds=[0, 1, 2],
            gamma_small=1.0,
            gamma_standard=0.5,
            adamw_lr=1e-3,
            adamw_steps=300,
            weight_decay=0.01,
            sgd_lr=2.0,
            sgd_steps=300,
            clip=1.0,
            log_points=28,
            runs=[("shakespeare", "char", "adamw"), ("shakespeare", "char", "sgd")],
            bpe_vocab=512,
            top_char=60,
            top_bpe=100,
            n_perm=200,
            pretrained_top=200,
            pretrained_chars=1_500_000,
        ),
        "book": dict(
            d_model=32,
            context_len=32,
            n_layers=1,
            d_mlp=0,
            batch=16,
            seeds=[0, 1, 2],
            gamma_small=1.0,
            gamma_standard=0.5,
            adamw_lr=1e-3,
            adamw_steps=600,
            weight_decay=0.01,
            sgd_lr=2.0,
            sgd_steps=800,
            clip=1.0,
            log_points=36,
            runs=[
                ("shakespeare", "char", "adamw"),
                ("shakespeare", "char", "sgd"),
                ("shakespeare", "bpe", "adamw"),
                ("shakespeare", "bpe", "sgd"),
                ("kjv", "char", "adamw"),
                ("kjv", "bpe", "adamw"),
            ],
            bpe_vocab=512,
            top_char=60,
            top_bpe=100,
            n_perm=200,
            pretrained_top=300,
            pretrained_chars=2_000_000,
        ),
        "paper": dict(
            d_model=256,
            context_len=128,
            n_layers=4,
            d_mlp=1024,
            batch=64,
            seeds=[0, 1, 2, 3, 4],
            gamma_small=1.0,
            gamma_standard=0.5,
            adamw_lr=3e-4,
            adamw_steps=30_000,
            weight_decay=0.01,
            sgd_lr=1.0,
            sgd_steps=60_000,
            clip=1.0,
            log_points=60,
            runs=[
                ("shakespeare", "char", "adamw"),
                ("shakespeare", "char", "sgd"),
                ("shakespeare", "bpe", "adamw"),
                ("shakespeare", "bpe", "sgd"),
                ("kjv", "char", "adamw"),
                ("kjv", "char", "sgd"),
                ("kjv", "bpe", "adamw"),
                ("kjv", "bpe", "sgd"),
            ],
            bpe_vocab=4096,
            top_char=60,
            top_bpe=500,
            n_perm=1000,
            pretrained_top=1000,
            pretrained_chars=None,
        ),
    },
    "06_embeddings_matter": {
        # Emb-MLP (SiLU, no biases) for every experiment; Adam. E1+E2 are one batched run
        # (tasks x {small, large} init x seeds); E3 and E4 one batched run each.
        "ci": dict(
            d_model=64,
            d_hidden=128,
            lr=1e-2,
            batch=128,
            seeds=[0, 1],
            gamma_small=1.0,
            gamma_large=0.3,
            p=47,
            t3_test_fraction=0.2,
            e1_steps=1500,
            e1_log_every=25,
            e3_steps=1000,
            e3_early_step=100,
            e3_gamma_rest=0.5,
            e4_steps=400,
            e4_keep=0.5,
            e4_main_batch=64,
            e4_aux_batch=16,
            e4_aux_weight=1.0,
        ),
        "book": dict(
            d_model=64,
            d_hidden=128,
            lr=1e-2,
            batch=128,
            seeds=[0, 1, 2],
            gamma_small=1.0,
            gamma_large=0.3,
            p=47,
            t3_test_fraction=0.2,
            e1_steps=2000,
            e1_log_every=25,
            e3_steps=2000,
            e3_early_step=100,
            e3_gamma_rest=0.5,
            e4_steps=800,
            e4_keep=0.5,
            e4_main_batch=64,
            e4_aux_batch=16,
            e4_aux_weight=1.0,
        ),
        "paper": dict(
            d_model=128,
            d_hidden=512,
            lr=3e-3,
            batch=512,
            seeds=[0, 1, 2, 3, 4],
            gamma_small=1.0,
            gamma_large=0.3,
            p=97,
            t3_test_fraction=0.2,
            e1_steps=20000,
            e1_log_every=50,
            e3_steps=10000,
            e3_early_step=200,
            e3_gamma_rest=0.5,
            e4_steps=4000,
            e4_keep=0.5,
            e4_main_batch=256,
            e4_aux_batch=64,
            e4_aux_weight=1.0,
        ),
    },
    # The reproduction report gathers what the chapters recorded; it has no constants.
    "99_report": {"ci": {}, "book": {}, "paper": {}},
}


def _validate(chapter: str, scale: str) -> None:
    if chapter not in CONFIGS:
        raise ConfigError(
            f"no experiment config for chapter {chapter!r}; known chapters: {', '.join(sorted(CONFIGS))}"
        )
    missing = [s for s in SCALES if s not in CONFIGS[chapter]]
    if missing:
        raise ConfigError(f"chapter {chapter!r} has no config for scale(s) {missing}")
    keys = {s: set(CONFIGS[chapter][s]) for s in SCALES}
    if len({frozenset(k) for k in keys.values()}) != 1:
        raise ConfigError(f"chapter {chapter!r}: the scales define different keys: {keys}")
    if scale not in SCALES:
        raise ConfigError(f"unknown scale {scale!r}; valid values are: {', '.join(SCALES)}")


def chapter_config(chapter: str, scale: str | None = None) -> MappingProxyType:
    """The read-only experiment config of ``chapter`` at ``scale`` (default: ``get_scale()``)."""
    scale = get_scale() if scale is None else scale
    _validate(chapter, scale)
    return MappingProxyType(dict(CONFIGS[chapter][scale], scale=scale))


def announce(chapter: str, cpu_threads: int | None = None) -> tuple[MappingProxyType, torch.device]:
    """Print the scale, device and versions a chapter runs at; return (config, device).

    Called in every chapter's first code cell, so the first output of the page
    says at what scale and on what device its numbers were made. Every model and
    tensor of the chapter goes to the returned device. ``cpu_threads`` caps torch's
    threads, on the CPU only (tiny models run faster on one thread of a shared machine;
    on a GPU the cap would only starve the host side).
    """
    cfg = chapter_config(chapter)
    dev = get_device()
    torch.manual_seed(0)
    if cpu_threads is not None and dev.type == "cpu":
        torch.set_num_threads(int(cpu_threads))
    print(
        f"chapter {chapter} | BOOK_SCALE={cfg['scale']} | device={dev} | "
        f"torch {torch.__version__} | python {platform.python_version()}"
    )
    return cfg, dev
