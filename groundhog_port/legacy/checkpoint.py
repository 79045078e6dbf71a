"""GroundHog ``*_model.npz`` -> the port's tensors, through ONE table.

``legacy_param_table(cfg)`` lists every parameter the original model of this
configuration saves (``Container.save`` writes one float32 array per Theano shared
variable in ``lm_model.params``, keyed by its GroundHog name), the module attribute
it fills, its shape, and its symbol in the paper (:func:`paper_symbol`): the one
vocabulary table of the port, read by loading, export and the docstrings.  It also names the tensors GroundHog creates but never
saves: biases of layers built with ``learn_bias=False`` (they stay at their initial
value, zeros) and the layers built but never used (so they are not in
``lm_model.params``).

Loading is strict by default: a missing, unknown or wrongly shaped parameter is an
error listing every offending name.  ``lenient=True`` reproduces
``Container.load`` (groundhog/layers/basic.py:168): log and continue, a missing
parameter stays at its ``skip_init=True`` value (zeros); only a shape mismatch
raises.
"""

from __future__ import annotations

import logging
import os
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..errors import LegacyInputError
from ..model.config import GRCONV, ModelConfig
from ..untrusted import open_input, reading
from . import compat, npzguard

if TYPE_CHECKING:
    from ..model.encdec import RNNEncoderDecoder

#: a model file's arrays as read: the data, or a member's header only (:func:`read_npz`)
Arrays = Mapping[str, np.ndarray | npzguard.Member]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LegacyParam:
    name: str  # GroundHog's name, the key in *_model.npz
    path: str  # attribute path in RNNEncoderDecoder
    shape: tuple
    symbol: str = ""  # the paper's symbol, LaTeX (paper_symbol)


@dataclass(frozen=True)
class UnsavedTensor:
    name: str  # the name GroundHog gives it
    reason: str  # why no model file holds it, and what the port uses instead


def _multilayer(table, unsaved, name, path, shape_in, shape_out, learn_bias=True):
    table.append(LegacyParam(f"W_0_{name}", f"{path}.W", (shape_in, shape_out)))
    if learn_bias:
        table.append(LegacyParam(f"b_0_{name}", f"{path}.b", (shape_out,)))
    else:
        unsaved.append(
            UnsavedTensor(
                f"b_0_{name}",
                "learn_bias=False: never saved, added as "
                "its initial value (zeros, init_bias with bias_scale=0)",
            )
        )


def _recurrent(table, name, path, dim, rec):
    if rec.layer == GRCONV:
        # RecursiveConvolutionalLayer._init_params (rconv_layers.py:144-184), in its order
        table += [
            LegacyParam(f"W_{name}", f"{path}.W", (dim, dim)),
            LegacyParam(f"U_{name}", f"{path}.U", (dim, dim)),
            LegacyParam(f"b_{name}", f"{path}.b", (dim,)),
            LegacyParam(f"GW_{name}", f"{path}.GW", (dim, 3)),
            LegacyParam(f"GU_{name}", f"{path}.GU", (dim, 3)),
            LegacyParam(f"Gb_{name}", f"{path}.Gb", (3,)),
        ]
        return
    table.append(LegacyParam(f"W_{name}", f"{path}.W", (dim, dim)))
    if rec.gating:
        table.append(LegacyParam(f"G_{name}", f"{path}.G", (dim, dim)))
    if rec.reseting:
        table.append(LegacyParam(f"R_{name}", f"{path}.R", (dim, dim)))


