"""The networks and their training: the one init, the batched models, the engine.

A module of this layer imports from :mod:`lib.data` and :mod:`lib.env`, never from the
layers above it (measurement, theory, experiments, the book).

``init`` (the one initialization function), ``layers`` (what the models are built of:
embeddings, per-instance linear maps, norms, rotary positions), ``models`` (the batched
models), ``transformer`` (the decoder-only transformer, its forward pass in named parts),
``engine`` (batched training: the loop, losses, logging and callbacks), ``smoke`` (how
the smoke mode cuts a run), ``optimizers`` (GD, SGD, Adam and AdamW with a learning rate
per instance), ``sweep`` (labelled grids of instances), ``qkov`` (the QK/OV single-query attention models of
Chapters 7 and 8), ``embedstruct`` (Chapter 6's constructed embeddings and mixed
batches) and ``run_cache`` (runs that two chapters read, trained once).
"""
