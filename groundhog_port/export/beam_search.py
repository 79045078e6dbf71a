#!/usr/bin/env python3
"""Beam search over the ONNX graphs of ``groundhog-port export --format onnx``.

Standalone: numpy, onnxruntime and the standard library only (no torch, no groundhog_port);
``export`` copies this file next to the graphs.  It follows GroundHog's sample.py
(experiments/nmt/sample.py at commit 4d2433b) as groundhog-port's literal search does
(groundhog_port/search/literal.py), so both return the same translations::

    python beam_search.py --beam-size 10 --source test.en --trans out.txt [--normalize] [--ignore-unk]

or from Python: ``OnnxTranslator(export_dir).translate_line("the cat .", beam_size=5)``.

Kept from sample.py: ``3 * len(seq)`` steps (sample.py:60); the previous word 0 at step 0
(:67-69); costs are float64 sums of the float32 ``log p`` (:70); ``--ignore-unk`` and the
``minlen = len(seq) // 2`` end-of-sequence ban (:73-77, :152); finished hypotheses leave
the beam and shrink it (:108-120); no finished hypothesis: retry without ignore_unk, then
with a doubled beam while it is below 500 (:122-131); the crash where the beam reaches the
vocabulary size (``kth out of bounds``, :82) and where nothing was found (argmin of an
empty list, :269), reported here as :class:`SearchFailed` and an empty output line;
``--normalize`` divides by the length, end-of-sequence counted (:153-155); the line written
is the first hypothesis of least cost, words up to ``<eol>`` (:137-143, :269-270).  The
attention's exp-then-normalise and the ``y_prev > 0`` bigram check are inside the graphs.

The selection replaces ``numpy.argpartition(flat, n)[:n]`` (:82), whose order is unspecified,
by groundhog-port's rule (groundhog_port/search/common.py ``select_cheapest``): the ``n``
cheapest candidates, ties at the boundary kept by lowest flat index, NaN last, ordered by
(cost, index) -- a stable argsort.  The set is argpartition's except under exact ties.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import stat
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

#: sample.py:127: the beam is doubled while it is below this
MAX_RETRY_BEAM = 500
logger = logging.getLogger("groundhog_onnx")


class SearchFailed(Exception):
    """A sentence the original sample.py could not translate (it crashed there)."""


class DriverError(Exception):
    """A bad input of this driver: one ``beam_search.py: error: ...`` line, exit 2 (the
    bounded readers of groundhog-port, ``groundhog_port/untrusted.py``, in small: this file
    imports nothing of groundhog_port)."""


#: what reading config.json may make this process hold (2 x its bytes + 160 bytes per JSON
#: element, as groundhog_port.untrusted.json_estimate; groundhog-port's default parse budget)
MAX_CONFIG_MEMORY = 256 << 20
#: deepest nesting of config.json (written: 3)
MAX_JSON_DEPTH = 16
#: longest number in config.json (an int64 needs 20 characters)
MAX_JSON_NUMBER = 40
#: longest source line, as groundhog-port's line-length limit (64 KiB: some 10,000 words)
MAX_LINE_BYTES = 1 << 16


def regular_file(path: str | os.PathLike[str], what: str) -> os.stat_result:
    """``os.stat`` of ``path`` if it is a regular file (FIFOs, devices and folders refused by
    type, before anything is opened)."""
    try:
        st = os.stat(path)
    except OSError as err:
        raise DriverError(f"{path}: cannot read {what} ({err.strerror or err})") from None
    if stat.S_ISDIR(st.st_mode):
        raise DriverError(f"{path}: is a folder, not {what}")
    if not stat.S_ISREG(st.st_mode):
        raise DriverError(f"{path}: not a regular file (a FIFO or a device?): not read as {what}")
    return st


def _json_number(text: str, kind: Callable[[str], Any]) -> Any:
    if len(text) > MAX_JSON_NUMBER:
        raise ValueError(f"a number of {len(text)} characters")
    value = kind(text)
    if kind is float and abs(value) == float("inf"):
        raise ValueError(f"the number {text} is out of range")
    return value


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def _depth(value: Any, limit: int) -> int:
    """How deep the objects and arrays of ``value`` nest (iterative), up to ``limit + 1``."""
    deepest, stack = 0, [(value, 1)]
    while stack and deepest <= limit:
        v, d = stack.pop()
        children = v.values() if isinstance(v, dict) else v if isinstance(v, list) else None
        if children is not None:
            deepest = max(deepest, d)
            stack.extend((x, d + 1) for x in children if isinstance(x, (dict, list)))
    return deepest


def read_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """``config.json`` of the export: bounded (size, elements, depth, numbers) and of the
    layout ``export`` writes (the graphs, the search's ids, the vocabularies)."""
    size = regular_file(path, "the export's config.json").st_size
    if 2 * size > MAX_CONFIG_MEMORY:
        raise DriverError(f"{path}: {size} bytes, more than a config.json can take")
    try:
        with open(path, "rb") as f:
            data = f.read(size + 1)
        need = 2 * len(data) + 160 * (1 + data.count(b",") + data.count(b":"))
        if need > MAX_CONFIG_MEMORY:
            raise DriverError(f"{path}: would take about {need >> 20} MiB parsed: refused")
        config = json.loads(
            data.decode("utf-8"),
            parse_int=lambda t: _json_number(t, int),
            parse_float=lambda t: _json_number(t, float),
            parse_constant=_refuse_constant,
        )
    except RecursionError:
        raise DriverError(f"{path}: nested deeper than {MAX_JSON_DEPTH} levels") from None
    except (OSError, ValueError) as err:  # UnicodeDecodeError and JSONDecodeError included
        raise DriverError(f"{path}: not a readable config.json ({str(err)[:200]})") from None
    if _depth(config, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        raise DriverError(f"{path}: nested deeper than {MAX_JSON_DEPTH} levels")
    missing = _layout_problem(config)
    if missing:
        raise DriverError(f"{path}: not a config.json of groundhog-port export: {missing}")
    checked: dict[str, Any] = config  # a JSON object (_layout_problem)
    return checked


_SEARCH_IDS = ("null_sym_source", "unk_sym_source", "n_sym_source")
_TARGET_IDS = ("null_sym_target", "unk_sym_target")


def _layout_problem(config: Any) -> str | None:
    """What ``config`` lacks of the layout ``export --format onnx`` writes, or None."""
    if not isinstance(config, dict):
        return "not a JSON object"
    graphs = config.get("graphs")
    if not isinstance(graphs, dict) or not {"encoder", "next_probs", "next_states"} <= set(graphs):
        return '"graphs" must name the encoder, next_probs and next_states files'
    for name in graphs.values():
        if (
            not isinstance(name, str)
            or not name
            or "/" in name
            or "\\" in name
            or name
            in (
                ".",
                "..",
            )
        ):
            return f'"graphs" must hold file names beside config.json, not {str(name)[:80]!r}'
    s = config.get("search")
    if not isinstance(s, dict):
        return 'no "search" object'
    for key in (*_SEARCH_IDS, *_TARGET_IDS):
        if not isinstance(s.get(key), int) or isinstance(s.get(key), bool) or s[key] < 0:
            return f'"search" has no word id {key}'
    if not isinstance(s.get("oov"), str):
        return '"search" has no "oov" word'
    v = config.get("vocabularies")
    if not isinstance(v, dict):
        return 'no "vocabularies" object'
    for key, kind in (
        ("source_word2idx", int),
        ("source_idx2word", str),
        ("target_idx2word", str),
    ):
        table = v.get(key)
        if not isinstance(table, dict) or not all(isinstance(x, kind) for x in table.values()):
            return f'"vocabularies" has no {key} object of {kind.__name__} values'
        if kind is str and not all(k.lstrip("-").isdigit() for k in table):
            return f'"vocabularies" {key} has keys that are not ids'
    return None


def read_source(path: str | os.PathLike[str]) -> list[str]:
    """The lines of ``--source`` (split at ``\\n`` only, the final newline not starting a
    line), one at a time, each at most :data:`MAX_LINE_BYTES` and UTF-8."""
    regular_file(path, "the --source file")
    lines = []
    try:
        with open(path, "rb") as f:
            for number, raw in enumerate(iter(lambda: f.readline(MAX_LINE_BYTES + 1), b""), 1):
                if raw.endswith(b"\n"):
                    raw = raw[:-1]
                elif len(raw) > MAX_LINE_BYTES:
                    raise DriverError(
                        f"{path}: line {number} is longer than {MAX_LINE_BYTES} bytes "
                        "(not a sentence)"
                    )
                try:
                    lines.append(raw.decode("utf-8"))
                except UnicodeDecodeError as err:
                    raise DriverError(
                        f"{path}: line {number}: not valid UTF-8 (byte 0x{raw[err.start]:02x} "
                        f"at column {err.start + 1})"
                    ) from None
    except OSError as err:
        raise DriverError(f"{path}: cannot read ({err.strerror or err})") from None
    return lines


def length_normalized(
    costs: Sequence[float] | np.ndarray, trans: Sequence[Sequence[int]]
) -> np.ndarray:
    """``--normalize`` (sample.py:153-155): ``costs[i] / len(trans[i])`` in float64, the length
    counting the end-of-sequence.  A copy of groundhog_port.search.common.length_normalized
    (this file runs without the package); parity_tests/export/test_export_onnx.py checks the
    two agree bit for bit."""
    lengths = np.array([len(t) for t in trans], dtype=np.float64)
    return np.asarray(costs, dtype=np.float64) / lengths


# -- what a graph may hold, read before onnxruntime sees it -----------------------------
# (protobuf field numbers of onnx.proto3: ModelProto.graph 7; GraphProto.node 1,
# .initializer 5, .sparse_initializer 15; NodeProto.attribute 5; AttributeProto.t 5, .g 6,
# .tensors 10, .graphs 11, .sparse_tensor 22, .sparse_tensors 23; TensorProto.external_data
# 13, .data_location 14)


def _fields(
    buf: memoryview, start: int = 0, end: int | None = None
) -> Iterator[tuple[int, int, Any]]:
    """``(field, wire type, value)`` of a protobuf message (``value``: an int, or the
    ``(start, end)`` of a length-delimited field); a damaged one raises ValueError."""
    end = len(buf) if end is None else end
    i = start
    while i < end:
        key, i = _varint(buf, i)
        field, kind = key >> 3, key & 7
        value: int | tuple[int, int] | None
        if kind == 0:
            value, i = _varint(buf, i)
        elif kind == 2:
            n, i = _varint(buf, i)
            if i + n > end:
                raise ValueError("a field runs past its message")
            value, i = (i, i + n), i + n
        elif kind in (1, 5):
            value, i = None, i + (8 if kind == 1 else 4)
        else:
            raise ValueError(f"wire type {kind}")
        yield field, kind, value


def _varint(buf: memoryview, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise ValueError("a damaged number")
        b = buf[i]
        value |= (b & 0x7F) << shift
        i, shift = i + 1, shift + 7
        if not b & 0x80:
            return value, i


def _tensor_problem(buf: memoryview, span: tuple[int, int]) -> str | None:
    for field, _, value in _fields(buf, *span):
        if field == 13 or (field == 14 and value == 1):
            return "a tensor whose data lies in another file (external data)"
    return None


def _graph_problem(buf: memoryview, span: tuple[int, int], depth: int = 0) -> str | None:
    """Why a GraphProto may not be loaded: what groundhog-port's export never writes and
    onnxruntime would hold whatever it declares -- a sparse initializer (87 bytes made it
    densify 3 GiB), a tensor whose data lies in another file (1 GiB of sparse external
    data was read whole)."""
    if depth > 8:
        return "graphs nested more than 8 deep"
    for field, kind, value in _fields(buf, *span):
        if kind != 2:
            continue
        if field == 15:
            return "a sparse initializer"
        if field == 5 and (bad := _tensor_problem(buf, value)):
            return bad
        if field == 1:  # a node: its attributes
            for f, k, attr in _fields(buf, *value):
                if f != 5 or k != 2:
                    continue
                for g, gk, v in _fields(buf, *attr):
                    if g in (22, 23) and gk == 2:
                        return "a sparse tensor in a node's attribute"
                    if g in (5, 10) and gk == 2 and (bad := _tensor_problem(buf, v)):
                        return bad
                    if g in (6, 11) and gk == 2 and (bad := _graph_problem(buf, v, depth + 1)):
                        return bad
    return None


def graph_problem(path: str | os.PathLike[str]) -> str | None:
    """Why the ONNX file ``path`` may not be given to onnxruntime (:func:`_graph_problem`),
    or None."""
    data = memoryview(Path(path).read_bytes())
    try:
        for field, kind, value in _fields(data):
            if field == 7 and kind == 2:
                return _graph_problem(data, value)
    except ValueError as err:
        return f"not an ONNX graph ({err})"
    return "not an ONNX graph (no graph in it)"


def _session(ort: Any, path: str | os.PathLike[str], opts: Any) -> Any:
    """An onnxruntime session of the graph ``path``; whatever onnxruntime refuses (external
    data outside the folder, an absolute or linked location, a FIFO, a damaged graph) is one
    :class:`DriverError` line."""
    try:
        return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    except Exception as err:  # noqa: BLE001 -- onnxruntime raises its own types for all of these
        detail = " ".join(str(err).split())[:300] or type(err).__name__
        raise DriverError(f"{path}: onnxruntime cannot load this graph ({detail})") from None


class OnnxTranslator:
    """The exported graphs (``encoder``, ``next_probs``, ``next_states``) and vocabularies."""

    def __init__(self, export_dir: str | os.PathLike[str], threads: int = 1) -> None:
        import onnxruntime as ort

        self.dir = Path(export_dir)
        self.config = read_config(self.dir / "config.json")
        for name in self.config["graphs"].values():
            regular_file(self.dir / name, "an ONNX graph")
            bad = graph_problem(self.dir / name)
            if bad is not None:
                raise DriverError(
                    f"{self.dir / name}: holds {bad}, which groundhog-port's export never "
                    "writes: not loaded"
                )
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        self.sessions = {
            key: _session(ort, self.dir / name, opts) for key, name in self.config["graphs"].items()
        }
        s = self.config["search"]
        self.eos_id, self.unk_id = s["null_sym_target"], s["unk_sym_target"]
        v = self.config["vocabularies"]
        self.src_word2idx = v["source_word2idx"]
        self.src_idx2word = {int(i): w for i, w in v["source_idx2word"].items()}
        trg = {int(i): w for i, w in v["target_idx2word"].items()}
        trg[s["null_sym_target"]] = "<eol>"  # LM_Model.load_dict (LM_model.py:221-225)
        trg[s["unk_sym_target"]] = s["oov"]
        self.trg_idx2word = trg

    # -- the compiled functions ----------------------------------------------------------
    def encode(
        self, seq: np.ndarray | Sequence[int]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """``(c, init_state, p_from_c or None)`` of one sentence (sample.py:48-49)."""
        outs = self.sessions["encoder"].run(None, {"seq": np.asarray(seq, dtype=np.int64)})
        return outs[0], outs[1], (outs[2] if len(outs) > 2 else None)

    def _step_feed(
        self,
        c: np.ndarray,
        p_from_c: np.ndarray | None,
        step: int,
        words: np.ndarray,
        states: np.ndarray,
        word_name: str,
    ) -> dict[str, np.ndarray]:
        feed = {
            "c": c,
            word_name: np.asarray(words, dtype=np.int64),
            "s_prev": np.ascontiguousarray(states, dtype=np.float32),
        }
        if p_from_c is not None:
            feed["p_from_c"] = p_from_c
        else:
            feed["step"] = np.asarray(step, dtype=np.int64)
        return feed

    def next_probs(
        self,
        c: np.ndarray,
        p_from_c: np.ndarray | None,
        step: int,
        y_prev: np.ndarray,
        states: np.ndarray,
    ) -> np.ndarray:
        probs: np.ndarray = self.sessions["next_probs"].run(
            None, self._step_feed(c, p_from_c, step, y_prev, states, "y_prev")
        )[0]
        return probs

    def next_states(
        self,
        c: np.ndarray,
        p_from_c: np.ndarray | None,
        step: int,
        y: np.ndarray,
        states: np.ndarray,
    ) -> np.ndarray:
        new_states: np.ndarray = self.sessions["next_states"].run(
            None, self._step_feed(c, p_from_c, step, y, states, "y")
        )[0]
        return new_states

    # -- text ----------------------------------------------------------------------------
    def parse_source(self, line: str) -> np.ndarray:
        """``parse_input`` (encdec.py:1494): ids + end-of-sequence; unknown words and ids
        ``>= n_sym_source`` become UNK; words split on ASCII whitespace as Python 2 did."""
        s = self.config["search"]
        words = [w.decode("utf-8") for w in line.encode("utf-8").split()]
        seq = np.zeros(len(words) + 1, dtype=np.int64)
        for pos, word in enumerate(words):
            idx = self.src_word2idx.get(word, s["unk_sym_source"])
            seq[pos] = s["unk_sym_source"] if idx >= s["n_sym_source"] else idx
        seq[-1] = s["null_sym_source"]
        return seq

    def render(self, ids: Iterable[int]) -> str:
        """The words of ``ids`` up to the first ``<eol>`` (sample.py:137-143)."""
        words = []
        for i in ids:
            word = self.trg_idx2word.get(int(i))
            if word is None:
                raise DriverError(
                    f"{self.dir / 'config.json'}: vocabularies.target_idx2word has no word for "
                    f"id {int(i)}, which the graphs produced: not this export's config.json?"
                )
            if word == "<eol>":
                break
            words.append(word)
        return " ".join(words)

    # -- the search ----------------------------------------------------------------------
    def search(
        self,
        seq: np.ndarray | Sequence[int],
        beam_size: int,
        ignore_unk: bool = False,
        minlen: int = 1,
    ) -> tuple[list[list[int]], np.ndarray]:
        """``BeamSearch.search`` (sample.py:47, where ``beam_size`` is ``n_samples``): finished
        hypotheses and float64 costs, sorted by cost (stable)."""
        if self.config["search"].get("grconv") and len(seq) < 2:
            raise SearchFailed("We didn't implemented yet the case where scan do 0 iteration")
        c, states, p_from_c = self.encode(seq)
        fin_trans: list[list[int]] = []
        fin_costs: list[float] = []
        trans: list[list[int]] = [[]]
        costs = np.zeros(1)
        for k in range(3 * len(seq)):
            if beam_size == 0:
                break
            last_words = (
                np.array([t[-1] for t in trans], dtype=np.int64)
                if k > 0
                else np.zeros(len(trans), dtype=np.int64)
            )
            probs = self.next_probs(c, p_from_c, k, last_words, states)
            # float32 log p (correctly rounded, as groundhog_port.search.common.legacy_log)
            with np.errstate(divide="ignore"):
                log_probs = np.log(probs.astype(np.float64)).astype(np.float32)
            if ignore_unk:
                log_probs[:, self.unk_id] = -np.inf
            if k < minlen:
                log_probs[:, self.eos_id] = -np.inf
            flat = (costs[:, None] - log_probs.astype(np.float64)).ravel()
            if beam_size >= flat.size:
                raise SearchFailed(f"kth(={beam_size}) out of bounds ({flat.size})")
            best = np.argsort(flat, kind="stable")[:beam_size]
            voc_size = probs.shape[1]
            trans_indices, word_indices = best // voc_size, best % voc_size
            new_costs = flat[best]
            new_states = self.next_states(c, p_from_c, k, word_indices, states[trans_indices])
            trans_prev, trans, kept = trans, [], []
            for i in range(beam_size):
                hyp = trans_prev[trans_indices[i]] + [int(word_indices[i])]
                if word_indices[i] != self.eos_id:
                    trans.append(hyp)
                    kept.append(i)
                else:
                    fin_trans.append(hyp)
                    fin_costs.append(float(new_costs[i]))
            beam_size = len(kept)
            costs, states = new_costs[kept], new_states[kept]
        if not fin_trans:
            if ignore_unk:
                logger.warning("Did not manage without UNK")
                return self.search(seq, beam_size, False, minlen)
            if beam_size < MAX_RETRY_BEAM:
                logger.warning("Still no translations: try beam size %d", beam_size * 2)
                return self.search(seq, beam_size * 2, False, minlen)
            raise SearchFailed("Translation failed (attempt to get argmin of an empty sequence)")
        order = np.argsort(np.asarray(fin_costs), kind="stable")
        return [fin_trans[i] for i in order], np.asarray(fin_costs)[order]

    def sample(
        self,
        seq: np.ndarray | Sequence[int],
        beam_size: int,
        ignore_unk: bool = False,
        normalize: bool = False,
    ) -> tuple[list[list[int]], np.ndarray]:
        """``sample()`` with beam search (sample.py:145): hypotheses and their costs."""
        trans, costs = self.search(seq, beam_size, ignore_unk, minlen=len(seq) // 2)
        if normalize:
            costs = length_normalized(costs, trans)
        return trans, costs

    def translate_line(
        self, line: str, beam_size: int, ignore_unk: bool = False, normalize: bool = False
    ) -> tuple[str, float]:
        """The line sample.py writes for ``line`` and its cost (``SearchFailed`` where the
        original crashed)."""
        trans, costs = self.sample(self.parse_source(line), beam_size, ignore_unk, normalize)
        best = int(np.argmin(costs))
        return self.render(trans[best]), float(costs[best])


def _same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def output_collision(
    trans: str | os.PathLike[str], reads: Iterable[tuple[str, str | os.PathLike[str]]]
) -> str | None:
    """Why ``--trans`` would destroy a file the run reads (``reads``: ``[(what, path)]``),
    or None: it is one of them, through a link or a hard link, or its partial file is.  A
    small copy of groundhog-port's ``outputs.check_outputs`` (this file runs without the
    package)."""
    partial = os.path.realpath(trans) + ".partial"
    for what, path in reads:
        if _same_file(trans, path) or (os.path.lexists(partial) and _same_file(partial, path)):
            return (
                f"{trans}: is the {what} input of this run: writing --trans there would "
                "destroy it; choose another output file"
            )
    return None


def write_output(trans: str | os.PathLike[str], text: str) -> None:
    """``text`` into ``--trans``: a new file (``TRANS.partial``, never a link or another
    file's hard link) renamed into place, so ``TRANS`` is complete or as it was; a link is
    written through (its target replaced), a FIFO or a device written in place."""
    real = os.path.realpath(trans)
    if os.path.exists(real) and not stat.S_ISREG(os.stat(real).st_mode):
        with open(real, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        return
    partial = real + ".partial"
    if os.path.lexists(partial):
        st = os.lstat(partial)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
            raise OSError(f"{partial} is a link or a special file: remove it")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    try:
        with open(os.open(partial, flags, 0o666), "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(partial, real)
    except BaseException:
        if os.path.lexists(partial):
            os.unlink(partial)
        raise


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="sample.py --beam-search over the exported ONNX graphs (onnxruntime, CPU)"
    )
    p.add_argument(
        "--model-dir",
        default=str(Path(__file__).resolve().parent),
        help="the export directory (default: this file's)",
    )
    p.add_argument("--beam-size", type=int, required=True)
    p.add_argument("--source", required=True, help="source sentences, one per line")
    p.add_argument("--trans", required=True, help="file to write the translations to")
    p.add_argument("--ignore-unk", action="store_true")
    p.add_argument("--normalize", action="store_true")
    p.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if args.beam_size < 1:
        p.error("--beam-size must be at least 1")
    try:
        return _run(args)
    except DriverError as err:
        print(f"beam_search.py: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # e.g. --trans names a folder
        name = err.filename if err.filename is not None else "?"
        print(f"beam_search.py: error: {name}: {err.strerror or err}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    if os.path.isdir(args.trans):
        raise DriverError(f"{args.trans}: is a folder, not a file to write --trans to")
    lines = read_source(args.source)
    tr = OnnxTranslator(args.model_dir, args.threads)
    reads = [("--source", args.source), ("config.json", tr.dir / "config.json")]
    reads += [(f"{name} graph", tr.dir / name) for name in tr.config["graphs"].values()]
    reads.append(("driver", Path(__file__)))
    refused = output_collision(args.trans, reads)
    if refused:
        raise DriverError(refused)
    out, total, failed = [], 0.0, []
    for n, line in enumerate(lines, 1):
        try:
            sentence, cost = tr.translate_line(
                line, args.beam_size, args.ignore_unk, args.normalize
            )
            total += cost
        except SearchFailed as err:
            logger.error(
                "line %d: the original sample.py fails here (%s); writing an empty line", n, err
            )
            sentence = ""
            failed.append(n)
        out.append(sentence + "\n")
    try:
        write_output(args.trans, "".join(out))
    except OSError as err:
        raise DriverError(f"{args.trans}: cannot write ({err})") from None
    print(f"Total cost of the translations: {total}")
    return 3 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
