"""An exported checkpoint: ``model.safetensors`` + ``config.json``, no pickle anywhere.

``write_checkpoint(exp, outdir)`` writes what :func:`~groundhog_port.legacy.loading.open_experiment`
loaded from the legacy files:

``model.safetensors``
    every parameter GroundHog saved, float32, under its stable name
    (:mod:`groundhog_port.legacy.export_names`); the metadata holds ``format``,
    ``format_version`` and, per tensor ``N``, ``legacy:N`` (the ``*_model.npz`` key) and
    ``symbol:N`` (the paper's symbol).  The zero biases GroundHog never saved
    (``learn_bias=False``) are not written: a loader adds them as zeros, as GroundHog did.
``config.json``
    ``state``: the complete state the model was built from (``prototype_state()`` updated
    with the pickle and the changes: every architecture option and every search / scoring
    setting the commands read); ``architecture``: the :class:`~groundhog_port.model.config.ModelConfig`
    derived from it (a reader's summary; checked against ``state`` on loading);
    ``vocabularies``: the four dictionaries as JSON (source/target word -> id and id -> word,
    the target one as stored, before ``LM_Model.load_dict`` sets ``<eol>`` and ``oov``);
    ``tensors``: name, legacy name, symbol and shape of each tensor.

:func:`open_checkpoint` reads it back into an :class:`~groundhog_port.legacy.experiment.Experiment`
whose model holds the same float32 bits, so every command computes exactly what it
computes from the legacy files (``parity_tests/export/test_export.py``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

import legacy_states

from .. import budget, lookup
from ..errors import LegacyInputError, quoted
from ..model.config import ModelConfig
from ..outputs import atomic_write_bytes, atomic_write_text, file_in
from ..untrusted import load_json, open_input, read_json
from . import checkpoint, vocab
from .experiment import Experiment, allocate, auto_threads, resolve_device
from .export_names import FORMAT_NAME, FORMAT_VERSION, export_table

WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"

#: a non-finite float in the state (JSON has none): ``{"__float__": "inf"}``
_FLOAT_TAG = "__float__"


def encode_state(value: object) -> object:
    """State values as strict JSON (tuples become lists; inf / nan are tagged)."""
    if isinstance(value, float) and not math.isfinite(value):
        return {_FLOAT_TAG: repr(value)}
    if isinstance(value, (list, tuple)):
        return [encode_state(v) for v in value]
    if isinstance(value, dict):
        return {str(k): encode_state(v) for k, v in value.items()}
    return value


#: what ``{"__float__": ...}`` may hold: the reprs of the non-finite floats
_FLOAT_TEXTS = frozenset({"inf", "-inf", "nan"})


def decode_state(value: object, path: str | os.PathLike[str] | None = None) -> Any:  # JSON
    """:func:`encode_state` undone; a ``{"__float__": ...}`` holding anything but ``"inf"``,
    ``"-inf"`` or ``"nan"`` is one error naming ``path``."""
    if isinstance(value, dict):
        if set(value) == {_FLOAT_TAG}:
            text = value[_FLOAT_TAG]
            if not isinstance(text, str) or text not in _FLOAT_TEXTS:  # [] is unhashable
                raise LegacyInputError(
                    path,
                    f'"state" holds {{"{_FLOAT_TAG}": {quoted(text)}}}: only "inf", "-inf" '
                    'and "nan" are written there',
                )
            return float(text)
        return {k: decode_state(v, path) for k, v in value.items()}
    if isinstance(value, list):
        return [decode_state(v, path) for v in value]
    return value


def architecture(cfg: ModelConfig) -> dict[str, Any]:
    """Every option of the :class:`ModelConfig` as JSON (activations as name, pieces and
    the state's text), with the derived widths."""
    out = dataclasses.asdict(cfg)
    out.update(c_dim=cfg.c_dim, softmax_in=cfg.softmax_in, softmax_name=cfg.softmax_name)
    return out


def write_checkpoint(exp: Experiment, outdir: str | os.PathLike[str]) -> tuple[Path, Path]:
    """Write ``model.safetensors`` and ``config.json`` of ``exp`` into ``outdir``;
    returns their paths."""
    save = _safetensors().numpy.save
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    rows = export_table(exp.cfg)
    tensors, metadata = {}, {"format": FORMAT_NAME, "format_version": str(FORMAT_VERSION)}
    for name, legacy, sym, _ in rows:
        tensors[name] = np.ascontiguousarray(exp.model.get_parameter(name).detach().cpu().numpy())
        metadata[f"legacy:{name}"] = legacy
        metadata[f"symbol:{name}"] = sym
    config = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "weights": WEIGHTS_FILE,
        "state": encode_state(exp.state),
        "architecture": architecture(exp.cfg),
        "vocabularies": {
            "source_word2idx": exp.src_word2idx,
            "source_idx2word": {str(k): v for k, v in exp.src_idx2word.items()},
            "target_word2idx": exp.trg_word2idx,
            "target_idx2word": {str(k): v for k, v in raw_target_idx2word(exp).items()},
        },
        "tensors": [
            {"name": n, "legacy_name": l, "symbol": s, "shape": list(sh)} for n, l, s, sh in rows
        ],
    }
    # files this function names inside OUTDIR: a link there is never followed
    weights, cfg_path = file_in(outdir, WEIGHTS_FILE), file_in(outdir, CONFIG_FILE)
    atomic_write_bytes(weights, save(tensors, metadata=metadata))
    atomic_write_text(
        cfg_path, json.dumps(config, indent=1, ensure_ascii=False, allow_nan=False) + "\n"
    )
    return weights, cfg_path


