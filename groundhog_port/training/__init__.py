"""Training as GroundHog's ``train.py`` did it: ``SGD_adadelta`` updates inside ``MainLoop``.

One room per part of the original:

* :mod:`.cost`     -- the training cost (``SoftmaxLayer.get_cost`` with ``sum_over_time``)
                      and ``LM_Model``'s reported properties;
* :mod:`.order`    -- the order of ``lm_model.params`` (it fixes the summation order of the
                      global gradient norm);
* :mod:`.adadelta` -- ``SGD_adadelta``: gradient clipping, the non-finite guard and the
                      Adadelta update, in the original's order of operations;
* :mod:`.init`     -- a new model drawn as ``RNNEncoderDecoder.build()`` drew it, call for call;
* :mod:`.files`    -- ``*_model.npz``, Python-2 ``*_state.pkl``, ``*_timing.npz`` writers
                      (and the opt-in ``*_adadelta.npz``);
* :mod:`.loop`     -- ``MainLoop.main``: saving every ``saveFreq`` minutes, resuming,
                      the progress line;
* :mod:`.curves`   -- ``analysis.py``'s training curves from ``*_timing.npz``;
* :mod:`.parity`   -- the ``/train_step`` comparison with a recorded trace;
* :mod:`.fidelity` -- the port's runs against GroundHog's recorded training runs (a new
                      model, its first update, 30 continued updates).
"""
