"""The network of RNNsearch / RNNencdec (Bahdanau et al. 2015, Cho et al. 2014): configuration, activations, layers, encoder, attention, decoder and the encoder-decoder that joins them; pure step functions shared by scoring, search, sampling and training.

* :mod:`.activations` -- The activation strings GroundHog ``eval()``s, parsed against a whitelist.
* :mod:`.attention` -- The alignment model of RNNsearch: ``RecurrentLayerWithSearch.step_fprop`` (encdec.py:299).
* :mod:`.config` -- The architecture a GroundHog state describes, as one frozen dataclass.
* :mod:`.decoder` -- The decoder (``Decoder``, encdec.py:803): initial state, transition, readout.
* :mod:`.encdec` -- ``RNNEncoderDecoder`` (encdec.py:1263): the model as search and scoring see it.
* :mod:`.encoder` -- Forward / backward encoders and the annotation composition (encdec.py:659, :1296).
* :mod:`.layers` -- GroundHog's layers, each a small module holding its legacy-named weights.
* :mod:`.numerics` -- Float32 kernels whose result for one row does not depend on the other rows.
* :mod:`.packed` -- Products by a weight matrix packed once: onnxruntime's MLAS ``sgemm`` on pre-packed ``W``.
"""
