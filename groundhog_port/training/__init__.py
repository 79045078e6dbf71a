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
* :mod:`.check`    -- does training work: the cost of the same batches before and after
                      training, the saved checkpoint reloaded (``tools/train_check.py``).

Elsewhere by role: the training curves (``analysis.py``) are :mod:`groundhog_port.tasks.curves`,
the ``/train_step`` parity group :mod:`groundhog_port.harness.groups.train_step`, and the
check of whole recorded training runs test support (``parity_tests/support/train_fidelity.py``).
"""
