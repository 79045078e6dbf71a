"""One module per group of recorded quantities compared by the harness.

* :mod:`.sampler` -- Parity of the random sampler against a trace's ``/sampler`` group (docs/trace_format.md, ``/sampler``).
* :mod:`.scoring` -- Parity groups ``repr``, ``pairs`` and ``batch``: the encoder and teacher-forced scoring (``score`` and ``score --mode batch``) against the recording (:mod:`groundhog_port.harness.check` describes each group's quantities).
* :mod:`.search` -- Parity groups ``steps`` and ``beam``: every instrumented step of the literal beam search fed with the recorded inputs, and translate's two searches (literal and batched) on every recorded label (:mod:`groundhog_port.harness.check` describes each group's quantities).
* :mod:`.train_step` -- ``/train_step`` of a trace: one ``SGD_adadelta`` update compared with the port's.
"""