def _encoder(table, unsaved, cfg, prefix, path, rec):
    dim, rank = cfg.dim, cfg.rank_n_approx
    if prefix == "enc":
        _multilayer(
            table, unsaved, "enc_approx_embdr", f"{path}.approx_embedder", cfg.n_sym_source, rank
        )
    else:
        unsaved.append(
            UnsavedTensor(
                "W_0_back_enc_approx_embdr / b_0_back_enc_approx_embdr",
                "built by the original but unused: the backward encoder embeds x[::-1] with the "
                "forward encoder's approx_embedder (encdec.py:1330), so never saved",
            )
        )
    _multilayer(table, unsaved, f"{prefix}_input_embdr_0", f"{path}.input_embedder", rank, dim)
    if rec.gating:
        _multilayer(
            table,
            unsaved,
            f"{prefix}_update_embdr_0",
            f"{path}.update_embedder",
            rank,
            dim,
            learn_bias=False,
        )
    if rec.reseting:
        _multilayer(
            table,
            unsaved,
            f"{prefix}_reset_embdr_0",
            f"{path}.reset_embedder",
            rank,
            dim,
            learn_bias=False,
        )
    _recurrent(table, f"{prefix}_transition_0", f"{path}.transition", dim, rec)
    unsaved.append(
        UnsavedTensor(
            f"W_0_{prefix}_repr_contrib_0 / b_0_{prefix}_repr_contrib_0",
            "built for stacked encoders only, unused with one level (encdec.py:688), never saved",
        )
    )


def legacy_param_table(cfg: ModelConfig) -> tuple[list[LegacyParam], list[UnsavedTensor]]:
    """``(saved, unsaved)``: every saved parameter of this architecture, and the
    tensors GroundHog names but never saves."""
    table: list[LegacyParam] = []
    unsaved: list[UnsavedTensor] = []
    dim, rank, c_dim = cfg.dim, cfg.rank_n_approx, cfg.c_dim
    _encoder(table, unsaved, cfg, "enc", "encoder", cfg.enc)
    if cfg.needs_backward_encoder:
        _encoder(table, unsaved, cfg, "back_enc", "backward_encoder", cfg.back_enc)
    else:
        unsaved.append(
            UnsavedTensor(
                "*_back_enc_*",
                "backward=last_backward=False: the backward "
                "encoder is built but feeds nothing, so never saved",
            )
        )
    d = "decoder"
    _multilayer(table, unsaved, "dec_approx_embdr", f"{d}.approx_embedder", cfg.n_sym_target, rank)
    _multilayer(table, unsaved, "dec_input_embdr_0", f"{d}.input_embedder", rank, dim)
    if cfg.dec.gating:
        _multilayer(
            table,
            unsaved,
            "dec_update_embdr_0",
            f"{d}.update_embedder",
            rank,
            dim,
            learn_bias=False,
        )
    if cfg.dec.reseting:
        _multilayer(
            table, unsaved, "dec_reset_embdr_0", f"{d}.reset_embedder", rank, dim, learn_bias=False
        )
    _recurrent(table, "dec_transition_0", f"{d}.transition", dim, cfg.dec)
    if cfg.search:
        table += [
            LegacyParam("A_dec_transition_0", f"{d}.A", (c_dim, dim)),
            LegacyParam("B_dec_transition_0", f"{d}.B", (dim, dim)),
            LegacyParam("D_dec_transition_0", f"{d}.D", (dim, 1)),
        ]
    if cfg.bias_code:
        _multilayer(table, unsaved, "dec_initializer_0", f"{d}.initializer", dim, dim)
    else:
        unsaved.append(UnsavedTensor("dec_initializer_0", "bias_code=False: ZeroLayer, s_0 = 0"))
    if cfg.decoding_inputs:
        _multilayer(
            table, unsaved, "dec_dec_inputter_0", f"{d}.dec_inputter", c_dim, dim, learn_bias=False
        )
        if cfg.dec.gating:
            _multilayer(
                table,
                unsaved,
                "dec_dec_updater_0",
                f"{d}.dec_updater",
                c_dim,
                dim,
                learn_bias=False,
            )
        if cfg.dec.reseting:
            _multilayer(
                table,
                unsaved,
                "dec_dec_reseter_0",
                f"{d}.dec_reseter",
                c_dim,
                dim,
                learn_bias=False,
            )
    _multilayer(
        table, unsaved, "dec_repr_readout", f"{d}.repr_readout", c_dim, dim, learn_bias=False
    )
    _multilayer(table, unsaved, "dec_hid_readout_0", f"{d}.hid_readout", dim, dim)
    if cfg.bigram:
        _multilayer(
            table, unsaved, "dec_prev_readout_0", f"{d}.prev_readout", rank, dim, learn_bias=False
        )
    sm, out = cfg.softmax_name, f"{d}.output_layer"
    if rank:
        table += [
            LegacyParam(f"W1_{sm}", f"{out}.W1", (cfg.softmax_in, rank)),
            LegacyParam(f"W2_{sm}", f"{out}.W2", (rank, cfg.n_sym_target)),
        ]
    else:
        table.append(LegacyParam(f"W_{sm}", f"{out}.W", (cfg.softmax_in, cfg.n_sym_target)))
    table.append(LegacyParam(f"b_{sm}", f"{out}.b", (cfg.n_sym_target,)))
    table = [LegacyParam(p.name, p.path, p.shape, paper_symbol(p.path, cfg)) for p in table]
    return table, unsaved


