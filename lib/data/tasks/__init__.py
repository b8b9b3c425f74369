"""Synthetic tasks of the book: one seeded, vectorized generator per task, one module per
family.

Every generator returns plain ``torch.int64`` tensors and never loops over samples in
Python. Where a task is meant to show a property of the *signatures* (the label
statistics of a token, Chapter 1 of the book), the data are an **exactly
balanced enumerated design**: every combination of the task's factors appears the same
number of times. Then the identities the chapters rely on (e.g. "all memory anchors have
the same order-0 label signature") hold exactly on the training set, by construction,
rather than only in expectation.

Notation used in the docstrings (Chapter 1, after Yao et al., arXiv 2509.20124,
``yao2025probsig`` in ``references.bib``):

* order-0 (label) signature of token ``s``: ``phi_s(nu) ∝ sum_n c_s(X_n) 1[y_n = nu]``,
  the label distribution over sequences containing ``s``, weighted by its count;
* order-1 (joint) signature: ``phi_s(mu, nu) ∝ sum_n c_s(X_n) c_mu(X_n) 1[y_n = nu]``,
  the joint distribution of (another token in the context, label).

A task's ``info_order`` says which of the two carries the information that tells the
task-relevant tokens apart.

Modules: ``base`` (:class:`TaskData`, :class:`Task`, shared helpers, :func:`with_marker`),
``composite`` (T1/T2 composite addition), ``gated`` (T3 gated addition, its naive version
and its order-0 control), ``modular`` (modular addition and its order-0 twins),
``synonyms`` (synonym groups), ``scan_snap`` (Scan-and-Snap), ``parity`` (gated parity
bits), ``selective`` (selective parity bits, which attention must learn to read),
``competing`` (competing orders) and ``agreement`` (subject-verb agreement). Every public
name is re-exported here: ``from lib.data import tasks; tasks.gated_addition(...)``.
"""

from .agreement import Agreement, AgreementBatch, agreement_batch
from .base import Task, TaskData, label_distributions, with_marker
from .competing import CompetingOrders, competing_orders
from .composite import T1_KEYS, T1_MEMORY, T1_REASONING, composite_addition
from .gated import (
    T3_ANCHORS,
    T3_GATE_MINUS,
    T3_GATE_PLUS,
    T3_KEYS,
    T3_VOCAB,
    gated_addition,
    gated_addition_control,
    gated_addition_naive,
)
from .modular import modular_addition, plain_addition
from .parity import ParityBits, gated_parity_bits, shuffled_bit1
from .scan_snap import (
    ScanSnap,
    ScanSnapBatch,
    scan_snap_batch,
    scan_snap_probs,
    scan_snap_uniform_distinct_mass,
)
from .selective import SelectiveBits, selective_parity_bits
from .synonyms import SynonymGroups, synonym_groups

__all__ = [
    "TaskData",
    "Task",
    "composite_addition",
    "gated_addition",
    "gated_addition_naive",
    "modular_addition",
    "gated_addition_control",
    "plain_addition",
    "with_marker",
    "label_distributions",
    "SynonymGroups",
    "synonym_groups",
    "ScanSnap",
    "ScanSnapBatch",
    "scan_snap_probs",
    "scan_snap_batch",
    "scan_snap_uniform_distinct_mass",
    "ParityBits",
    "gated_parity_bits",
    "shuffled_bit1",
    "selective_parity_bits",
    "SelectiveBits",
    "CompetingOrders",
    "competing_orders",
    "Agreement",
    "AgreementBatch",
    "agreement_batch",
    "T1_KEYS",
    "T1_MEMORY",
    "T1_REASONING",
    "T3_KEYS",
    "T3_ANCHORS",
    "T3_GATE_PLUS",
    "T3_GATE_MINUS",
    "T3_VOCAB",
]
