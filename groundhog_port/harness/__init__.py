"""The port against the recordings of the original: the trace format, the derived tolerances, the per-group comparisons and the report of ``groundhog-port parity``.

* :mod:`.check` -- The equivalence harness: recompute what a trace holds and compare, quantity by quantity.
* :mod:`.names` -- The names of the parity groups, for ``--help`` without torch.
* :mod:`.onnx` -- The exported ONNX graphs against a recorded trace, under the port's derived bounds.
* :mod:`.report` -- The parity report and the comparisons every group of the harness uses.
* :mod:`.tolerance` -- The derived tolerance model: how far the port's float32 output may be from a recording.
* :mod:`.trace` -- Read and write the project's trace files (``trace.h5``), format version 1.
"""
