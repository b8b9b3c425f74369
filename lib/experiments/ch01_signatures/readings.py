"""What Chapter 1 reads from the signatures, section by section: T1's order-0 geometry, T3's
orders and gates, the agreement of the orders task by task, the output side, and the corpus
at the character and the BPE level. Each function returns a dict of arrays and numbers."""

from __future__ import annotations

import numpy as np
import torch

from ...data import corpora, tasks, tokenizers
from ...data import signatures as sig
from ...data.tasks import TaskData
from ...measure import metrics as M
from .counting import agreement, on_device, similarity


def t1_order0(D: TaskData, phi_y: torch.Tensor, anchors: list[int], shuffle_seed: int) -> dict:
    """T1's anchors at order 0: the cosines ``S0`` of their uniform-centred label signatures
    ``phi_y``, the memory block ``S_mem``, the largest difference between two memory anchors'
    signatures (``gap_mem``, and ``gap_mem_shuffled`` with the labels shuffled), and the
    reasoning anchors' mean cosine at each distance 1..9 (``sim_by_dist``)."""
    V, n_lab = D.vocab_size, D.n_labels
    phi_y_c = sig.centre(phi_y, "uniform")
    S0_t1 = M.cosine_similarity_matrix(phi_y_c[anchors]).cpu().numpy()

    n_mem = len(D.groups["memory_anchors"])
    mem = np.arange(n_mem)
    S_mem = S0_t1[np.ix_(mem, mem)]

    # Largest difference between two memory anchors' label signatures: 0 iff identical.
    mem_pairs = [(a, b) for a in anchors[:n_mem] for b in anchors[:n_mem] if a < b]
    gap_mem = sig.label_signature_gap(D.X, D.y, V, n_lab, mem_pairs)
    # Control: the same count with the labels shuffled across sequences (the design broken).
    shuffle = torch.randperm(len(D), generator=torch.Generator().manual_seed(shuffle_seed))
    gap_mem_shuffled = sig.label_signature_gap(
        D.X, D.y[shuffle.to(D.y.device)], V, n_lab, mem_pairs
    )

    # Reasoning anchors: mean similarity as a function of the distance |a - a'|.
    rsn = np.arange(n_mem, len(anchors))
    S_rsn = S0_t1[np.ix_(rsn, rsn)]
    dist = np.abs(np.subtract.outer(rsn, rsn))
    sim_by_dist = np.array([S_rsn[dist == k].mean() for k in range(1, 10)])
    return dict(
        anchors=anchors,
        n_labels=n_lab,
        phi_y=phi_y,
        S0=S0_t1,
        S_mem=S_mem,
        gap_mem=gap_mem,
        gap_mem_shuffled=gap_mem_shuffled,
        sim_by_dist=sim_by_dist,
    )


def t1_numbers(t1: dict) -> dict:
    """The glued numbers of :func:`t1_order0`."""
    return dict(
        mem_min_cos=float(t1["S_mem"].min()),
        gap_mem=t1["gap_mem"],
        gap_mem_shuffled=t1["gap_mem_shuffled"],
        sim_d1=float(t1["sim_by_dist"][0]),
        sim_d9=float(t1["sim_by_dist"][-1]),
    )


