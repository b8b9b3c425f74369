"""The data layer: tasks, corpora and the signatures counted on them.

Nothing here trains or imports a model: a module of this layer imports only
:mod:`lib.env` and the modules beside it.

``tasks`` (the synthetic tasks, one module per family), ``corpora`` (the offline corpora,
their documents and splits), ``corpus_files`` (their files, checked before they are read),
``tokenizers`` (character and byte-pair tokenizers), ``windows`` (random windows of a
token stream: a language model's batches), ``signatures`` (probability signatures, by
counting), ``chains`` (what a stream's empirical Markov chains predict, the residual
signatures beyond them, and streams sampled from them) and ``pretrained`` (a pretrained
model's embedding, read from its file).
"""