# The paper's symbols: Bahdanau, Cho & Bengio (2015), appendix A (A.2.1 encoder, A.2.2
# decoder, \overrightarrow / \overleftarrow for the two encoder directions); for the grConv
# encoder Cho et al. (2014b), "On the properties of neural machine translation", section 3.2.
# The paper omits biases ("all the biases are omitted"); ``b[X]`` is the bias added with X's
# product.  RNNencdec models (Cho et al. 2014a) use the same symbols for the same roles.

#: encoder prefix -> the paper's arrow (forward / backward RNN, appendix A.2.1)
_ARROW = {"encoder": "\\overrightarrow", "backward_encoder": "\\overleftarrow"}
#: GRU attribute (of an encoder or the decoder) -> symbol without arrow
_GRU = {
    "input_embedder.W": "W",
    "update_embedder.W": "W_z",
    "reset_embedder.W": "W_r",
    "transition.W": "U",
    "transition.G": "U_z",
    "transition.R": "U_r",
}
#: the grConv (Cho et al. 2014b eq. 4-5): W multiplies the right child, U the left one
_GRCONV = {
    "transition.W": "W^r",
    "transition.U": "W^l",
    "transition.GW": "G^r",
    "transition.GU": "G^l",
}
#: decoder attribute -> symbol: attention e_ij = v_a^T tanh(W_a s_{i-1} + U_a h_j) (A.1.2),
#: s_0 = tanh(W_s h_1 backward), C/C_z/C_r take the context c_i, the readout
#: t~_i = U_o s_{i-1} + V_o E y_{i-1} + C_o c_i, p(y_i) from W_o t_i (A.2.2)
_DECODER = {
    "approx_embedder.W": "E (target)",
    "A": "U_a",
    "B": "W_a",
    "D": "v_a",
    "initializer.W": "W_s",
    "dec_inputter.W": "C",
    "dec_updater.W": "C_z",
    "dec_reseter.W": "C_r",
    "repr_readout.W": "C_o",
    "hid_readout.W": "U_o",
    "prev_readout.W": "V_o",
    "output_layer.W": "W_o",
    "output_layer.W1": "W_o (first factor, W_o = W1 W2)",
    "output_layer.W2": "W_o (second factor, W_o = W1 W2)",
}


def _with_arrow(arrow, sym):
    base, _, sub = sym.partition("_")
    return f"{arrow}{{{base}}}" + (f"_{sub}" if sub else "")