def raw_target_idx2word(exp: Experiment) -> dict[int, str]:
    """The target id -> word file as read (the experiment's dictionary has ``<eol>`` and
    ``oov`` set by ``LM_Model.load_dict``; the loader sets them again)."""
    if isinstance(exp, ExportedExperiment):
        assert exp.stored_vocabularies is not None  # set by open_checkpoint
        return exp.stored_vocabularies["target_idx2word"]
    return vocab.load_idx2word(exp.path("indx_word_target"))


class ExportedExperiment(Experiment):
    """An :class:`Experiment` whose vocabularies come from ``config.json`` (``state_path``);
    ``weights_path``: its ``model.safetensors``."""

    stored_vocabularies: dict | None = None
    weights_path: Path | None = None

    def _vocab(self, key):
        return self.stored_vocabularies[key]

    @cached_property
    def src_word2idx(self) -> dict[str, int]:
        return self._vocab("source_word2idx")

    @cached_property
    def trg_word2idx(self) -> dict[str, int]:
        return self._vocab("target_word2idx")

    @cached_property
    def src_idx2word(self) -> dict[int, str]:
        return self._vocab("source_idx2word")

    @cached_property
    def trg_idx2word(self) -> dict[int, str]:
        return vocab.target_idx2word(self.state, self._vocab("target_idx2word"), self.state_path)


#: deepest nesting of a ``config.json`` (written: 4 -- vocabularies, state lists)
CONFIG_DEPTH = 16


def _read_config(path):
    """``config.json`` under the parse budget (:func:`groundhog_port.untrusted.read_json`:
    size, depth, number length; a FIFO or device refused by type), checked against the
    layout :func:`write_checkpoint` writes."""
    if not os.path.lexists(path):
        raise LegacyInputError(
            path.parent,
            f"not an exported checkpoint: no {CONFIG_FILE} (write one with groundhog-port export)",
        )
    config = read_json(path, CONFIG_FILE, max_depth=CONFIG_DEPTH)
    if not isinstance(config, dict) or config.get("format") != FORMAT_NAME:
        raise LegacyInputError(path, f'not a {FORMAT_NAME} config (no "format": "{FORMAT_NAME}")')
    if config.get("format_version") != FORMAT_VERSION:
        raise LegacyInputError(
            path,
            f"format_version {config.get('format_version')!r}; this "
            f"groundhog-port reads version {FORMAT_VERSION}",
        )
    for key in ("state", "architecture", "vocabularies"):
        if not isinstance(config.get(key), dict):
            raise LegacyInputError(path, f'no "{key}" object')
    weights = config.get("weights", WEIGHTS_FILE)
    if (
        not isinstance(weights, str)
        or not weights
        or weights in (".", "..")
        or "/" in weights
        or "\\" in weights
        or "\0" in weights
    ):
        raise LegacyInputError(
            path,
            f'"weights" is {quoted(weights)}: the name of a file beside {CONFIG_FILE} '
            f"(written: {WEIGHTS_FILE})",
        )
    return config


