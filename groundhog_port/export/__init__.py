"""Exporting a loaded checkpoint to formats other tools read (docs/export.md).

:mod:`.names` (stable tensor names and the paper's symbols), :mod:`.checkpoint_dir`
(``model.safetensors`` + ``config.json``, and loading them back).
"""
