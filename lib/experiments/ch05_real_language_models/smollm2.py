"""Chapter 5's pretrained model: SmolLM2-135M's token embedding read against the targets of
each corpus, plainly and with its token classes partialled out."""

from __future__ import annotations

from ...book import page
from ...book.page import listing
from ...data import pretrained
from ...data import signatures as sig
from .. import real_lm_stairs as rd
from .targets import LOADERS, TITLE, targets

NAMES = ("next", "previous", "res_skip2")


def readout(cfg, device) -> dict:
    """Per (corpus, target): SmolLM2's R and its null's upper quantile, then the same with
    every token class's mean row removed from the embedding and the target alike."""
    smol = pretrained.load_smollm2()
    smol_tok = smol.tokenizer()
    smol_R = {}
    for corpus in cfg.pretrained.corpora:
        c = LOADERS[corpus]()
        text = c.text if cfg.pretrained.chars is None else c.text[: cfg.pretrained.chars]
        stream = pretrained.pretrained_stream(smol_tok, text, device)
        used, parts, top_c = sig.frequent_in_every_stream(
            [stream], cfg.pretrained.top, cfg.model.context_len, min_count=10
        )
        top = used[top_c].tolist()
        phi = targets(parts[0], len(used), top_c, 2)
        E = smol.token_embedding(top)
        classes = [rd.token_class(smol_tok.id_to_token(t)) for t in top]
        plain = rd.static_readout(E, {n: phi[n] for n in NAMES}, cfg, {"res_skip2": ("next",)})
        held = rd.static_readout(
            rd.within_class(E, classes),
            {n: rd.within_class(phi[n], classes) for n in NAMES},
            cfg,
            {"res_skip2": ("next",)},
        )
        for n in NAMES:
            smol_R[corpus, n] = (*plain[n], *held[n])
    return smol_R


def readout_table(smol_R: dict) -> list[dict]:
    """One row per corpus and target."""
    return [
        {
            "corpus": TITLE[c],
            "target": rd.LABEL[n],
            "R": v[0],
            "null 99 %": v[1],
            "R, classes out": v[2],
            "null 99 %, classes out": v[3],
        }
        for (c, n), v in smol_R.items()
    ]


def readout_numbers(cfg, smol_R: dict) -> dict:
    """Per target, the R of every corpus, plainly and with the classes out."""
    return {
        f"smol_{key}": page.per_seed_text(
            [smol_R[c, n][j] for c in cfg.pretrained.corpora], "{:.2f}"
        )
        for key, n, j in (
            ("next", "next", 0),
            ("next_cls", "next", 2),
            ("prev", "previous", 0),
            ("prev_cls", "previous", 2),
            ("res2", "res_skip2", 0),
            ("res2_cls", "res_skip2", 2),
        )
    } | {
        "smol_top": cfg.pretrained.top,
        "smol_corpora": listing([TITLE[c] for c in cfg.pretrained.corpora], ""),
    }