def t3_orders(phi3, ctx3, joint3, inter3, anch3: list[int], gates: list[int]) -> dict:
    """T3's anchors and gates under four signatures, as cosine matrices: order 0 (``S0``,
    uniform-centred), contextual (``SX``), the full centred order 1 (``S1``), the anchors'
    interaction with the gates (``S1_gate``) and the gates' with the anchors
    (``S1_anchor``); with the cosines of the gates and of each anchor pair at both orders,
    and the masks of anchor pairs of the same and of opposite parity."""
    cos = similarity
    tok3 = anch3 + gates
    A = len(anch3)
    S0_t3 = cos(sig.centre(phi3, "uniform")[tok3])
    SX_t3 = cos(ctx3[tok3])
    S1_t3 = cos(joint3)  # full order 1, every context token
    S1_gate = cos(inter3[:A][:, gates])  # anchors' interaction with the gates
    S1_anchor = cos(inter3[A:][:, anch3])  # gates' interaction with the anchors

    gate_cos0, gate_cos1 = S0_t3[A, A + 1], S1_anchor[0, 1]
    pair_cos0 = np.array([S0_t3[2 * m, 2 * m + 1] for m in range(A // 2)])
    pair_cos1 = np.array([S1_gate[2 * m, 2 * m + 1] for m in range(A // 2)])
    parity = np.array([a % 2 for a in anch3])
    same = np.equal.outer(parity, parity) & ~np.eye(A, dtype=bool)
    diff = ~np.equal.outer(parity, parity)
    return dict(
        anchors=anch3,
        S0=S0_t3,
        SX=SX_t3,
        S1=S1_t3,
        S1_gate=S1_gate,
        S1_anchor=S1_anchor,
        gate_cos0=gate_cos0,
        gate_cos1=gate_cos1,
        pair_cos0=pair_cos0,
        pair_cos1=pair_cos1,
        same=same,
        diff=diff,
    )


def t3_numbers(t3: dict) -> dict:
    """The glued numbers of :func:`t3_orders`."""
    A = len(t3["anchors"])
    return dict(
        gate_cos0=float(t3["gate_cos0"]),
        gate_cos1=float(t3["gate_cos1"]),
        gate_cos1_full=float(t3["S1"][A, A + 1]),
        pair_cos0_min=float(t3["pair_cos0"].min()),
        pair_cos1_max=float(t3["pair_cos1"].max()),
        s1_same=float(t3["S1_gate"][t3["same"]].mean()),
        s1_diff=float(t3["S1_gate"][t3["diff"]].mean()),
    )


def gates_and_marginal(naive: TaskData, D3: TaskData) -> dict:
    """The gates of the naive design against T3's: their order-0 cosine centred on ``u``
    and on the label marginal, and how far each design's gate signatures lie from it."""
    phin = sig.centre(sig.label_signature(naive.X, naive.y, naive.vocab_size, naive.n_labels))
    gn = naive.groups["gates"]
    naive_gate_cos = float(M.cosine_similarity_matrix(phin[gn])[0, 1])
    pbar_n = sig.label_marginal(naive.X, naive.y, naive.vocab_size, naive.n_labels)
    phin_m = sig.centre(phin + 1 / naive.n_labels, "marginal", marginal=pbar_n)
    naive_gate_cos_marg = float(M.cosine_similarity_matrix(phin_m[gn])[0, 1])
    # In our design each gate's signature *is* the label marginal (every sequence has one gate).
    gates = D3.groups["gates"]
    gate_dev_marg = sig.marginal_deviation(D3.X, D3.y, D3.vocab_size, D3.n_labels, gates)
    naive_gate_dev_marg = sig.marginal_deviation(
        naive.X, naive.y, naive.vocab_size, naive.n_labels, gn
    )
    return dict(
        naive_gate_cos=naive_gate_cos,
        naive_gate_cos_marg=naive_gate_cos_marg,
        gate_dev_marg=gate_dev_marg,
        naive_gate_dev_marg=naive_gate_dev_marg,
    )


def order1_table(o1: dict) -> tuple[list, list[str]]:
    """Rows and columns of the table of :func:`~.counting.order1_only`, one row per design."""
    rows = [(name, r["gap0"], r["cos1"], "yes" if r["holds"] else "no") for name, r in o1.items()]
    return rows, ["design", "largest order-0 difference", "largest order-1 cosine", "order 1 only"]


def order_agreement(D: TaskData, t1: dict, t3: dict) -> dict:
    """Pearson r of the upper triangles of the order-0 and order-1 similarities: on T1's
    anchors (``orders_t1``), and on T3's for the full order 1 (``orders_t3_full``) and the
    interaction with the gates (``orders_t3``)."""
    cos, corr = similarity, agreement
    A = len(t3["anchors"])
    S0_t3, S1_t3 = t3["S0"], t3["S1"]
    joint1 = sig.centred_joint_signature(D.X, D.y, D.vocab_size, D.n_labels, tokens=t1["anchors"])
    S1_t1 = cos(joint1)
    corr_t1 = corr(t1["S0"], S1_t1)
    corr_t3_full = corr(S0_t3[:A, :A], S1_t3[:A, :A])
    corr_t3 = corr(S0_t3[:A, :A], t3["S1_gate"])
    return dict(orders_t1=corr_t1, orders_t3_full=corr_t3_full, orders_t3=corr_t3)


def modular_and_plain(p_mod: int, seed: int, device) -> dict:
    """Modular addition mod ``p_mod``: the largest deviation of a label signature from
    uniform (``mod_dev0``), the largest centred joint signature (``mod_dev1``), and over
    every token pair the largest order-0 difference (``mod_gap0``, and ``plain_gap0`` for
    plain addition, the control) and the smallest order-1 difference (``mod_gap1``)."""
    mod = tasks.modular_addition(seed=seed, p=p_mod, test_fraction=0.0).train
    mod = on_device(mod, device)
    phi_mod = sig.label_signature(mod.X, mod.y, p_mod, p_mod)
    mod_dev0 = float((phi_mod - 1 / p_mod).abs().max())
    joint_mod = sig.centred_joint_signature(mod.X, mod.y, p_mod, p_mod, tokens=list(range(p_mod)))
    mod_dev1 = float(joint_mod.abs().max())
    # Which token pairs each order tells apart; the control is plain addition on the same pairs.
    tok_pairs = [(a, b) for a in range(p_mod) for b in range(a + 1, p_mod)]
    plain = tasks.plain_addition(seed=seed, p=p_mod, test_fraction=0.0).train
    plain = on_device(plain, device)
    mod_gap0 = sig.label_signature_gap(mod.X, mod.y, mod.vocab_size, mod.n_labels, tok_pairs)
    plain_gap0 = sig.label_signature_gap(
        plain.X, plain.y, plain.vocab_size, plain.n_labels, tok_pairs
    )
    mod_gap1 = min(float((joint_mod[a] - joint_mod[b]).abs().max()) for a, b in tok_pairs)
    return dict(
        mod_dev0=mod_dev0,
        mod_dev1=mod_dev1,
        mod_gap0=mod_gap0,
        plain_gap0=plain_gap0,
        mod_gap1=mod_gap1,
    )


def centring_agreement(t1: dict, pbar: torch.Tensor) -> float:
    """Pearson r of T1's anchor similarities centred on ``u`` and on the label marginal
    ``pbar``."""
    S0_marg = (
        M.cosine_similarity_matrix(
            sig.centre(t1["phi_y"], "marginal", marginal=pbar)[t1["anchors"]]
        )
        .cpu()
        .numpy()
    )
    return agreement(t1["S0"], S0_marg)


def shakespeare_chars(corpus_chars: int | None, top_tokens: int, top_chars: int, device) -> dict:
    """The Shakespeare training plays (the first ``corpus_chars`` characters, or all) as a
    character stream on ``device``: its tokenizer, vocabulary size, unigram counts, the
    characters by frequency (``order``) and the most frequent ones (``top``)."""
    shakespeare = corpora.load_shakespeare()
    train_text, val_text = corpora.split_by_document(shakespeare)
    if corpus_chars is not None:
        train_text = train_text[:corpus_chars]
    chars = tokenizers.CharTokenizer(train_text)
    stream = chars.encode(train_text).to(device)
    Vc = chars.vocab_size
    unigram = torch.bincount(stream, minlength=Vc).double()
    order = torch.argsort(unigram, descending=True)
    top = order[: min(top_tokens, top_chars)].tolist()
    return dict(
        sha256=shakespeare.sha256,
        train_text=train_text,
        chars=chars,
        stream=stream,
        vocab=Vc,
        unigram=unigram,
        order=order,
        top=top,
    )


def char_signatures(sigs: dict[str, torch.Tensor]) -> dict:
    """The cosine matrix of each uniform-centred signature in ``sigs`` (``S``), its
    agreement with the next-token one (``corr_next``), and the agreement of skip-2 with
    skip-3 and of skip-3 with skip-4 (``corr_wide``)."""
    corr = agreement
    S_lm = {n: M.cosine_similarity_matrix(sig.centre(p)).cpu().numpy() for n, p in sigs.items()}
    corr_next = {n: corr(S_lm["next"], S) for n, S in S_lm.items()}
    corr_wide = {
        "skip2_skip3": corr(S_lm["skip2"], S_lm["skip3"]),
        "skip3_skip4": corr(S_lm["skip3"], S_lm["skip4"]),
    }
    return dict(S=S_lm, corr_next=corr_next, corr_wide=corr_wide)


def vowel_block(S_next: np.ndarray, chars, top: list[int]) -> tuple:
    """The mean next-token cosine among the lower-case vowels of ``top`` and between them
    and the lower-case consonants."""
    top_chars = [chars.id_to_token(i) for i in top]
    vowel = np.array([c in "aeiou" for c in top_chars])
    letter = np.array([c.isalpha() and c.islower() for c in top_chars])
    Sn = S_next
    vv = Sn[np.ix_(vowel, vowel)][~np.eye(vowel.sum(), dtype=bool)].mean()
    vc = Sn[np.ix_(vowel, letter & ~vowel)].mean()
    return vv, vc


def bpe_signatures(train_text: str, bpe_vocab: int, top_tokens: int, skip_offsets, device) -> dict:
    """A byte-level BPE of ``bpe_vocab`` tokens trained on ``train_text``, and for its
    ``top_tokens`` most frequent tokens the agreement of the next-token geometry with the
    skip-k ones (``corr``, by k) and the previous-token one (``corr_pre``)."""
    cos, corr = similarity, agreement
    bpe = tokenizers.train_bpe(train_text, bpe_vocab)
    bstream = bpe.encode(train_text).to(device)
    Vb = bpe.vocab_size
    bcount = torch.bincount(bstream, minlength=Vb)
    btop = torch.argsort(bcount, descending=True)[:top_tokens].tolist()
    b_next = sig.centre(sig.next_token_signature(bstream, Vb, rows=btop))
    b_pre = sig.centre(sig.previous_token_signature(bstream, Vb, rows=btop))
    b_skip = {k: sig.centre(sig.skip_signature(bstream, Vb, k, rows=btop)) for k in skip_offsets}
    Sb_next = cos(b_next)
    corr_b = {k: corr(Sb_next, cos(s)) for k, s in b_skip.items()}
    corr_b_pre = corr(Sb_next, cos(b_pre))
    return dict(vocab=Vb, n_tokens=len(bstream), corr=corr_b, corr_pre=corr_b_pre)
