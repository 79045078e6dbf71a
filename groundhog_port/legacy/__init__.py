"""GroundHog's files in and out: ``*_model.npz`` through the one legacy-name table, states, vocabularies, corpora (text, ``.h5``), old vintages, the guards that read untrusted files, and opening an experiment.

* :mod:`.checkpoint` -- GroundHog ``*_model.npz`` -> the port's tensors, through ONE table.
* :mod:`.compat` -- Checkpoints from before GroundHog renamed or merged some of their contents.
* :mod:`.data` -- Batches exactly as GroundHog builds them: score.py's text path and the ``.h5`` bitext path.
* :mod:`.export_names` -- The stable names of an exported checkpoint, and the paper's symbol of every tensor.
* :mod:`.exported` -- An exported checkpoint: ``model.safetensors`` + ``config.json``, no pickle anywhere.
* :mod:`.h5guard` -- What to check before reading an HDF5 dataset whole (``ds[()]``), or its attributes.
* :mod:`.loading` -- Open an archived GroundHog experiment the way sample.py / score.py do.
* :mod:`.longlines` -- A warning for input lines longer than the model was trained on.
* :mod:`.npzguard` -- What to check before decompressing a ``.npz`` archive's members.
* :mod:`.preprocess` -- GroundHog's data preparation (``experiments/nmt/preprocess/``), file for file.
* :mod:`.vocab` -- GroundHog vocabularies: loading, text -> ids (``parse_input``), ids -> text.
"""
