"""Measurement: what the chapters read off weights and training histories.

Alignment metrics, onsets and plateaus, probes, permutation nulls, rates and statistics
over seeds. A module of this layer reads models and histories (:mod:`lib.training`,
:mod:`lib.data`); it never imports the theory, the experiments or the book.

``metrics`` (alignment: R_cos, partial correlations, CKA), ``onsets`` (when an event
comes on a logged curve), ``matched_loss`` (curves read where two arms reach one loss),
``statistics`` (bootstrap intervals, exponents and trend tests over seeds),
``attention`` (entropies, distances from uniform, faithfulness), ``plateaus`` (how long a curve waits, and how long it then
takes), ``staircase`` (the context staircase's targets, partial correlations and stairs),
``staircase_callbacks`` (what a staircase run logs), ``stability`` (whether a rerun reads
the same stairs), ``probes`` (held-out linear probes), ``nulls`` (label-permutation
floors), ``rates`` (rates over perturbed copies, Wilson intervals), ``survival`` (event times
with censoring: Kaplan-Meier medians and their intervals), ``lm`` (a language model's
alignment curves) and ``ngram`` (how close a language model passes to each k-gram
predictor).
"""
