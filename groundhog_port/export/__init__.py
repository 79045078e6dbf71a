"""Exporting a loaded checkpoint to formats other tools read (docs/export.md).

:mod:`.names` (stable tensor names and the paper's symbols), :mod:`.checkpoint_dir`
(``model.safetensors`` + ``config.json``, and loading them back), :mod:`.onnx_graphs`
(the encoder and one decoder step as ONNX graphs), :mod:`.beam_search` (the standalone
numpy + onnxruntime driver copied next to them), :mod:`.onnx_parity` (the graphs against
a recorded trace under the port's derived bounds).
"""
