#!/usr/bin/env python
# -*- coding: utf-8 -*-
"""Record a GroundHog trace (``trace.h5``, format version 1) in a legacy environment.

Run this where GroundHog and Theano are installed -- Python 2.7 with Theano 0.7-1.0, or
Python 3 with Theano 1.0.5 and a Python-3 port of GroundHog -- to record what *your*
checkpoint computes, so that groundhog-port can be checked against it
(``groundhog-port parity --trace trace.h5``).  It loads the model exactly as GroundHog's
``sample.py`` / ``score.py`` do::

    state = prototype_state(); state.update(pickle.load(state.pkl)); state.update(changes)
    enc_dec = RNNEncoderDecoder(state, RandomState(state['seed']), skip_init=True,
                                compute_alignment=True)
    enc_dec.build(); lm_model = enc_dec.create_lm_model(); lm_model.load(model.npz)

and writes, for the sentence pairs in ``--source``/``--target``:

* ``/pairs/{i}``      teacher-forced word probabilities, attention, score (score.py --mode=txt)
* ``/batch_all/{b}``  the padded batches of score.py --mode=batch and their scores (+ ``/batch``)
* ``/repr/{i}``       the annotations and initial decoder states (sample.py's parsing)
* ``/steps/{i}``      for the first ``--steps`` sentences, a beam search of width
                      ``--steps-beam`` instrumented at every step (the compiled
                      next_probs / next_states functions and ``sample.argpartition`` are
                      wrapped by pass-through recorders; GroundHog's code is not changed)
* ``/beam/{label}``   sample.py's n-best lists for every ``--beam-sizes`` label
                      (``N``, ``N_normalize``, ``N_ignore_unk``); a sentence on which
                      sample.py would crash gets an ``error`` record and the run goes on.
* ``/sampler``        the random sampler (``create_sampler(many_samples=True)`` called
                      through ``sample.sample(..., sampler=..., alpha=1.0)``) on the first
                      ``--sampler-calls`` sentences with at least 3 tokens, with the MRG31k3p
                      random state before and after each call
* ``/train_step``     one update as train.py does it (a second model built with
                      ``skip_init=False``, ``get_batch_iterator(state)``, ``SGD_adadelta``,
                      the weights of ``--model``, the iterator started at offset 0, one
                      ``algo()`` call): the batch, the returned values, the clipped gradients,
                      the Adadelta accumulators and the parameters that changed; it reads the
                      training corpus of the state (``source``/``target``, see ``--remap-dir``)

Root attributes include ``groundhog_commit`` (``--groundhog-commit``, by default the reference
commit 4d2433b...; a warning when the ``--groundhog`` checkout's own HEAD differs), ``prototype`` (the ``prototype_*_state`` of
experiments/nmt/state.py the state differs least from, or ``--prototype``) and
``scan_mode`` (whether Theano's C scan loop was available, worded as in the reference
recordings).

The layout is documented in groundhog-port's ``docs/trace_format.md``.

Every file the requested parts read (vocabularies; for /train_step the training corpus) is
located before anything is compiled -- at the state's stored path, then by base name in
``--data`` (the corpus) and each ``--remap-dir`` -- and a file found nowhere is one error
line, exit 2.  GroundHog's data loader thread is watched (``--loader-timeout``).  Each group
is copied to ``--output`` as soon as it is finished: an interrupted run (exit 130 on Ctrl-C,
143 on SIGTERM) leaves a trace of every finished group, and ``--resume`` adds the rest.
Paths of this machine are recorded by their base name unless ``--keep-paths``.

Example (Python 2.7, GroundHog checkout in ~/GroundHog; the walk-through is groundhog-port's
``docs/recording.md``)::

    THEANO_FLAGS=floatX=float32,device=cpu python tools/record_theano_traces.py \\
        --groundhog ~/GroundHog --state search_state.pkl --model search_model.npz \\
        --source test.en --target test.fr --output trace.h5 \\
        --remap-dir ~/wmt14/vocab --data ~/wmt14/corpus

This file must stay valid Python 2.7 *and* 3 (no f-strings, annotations or keyword-only
arguments) and must not import groundhog_port: it runs in the legacy environment.
"""

from __future__ import division, print_function

import argparse
import ast
import io
import json
import logging
import os
import platform
import re
import shutil
import signal
import sys
import threading
import time

import numpy

try:
    text_type = unicode  # noqa: F821  (Python 2)
except NameError:
    text_type = str

PY2 = sys.version_info[0] == 2

FORMAT_VERSION = 1
COMPRESS_ABOVE = 256
DEFAULT_BEAMS = ["1", "5", "10", "1_normalize", "5_normalize", "10_normalize", "5_ignore_unk"]
PARTS = ("pairs", "batch", "repr", "steps", "beam", "sampler", "train_step")
#: the parts recorded with sample.py's BeamSearch compiled (the sampler too: its streams'
#: states have always been recorded after the random op BeamSearch.compile builds)
SEARCH_PARTS = ("repr", "steps", "beam", "sampler")
#: MRG31k3p state arrays are stored in full only for the stream sample_fn uses (the others:
#: their first rows and a sha256 of the whole array), as in the reference recordings
FIRST_ROWS = 8
#: the sampler calls use sentences of at least this many tokens (MANIFEST section 7, /sampler)
SAMPLER_MIN_LEN = 3
#: the state values written as int root attributes (docs/trace_format.md, "Root attributes")
STATE_ATTRS = (
    "seed",
    "null_sym_source",
    "null_sym_target",
    "n_sym_source",
    "n_sym_target",
    "unk_sym_source",
    "unk_sym_target",
)
STEP_FIELDS = (
    ("last_words", "int64"),
    ("states_in", "float32"),
    ("next_probs", "float32"),
    ("flat_next_costs", "float64"),
    ("best_costs_indices", "int64"),
    ("trans_indices", "int64"),
    ("word_indices", "int64"),
    ("costs", "float64"),
    ("states_gathered", "float32"),
    ("next_states", "float32"),
)
#: the GroundHog commit the reference recordings were made with (MANIFEST, section 1)
REFERENCE_COMMIT = "4d2433b6ff03da63f3619ecb3e8c501901779cdb"
EXIT_OK = 0
EXIT_INPUT = 2

log = logging.getLogger("record_theano_traces")


class InputError(Exception):
    """A problem with the command line or an input file (exit code 2)."""


class RecorderError(Exception):
    """A failure of the recorder itself (never written to the trace as a sentence error)."""


def error_text(exc):
    """``"ValueError: kth(=512) out of bounds (321)"`` -- how the trace stores a crash."""
    return "{0}: {1}".format(type(exc).__name__, exc)


