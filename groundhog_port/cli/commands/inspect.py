"""``groundhog-port inspect``: what a state describes and what a checkpoint holds."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence, Sized
from typing import Any

import legacy_states

from ... import lookup
from ...errors import EXIT_INPUT, EXIT_OK, LegacyInputError
from ...outputs import signals_held
from .common import add_data_dir_argument, add_model_and_changes, model_and_changes

NAME = "inspect"
HELP = "print the architecture a *_state.pkl describes and check a *_model.npz against it"

VOCAB_KEYS = ("word_indx", "word_indx_trgt", "indx_word", "indx_word_target")
CORPUS_KEYS = ("source", "target")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state", required=True, help="the experiment's *_state.pkl")
    add_model_and_changes(p, "the experiment's *_model.npz (optional)")
    add_data_dir_argument(p)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def report(
    state_path: str | os.PathLike[str],
    model_path: str | os.PathLike[str] | None = None,
    changes: str | list[str] = "",
    data_dir: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
    strict: bool = False,
) -> dict[str, Any]:  # JSON-able
    """The inspection as a dict (what ``--json`` prints)."""
    with signals_held():  # torch loads here: a Ctrl-C waits until it has (cli/main.py says why)
        from ...legacy import checkpoint
        from ...legacy.experiment import Experiment
        from ...model.config import GRCONV, ModelConfig
    state = legacy_states.load_state(state_path, changes, data_dir, strict)
    cfg = ModelConfig.from_state(state, state_path)
    prototype, differing = legacy_states.match_prototype(state)
    table, unsaved = checkpoint.legacy_param_table(cfg)
    out: dict[str, Any] = {
        "state": str(state_path),
        "prototype": prototype,
        "differs_from_prototype": {k: state.get(k) for k in differing},
        "architecture": {
            "model": "RNNsearch (attention)" if cfg.search else "RNNencdec (fixed context)",
            "encoder": (
                "RecursiveConvolutionalLayer (grConv)"
                if cfg.enc.layer == GRCONV
                else "RecurrentLayer (GRU)"
            ),
            "dim": cfg.dim,
            "rank_n_approx": cfg.rank_n_approx,
            "n_sym_source": cfg.n_sym_source,
            "n_sym_target": cfg.n_sym_target,
            "null_sym_source": cfg.null_sym_source,
            "null_sym_target": cfg.null_sym_target,
            "annotation_components": [
                n
                for n in ("forward", "last_forward", "backward", "last_backward")
                if getattr(cfg, n)
            ],
            "c_dim": cfg.c_dim,
            "search": cfg.search,
            "readout": {
                "deep_out": cfg.deep_out,
                "unary_activ": state["unary_activ"],
                "maxout_part": cfg.maxout_part,
                "softmax_input": cfg.softmax_in,
                "bigram": cfg.bigram,
                "check_first_word": cfg.check_first_word,
            },
            "bias_code": cfg.bias_code,
            "decoding_inputs": cfg.decoding_inputs,
            "activations": {
                "enc": cfg.enc.activation.name,
                "back_enc": cfg.back_enc.activation.name,
                "dec": cfg.dec.activation.name,
                "rank_n_activ": cfg.rank_n_activ.name,
            },
        },
        "parameters": [{"name": p.name, "shape": list(p.shape), "module": p.path} for p in table],
        "not_saved_by_groundhog": [{"name": u.name, "why": u.reason} for u in unsaved],
    }
    exp = Experiment(
        state_path,  # type: ignore[arg-type]  # as given (str or Path): messages name it so
        state,
        cfg,
        None,  # type: ignore[arg-type]  # no model: inspect reads the vocabularies only
        lookup.data_dirs(data_dir),
        frozenset(legacy_states.parse_changes(changes)),
    )
    out["data"] = {}
    for key in VOCAB_KEYS + CORPUS_KEYS:
        try:
            path = exp.path(key)
        except LegacyInputError as err:
            out["data"][key] = {"error": err.problem}
            continue
        entry: dict[str, object] = {"path": str(path)}
        if key in VOCAB_KEYS:
            vocabularies: dict[str, Callable[[], Sized]] = {
                "word_indx": lambda: exp.src_word2idx,
                "word_indx_trgt": lambda: exp.trg_word2idx,
                "indx_word": lambda: exp.src_idx2word,
                "indx_word_target": lambda: exp.trg_idx2word,
            }
            entry["size"] = len(vocabularies[key]())
        out["data"][key] = entry
    if model_path:
        arrays = checkpoint.read_npz(model_path, table)
        problems = checkpoint.check_arrays(arrays, table, model_path, lenient=True)
        for entry in out["parameters"]:
            entry["in_checkpoint"] = entry["name"] in arrays
        out["checkpoint"] = {
            "path": str(model_path),
            "arrays": len(arrays),
            "problems": problems,
            "nonfinite": checkpoint.nonfinite_params(arrays),
        }
    return out


def run(args: argparse.Namespace) -> int:
    model, changes = model_and_changes(args)
    rep = report(args.state, model, changes, args.data_dir, args.strict)
    if args.json:
        print(json.dumps(rep, indent=2, ensure_ascii=False, default=_json_value))
    else:
        print_text(rep)
    ck = rep.get("checkpoint")
    if ck and (ck["problems"] or ck["nonfinite"]):
        n = len(ck["problems"]) + len(ck["nonfinite"])
        print(
            f"groundhog-port inspect: error: {ck['path']}: {n} problem(s), listed above",
            file=sys.stderr,
        )
        return EXIT_INPUT
    return EXIT_OK


def _json_value(value):
    """State values JSON has no type for (numpy scalars and arrays, sets, complex)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    return repr(value)