def _weight_symbol(path, cfg):
    """Symbol of a weight matrix at module ``path`` (``encoder.transition.W`` ...)."""
    head, _, rest = path.partition(".")
    if head in _ARROW:
        if rest == "approx_embedder.W":
            return "E (source)"  # one E for both directions, as in the paper (encdec.py:1330)
        if cfg.enc.layer == GRCONV and head == "encoder" and rest in _GRCONV:
            return _GRCONV[rest]
        return _with_arrow(_ARROW[head], _GRU[rest])
    if rest in _DECODER:
        return _DECODER[rest]
    return _GRU[rest]


def paper_symbol(path: str, cfg: ModelConfig) -> str:
    """The paper's symbol (LaTeX) of the parameter at attribute ``path`` of ``cfg``'s model
    (a bias: ``b[<its weight's symbol>]``)."""
    if path.endswith(".Gb"):
        return "b[G]"
    if path.endswith(".b"):
        owner = path[:-1] + "W"
        if owner.endswith("output_layer.W"):
            return "b[W_o]"
        if owner == "encoder.transition.W" and cfg.enc.layer == GRCONV:
            return "b[W]"
        return f"b[{_weight_symbol(owner, cfg)}]"
    return _weight_symbol(path, cfg)


def read_npz(
    path: str | os.PathLike[str],
    table: Sequence[LegacyParam] | None = None,
    on_array: Callable[[str, np.ndarray], object] | None = None,
) -> dict[str, Any]:
    """The arrays of a GroundHog model file (:func:`read_npz_arrays`); old vintages are
    converted in memory (:func:`compat.upgrade_model`).  With the state's ``table``, only
    its parameters (and an old vintage's ``*_back_*`` projections) are read; any other
    member is returned as its header (:class:`npzguard.Member`: name, shape, dtype), never
    decompressed, so that :func:`check_arrays` can still name it.  ``on_array(name, array)``
    is called as soon as an array is read (:class:`~groundhog_port.model.packed.PackingAhead`)."""
    expected: dict[str, tuple[int, ...] | None] | None = None
    if table is not None:
        expected = {p.name: p.shape for p in table}
        # an old vintage's *_back_* projections, and the forward ones they are stacked under
        # (of another shape until then): read whatever their shape, charged to the budget
        expected.update(
            {
                name: None
                for pair in compat.BACK_PROJECTIONS
                for name in pair
                if name in expected or name.startswith("W_0_dec_back_")
            }
        )
    return compat.upgrade_model(read_npz_arrays(path, expected=expected, on_array=on_array), path)


#: the arrays of a ``<prefix>timing.npz`` that mark it as one (mainLoop.py:132-148 starts
#: every timing record with these two)
TIMING_MARKS = frozenset({"step", "next_offset"})
#: the prefixes of a ``<prefix>adadelta.npz``'s arrays (``train --keep-accumulators``)
ADADELTA_PREFIXES = ("gnorm2_", "dnorm2_")


def not_a_model_npz(path: str | os.PathLike[str], names: Iterable[str]) -> str | None:
    """What a ``.npz`` holding the arrays ``names`` is when it is not a model file (a
    ``*_timing.npz``, a ``*_adadelta.npz``), said with where the model is; None otherwise."""
    names = set(names)
    path = Path(path)
    if TIMING_MARKS <= names:
        what = "a training timing file (*_timing.npz: step, next_offset, cost... per update)"
    elif names and all(n.startswith(ADADELTA_PREFIXES) or n == "step" for n in names):
        what = "Adadelta's accumulators (*_adadelta.npz, train --keep-accumulators)"
    else:
        return None
    stem = path.name.rsplit("_", 1)[0] + "_" if "_" in path.name else None
    beside = path.with_name(stem + "model.npz") if stem else None
    where = f": {beside}" if beside is not None and beside.is_file() else ""
    return f"is {what}, not a model; give the experiment's *_model.npz{where}"


#: how an export (``export --format safetensors``) is given instead of --state S MODEL
CHECKPOINT_HINT = (
    "translate, score, serve, parity, reproduce and export take its folder as --checkpoint DIR"
)


