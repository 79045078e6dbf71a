"""The stable names of an exported checkpoint, and the paper's symbol of every tensor.

An exported tensor is named by its place in the model (``encoder.transition.W``): the
attribute path of :mod:`groundhog_port.legacy.checkpoint`'s legacy table, frozen here as export
format 1 (``docs/export.md`` lists them; ``parity_tests/export/test_export.py`` checks the list
against this module).  Each tensor also carries its GroundHog name (the key in
``*_model.npz``) and its symbol in the paper, in LaTeX (Bahdanau, Cho & Bengio 2015,
appendix A: ``\\overrightarrow{W}`` ...), both from that one table
(:func:`groundhog_port.legacy.checkpoint.paper_symbol` says where each symbol comes from).
"""

from __future__ import annotations

from ..model.config import ModelConfig
from .checkpoint import legacy_param_table

#: export format version written into the safetensors metadata and config.json
FORMAT_VERSION = 1
FORMAT_NAME = "groundhog-port-export"


def export_table(cfg: ModelConfig) -> list[tuple[str, str, str, tuple[int, ...]]]:
    """``[(export_name, legacy_name, symbol, shape)]`` for every saved parameter of ``cfg``,
    in the order of the legacy table (the order GroundHog's ``lm_model.params`` lists them)."""
    table, _ = legacy_param_table(cfg)
    return [(p.path, p.name, p.symbol, p.shape) for p in table]
