"""The Order of Learning: the library behind the executable book.

Core: ``env`` (scale, device, quietness, ``ConfigError``), ``process`` (the settings
importing ``lib`` applies to the process: idle threads sleep, denormal floats flush to
zero), ``init`` (the one init
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

from .process import set_process_defaults as _set_process_defaults

_set_process_defaults()