def not_a_model_file(path: str | os.PathLike[str], magic: bytes) -> str | None:
    """What a file that is no zip archive is, from its first bytes ``magic`` (up to 16), so
    that a wrong file given as MODEL is named; None when it is nothing known."""
    if magic[:1] == b"\x80" or magic[:3] == b"(dp":  # GroundHog's pickles: protocol 2 or 0
        what = "a *_state.pkl" if Path(path).name.endswith("state.pkl") else "a vocabulary"
        return f"a pickle: {what} given for the model? (--state S_state.pkl S_model.npz)"
    if magic.startswith(b"\x89HDF\r\n\x1a\n"):
        return "an HDF5 file (a trace.h5 or a binarized corpus?)"
    if len(magic) >= 9 and magic[8:9] == b"{" and int.from_bytes(magic[:8], "little") < 1 << 30:
        return f"a safetensors file (an export: {CHECKPOINT_HINT})"
    if magic and b"\0" not in magic:
        try:
            magic.decode("utf-8")
        except UnicodeDecodeError:
            return None
        return "a text file (a test set or a translation?)"
    return None


def read_npz_arrays(
    path: str | os.PathLike[str],
    kind: str = "model",
    expected: Mapping[str, tuple[int, ...] | None] | None = None,
    allowance: int = 0,
    on_array: Callable[[str, np.ndarray], object] | None = None,
) -> dict[str, Any]:
    """The arrays of a GroundHog ``*_{kind}.npz`` file (``model``, ``timing``, ``adadelta``),
    never unpickling anything.  Every member's header is checked before any data is
    decompressed (:func:`npzguard.read_members`: declared sizes, compression ratio, the parse
    budget beyond what ``expected`` -- ``{name: shape}`` from the state -- declares, plus
    ``allowance`` bytes); members outside ``expected`` come back as headers only.  numpy's
    zip reader runs inside the untrusted-file guard: whatever it raises on a damaged archive
    (bad CRC, unsupported compression, encrypted member, damaged deflate data, malformed
    ``.npy`` header...) is one error naming the file.  ``on_array(name, array)``: called
    with each array as soon as it is read."""
    with reading(path, f"truncated or corrupt .npz {kind} file"):
        try:
            if Path(path).is_dir():  # before open_input's generic refusal: name an export
                raise IsADirectoryError(path)
            with open_input(path, f"an .npz {kind} file") as f:  # FIFOs, devices: by type
                magic = f.read(16)
            if magic[:4] != b"PK\x03\x04":
                what = not_a_model_file(path, magic) if kind == "model" else None
                raise LegacyInputError(
                    path,
                    f"not a .npz archive: it is {what}; the model is the experiment's "
                    "*_model.npz (numpy.savez output)"
                    if what
                    else f"not a .npz archive (no zip header); a GroundHog {kind} file "
                    "is numpy.savez output",
                )
            npzguard.check_directory(path)
            with zipfile.ZipFile(path) as zf:
                if kind == "model":
                    names = [n.removesuffix(".npy") for n in zf.namelist()]
                    other = not_a_model_npz(path, names)
                    if other:
                        raise LegacyInputError(path, other)
                to_read, skipped = npzguard.read_members(zf, path, kind, expected, allowance)
                arrays = {}
                for name, member in to_read.items():
                    arrays[name] = npzguard.read_array(zf, member)
                    if on_array is not None:
                        on_array(name, arrays[name])
            return {**arrays, **skipped}
        except FileNotFoundError:
            raise LegacyInputError(path, "no such file") from None
        except IsADirectoryError:
            export = (
                f" (it holds an export: {CHECKPOINT_HINT})"
                if (Path(path) / "config.json").is_file()
                else ""
            )
            raise LegacyInputError(
                path, f"is a directory, expected a *_{kind}.npz file{export}"
            ) from None
        except ValueError as err:
            if "allow_pickle" in str(err) or "Object arrays" in str(err):
                raise LegacyInputError(
                    path,
                    f"holds object arrays (pickled Python objects); a "
                    f"GroundHog {kind} file holds only numeric arrays",
                ) from None
            raise
        except MemoryError:
            raise LegacyInputError(
                path, "an array declares a size that does not fit in memory"
            ) from None