def _vocabularies(stored, path):
    """The four dictionaries with int ids, checked for shape."""
    out = {}
    try:
        for side in ("source", "target"):
            out[f"{side}_word2idx"] = {
                str(w): int(i) for w, i in stored[f"{side}_word2idx"].items()
            }
            out[f"{side}_idx2word"] = {
                int(i): str(w) for i, w in stored[f"{side}_idx2word"].items()
            }
    except (KeyError, AttributeError, TypeError, ValueError) as err:
        raise LegacyInputError(
            path,
            f'"vocabularies" is malformed ({err!r}): expected '
            "source/target word2idx and idx2word objects",
        ) from None
    return out


def _safetensors():
    """The ``safetensors`` package, or one line saying how to get it."""
    try:
        import safetensors
        import safetensors.numpy
    except ImportError:
        raise LegacyInputError(
            None,
            "safetensors checkpoints need the safetensors package: "
            "pip install 'groundhog-port[export]'",
        ) from None
    return safetensors


#: a safetensors header parsed takes about 8.6 times its bytes (94 MB of metadata: +805 MiB
#: through ``safe_open`` and ``load_file``, measured for issue 40); charged at this factor
HEADER_FACTOR = 10
#: what one tensor entry of the header costs parsed (1.3 M zero-size tensors: +1.15 GiB)
TENSOR_ENTRY_BYTES = 1024
#: the dtype every GroundHog parameter has (float32); anything else is refused by name
WEIGHTS_DTYPE = "F32"


def check_weights_header(path: str | os.PathLike[str]) -> int:
    """The header of a ``model.safetensors`` read and checked *before* the safetensors
    library parses it: the file a regular one (a FIFO would block its native ``open()``),
    the header's length within the file, its bytes and tensor entries within the parse
    budget, strict JSON of the layout safetensors writes, and every tensor of dtype ``F32``
    (``BF16``, ``F16``, ``F8_*``, ``I32``, ``BOOL``... are refused by name).  Returns the
    number of tensors."""
    what = "not a readable safetensors file"
    try:
        with open_input(path, "a safetensors file") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(8)
            if len(head) < 8:
                raise LegacyInputError(path, f"{what}: {size} bytes, shorter than its header")
            n = int.from_bytes(head, "little")
            if n > size - 8:
                raise LegacyInputError(
                    path, f"{what}: declares a header of {n} bytes in a file of {size}"
                )
            budget.check(path, f"a safetensors header of {n} bytes", HEADER_FACTOR * n)
            header = load_json(f.read(n), path, "the safetensors header", max_depth=3)
    except FileNotFoundError:
        raise LegacyInputError(path, "no such file") from None
    except OSError as err:
        raise LegacyInputError(path, f"{what}: {err.strerror or err}") from None
    if not isinstance(header, dict):
        raise LegacyInputError(path, f"{what}: the header is not a JSON object")
    meta = header.pop("__metadata__", {})
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise LegacyInputError(path, f'{what}: "__metadata__" is not an object of strings')
    budget.check(
        path,
        f"a safetensors header of {len(header)} tensors",
        HEADER_FACTOR * n + TENSOR_ENTRY_BYTES * len(header),
    )
    for name, info in header.items():
        dtype = info.get("dtype") if isinstance(info, dict) else None
        if not isinstance(dtype, str):
            raise LegacyInputError(path, f"{what}: tensor {quoted(name)} has no dtype")
        if dtype != WEIGHTS_DTYPE:
            raise LegacyInputError(
                path,
                f"tensor {quoted(name)} has dtype {quoted(dtype, 40)}: a GroundHog "
                f"checkpoint holds float32 ({WEIGHTS_DTYPE}) tensors only",
            )
    return len(header)


