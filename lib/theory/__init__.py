"""Theory: the expansions and reduced dynamics that the chapters hold against simulation.

A module of this layer computes what an equation of a chapter predicts, from weights or
signatures; it imports the layers below it (data, training, measure), never the
experiments or the book.

``flow`` (the gradient-flow expansion of the Emb-MLP, and the linear model),
``attention_flow`` (the same for one-layer attention), ``saddle`` (the escape of a pair of
tokens from a symmetric saddle), ``qkov_flow`` (the gradient flow of factorized QK/OV circuits), ``reduced`` (the
reduced two-scalar QK/OV theory), ``order`` (what sets the order: context order against signal strength) and
``adam_plateau`` (the bit-1 plateau under Adam).
"""
