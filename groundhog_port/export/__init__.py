"""Exporting a loaded checkpoint to formats other tools read (docs/export.md).

:mod:`.onnx_graphs` (the encoder and one decoder step as ONNX graphs) and
:mod:`.beam_search` (the standalone numpy + onnxruntime driver copied next to them).
The exported checkpoint directory (``model.safetensors`` + ``config.json``) is a checkpoint
format the loaders read back: :mod:`groundhog_port.legacy.exported`, with its stable
tensor names in :mod:`groundhog_port.legacy.export_names`; the graphs against a recorded
trace are :mod:`groundhog_port.harness.onnx`.
"""
