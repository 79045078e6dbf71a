"""What the commands do, as library functions with explicit parameters: reproducing and rescoring archived outputs, whole archives, plots and training curves.

* :mod:`.archive` -- Re-doing a whole tree of old GroundHog experiments: ``groundhog-port archive ROOT``.
* :mod:`.curves` -- Training curves from ``*_timing.npz``, as ``experiments/nmt/analysis.py`` drew them.
* :mod:`.plots` -- Attention heatmaps as Figure 3 of Bahdanau et al. (2015).
* :mod:`.reproduce` -- Re-translating an archived experiment and comparing with what the original wrote.
* :mod:`.rescore` -- BLEU / chrF of translation files, Moses ``multi-bleu.perl`` numbers, and line comparison.
"""