def print_text(rep: Mapping[str, Any]) -> None:
    a = rep["architecture"]
    print(f"state       {rep['state']}")
    print(f"prototype   {rep['prototype']}")
    for k, v in rep["differs_from_prototype"].items():
        print(f"  changed   {k} = {v!r}")
    print(f"model       {a['model']}")
    print(
        f"sizes       dim={a['dim']} rank_n_approx={a['rank_n_approx']} "
        f"n_sym_source={a['n_sym_source']} n_sym_target={a['n_sym_target']} c_dim={a['c_dim']}"
    )
    print(f"encoder     {a['encoder']}")
    print(f"annotation  {' + '.join(a['annotation_components'])}")
    r = a["readout"]
    print(
        f"readout     deep_out={r['deep_out']} unary_activ={r['unary_activ']!r} "
        f"softmax_input={r['softmax_input']} bigram={r['bigram']} "
        f"check_first_word={r['check_first_word']}"
    )
    print(
        f"decoder     bias_code={a['bias_code']} decoding_inputs={a['decoding_inputs']} "
        f"search={a['search']}"
    )
    ck = rep.get("checkpoint")
    print(
        f"parameters  {len(rep['parameters'])}"
        + (f" (checkpoint {ck['path']}: {ck['arrays']} arrays)" if ck else "")
    )
    for p in rep["parameters"]:
        mark = "" if "in_checkpoint" not in p else ("  ok" if p["in_checkpoint"] else "  MISSING")
        print(f"  {p['name']:<32} {str(tuple(p['shape'])):<14} -> {p['module']}{mark}")
    print("not saved by GroundHog")
    for u in rep["not_saved_by_groundhog"]:
        print(f"  {u['name']}: {u['why']}")
    print("data")
    for key, d in rep["data"].items():
        if "error" in d:
            note = (
                (" (the training corpus: not needed to inspect, translate or score text files)")
                if key in CORPUS_KEYS
                else ""
            )
            print(f"  {key:<17} NOT FOUND{note}: {d['error']}")
        else:
            size = f"  ({d['size']} entries)" if "size" in d else ""
            print(f"  {key:<17} {d['path']}{size}")
    if ck:
        for prob in ck["problems"]:
            print(f"PROBLEM     {prob}")
        for name, n in ck["nonfinite"].items():
            print(f"NONFINITE   {name}: {n} NaN/Inf values")
