"""Chapter 5's corpora and their targets: the real text and the Markov chains fitted to it,
the next-token, skip-k residual and previous-token targets of the tracked tokens, and the
split-half ceilings of each reading."""

from __future__ import annotations

import numpy as np
import torch

from ...data import chains, corpora, tokenizers
from ...data import signatures as sig
from ...measure import lm
from ...measure import metrics as M

Run = tuple[str, str]  # (corpus, tokenization)

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


def chain_orders(cfg) -> tuple[int, ...]:
    """The orders of the chains that train beside the main run, 0 first where it does."""
    return ((0,) if cfg.chains.unigram else ()) + tuple(cfg.chains.orders)


def residual_names(cfg) -> list[str]:
    """The skip-k residual targets the run reads: k = 2 .. the highest chain order."""
    return [f"res_skip{k}" for k in range(2, max(cfg.chains.orders) + 1)]


def target_names(cfg) -> list[str]:
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


def chain_stream(cfg, stream, V: int, order: int) -> torch.Tensor:
    """The stream of the order-``order`` chain fitted to ``stream``, as long as it."""
    if order == 0:
        return unigram_stream(stream, V, len(stream), cfg.chains.seed)
    return chains.markov_stream(
        stream, V, order, len(stream), cfg.chains.seed, n_chains=cfg.chains.n_chains
    )


def corpus_data(cfg, device) -> dict[Run, dict]:
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
            else tokenizers.train_bpe(text, cfg.tokens.bpe_vocab)
        )
        V = tok.vocab_size
        streams = {"text": tok.encode(text).to(device)}
        halves = [tok.encode(h).to(device) for h in corpora.train_halves(c)]
        tracked = sig.frequent_in_both_halves(
            streams["text"],
            halves,
            V,
            cfg.tokens.top_char if kind == "char" else cfg.tokens.top_bpe,
        )
        orders = chain_orders(cfg) if n_run == 0 else (1,)
        for order in orders:
            streams[f"markov{order}"] = chain_stream(cfg, streams["text"], V, order)
        kmax = max(cfg.chains.orders) if n_run == 0 else 2
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


def skip2_ceiling(cfg, corpus: str) -> float:
    """The split-half ceiling of the skip-2 reading on another corpus's characters (its own
    tracked tokens), as :func:`corpus_data` computes the main run's."""
    c = LOADERS[corpus]()
    tok = tokenizers.CharTokenizer(c.text)
    halves = [tok.encode(h) for h in corpora.train_halves(c)]
    stream = tok.encode(corpora.split_by_document(c)[0])
    tracked = sig.frequent_in_both_halves(stream, halves, tok.vocab_size, cfg.tokens.top_char)
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