def read_weights(path: str | os.PathLike[str]) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """``{export name: float32 array}`` and the metadata of a ``model.safetensors``
    (its header checked first: :func:`check_weights_header`)."""
    st = _safetensors()
    check_weights_header(path)
    SafetensorError, load_file, safe_open = st.SafetensorError, st.numpy.load_file, st.safe_open
    try:
        with safe_open(str(path), framework="numpy") as f:
            metadata = f.metadata() or {}
        return load_file(str(path)), metadata
    except FileNotFoundError:
        raise LegacyInputError(path, "no such file") from None
    except (SafetensorError, OSError, ValueError) as err:
        raise LegacyInputError(path, f"not a readable safetensors file: {err}") from None


def open_checkpoint(
    directory: str | os.PathLike[str],
    changes: str | list[str] | None = "",
    device: str = "cpu",
    allow_nonfinite: bool = False,
    stable_softmax: bool = False,
    data_dir: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
    strict: bool = False,
) -> ExportedExperiment:
    """An exported checkpoint (a directory, or its ``config.json``) as an :class:`Experiment`.

    ``changes`` apply to the stored state as they apply to a ``*_state.pkl`` (sample.py:228).
    The stored architecture must be the one the stored state describes (a config edited by
    hand on one side only is refused).  ``data_dir``: where the data files the state names
    (training corpora) are looked for, as for a legacy state.
    """
    directory = Path(directory)
    cfg_path = directory if directory.name == CONFIG_FILE else directory / CONFIG_FILE
    config = _read_config(cfg_path)
    stored = decode_state(config["state"], cfg_path)
    if architecture(ModelConfig.from_state(stored, cfg_path)) != config["architecture"]:
        raise LegacyInputError(
            cfg_path, '"architecture" does not match the one "state" describes (edited by hand?)'
        )
    state = dict(stored)
    parsed = legacy_states.parse_changes(changes or "")
    legacy_states.check_change_keys(parsed, stored, strict)
    state.update(parsed)
    cfg = ModelConfig.from_state(state, cfg_path)
    auto_threads()
    weights_path = cfg_path.parent / str(config.get("weights", WEIGHTS_FILE))
    tensors, metadata = read_weights(weights_path)
    if metadata.get("format") != FORMAT_NAME:
        raise LegacyInputError(
            weights_path,
            f'not a {FORMAT_NAME} weights file (metadata "format" is {metadata.get("format")!r})',
        )
    names = {name: legacy for name, legacy, _, _ in export_table(cfg)}
    unknown = sorted(set(tensors) - set(names))
    if unknown:
        raise LegacyInputError(
            weights_path,
            f"unknown tensors {', '.join(unknown[:5])} for the architecture in config.json",
        )
    # the legacy loader's checks (shapes, dtype, missing, non-finite) on the same arrays
    arrays = {names[name]: a for name, a in tensors.items()}
    table, _ = checkpoint.legacy_param_table(cfg)
    checkpoint.check_arrays(arrays, table, weights_path)
    model = allocate(cfg, table, cfg_path, stable_softmax)
    checkpoint.load_into(model, weights_path, allow_nonfinite=allow_nonfinite, arrays=arrays)
    model.to(resolve_device(device))
    model.eval()
    exp = ExportedExperiment(
        cfg_path, state, cfg, model, lookup.data_dirs(data_dir), frozenset(parsed)
    )
    exp.stored_vocabularies = _vocabularies(config["vocabularies"], cfg_path)
    exp.weights_path = weights_path
    return exp