def check_arrays(
    arrays: Arrays,
    table: Sequence[LegacyParam],
    path: str | os.PathLike[str],
    lenient: bool = False,
) -> list[str]:
    """Compare a model file with the table; returns the problems found (lenient) or raises."""
    expected = {p.name: p for p in table}
    problems = []
    for p in table:
        if p.name not in arrays:
            problems.append(f"missing {p.name} (expected shape {p.shape})")
            continue
        a = arrays[p.name]
        if tuple(a.shape) != p.shape:
            problems.append(f"{p.name}: expected shape {p.shape}, found {tuple(a.shape)}")
        elif a.dtype != np.float32:
            problems.append(f"{p.name}: expected float32, found {a.dtype}")
    for name in sorted(set(arrays) - set(expected)):
        problems.append(f"unknown parameter {name} (shape {tuple(arrays[name].shape)})")
    if problems and not lenient:
        raise LegacyInputError(path, "model file does not match the state: " + "; ".join(problems))
    return problems


def nonfinite_params(arrays: Arrays) -> dict[str, int]:
    """``{name: count}`` of parameters holding NaN or Inf."""
    out = {}
    for name, a in arrays.items():
        # max and min are NaN when any value is, +-inf when one is: two passes without
        # temporaries decide it for the usual all-finite array (counted only otherwise)
        if (
            isinstance(a, np.ndarray)
            and a.dtype.kind == "f"
            and a.size
            and not (np.isfinite(a.max()) and np.isfinite(a.min()))
        ):
            n = int(a.size - np.isfinite(a).sum())
            if n:
                out[name] = n
    return out


def load_into(
    model: RNNEncoderDecoder,
    path: str | os.PathLike[str],
    lenient: bool = False,
    allow_nonfinite: bool = False,
    arrays: Arrays | None = None,
) -> list[LegacyParam]:
    """Fill ``model`` from ``path`` (``arrays``: its :func:`read_npz`, if already read);
    returns the table used."""
    table, _ = legacy_param_table(model.cfg)
    if arrays is None:
        arrays = read_npz(path, table)
    problems = check_arrays(arrays, table, path, lenient)
    bad = nonfinite_params({p.name: arrays[p.name] for p in table if p.name in arrays})
    if bad and not allow_nonfinite:
        listing = ", ".join(f"{k} ({v} values)" for k, v in sorted(bad.items()))
        raise LegacyInputError(
            path,
            f"non-finite weights (NaN/Inf) in {listing}; pass --allow-nonfinite to use them anyway",
        )
    for problem in problems:
        logger.warning("LENIENT LOAD (as GroundHog's Container.load): %s -- %s", path, problem)
    for p in table:
        a = arrays.get(p.name)
        if a is None or tuple(a.shape) != p.shape:
            if a is not None:  # GroundHog raises on shape mismatch even when lenient
                raise LegacyInputError(
                    path, f"{p.name}: expected shape {p.shape}, found {tuple(a.shape)}"
                )
            continue  # missing: stays zero, as with skip_init=True
        if a.dtype.kind not in "fiub":  # lenient: text, structured, complex... cannot be weights
            raise LegacyInputError(
                path, f"{p.name}: {a.dtype} values cannot be used as float32 weights"
            )
        target = model.get_parameter(p.path)
        a = np.ascontiguousarray(a, dtype=np.float32)
        if target.device.type == "cpu" and a.flags.writeable:
            # the parameter takes the array's memory: no second copy of the model
            target.data = torch.from_numpy(a)
        else:
            with torch.no_grad():
                target.copy_(torch.from_numpy(a))
    return table