def to_text(value):
    """Native str/bytes/unicode -> unicode text (UTF-8 assumed for bytes)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return text_type(value)


# ----------------------------------------------------------------------------------------
# Arguments
# ----------------------------------------------------------------------------------------
def parse_beam_label(label):
    """``"10_normalize"`` -> ``(10, True, False)`` = (beam size, normalize, ignore_unk)."""
    m = re.match(r"^(\d+)((?:_normalize|_ignore_unk)*)$", label)
    if not m or int(m.group(1)) < 1:
        raise InputError(
            "bad --beam-sizes entry {0!r}: expected N, N_normalize, N_ignore_unk "
            "or N_normalize_ignore_unk with N >= 1".format(label)
        )
    flags = m.group(2)
    return int(m.group(1)), "_normalize" in flags, "_ignore_unk" in flags


def parse_changes(text, option="--changes"):
    """GroundHog's ``changes`` argument (``"key=value,key2=value2"``) without ``eval``.

    sample.py / score.py do ``state.update(eval("dict({})".format(changes)))``; here every
    value must be a Python literal (string, number, bool, None, tuple, list, dict).
    """
    text = (text or "").strip()
    if not text:
        return {}
    try:
        tree = ast.parse("dict({0})".format(text), mode="eval")
    except SyntaxError as err:
        raise InputError(
            "{0} {1!r} is not of the form key=value,...: {2}".format(option, text, err)
        )
    call = tree.body
    if (
        not isinstance(call, ast.Call)
        or getattr(call.func, "id", None) != "dict"
        or call.args
        or getattr(call, "starargs", None) is not None
        or getattr(call, "kwargs", None) is not None
    ):
        raise InputError("{0} {1!r} is not of the form key=value,...".format(option, text))
    out = {}
    for kw in call.keywords:
        if kw.arg is None:
            raise InputError("{0}: '**' is not supported".format(option))
        try:
            out[kw.arg] = ast.literal_eval(kw.value)
        except ValueError:
            raise InputError("{0}: the value of {1} is not a literal".format(option, kw.arg))
    return out


def build_parser():
    p = argparse.ArgumentParser(
        prog="record_theano_traces.py",
        description="Record a GroundHog/Theano trace (trace.h5, format version 1) of a model "
        "for groundhog-port parity checks.  Runs under Python 2.7 or 3 where "
        "GroundHog and Theano are installed.",
        epilog="exit codes: 0 success, 2 usage or input error",
    )
    p.add_argument(
        "--groundhog",
        required=True,
        metavar="DIR",
        help="GroundHog checkout (the directory holding 'groundhog' and 'experiments'); "
        "put first on sys.path",
    )
    p.add_argument("--state", required=True, metavar="PKL", help="the model's *_state.pkl")
    p.add_argument("--model", required=True, metavar="NPZ", help="the model's *_model.npz")
    p.add_argument("--source", required=True, metavar="FILE", help="source sentences, one per line")
    p.add_argument(
        "--target",
        required=True,
        metavar="FILE",
        help="target sentences (same number of lines), for /pairs and /batch",
    )
    p.add_argument("--output", required=True, metavar="H5", help="trace file to write")
    p.add_argument(
        "--changes",
        default="",
        metavar="K=V,...",
        help="changes to the state, as sample.py's 'changes' argument "
        "(e.g. \"word_indx='vocab.en.pkl'\"); values must be literals",
    )
    p.add_argument(
        "--train-changes",
        default=None,
        metavar="K=V,...",
        help="the changes train.py was given when the model was trained (its "
        "'changes' argument), recorded as the root attribute state_changes_json as "
        "the reference recordings hold it; values must be literals",
    )
    p.add_argument(
        "--remap-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="where to look, by base name, for each vocabulary or corpus file the state "
        "names (word_indx, word_indx_trgt, indx_word, indx_word_target, source, target) "
        "that is not at its stored path (archived states hold the training machine's "
        "paths); repeatable, searched in order; where each file was found is logged, and "
        "a file found nowhere is an error",
    )
    p.add_argument(
        "--data",
        default=None,
        metavar="DIR",
        help="the folder holding the training corpus (the state's source / target .h5 "
        "files, read by /train_step only), searched before --remap-dir",
    )
    p.add_argument(
        "--loader-timeout",
        type=float,
        default=300.0,
        metavar="S",
        help="/train_step: seconds to wait for the first batch of GroundHog's data loader "
        "thread before giving up (default %(default)s; a loader thread that dies is "
        "reported at once)",
    )
    p.add_argument(
        "--beam-sizes",
        nargs="+",
        default=list(DEFAULT_BEAMS),
        metavar="LABEL",
        help="sample.py configurations for /beam: N, N_normalize, N_ignore_unk "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--steps",
        type=int,
        default=8,
        metavar="N",
        help="instrument the beam search of the first N sentences (default 8; 0: none)",
    )
    p.add_argument(
        "--steps-beam",
        type=int,
        default=5,
        metavar="K",
        help="beam width of the instrumented searches (default 5)",
    )
    p.add_argument(
        "--max-sentences",
        type=int,
        default=None,
        metavar="N",
        help="only the first N lines for /pairs, /repr, /steps, /beam (default all; "
        "/batch_all always covers the whole files, as score.py does)",
    )
    p.add_argument(
        "--parts",
        default=",".join(PARTS),
        metavar="LIST",
        help="comma-separated parts to record (default %(default)s)",
    )
    p.add_argument(
        "--sampler-calls",
        type=int,
        default=5,
        metavar="N",
        help="/sampler: calls on the first N sentences with >= 3 tokens (default 5)",
    )
    p.add_argument(
        "--sampler-samples",
        type=int,
        default=5,
        metavar="K",
        help="/sampler: samples drawn per call (default 5)",
    )
    p.add_argument(
        "--prototype",
        default=None,
        metavar="NAME",
        help="root attribute 'prototype' (default: the prototype_*_state function of "
        "experiments.nmt the state differs least from)",
    )
    p.add_argument(
        "--groundhog-commit",
        default=REFERENCE_COMMIT,
        metavar="SHA",
        help="root attribute 'groundhog_commit': the GroundHog commit your --groundhog "
        "tree is (default %(default)s, the reference commit; a warning when the "
        "checkout's own git HEAD differs)",
    )
    p.add_argument("--case", default=None, help="root attribute 'case' (a name for this model)")
    p.add_argument("--force", action="store_true", help="overwrite --output if it exists")
    p.add_argument(
        "--resume",
        action="store_true",
        help="add to an existing --output (left by an interrupted run) the requested "
        "--parts it does not hold yet",
    )
    p.add_argument(
        "--keep-paths",
        action="store_true",
        help="keep this machine's paths in the recorded state_json, changes and "
        "THEANO_FLAGS (default: recorded by their base name)",
    )
    p.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    return p


def parse_args(argv):
    """Parsed and checked arguments; raises InputError / SystemExit (argparse)."""
    args = build_parser().parse_args(argv)
    parts = [x.strip() for x in args.parts.split(",") if x.strip()]
    unknown = [x for x in parts if x not in PARTS]
    if unknown:
        raise InputError(
            "--parts: unknown part(s) {0} (known: {1})".format(", ".join(unknown), ", ".join(PARTS))
        )
    args.parts = parts
    args.beams = [(label,) + parse_beam_label(label) for label in args.beam_sizes]
    if args.steps < 0 or args.steps_beam < 1:
        raise InputError("--steps must be >= 0 and --steps-beam >= 1")
    if args.sampler_calls < 0 or args.sampler_samples < 1:
        raise InputError("--sampler-calls must be >= 0 and --sampler-samples >= 1")
    if args.max_sentences is not None and args.max_sentences < 0:
        raise InputError("--max-sentences must be >= 0")
    if args.loader_timeout <= 0:
        raise InputError("--loader-timeout must be > 0")
    args.changes_dict = parse_changes(args.changes)
    args.train_changes_dict = (
        None if args.train_changes is None else parse_changes(args.train_changes, "--train-changes")
    )
    for name in ("source", "target"):
        if not os.path.isfile(getattr(args, name)):
            raise InputError("--{0} {1}: file not found".format(name, getattr(args, name)))
    for name, value in [("--remap-dir", d) for d in args.remap_dir] + [("--data", args.data)]:
        if value is not None and not os.path.isdir(value):
            raise InputError("{0} {1}: no such folder".format(name, value))
    if args.resume and args.force:
        raise InputError("--resume adds to --output and --force overwrites it: give one")
    if args.resume and not os.path.isfile(args.output):
        raise InputError(
            "--resume: --output {0} not found (nothing to resume: run without --resume)".format(
                args.output
            )
        )
    if os.path.exists(args.output) and not (args.force or args.resume):
        raise InputError(
            "--output {0}: exists (--resume adds the parts it lacks, --force overwrites it)".format(
                args.output
            )
        )
    return args


# ----------------------------------------------------------------------------------------
# The files GroundHog reads: located before anything is compiled
# ----------------------------------------------------------------------------------------
#: vocabularies GroundHog's LM_Model.load_dict reads while any model is built (every part;
#: groundhog/models/LM_model.py:216, called from encdec.py:1401's create_lm_model)
MODEL_FILE_KEYS = ("indx_word", "indx_word_target")
#: vocabularies the test sentences are parsed with (every part but /train_step)
TEXT_FILE_KEYS = ("word_indx", "word_indx_trgt")
#: the training corpus of /train_step: get_batch_iterator reads state['source'][0] and
#: state['target'][0] (experiments/nmt/encdec.py:177-181)
CORPUS_KEYS = ("source", "target")


def locate_file(label, stored, dirs, fix, what=None, none_given=("--remap-dir",)):
    """The path of the file ``stored`` names: itself when it exists, else ``DIR/<basename>``
    for the first ``(option, DIR)`` of ``dirs`` holding it.  Logs where it was found; a file
    found nowhere is an InputError naming it, where it looked and ``fix``."""
    if os.path.isfile(stored):
        log.info("%s: %s (the stored path)", label, stored)
        return stored
    base = os.path.basename(stored)
    for option, folder in dirs:
        candidate = os.path.join(folder, base)
        if os.path.isfile(candidate):
            log.info("%s: %s not found; using %s (%s %s)", label, stored, candidate, option, folder)
            return candidate
    looked = "not found there"
    if dirs:
        looked += " nor as {0} in {1}".format(
            base, ", ".join("{0} {1}".format(o, d) for o, d in dirs)
        )
    else:
        looked += " (no {0} given)".format(" or ".join(none_given))
    raise InputError(
        "{0} {1}{2}: {3}; give {4}".format(
            label, stored, " ({0})".format(what) if what else "", looked, fix.format(base=base)
        )
    )


def locate_inputs(state, parts, remap_dirs, data_dir=None):
    """``{key: value}`` of the state's file entries the ``parts`` read, each located with
    :func:`locate_file` (the stored path, then ``--data`` for the corpus, then each
    ``--remap-dir`` in order).  Raises InputError for the first file found nowhere, before
    anything is built or compiled."""
    remap = [("--remap-dir", d) for d in remap_dirs]
    keys = list(MODEL_FILE_KEYS)
    if [p for p in parts if p != "train_step"]:
        keys += TEXT_FILE_KEYS
    found = {}
    for key in keys:
        value = state.get(key)
        if not value:  # None or '': GroundHog reads nothing
            continue
        if not isinstance(value, (bytes, text_type)):
            raise InputError("state[{0!r}] = {1!r} is not a file path".format(key, value))
        found[key] = locate_file(
            "state[{0!r}]".format(key),
            value,
            remap,
            "--remap-dir DIR (the folder holding {base})",
        )
    if "train_step" not in parts:
        return found
    for key in CORPUS_KEYS:
        value = state.get(key)
        if (
            not isinstance(value, (list, tuple))
            or not value
            or not isinstance(value[0], (bytes, text_type))
        ):
            raise InputError(
                "state[{0!r}] = {1!r}: /train_step reads the training corpus from "
                "state[{0!r}][0], a list of paths; give --changes \"{0}=['FILE']\", or "
                "--parts without train_step".format(key, value)
            )
        path = locate_file(
            "state[{0!r}][0]".format(key),
            value[0],
            ([("--data", data_dir)] if data_dir else []) + remap,
            "--data DIR (the folder holding {base}), or --parts without train_step",
            what="the training corpus /train_step reads",
            none_given=("--data", "--remap-dir"),
        )
        found[key] = [path] + list(value[1:])
    return found


def is_local_path(value):
    """Whether ``value`` is a path of this machine: a string with a folder separator whose
    file, or whose parent folder, exists here."""
    if not isinstance(value, (bytes, text_type)) or not value:
        return False
    text = to_text(value)
    if "/" not in text and os.sep not in text:
        return False
    return os.path.exists(value) or os.path.isdir(os.path.dirname(value.rstrip("/" + os.sep)))


def public(value, keep_paths=False):
    """``value`` (a state, its changes, one entry) with every path of this machine replaced
    by its base name (what --remap-dir looks files up by), unless ``keep_paths``."""
    if keep_paths:
        return value
    if isinstance(value, dict):
        return dict((k, public(v)) for k, v in value.items())
    if isinstance(value, list):
        return [public(v) for v in value]
    if isinstance(value, tuple):
        return tuple(public(v) for v in value)
    if is_local_path(value):
        return os.path.basename(value.rstrip("/" + os.sep))
    return value


def public_flags(flags, keep_paths=False):
    """THEANO_FLAGS with the paths of this machine (``base_compiledir=...``) as base names."""
    if keep_paths:
        return flags
    out = []
    for item in flags.split(","):
        key, eq, value = item.partition("=")
        out.append(key + eq + public(value) if eq else item)
    return ",".join(out)


# ----------------------------------------------------------------------------------------
# GroundHog's training-data loader thread, watched
# ----------------------------------------------------------------------------------------
#: seconds a dead loader thread's last batch may take to reach the main thread
LOADER_GRACE_S = 2.0


def start_watched(start, *args):
    """``start(*args)`` (the data iterator's ``start``), returning the threads it started
    and a list that collects their uncaught exceptions (each thread's ``run`` wrapped; the
    exception still ends the thread, and Python prints it as before)."""
    started, errors = [], []
    # the plain function (Python 2: not the unbound method), put back as it was
    original = threading.Thread.__dict__["start"]

    def recording_start(thread):
        run = thread.run

        def recorded_run():
            try:
                run()
            except BaseException as exc:
                errors.append(exc)
                raise

        thread.run = recorded_run
        started.append(thread)
        return original(thread)

    threading.Thread.start = recording_start
    try:
        start(*args)
    finally:
        threading.Thread.start = original
    return started, errors


def watched_call(fn, threads, errors, timeout, what, poll=0.2):
    """``fn()`` run beside the main thread, which waits for it (interruptible: Ctrl-C and
    SIGTERM are delivered) while watching ``threads``: when they have all died without
    ``fn`` returning, or after ``timeout`` seconds, an InputError names ``what``.  (GroundHog's
    iterator waits in ``queue.get()`` for a loader thread that may be dead: forever.)"""
    result = {}

    def work():
        try:
            result["value"] = fn()
        except BaseException as exc:  # handed to the main thread
            result["error"] = exc

    worker = threading.Thread(target=work, name="record_theano_traces-next")
    worker.daemon = True
    worker.start()
    t0 = time.time()
    dead_since = None
    while True:
        worker.join(poll)
        if not worker.is_alive():
            break
        now = time.time()
        if threads and not [t for t in threads if t.is_alive()]:
            dead_since = now if dead_since is None else dead_since
            if now - dead_since > LOADER_GRACE_S:
                why = (
                    error_text(errors[-1]).splitlines()[0][:300]
                    if errors
                    else "its traceback is above"
                )
                raise InputError(
                    "GroundHog's data loader thread died before giving a batch ({0}) "
                    "reading {1}".format(why, what)
                )
        if now - t0 > timeout:
            raise InputError(
                "no batch from GroundHog's data loader within {0:g} s (--loader-timeout) "
                "reading {1}".format(timeout, what)
            )
    if "error" in result:
        raise result["error"]
    return result["value"]


def read_lines(path):
    """Lines of a UTF-8 file as unicode, without the newline (the producer strips them the
    way GroundHog does: ``line.strip()`` on the interpreter's native string)."""
    with io.open(path, "r", encoding="utf-8", newline="") as f:
        text = f.read()
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


# ----------------------------------------------------------------------------------------
# Writer: the trace layout (kept in step with groundhog_port.harness.trace.TraceWriter)
# ----------------------------------------------------------------------------------------
class TraceLayoutWriter(object):
    """Writes the groups of a version-1 trace with h5py."""

    def __init__(self, path, root_attrs, append=False):
        import h5py

        self.h5py = h5py
        self.path = path
        if append:  # a trace of an earlier run (--resume): its root attributes stay
            self.f = h5py.File(path, "a")
            return
        self.f = h5py.File(path, "w-")  # a new file: fails on a name taken meanwhile
        self.f.attrs["format_version"] = numpy.int64(FORMAT_VERSION)
        self.set_attrs(self.f, root_attrs)

    def close(self):
        if self.f is not None:
            self.f.close()
            self.f = None

    def reopen(self):
        self.f = self.h5py.File(self.path, "a")

    def set_attrs(self, obj, attrs):
        for key in sorted(attrs):
            value = attrs[key]
            if value is None:
                continue
            if isinstance(value, bool):
                value = numpy.bool_(value)
            elif isinstance(value, (bytes, text_type)):
                value = to_text(value)
            elif (
                isinstance(value, (list, tuple))
                and value
                and all(isinstance(v, (bytes, text_type)) for v in value)
            ):
                value = numpy.array([to_text(v).encode("utf-8") for v in value])
            elif isinstance(value, (dict, list, tuple)):
                value = json.dumps(value, sort_keys=True)
            elif isinstance(value, int) or (PY2 and isinstance(value, long)):  # noqa: F821
                value = numpy.int64(value)
            elif isinstance(value, float):
                value = numpy.float64(value)
            obj.attrs[key] = value

    def group(self, path):
        return self.f.require_group(path)

    def dataset(self, group, name, value, dtype):
        arr = numpy.ascontiguousarray(numpy.asarray(value, dtype=dtype))
        if name in group:
            del group[name]
        if arr.size > COMPRESS_ABOVE:
            group.create_dataset(name, data=arr, compression="gzip", shuffle=True)
        else:
            group.create_dataset(name, data=arr)

    def pair(self, i, rec, src_line, trg_line):
        g = self.group("pairs/{0}".format(i))
        self.dataset(g, "src_ids", rec["src_ids"], "int64")
        self.dataset(g, "trg_ids", rec["trg_ids"], "int64")
        self.dataset(g, "word_probs", rec["word_probs"], "float32")
        self.dataset(g, "alignment", rec["alignment"], "float32")
        self.dataset(g, "score", numpy.atleast_1d(rec["score"]), "float32")
        self.set_attrs(g, {"src_line": src_line, "trg_line": trg_line})

    def batch(self, b, rec, batch_size):
        names = (
            ("x", "int64"),
            ("y", "int64"),
            ("x_mask", "float32"),
            ("y_mask", "float32"),
            ("scores", "float32"),
        )
        paths = ["batch_all/{0}".format(b)] + (["batch"] if b == 0 else [])
        for path in paths:
            g = self.group(path)
            for name, dtype in names:
                self.dataset(g, name, rec[name], dtype)
        if b == 0:
            self.set_attrs(self.f["batch"], {"batch_size": int(batch_size)})

    def repr(self, i, rec):
        g = self.group("repr/{0}".format(i))
        self.dataset(g, "seq", rec["seq"], "int64")
        self.dataset(g, "c", rec["c"], "float32")
        self.dataset(g, "init_states", rec["init_states"], "float32")
        self.set_attrs(g, {"parsed_in": rec.get("parsed_in")})

    def steps(self, i, seq, rec, beam_size, ignore_unk, error=None):
        self.set_attrs(
            self.group("steps"), {"beam_size": int(beam_size), "ignore_unk": bool(ignore_unk)}
        )
        g = self.group("steps/{0}".format(i))
        steps = [st for st in rec.get("steps", []) if all(name in st for name, _ in STEP_FIELDS)]
        for n, st in enumerate(steps):
            sg = g.require_group("{0:03d}".format(n))
            for name, dtype in STEP_FIELDS:
                self.dataset(sg, name, st[name], dtype)
            self.set_attrs(sg, {"k": int(st["k"]), "n_samples": int(st["n_samples"])})
        self.dataset(g, "seq", seq, "int64")
        if error is None:
            flat, lengths = join_flat(rec["trans"])
            self.dataset(g, "fin_trans_flat", flat, "int64")
            self.dataset(g, "fin_trans_lengths", lengths, "int64")
            self.dataset(
                g, "fin_costs", numpy.asarray(rec["costs"], dtype="float64").reshape(-1), "float64"
            )
        self.set_attrs(
            g,
            {
                "minlen": int(rec.get("minlen", len(seq) // 2)),
                "n_steps": len(steps),
                "error": error,
            },
        )

    def beam_group(self, label, beam_size, normalize, ignore_unk):
        self.set_attrs(
            self.group("beam/{0}".format(label)),
            {
                "beam_size": int(beam_size),
                "normalize": bool(normalize),
                "ignore_unk": bool(ignore_unk),
            },
        )

    def beam(self, label, i, trans, costs, best, best_sentence):
        g = self.group("beam/{0}/{1}".format(label, i))
        flat, lengths = join_flat(trans)
        self.dataset(g, "fin_trans_flat", flat, "int64")
        self.dataset(g, "fin_trans_lengths", lengths, "int64")
        self.dataset(g, "fin_costs", numpy.asarray(costs, dtype="float64").reshape(-1), "float64")
        self.set_attrs(g, {"best": int(best), "best_sentence": best_sentence})

    def beam_error(self, label, i, message):
        self.set_attrs(self.group("beam/{0}/{1}".format(label, i)), {"error": message})

    def beam_timing(self, label, seconds_total, n_sentences):
        self.set_attrs(
            self.group("beam/{0}".format(label)),
            {
                "seconds_total": float(seconds_total),
                "seconds_per_sentence": float(seconds_total) / max(1, n_sentences),
            },
        )

    def sampler(self, rec):
        """``/sampler`` (MANIFEST section 7): ``rec`` as returned by a producer's
        ``sampler_record``."""
        g = self.group("sampler")
        self.set_attrs(g, rec.get("attrs", {}))
        self.dataset(g, "mrg_base_rstate_after_build", rec["base_rstate_after_build"], "int32")
        self.rstates(
            self.group("sampler/rstate_shared_before_first_call"),
            rec["rstate_before"],
            rec["used"],
            mark_used=True,
        )
        for call in rec["calls"]:
            cg = self.group("sampler/{0}".format(call["index"]))
            self.dataset(cg, "seq", call["seq"], "int64")
            self.dataset(cg, "sample_ids", call["sample_ids"], "int64")
            self.dataset(cg, "sample_neg_log_probs", call["sample_neg_log_probs"], "float32")
            self.dataset(
                cg, "costs", numpy.asarray(call["costs"], dtype="float64").reshape(-1), "float64"
            )
            self.set_attrs(
                cg,
                {
                    "test_index": int(call["index"]),
                    "n_samples": int(call["n_samples"]),
                    "n_steps": int(call["n_steps"]),
                    "alpha": float(call["alpha"]),
                    "sentences": json.dumps(
                        [to_text(x) for x in call["sentences"]], ensure_ascii=False
                    ),
                },
            )
            self.rstates(
                self.group("sampler/{0}/rstate_shared_after_call".format(call["index"])),
                call["rstate_after"],
                [False] * len(call["rstate_after"]),
            )

    def rstates(self, group, arrays, used, mark_used=False):
        """MRG state arrays ``{j:02d}``: in full where ``used``, else ``{j:02d}_first8rows``;
        each with its ``full_shape`` and the ``sha256`` of the whole int32 array."""
        for j, (a, is_used) in enumerate(zip(arrays, used)):
            a = numpy.ascontiguousarray(numpy.asarray(a, dtype="int32"))
            name = "{0:02d}".format(j) if is_used else "{0:02d}_first{1}rows".format(j, FIRST_ROWS)
            self.dataset(group, name, a if is_used else a[:FIRST_ROWS], "int32")
            attrs = {"full_shape": numpy.array(a.shape, dtype="int64"), "sha256": sha256_hex(a)}
            if mark_used:
                attrs["used_by_sample_fn"] = bool(is_used)
            self.set_attrs(group[name], attrs)

    def train_step(self, rec):
        """``/train_step`` (MANIFEST section 7): ``rec`` as returned by a producer's
        ``train_step``; ``params_after`` only for the parameters whose value changed."""
        g = self.group("train_step")
        for name, dtype in (
            ("x", "int64"),
            ("x_mask", "float32"),
            ("y", "int64"),
            ("y_mask", "float32"),
        ):
            self.dataset(g, name, rec[name], dtype)
        order = [to_text(n) for n in rec["param_order"]]
        changed = [
            n
            for n in order
            if not numpy.array_equal(
                numpy.asarray(rec["params_before"][n]), numpy.asarray(rec["params_after"][n])
            )
        ]
        attrs = dict(rec.get("attrs", {}))
        attrs.update({"param_order": json.dumps(order), "changed_params": json.dumps(changed)})
        for key, value in rec["rval"].items():
            attrs["rval_" + to_text(key)] = float(numpy.asarray(value))
        self.set_attrs(g, attrs)
        for sub, names in (
            ("params_after", changed),
            ("clipped_grads", order),
            ("gnorm2_after", order),
            ("dnorm2_after", order),
        ):
            sg = self.group("train_step/" + sub)
            for n in names:
                self.dataset(sg, n, rec[sub][n], "float32")


def sha256_hex(a):
    """sha256 of an array's C-order bytes (how the reference recordings fingerprint the MRG
    states they do not store in full)."""
    import hashlib

    return hashlib.sha256(numpy.ascontiguousarray(a).tobytes()).hexdigest()


def join_flat(trans):
    """Hypotheses -> (fin_trans_flat, fin_trans_lengths), both int64."""
    seqs = [numpy.asarray(t, dtype="int64").reshape(-1) for t in trans]
    lengths = numpy.array([len(s) for s in seqs], dtype="int64")
    flat = numpy.concatenate(seqs) if seqs else numpy.zeros((0,), dtype="int64")
    return flat.astype("int64"), lengths


# ----------------------------------------------------------------------------------------
# The producer that wraps GroundHog (only built for a real run)
# ----------------------------------------------------------------------------------------
class StepRecorder(object):
    """Pass-through wrappers around the compiled beam-search functions and argpartition.

    While ``active``, every call of next_probs opens a step record; the argpartition call
    that follows fills the selection, the next_states call the new states.  The wrapped
    functions return exactly what the originals return.
    """

    def __init__(self):
        self.active = False
        self.steps = []
        self.current = None

    def start(self):
        self.active = True
        self.steps = []
        self.current = None

    def stop(self):
        self.active = False
        steps, self.steps, self.current = self.steps, [], None
        return steps

    def wrap_next_probs(self, fn):
        def next_probs(c, k, last_words, *states):
            out = fn(c, k, last_words, *states)
            if self.active:
                self.current = {
                    "k": int(k),
                    "last_words": numpy.array(last_words, dtype="int64"),
                    "states_in": numpy.array([numpy.array(s) for s in states]),
                    "next_probs": numpy.array(out[0]),
                }
                self.steps.append(self.current)
            return out

        return next_probs

    def wrap_argpartition(self, fn):
        def argpartition(a, kth, *args, **kwargs):
            out = fn(a, kth, *args, **kwargs)
            cur = self.current
            if self.active and cur is not None and "best_costs_indices" not in cur:
                best = numpy.array(out[:kth], dtype="int64")
                voc = cur["next_probs"].shape[1]
                flat = numpy.array(a)
                cur.update(
                    n_samples=int(kth),
                    flat_next_costs=flat,
                    best_costs_indices=best,
                    trans_indices=best // voc,
                    word_indices=best % voc,
                    costs=flat[best],
                )
            return out

        return argpartition

    def wrap_next_states(self, fn):
        def next_states(c, k, inputs, *states):
            out = fn(c, k, inputs, *states)
            cur = self.current
            if self.active and cur is not None:
                cur["states_gathered"] = numpy.array([numpy.array(s) for s in states])
                cur["next_states"] = numpy.array([numpy.array(s) for s in out])
            return out

        return next_states


def load_pickle(path):
    """A Python-2 pickle (GroundHog's states and vocabularies)."""
    if PY2:
        import cPickle

        with open(path, "rb") as f:
            return cPickle.load(f)
    import pickle

    with open(path, "rb") as f:
        return pickle.load(f, encoding="utf-8")


def load_vocabulary(state, key):
    """The pickle ``state[key]`` names (located by :func:`locate_inputs`); InputError when it
    cannot be read as one."""
    try:
        return load_pickle(state[key])
    except Exception as exc:  # a truncated or foreign file: one line, before any compilation
        raise InputError(
            "state[{0!r}] {1}: not a readable vocabulary pickle ({2})".format(
                key, state[key], error_text(exc).splitlines()[0][:200]
            )
        )


def git_commit(checkout):
    """The commit a git checkout is at, from its metadata (no git needed), or None."""
    git = os.path.join(checkout, ".git")
    try:
        if os.path.isfile(git):  # a worktree / submodule: "gitdir: <path>"
            with io.open(git, encoding="utf-8") as f:
                git = os.path.join(checkout, f.read().split(":", 1)[1].strip())
        with io.open(os.path.join(git, "HEAD"), encoding="utf-8") as f:
            head = f.read().strip()
        if not head.startswith("ref:"):
            return head
        ref = head.split(":", 1)[1].strip()
        if os.path.isfile(os.path.join(git, ref)):
            with io.open(os.path.join(git, ref), encoding="utf-8") as f:
                return f.read().strip()
        with io.open(os.path.join(git, "packed-refs"), encoding="utf-8") as f:
            for line in f:
                parts = line.split()
                if len(parts) == 2 and parts[1] == ref:
                    return parts[0]
    except (IOError, OSError, IndexError):
        pass
    return None


def commit_mismatch(checkout, named):
    """Why ``checkout`` may not be GroundHog commit ``named`` (a warning text), or None.

    Short and full ids match by prefix.  The checkout may be a local commit on top of the
    named one (a Python-3 adaptation, MANIFEST section 2): the user names the commit the
    code is, the checkout's HEAD is only a hint.
    """
    head = git_commit(checkout)
    if head is None:
        return (
            "--groundhog {0} is not a git checkout: cannot check that it is GroundHog "
            "commit {1} (recorded as groundhog_commit)".format(checkout, named)
        )
    if head.startswith(named) or named.startswith(head):
        return None
    return (
        "--groundhog {0} is at git commit {1}, not {2}; groundhog_commit records {2} "
        "(give --groundhog-commit to name the GroundHog commit your tree is)".format(
            checkout, head, named
        )
    )


def closest_prototype(nmt, state):
    """Name of the ``prototype_*_state`` of ``experiments.nmt`` the state differs least from
    (the prototype train.py was given with ``--proto``, up to its ``changes``)."""
    best = None
    for name in sorted(dir(nmt)):
        if not (name.startswith("prototype_") and name.endswith("state")):
            continue
        try:
            proto = getattr(nmt, name)()
        except Exception:  # a prototype the installed GroundHog cannot build
            continue
        n_diff = sum(
            1
            for k in set(proto) | set(state)
            if k not in proto or k not in state or repr(proto[k]) != repr(state[k])
        )
        if best is None or n_diff < best[0]:
            best = (n_diff, name)
    return best[1] if best else None


def scan_mode(theano):
    """How Theano runs scan loops here (speed only; the recorded values do not depend on it),
    worded as the reference recordings' ``scan_mode``.

    ``disabled``: ``sys.modules['theano.scan_module.scan_perform_ext'] = None`` (MANIFEST
    section 1: the Cython scan does not build on Python 3.11).  Importing the module can
    compile it, and a failed build raises a plain Exception (Theano's scan falls back to
    Python only on ImportError), hence the broad except.
    """
    if not getattr(theano.config, "cxx", "x"):
        return "no C compiler: Python implementations of every op, python scan loop"
    name = "theano.scan_module.scan_perform_ext"
    if name in sys.modules and sys.modules[name] is None:
        return "python scan loop (scan_perform_ext disabled), inner graphs C-compiled"
    try:
        from theano.scan_module import scan_perform_ext  # noqa: F401

        return "C scan loop (scan_perform_ext), inner graphs C-compiled"
    except Exception as exc:
        return (
            "python scan loop (scan_perform_ext unavailable: {0}), inner graphs C-compiled".format(
                error_text(exc).splitlines()[0][:200]
            )
        )


def stream_states(trng):
    """The shared state arrays of a ``MRG_RandomStreams``, in creation order.

    ``trng.state_updates`` holds ``(shared_state, new_state)`` pairs in Theano 0.7-0.9 and
    ``(shared_state, new_state, size, nstreams)`` 4-tuples in 1.0.x (rng_mrg.py:809).
    """
    return [update[0] for update in trng.state_updates]


def record_mrg_seeds():
    """Make every ``MRG_RandomStreams`` remember the seed it was created with (pass-through:
    the stream is built exactly as before).  GroundHog's layers draw it from the model's
    ``RandomState`` while they are built, so it is known only at construction."""
    from theano.sandbox.rng_mrg import MRG_RandomStreams

    if getattr(MRG_RandomStreams, "_recorder_wrapped", False):
        return MRG_RandomStreams
    original = MRG_RandomStreams.__init__

    def __init__(self, seed=12345, *args, **kwargs):
        original(self, seed, *args, **kwargs)
        self._recorder_seed = seed

    MRG_RandomStreams.__init__ = __init__
    MRG_RandomStreams._recorder_wrapped = True
    return MRG_RandomStreams


class GroundHogProducer(object):
    """Computes every record with GroundHog's own functions (see the module docstring)."""

    def __init__(self, args, parts=PARTS):
        self.groundhog_dir = os.path.abspath(args.groundhog)
        sys.path.insert(0, self.groundhog_dir)
        t0 = time.time()
        import experiments.nmt.sample as sample_mod
        import experiments.nmt.score as score_mod
        import theano
        from experiments.nmt import RNNEncoderDecoder, parse_input, prototype_state

        self.theano = theano
        self.parse_input = parse_input
        self.sample_mod = sample_mod
        self.score_mod = score_mod

        import experiments.nmt as nmt

        self.nmt = nmt
        self.args = args
        self.mrg_class = record_mrg_seeds()

        state = prototype_state()
        state.update(load_pickle(args.state))
        state.update(args.changes_dict)
        # state_json records the state as given (its file entries as the state and the
        # changes name them, not where this machine found them)
        self.state_given = dict(state)
        # every file the requested parts read, located before anything is built
        state.update(locate_inputs(state, parts, args.remap_dir, args.data))
        self.state = state
        text_parts = [p for p in parts if p != "train_step"]
        self.indx_src = load_vocabulary(state, "word_indx") if text_parts else None
        self.indx_trg = load_vocabulary(state, "word_indx_trgt") if text_parts else None
        self.idict_src = load_vocabulary(state, "indx_word") if text_parts else None
        self.prototype = closest_prototype(nmt, state)
        warning = commit_mismatch(self.groundhog_dir, args.groundhog_commit)
        if warning:
            log.warning("%s", warning)
        rng = numpy.random.RandomState(state["seed"])
        self.enc_dec = RNNEncoderDecoder(state, rng, skip_init=True, compute_alignment=True)
        self.enc_dec.build()
        # /sampler/mrg_base_rstate_after_build: read now.  Every random op built later jumps
        # its stream's rstate 2^134 draws on (rng_mrg.py inc_rstate); BeamSearch.compile builds
        # the next-states graph in SAMPLING mode (encdec.py:1259-1261), whose multinomial
        # (cost_layers.py:1059) is one more op on the softmax layer's stream.
        self.rstates_after_build = [
            (trng, numpy.array(trng.rstate, dtype="int32")) for trng, _ in self._streams()
        ]
        self.lm_model = self.enc_dec.create_lm_model()
        self.lm_model.load(args.model)
        self.timings = {"build_load_s": time.time() - t0}

        self.recorder = StepRecorder()
        self.searcher = None
        if set(parts) & set(SEARCH_PARTS):  # else minutes of compilation for nothing
            t0 = time.time()
            self.searcher = sample_mod.BeamSearch(self.enc_dec)
            self.searcher.compile()
            bs = self.searcher
            bs.comp_next_probs = self.recorder.wrap_next_probs(bs.comp_next_probs)
            bs.comp_next_states = self.recorder.wrap_next_states(bs.comp_next_states)
            sample_mod.argpartition = self.recorder.wrap_argpartition(sample_mod.argpartition)
            self.timings["beam_compile_s"] = time.time() - t0
        self._probs = None
        self._scorer = None
        self._batch_scorer = None

    def _check_origin(self, exc):
        """A failure inside GroundHog's search is recorded as an ``error`` record; anything
        else is a bug of this recorder and must stop the run (RecorderError)."""
        tb = sys.exc_info()[2]
        while tb is not None:
            if os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(
                self.groundhog_dir + os.sep
            ):
                return
            tb = tb.tb_next
        raise RecorderError("{0} raised outside GroundHog's code".format(error_text(exc)))

    def _native(self, line):
        """What sample.py / score.py pass on: ``line.strip()`` of the file's native string
        (bytes under Python 2, so only ASCII whitespace is stripped there)."""
        if PY2 and isinstance(line, text_type):
            line = line.encode("utf-8")
        return line.strip()

    def root_attrs(self):
        s = self.state
        keep = self.args.keep_paths
        attrs = {
            "theano_version": getattr(self.theano, "__version__", "unknown"),
            "theano_floatX": self.theano.config.floatX,
            "THEANO_FLAGS": public_flags(os.environ.get("THEANO_FLAGS", ""), keep),
            "param_names": sorted(to_text(p.name) for p in self.lm_model.params),
            "state_json": json.dumps(public(self.state_given, keep), sort_keys=True, default=repr),
            "timings_json": json.dumps(self.timings, sort_keys=True),
            "prototype": self.prototype,
            "scan_mode": scan_mode(self.theano),
        }
        for key in STATE_ATTRS:
            attrs[key] = int(s[key])
        return attrs

    def _pair_ids(self, line, side):
        """score.py's ids of one ``side`` ("source" or "target") of a pair: parse_input with
        that side's dictionary, UNK and end-of-sequence ids, unknown words allowed."""
        s = self.state
        ids, _ = self.parse_input(
            s,
            self.indx_src if side == "source" else self.indx_trg,
            self._native(line),
            raise_unk=False,
            unk_sym=s["unk_sym_" + side],
            null_sym=s["null_sym_" + side],
        )
        return ids

    def pair(self, src_line, trg_line):
        if self._probs is None:
            self._probs = self.enc_dec.create_probs_computer(return_alignment=True)
            self._scorer = self.enc_dec.create_scorer()
        src = self._pair_ids(src_line, "source")
        trg = self._pair_ids(trg_line, "target")
        probs, alignment = self._probs(src, trg)
        score = self._scorer(src, trg)[0]
        return {
            "src_ids": src,
            "trg_ids": trg,
            "word_probs": probs,
            "alignment": alignment,
            "score": score,
        }

    def batches(self, source_path, target_path):
        s = self.state
        if self._batch_scorer is None:
            self._batch_scorer = self.enc_dec.create_scorer(batch=True)
        it = self.score_mod.BatchBiTxtIterator(
            s, source_path, self.indx_src, target_path, self.indx_trg, s["bs"], raise_unk=False
        )
        it.start()
        for batch in it:
            scores = self._batch_scorer(batch["x"], batch["y"], batch["x_mask"], batch["y_mask"])[0]
            rec = dict(batch)
            rec["scores"] = scores
            rec["batch_size"] = s["bs"]
            yield rec

    def representation(self, line):
        seq, parsed_in = self.parse_input(
            self.state, self.indx_src, self._native(line), idx2word=self.idict_src
        )
        c = self.searcher.comp_repr(seq)[0]
        init_states = numpy.array([numpy.array(x) for x in self.searcher.comp_init_states(c)])
        return {"seq": seq, "parsed_in": to_text(parsed_in), "c": c, "init_states": init_states}

    def beam_search(self, seq, beam_size, ignore_unk=False, normalize=False, instrument=False):
        if instrument:
            minlen = len(seq) // 2
            self.recorder.start()
            try:
                trans, costs = self.searcher.search(
                    seq, beam_size, ignore_unk=ignore_unk, minlen=minlen
                )
            except Exception as exc:
                self._check_origin(exc)
                exc.trace_steps = self.recorder.stop()
                raise
            steps = self.recorder.stop()
            return {
                "steps": steps,
                "trans": [numpy.asarray(t, dtype="int64") for t in trans],
                "costs": numpy.asarray(costs, dtype="float64"),
                "minlen": minlen,
            }
        try:
            sentences, costs, trans = self.sample_mod.sample(
                self.lm_model,
                seq,
                beam_size,
                beam_search=self.searcher,
                ignore_unk=ignore_unk,
                normalize=normalize,
            )
        except Exception as exc:
            self._check_origin(exc)
            raise
        return {
            "trans": [numpy.asarray(t, dtype="int64") for t in trans],
            "costs": numpy.asarray(costs, dtype="float64"),
            "sentences": [to_text(x) for x in sentences],
        }

    # -- /sampler ------------------------------------------------------------------------
    def _streams(self):
        """Every MRG stream of the model built for sampling, with its state arrays."""
        found = []
        for layer in self._layers(self.enc_dec):
            trng = getattr(layer, "trng", None)
            if isinstance(trng, self.mrg_class) and all(trng is not t for t, _ in found):
                found.append((trng, layer))
        return found

    @staticmethod
    def _layers(enc_dec):
        for part in (enc_dec.encoder, enc_dec.backward_encoder, enc_dec.decoder):
            for value in vars(part).values():
                for layer in value if isinstance(value, list) else [value]:
                    if hasattr(layer, "trng"):
                        yield layer

    def sampler_record(self, picked, n_samples, alpha):
        """``sample.sample(lm_model, seq, n_samples, sampler=sample_fn, alpha=alpha)`` on each
        ``(index, seq)`` of ``picked``, in order, with the MRG states around the calls.  The
        compiled ``sample_fn`` is wrapped by a pass-through recorder for its raw outputs."""
        sample_fn = self.enc_dec.create_sampler(many_samples=True)
        streams = self._streams()
        shared = [(trng, layer, sv) for trng, layer in streams for sv in stream_states(trng)]
        before = [numpy.array(sv.get_value()) for _, _, sv in shared]
        raw = []

        def recording_sampler(*args):
            out = sample_fn(*args)
            raw.append((args, [numpy.array(o) for o in out]))
            return out

        calls = []
        for index, seq in picked:
            sentences, costs, _ = self.sample_mod.sample(
                self.lm_model, seq, n_samples, sampler=recording_sampler, alpha=alpha
            )
            args, (values, neg_log_probs) = raw[-1]
            calls.append(
                {
                    "index": index,
                    "seq": seq,
                    "sample_ids": values,
                    "sample_neg_log_probs": neg_log_probs,
                    "costs": costs,
                    "sentences": [to_text(x) for x in sentences],
                    "n_samples": args[0],
                    "n_steps": args[1],
                    "alpha": args[2],
                    "rstate_after": [numpy.array(sv.get_value()) for _, _, sv in shared],
                }
            )
        first_after = calls[0]["rstate_after"] if calls else before
        used = [not numpy.array_equal(b, a) for b, a in zip(before, first_after)]
        owner = [t for (t, _, _), u in zip(shared, used) if u]
        if len(set(id(t) for t in owner)) > 1:
            raise RecorderError(
                "sample_fn advanced {0} MRG streams; the trace layout has one".format(
                    len(set(id(t) for t in owner))
                )
            )
        trng = owner[0] if owner else (streams[0][0] if streams else None)
        if trng is None:
            raise RecorderError("no MRG_RandomStreams found in the model's layers")
        layer = [l for t, l in streams if t is trng][0]
        keep = [k for k, (t, _, _) in enumerate(shared) if t is trng]
        for call in calls:
            call["rstate_after"] = [call["rstate_after"][k] for k in keep]
        return {
            "attrs": {
                "mrg_seed": int(getattr(trng, "_recorder_seed", -1)),
                "mrg_seed_origin": "MRG_RandomStreams(seed) of layer {0!r} ({1}), seed "
                "drawn from the layer-construction RandomState(state"
                "['seed']) while the model was built".format(
                    to_text(getattr(layer, "name", "?")), type(layer).__name__
                ),
            },
            "base_rstate_after_build": [r for t, r in self.rstates_after_build if t is trng][0],
            "rstate_before": [before[k] for k in keep],
            "used": [used[k] for k in keep],
            "calls": calls,
        }

    # -- /train_step ----------------------------------------------------------------------
    def train_step(self):
        """One update as train.py would do it (MANIFEST section 7, /train_step)."""
        from groundhog.trainer.SGD_adadelta import SGD as SGD_adadelta

        state = dict(self.state)
        enc_dec = self.nmt.RNNEncoderDecoder(
            state, numpy.random.RandomState(state["seed"]), skip_init=False
        )
        enc_dec.build()
        lm_model = enc_dec.create_lm_model()
        train_data = self.nmt.get_batch_iterator(state)
        consumed = []
        original_next = train_data.next
        loader = {"threads": [], "errors": []}
        corpus = (
            "state['source'][0] {0} and state['target'][0] {1}; are they the .h5 files of "
            "GroundHog's preprocess/convert-pkl2hdf5.py? (or --parts without train_step)".format(
                state["source"][0], state["target"][0]
            )
        )

        def recording_next(*args, **kwargs):
            # GroundHog's next() waits in queue.get() for its loader thread: watched here
            batch = watched_call(
                lambda: original_next(*args, **kwargs),
                loader["threads"],
                loader["errors"],
                self.args.loader_timeout,
                corpus,
            )
            consumed.append(batch)
            return batch

        train_data.next = recording_next
        cls = type(train_data)
        if "__next__" in dir(cls):
            # a lib2to3 conversion: SGD_adadelta's self.data.next() became next(self.data),
            # which Python 3 takes from the class (TM_dataset's raw __next__): routed to
            # next() here, as Python 2 called it
            train_data.__class__ = type(
                cls.__name__, (cls,), {"__next__": lambda self: self.next()}
            )
        algo = SGD_adadelta(lm_model, state, train_data)
        lm_model.load(self.args.model)
        loader["threads"], loader["errors"] = start_watched(train_data.start, 0)
        names = [to_text(p.name) for p in lm_model.params]
        before = dict((n, numpy.array(p.get_value())) for n, p in zip(names, lm_model.params))
        rval = algo()
        batch = consumed[0]
        get = (
            (lambda k: batch[k])
            if isinstance(batch, dict)
            else (lambda k: batch[("x", "y", "x_mask", "y_mask").index(k)])
        )
        values = lambda shared: dict((n, numpy.array(v.get_value())) for n, v in zip(names, shared))
        return {
            "x": get("x"),
            "x_mask": get("x_mask"),
            "y": get("y"),
            "y_mask": get("y_mask"),
            "rval": dict(
                (k, v)
                for k, v in rval.items()
                if numpy.asarray(v).size == 1 and numpy.asarray(v).dtype.kind in "biuf"
            ),
            "param_order": names,
            "params_before": before,
            "params_after": values(lm_model.params),
            "clipped_grads": values(algo.gs),
            "gnorm2_after": values(algo.gnorm2),
            "dnorm2_after": values(algo.dnorm2),
            "attrs": {
                "iterator_start_offset": 0,
                "note": "Fresh SGD_adadelta trainer (accumulators start at zero), model "
                "loaded from the model file, first batch of "
                "get_batch_iterator(state) started at offset 0, one call of "
                "algo() = train_fn() + update_fn().",
            },
        }


# ----------------------------------------------------------------------------------------
# Recording: each group committed to --output as soon as it is finished
# ----------------------------------------------------------------------------------------
#: the group a finished part leaves in the trace (beam: one group per label, beam/<label>)
PART_GROUP = {
    "pairs": "pairs",
    "batch": "batch_all",
    "repr": "repr",
    "steps": "steps",
    "sampler": "sampler",
    "train_step": "train_step",
}
#: root attributes that must be the same for --resume to add groups to a trace
RESUME_KEYS = STATE_ATTRS + (
    "case",
    "model_file",
    "state_file",
    "test_src_file",
    "test_trg_file",
    "state_json",
    "recorder_changes_json",
    "param_names",
    "theano_version",
    "theano_floatX",
    "groundhog_commit",
)


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled as Ctrl-C is: the finished groups stay in --output for --resume."""


def on_sigterm(signum, frame):
    raise Terminated()


def fresh_file_name(path):
    """Make ``path`` (one of the recorder's own ``--output.partial`` / ``--output.tmp``)
    free for a new file: a regular file an earlier, killed run left is removed; a link or
    a special file there is refused (writing would go through it: a stale ``t.h5.tmp ->
    src.txt`` replaced the linked file), never followed or removed."""
    try:
        st = os.lstat(path)
    except OSError:
        return
    import stat

    if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
        what = (
            "a symbolic link"
            if stat.S_ISLNK(st.st_mode)
            else ("a hard link of another file" if stat.S_ISREG(st.st_mode) else "a special file")
        )
        raise InputError(
            "{0} is {1}: the recorder writes its temporary files there and never writes "
            "through one; remove it (or record into another --output)".format(path, what)
        )
    os.remove(path)


def copy_new(src, dst):
    """Copy ``src`` into the new file ``dst`` (created with O_EXCL | O_NOFOLLOW: never
    through a link, never over a file that appeared meanwhile)."""
    fresh_file_name(dst)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(dst, flags, 0o644)
    with io.open(fd, "wb") as out, io.open(src, "rb") as f:
        shutil.copyfileobj(f, out)


def replace_file(src, dst):
    """``os.replace`` (Python 2: ``os.rename``, which replaces on POSIX)."""
    if hasattr(os, "replace"):
        os.replace(src, dst)
        return
    if os.name == "nt" and os.path.exists(dst):
        os.remove(dst)
    os.rename(src, dst)


def recorded_groups(f):
    """The groups of an open trace: top-level names and ``beam/<label>``."""
    names = set(to_text(k) for k in f.keys())
    if "beam" in f:
        names.update("beam/" + to_text(k) for k in f["beam"].keys())
    return names


def attr_plain(value):
    """An attribute as read back by h5py or as given to set_attrs -> comparable Python."""
    if isinstance(value, numpy.ndarray):
        return [attr_plain(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [attr_plain(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, numpy.generic):
        return value.item()
    return value


def read_resumed(args):
    """The groups the --output of an earlier run holds, and its root attributes; InputError
    when it is no trace or was recorded from other files."""
    import h5py

    try:
        with h5py.File(args.output, "r") as f:
            done = recorded_groups(f)
            attrs = dict((to_text(k), attr_plain(v)) for k, v in f.attrs.items())
    except (IOError, OSError) as exc:
        raise InputError(
            "--resume: --output {0} is not a readable trace ({1})".format(
                args.output, str(exc).splitlines()[0][:200]
            )
        )
    for key, path in (
        ("model_file", args.model),
        ("state_file", args.state),
        ("test_src_file", args.source),
        ("test_trg_file", args.target),
    ):
        if key in attrs and attrs[key] != os.path.basename(path):
            raise InputError(
                "--resume: {0} was recorded with {1} {2}, this run has {3}; record into "
                "another --output".format(args.output, key, attrs[key], os.path.basename(path))
            )
    return done, attrs


def parts_to_record(args, done):
    """``args.parts`` less those whose groups ``done`` holds (beam: every label's)."""
    todo = []
    for part in args.parts:
        if part == "beam":
            if [b for b in args.beams if "beam/" + b[0] not in done]:
                todo.append(part)
        elif PART_GROUP[part] not in done:
            todo.append(part)
    return todo


def read_test_files(args):
    """The --source / --target lines (checked before anything is built)."""
    src_lines = read_lines(args.source)
    trg_lines = read_lines(args.target)
    if len(src_lines) != len(trg_lines):
        raise InputError(
            "--source has {0} lines but --target has {1}".format(len(src_lines), len(trg_lines))
        )
    return src_lines, trg_lines


def root_attributes(args, producer):
    import h5py

    keep = args.keep_paths
    root = {
        "case": args.case,
        "recorder": "tools/record_theano_traces.py (groundhog-port)",
        "python_version": platform.python_version(),
        "numpy_version": numpy.__version__,
        "h5py_version": h5py.version.version,
        "test_src_file": os.path.basename(args.source),
        "test_trg_file": os.path.basename(args.target),
        "recorder_changes_json": json.dumps(public(args.changes_dict, keep), sort_keys=True),
        "model_file": os.path.basename(args.model),
        "state_file": os.path.basename(args.state),
    }
    if args.train_changes_dict is not None:
        root["state_changes_json"] = json.dumps(
            public(args.train_changes_dict, keep), sort_keys=True
        )
    root.update(producer.root_attrs() if hasattr(producer, "root_attrs") else {})
    if args.prototype:
        root["prototype"] = args.prototype
    if args.groundhog_commit:
        root["groundhog_commit"] = args.groundhog_commit
    return root


def record(args, producer, parts=None, done=(), lines=None):
    """Record ``parts`` (default ``args.parts``) into ``args.output``: written in
    ``<output>.partial``, which is copied to ``<output>`` (atomically) after each finished
    group, so that an interruption or a crash leaves a trace holding every finished group
    (``--resume`` adds the rest).  ``done``: the groups an earlier run's --output holds."""
    parts = list(args.parts if parts is None else parts)
    src_lines, trg_lines = read_test_files(args) if lines is None else lines
    n = len(src_lines) if args.max_sentences is None else min(args.max_sentences, len(src_lines))
    root = root_attributes(args, producer)
    partial = args.output + ".partial"
    timings = {}
    committed = sorted(done)
    if args.resume:
        copy_new(args.output, partial)
        writer = TraceLayoutWriter(partial, None, append=True)
        old = dict((to_text(k), attr_plain(v)) for k, v in writer.f.attrs.items())
        for key in RESUME_KEYS:
            if key in old and key in root and old[key] != attr_plain(root[key]):
                writer.close()
                os.remove(partial)
                raise InputError(
                    "--resume: {0} was recorded with another {1} than this run's; record "
                    "into another --output".format(args.output, key)
                )
        try:
            timings = json.loads(old.get("recorder_timings_json", "{}"))
            if not isinstance(timings, dict):
                raise ValueError("not an object")
        except ValueError as err:
            writer.close()
            os.remove(partial)
            raise InputError(
                "--resume: {0}: its recorder_timings_json attribute is not a JSON object "
                "({1}): a damaged or edited trace; record into another --output".format(
                    args.output, str(err)[:100]
                )
            )
        # the earlier run's attributes stay; what it did not write is added
        writer.set_attrs(writer.f, dict((k, v) for k, v in root.items() if k not in old))
    else:
        fresh_file_name(partial)
        writer = TraceLayoutWriter(partial, root)

    def commit(group):
        """``group`` is finished: the trace so far becomes --output."""
        writer.set_attrs(writer.f, {"recorder_timings_json": json.dumps(timings, sort_keys=True)})
        writer.close()
        tmp = args.output + ".tmp"
        copy_new(partial, tmp)
        replace_file(tmp, args.output)
        writer.reopen()
        committed.append(group)
        log.info("%s: committed to %s", group, args.output)

    try:
        if "pairs" in parts:
            t0 = time.time()
            for i in range(n):
                writer.pair(
                    i,
                    producer.pair(src_lines[i], trg_lines[i]),
                    src_lines[i].strip(),
                    trg_lines[i].strip(),
                )
            timings["pairs_total_s"] = time.time() - t0
            commit("pairs")
        if "batch" in parts:
            t0 = time.time()
            for b, rec in enumerate(producer.batches(args.source, args.target)):
                writer.batch(b, rec, rec.get("batch_size", numpy.shape(rec["x"])[1]))
            timings["batch_score_total_s"] = time.time() - t0
            commit("batch_all")
        seqs = {}

        def source_seq(i):
            if i not in seqs:
                seqs[i] = producer.representation(src_lines[i])
            return seqs[i]

        if "repr" in parts:
            for i in range(n):
                writer.repr(i, source_seq(i))
            commit("repr")
        if "steps" in parts:
            for i in range(min(args.steps, n)):
                seq = source_seq(i)["seq"]
                try:
                    rec = producer.beam_search(
                        seq, args.steps_beam, ignore_unk=False, normalize=False, instrument=True
                    )
                    writer.steps(i, seq, rec, args.steps_beam, False)
                except RecorderError:
                    raise
                except Exception as exc:  # the search crashed: keep the steps recorded so far
                    log.warning("steps/%d: %s", i, error_text(exc))
                    writer.steps(
                        i,
                        seq,
                        {"steps": getattr(exc, "trace_steps", []), "minlen": len(seq) // 2},
                        args.steps_beam,
                        False,
                        error=error_text(exc),
                    )
            commit("steps")
        if "beam" in parts:
            for label, beam_size, normalize, ignore_unk in args.beams:
                if "beam/" + label in done:
                    continue
                writer.beam_group(label, beam_size, normalize, ignore_unk)
                t0 = time.time()
                n_err = 0
                for i in range(n):
                    seq = source_seq(i)["seq"]
                    try:
                        rec = producer.beam_search(
                            seq, beam_size, ignore_unk=ignore_unk, normalize=normalize
                        )
                        best = int(numpy.argmin(rec["costs"]))  # sample.py: numpy.argmin(costs)
                    except RecorderError:
                        raise
                    except Exception as exc:  # where sample.py would die: record and go on
                        n_err += 1
                        log.warning("beam/%s/%d: %s", label, i, error_text(exc))
                        writer.beam_error(label, i, error_text(exc))
                        continue
                    writer.beam(label, i, rec["trans"], rec["costs"], best, rec["sentences"][best])
                writer.beam_timing(label, time.time() - t0, n)
                log.info("beam/%s: %d sentences, %d errors", label, n, n_err)
                commit("beam/" + label)
        for part, method in (("sampler", "sampler_record"), ("train_step", "train_step")):
            if part in parts and not hasattr(producer, method):
                log.warning("/%s not recorded: this producer offers no %s()", part, method)
        if "sampler" in parts and hasattr(producer, "sampler_record") and args.sampler_calls:
            t0 = time.time()
            picked = []
            for i in range(n):
                if len(picked) == args.sampler_calls:
                    break
                seq = source_seq(i)["seq"]
                if len(seq) >= SAMPLER_MIN_LEN:
                    picked.append((i, seq))
            writer.sampler(producer.sampler_record(picked, args.sampler_samples, 1.0))
            timings["sampler_total_s"] = time.time() - t0
            commit("sampler")
        if "train_step" in parts and hasattr(producer, "train_step"):
            t0 = time.time()
            writer.train_step(producer.train_step())
            timings["train_step_total_s"] = time.time() - t0
            commit("train_step")
        writer.set_attrs(writer.f, {"recorder_timings_json": json.dumps(timings, sort_keys=True)})
        writer.close()
        replace_file(partial, args.output)
    except BaseException as exc:
        writer.close()
        for path in (partial, args.output + ".tmp"):
            if os.path.isfile(path) and not os.path.islink(path):  # ours; a link is refused
                os.remove(path)
        if committed:
            exc.kept = "{0} holds {1} (every group finished); --resume adds the rest".format(
                args.output, ", ".join(committed)
            )
        else:
            exc.kept = "nothing was finished: no {0} written".format(args.output)
        if not isinstance(exc, KeyboardInterrupt):
            log.warning("%s", exc.kept)
        raise
    return EXIT_OK


def main(argv=None, producer=None):
    """Entry point; returns the exit code.  ``producer`` replaces GroundHog (tests)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else EXIT_INPUT
    except InputError as exc:
        print("record_theano_traces.py: error: {0}".format(exc), file=sys.stderr)
        return EXIT_INPUT
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        old_sigterm = signal.signal(signal.SIGTERM, on_sigterm)
    except ValueError:  # not the main thread: leave it
        old_sigterm = None
    try:
        lines = read_test_files(args)
        done = set()
        if args.resume:
            done, _ = read_resumed(args)
        parts = parts_to_record(args, done)
        if not parts:
            log.info("%s already holds every requested part: nothing to add", args.output)
            return EXIT_OK
        if done:
            log.info(
                "--resume: %s holds %s; recording %s",
                args.output,
                ", ".join(sorted(done)),
                ", ".join(parts),
            )
        if producer is None:
            for name in ("state", "model"):
                if not os.path.isfile(getattr(args, name)):
                    raise InputError("--{0} {1}: file not found".format(name, getattr(args, name)))
            if not os.path.isdir(os.path.join(args.groundhog, "experiments")):
                raise InputError(
                    "--groundhog {0}: no 'experiments' directory there".format(args.groundhog)
                )
            producer = GroundHogProducer(args, parts)
        return record(args, producer, parts, done, lines)
    except InputError as exc:
        print("record_theano_traces.py: error: {0}".format(exc), file=sys.stderr)
        return EXIT_INPUT
    except (IOError, OSError) as exc:
        print("record_theano_traces.py: error: {0}".format(exc), file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt as exc:
        what = "terminated" if isinstance(exc, Terminated) else "interrupted"
        kept = getattr(exc, "kept", "nothing was finished: no {0} written".format(args.output))
        print("record_theano_traces.py: {0}: {1}".format(what, kept), file=sys.stderr)
        return 143 if isinstance(exc, Terminated) else 130
    finally:
        if old_sigterm is not None:
            signal.signal(signal.SIGTERM, old_sigterm)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # GroundHog's data iterators join their fetcher threads in __del__; leave without that
    os._exit(code)
