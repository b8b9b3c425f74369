"""The Order of Learning: the library behind the executable book.

Core: ``env`` (scale, device, quietness, ``ConfigError``), ``init`` (the one init
function), ``models`` (the batched models), ``engine`` (batched training), ``sweep``
(labelled grids of instances), ``tasks`` (the synthetic tasks), ``corpora`` (offline
corpora and tokenizers; ``corpus_files``: their files, checked before they are read), ``signatures`` (probability signatures), ``metrics`` (alignment,
partial correlation, onsets, attention entropy, matched-loss reading), ``nulls``
(label-permutation floors), ``rates`` (rates over perturbed copies, Wilson intervals), ``style`` (the
figure style and palettes) and ``interactive`` (offline slider figures). Per topic:
``staircase`` (the context staircase), ``probes`` (held-out linear probes: where a
feature lives), ``adam_plateau`` (the bit-1 plateau under Adam: its symmetry, contrast and
two-phase law), ``order`` (what sets the order: context order against signal strength),
``flow`` (the gradient-flow expansions), ``lm``
(language-model training and alignment curves), ``pretrained`` (a pretrained model's
embedding), ``embedstruct`` (embedding structure), ``qkov`` (the QK/OV attention models)
and ``reduced`` (their reduced two-scalar theory). The book: ``experiments`` (one module
per chapter, ``experiments.chNN_name``: its typed ``Config`` and plumbing, and
``announce``), ``claims`` (what each chapter checks, for the reproduction report),
``page`` (gluing a section's numbers into its Markdown),
``booktools`` (the build's command line; its code is ``book``, one module per
concern) and ``bench`` (speed, as ratios). Chapters import what they
need: ``from lib import signatures as sig``.
"""

__version__ = "0.1.0"

import os as _os

# Threads that wait for work sleep instead of spinning. The Makefile exports the same for
# `make book` and `make test`; this covers a chapter run any other way (nbmake by hand, a
# script). A chapter's stability rerun on 2 threads beside another job otherwise spins for
# the core that job holds, many times slower; the results do not change. OpenMP reads it
# once, when torch loads, so it is set before the import (an explicit setting wins).
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch as _torch  # noqa: E402

# Flush denormal floats (below 1e-38) to zero, process-wide. Adam drives the logits of
# labels a model has ruled out down at a constant rate, so their probabilities and
# gradients pass through the denormal range, where CPUs compute many times slower
# (`make bench` measures it). The flag is per thread and worker threads copy it when they
# are created, so it is set here, on import, before torch starts its thread pool.
_torch.set_flush_denormal(True)
