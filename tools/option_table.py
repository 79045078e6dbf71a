"""Every state option GroundHog reads, accounted for: ``docs/options.md`` (issue 44, item 1).

Three lists, each computed, never typed in:

* the keys of the five prototypes (``legacy_states.prototypes``) with their defaults;
* the keys the port reads: string literals of ``groundhog_port/`` and ``legacy_states/``
  that are prototype keys or stand in a ``state[...]`` / ``state.get(...)`` read, and the
  ``enc_``/``dec_``/``back_enc_`` forms of the keys read through the prefixed lookup
  (``model/config.py``, as ``encdec.py:560``'s ``prefix_lookup``);
* the keys the original reads, with ``file:line`` at commit 4d2433b: ``state[...]``,
  ``state.get(...)``, ``'...' in state`` and ``prefix_lookup(...)`` in the files below,
  scanned from a checkout (``--groundhog DIR``) into ``tools/option_reads.json`` (names and
  line numbers only, no code of the original).

Each key then needs one line of :data:`EVIDENCE`: the recording that covers it, the
derivation test that checks it against the original's formula, the refusal that keeps it
out, or why it cannot change an output.  ``parity_tests/packaging/test_option_table.py``
fails when a key the port reads (or a prototype's) has none, when a derivation test named
here does not exist, or when ``docs/options.md`` is not what this writes.

    python tools/option_table.py --write               # docs/options.md
    python tools/option_table.py --groundhog ~/GroundHog --scan   # tools/option_reads.json
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

READS_FILE = REPO / "tools" / "option_reads.json"
DOC = REPO / "docs" / "options.md"
COMMIT = "4d2433b6ff03da63f3619ecb3e8c501901779cdb"
ORIGINAL_FILES = (
    "experiments/nmt/state.py",
    "experiments/nmt/encdec.py",
    "experiments/nmt/sample.py",
    "experiments/nmt/score.py",
    "experiments/nmt/train.py",
    "groundhog/trainer/SGD_adadelta.py",
    "groundhog/mainLoop.py",
    "groundhog/models/LM_model.py",
)
PROTOTYPES = (
    "prototype_state",
    "prototype_encdec_state",
    "prototype_search_state",
    "prototype_phrase_state",
    "prototype_phrase_lstm_state",
)
PREFIXES = ("enc", "dec", "back_enc")

_READ = re.compile(r"""(?:state|opts)(?:\.get)?\s*[\[(]\s*['"]([A-Za-z_][A-Za-z_0-9]*)['"]""")
_IN = re.compile(r"""['"]([A-Za-z_][A-Za-z_0-9]*)['"]\s+(?:not\s+)?in\s+(?:self\.)?state\b""")
_PREFIXED = re.compile(r"""prefix_lookup\([^,]+,\s*([^,]+),\s*['"]([A-Za-z_0-9]+)['"]""")
_PORT_PREFIXED = re.compile(
    r"""prefix_lookup\(\s*state\s*,\s*prefix\s*,\s*["']([A-Za-z_0-9]+)["']"""
)
_LITERAL = re.compile(r"""['"]([A-Za-z_][A-Za-z_0-9]*)['"]""")

R = "recording"  # every shared case runs with it (parity --case; the default or the case's value)
D = "derivation"  # a test computes the original's formula independently
X = "refused"  # a value the port cannot run is one error line (model/config.py UNSUPPORTED)
N = "inert"  # cannot change an output of the port; why
#: a tiny model with the key changed, recorded by the numpy stand-in, passes parity
#: (``parity_tests/parity/test_state_options.py``; the variants are named in the table)
V = "variant"

#: key -> (kind, evidence).  A derivation names ``parity_tests/<file>::<test>``.
EVIDENCE: dict[str, tuple[str, str]] = {
    # -- files and vocabularies
    "source": (D, "unit/test_state_derivations.py::test_the_training_corpora_are_the_states"),
    "target": (D, "unit/test_state_derivations.py::test_the_training_corpora_are_the_states"),
    "word_indx": (R, "every case's vocab.en.pkl (parse_input, sample.py:237)"),
    "word_indx_trgt": (R, "every case's vocab.fr.pkl (score.py:130)"),
    "indx_word": (R, "every case's ivocab.en.pkl (sample.py:247)"),
    "indx_word_target": (R, "every case's ivocab.fr.pkl (LM_model.py:221)"),
    "oov": (D, "unit/test_option_derivations.py::test_target_oov_word_is_the_states"),
    "unk_sym_source": (D, "unit/test_state_derivations.py::test_unk_sym_source_is_the_states"),
    "unk_sym_target": (D, "unit/test_option_derivations.py::test_target_oov_word_is_the_states"),
    "null_sym_source": (R, "every case's end-of-sequence id (repr/seq)"),
    "null_sym_target": (D, "unit/test_option_derivations.py::test_target_oov_word_is_the_states"),
    "n_sym_source": (R, "every case (embedding shapes; ids >= n_sym_source become UNK)"),
    "n_sym_target": (R, "every case (output layer shape)"),
    # -- architecture
    "last_forward": (V, "encdec (True), search (False); RNNsearch attending over it"),
    "last_backward": (V, "encdec, search (False); both with it"),
    "forward": (
        V,
        "search (True), encdec (False); encdec's per-word context c[min(t, S-1)] (encdec.py:1019)",
    ),
    "backward": (V, "search (True), encdec (False); RNNsearch without it"),
    "search": (R, "search, search_variant, phrase (True); encdec, encdec_variant (False)"),
    "bigram": (V, "the readout without the previous word (encdec.py:920)"),
    "bias_code": (V, "a zero initial state (encdec.py:847)"),
    "decoding_inputs": (V, "the decoder without the context's inputs (encdec.py:877)"),
    "deep_out": (V, "dec_softmax on the dim readout units (encdec.py:947)"),
    "encoder_stack": (X, "values other than 1 refused (state.py:58)"),
    "decoder_stack": (X, "values other than 1 refused (state.py:58, encdec.py:841)"),
    "take_top": (N, "read only with stacked layers, which are refused"),
    "check_first_word": (
        V,
        "the previous-word readout of word 0 kept in the one-step functions (encdec.py:1127)",
    ),
    "eps": (N, "not read by the NMT graph (state.py: 'unused')"),
    "rank_n_activ": (
        V,
        "rectified low-rank embeddings (ff_layers.py:281; not in the softmax, cost_layers.py:38)",
    ),
    "activ": (V, "rectified candidates of every layer and the initializer"),
    "unary_activ": (V, "Maxout(3), and a tanh readout"),
    "enc_rec_layer": (R, "RecurrentLayer in every case; grconv (pending_traces) the grConv"),
    "dec_rec_layer": (R, "RecurrentLayer in every case; LSTMLayer refused"),
    "rec_layer": (
        X,
        "anything but RecurrentLayer refused for the backward encoder, which reads it",
    ),
    "enc_rec_gating": (V, "the forward encoder without update gate"),
    "enc_rec_reseting": (V, "the forward encoder without reset gate"),
    "enc_rec_gater": (V, "hard sigmoid"),
    "enc_rec_reseter": (V, "hard sigmoid"),
    "dec_rec_gating": (V, "RNNencdec's decoder without update gate"),
    "dec_rec_reseting": (V, "RNNencdec's decoder without reset gate"),
    "dec_rec_gater": (V, "hard sigmoid"),
    "dec_rec_reseter": (V, "hard sigmoid"),
    "rec_gating": (V, "the backward encoder (no back_enc_ key) without update gate"),
    "rec_reseting": (V, "the backward encoder without reset gate"),
    "rec_gater": (V, "hard sigmoid in the backward encoder"),
    "rec_reseter": (V, "hard sigmoid in the backward encoder"),
    "dim": (R, "every case (the small recorded sizes; full size in tools/bench.py)"),
    "rank_n_approx": (R, "every case"),
    "maxout_part": (V, "3 and 1: the softmax's width dim / maxout_part (encdec.py:943)"),
    "bias": (D, "unit/test_state_derivations.py::test_init_scales_and_bias_are_the_states"),
    "rec_weight_init_fn": (
        D,
        "unit/test_state_derivations.py::test_rec_weight_init_fn_classic_keeps_the_draws_orth_would_decompose",
    ),
    "rec_weight_scale": (
        D,
        "unit/test_state_derivations.py::test_init_scales_and_bias_are_the_states",
    ),
    "weight_init_fn": (
        X,
        "anything but sample_weights_classic refused for a new model (training/init.py SUPPORTED; sample_weights_orth asserts square matrices, utils.py:126)",
    ),
    "weight_scale": (D, "unit/test_state_derivations.py::test_init_scales_and_bias_are_the_states"),
    "dropout": (X, "values below 1 refused (state.py:126)"),
    "dropout_rec": (X, "values below 1 refused (state.py:126)"),
    "weight_noise": (X, "True refused (state.py:132)"),
    "weight_noise_rec": (X, "True refused (state.py:132)"),
    "weight_noise_amount": (N, "read only with weight noise, which is refused"),
    "use_nce": (X, "True refused (not ported)"),
    "softmax_layer": (X, "anything but SoftmaxLayer refused"),
    "dim_mult": (X, "values other than 1 refused"),
    "hid_mult": (X, "values other than 1 refused"),
    # -- training
    "cutoff": (
        D,
        "unit/test_option_derivations.py::test_clipping_with_and_without_cutoff_rescale_length",
    ),
    "cutoff_rescale_length": (
        D,
        "unit/test_option_derivations.py::test_clipping_with_and_without_cutoff_rescale_length",
    ),
    "algo": (N, "only SGD_adadelta exists in the NMT experiments (train.py)"),
    "adarho": (
        D,
        "unit/test_state_derivations.py::test_adadelta_rho_and_eps_are_the_states_lr_is_not",
    ),
    "adaeps": (
        D,
        "unit/test_state_derivations.py::test_adadelta_rho_and_eps_are_the_states_lr_is_not",
    ),
    "patience": (N, "not read by the NMT main loop"),
    "lr": (
        N,
        "SGD_adadelta.py:136 sets float32(1.) whatever the state holds, reports it and writes it back (:187): unit/test_state_derivations.py::test_adadelta_rho_and_eps_are_the_states_lr_is_not",
    ),
    "minlr": (N, "not read by the NMT main loop"),
    "bs": (R, "/train_step batches, the continued run's 30 updates"),
    "sort_k_batches": (R, "the continued run's batches (recorded ids)"),
    "seqlen": (D, "unit/test_state_derivations.py::test_seqlen_and_trim_batches_are_the_states"),
    "trim_batches": (
        D,
        "unit/test_state_derivations.py::test_seqlen_and_trim_batches_are_the_states",
    ),
    "use_infinite_loop": (
        D,
        "unit/test_state_derivations.py::test_use_infinite_loop_is_the_states",
    ),
    "shuffle": (N, "False in every prototype and recording; True is read by the iterator"),
    "seed": (R, "pending_traces/init_draws (seed 1234) and the sampler's seed"),
    "level": (N, "logging level of the original's messages"),
    "prefix": (
        D,
        "parity/test_training.py::test_snapshots_numbered_from_0_in_each_run_with_overwrite_0",
    ),
    "reload": (D, "unit/test_state_derivations.py::test_reload_false_starts_over"),
    "overwrite": (
        D,
        "parity/test_training.py::test_snapshots_numbered_from_0_in_each_run_with_overwrite_0",
    ),
    "loopIters": (D, "unit/test_state_derivations.py::test_loop_iters_is_the_states"),
    "timeStop": (N, "wall-clock stop of training: no output depends on it"),
    "minerr": (N, "validation stop: the NMT experiments have no validation set"),
    "reset": (N, "-1 in every prototype: never resets"),
    "trainFreq": (N, "how often the cost is printed"),
    "hookFreq": (N, "how often the sample hook prints"),
    "validFreq": (N, "validation period: no validation set"),
    "saveFreq": (N, "save period in minutes: which updates are saved, not their values"),
    "n_samples": (N, "samples printed by the training hook"),
    "n_examples": (N, "examples shown by the training hook"),
    "on_nan": (N, "raise in every prototype: the port raises too"),
    # -- read by the original through prefix_lookup (encdec.py:560) or as the layer's own
    "enc_activ": (V, "absent from every prototype (activ is read, encdec.py:560); set: hard tanh"),
    "dec_activ": (V, "as enc_activ; rectified (the initializer's too, encdec.py:856)"),
    "back_enc_activ": (V, "as enc_activ; hard sigmoid"),
    "back_enc_rec_layer": (X, "as rec_layer"),
    "back_enc_rec_gating": (V, "as enc_activ: the backward encoder's own, off"),
    "back_enc_rec_reseting": (V, "as enc_activ: the backward encoder's own, off"),
    "back_enc_rec_gater": (V, "as enc_activ: hard tanh"),
    "back_enc_rec_reseter": (V, "as enc_activ: hard tanh"),
    "enc_rec_weight_scale": (
        D,
        "unit/test_state_derivations.py::test_init_scales_and_bias_are_the_states",
    ),
    "dec_rec_weight_scale": (
        D,
        "unit/test_state_derivations.py::test_init_scales_and_bias_are_the_states",
    ),
    "back_enc_rec_weight_scale": (
        D,
        "unit/test_state_derivations.py::test_init_scales_and_bias_are_the_states",
    ),
    "c_dim": (N, "set by encdec.py itself (2 x dim with search) before it is read"),
    "force_enc_repr_cpu": (N, "score.py's device placement of Theano's graph: no value changes"),
    "profile": (N, "Theano profiling switch (SGD_adadelta.py:80)"),
    # -- written and read back by the main loop (mainLoop.py): bookkeeping, no output value
    "best_params_pos": (N, "main-loop bookkeeping (mainLoop.py:208): validation is never run"),
    "bstep": (N, "main-loop bookkeeping of the best validation step"),
    "btime": (N, "main-loop bookkeeping: time of the best validation"),
    "bvalid": (N, "main-loop bookkeeping: best validation cost"),
    "bvalidcost": (N, "written into the saved state by train as the original writes it"),
    "clr": (N, "learning-rate bookkeeping: Adadelta never uses lr"),
    "cost_threshold": (N, "learning-rate schedule of the plain-SGD path, not SGD_adadelta's"),
    "divide_lr": (N, "as cost_threshold"),
    "lr_start": (N, "as cost_threshold"),
    "fulltrain": (N, "validation over the full training set: never run for NMT"),
    "gotNaN": (N, "main-loop flag, written with on_nan"),
    "step": (N, "main-loop step counter: train --resume continues it (the continued run)"),
    "test": (N, "test-set cost: the NMT experiments have none"),
    "testtime": (N, "timing bookkeeping"),
    "traincost": (N, "the last training cost, printed"),
    "valid": (N, "validation-set cost: the NMT experiments have none"),
    "validtime": (N, "timing bookkeeping"),
    "wholetime": (N, "timing bookkeeping, written into timing.npz as the original does"),
}


def prototype_keys() -> dict[str, dict[str, object]]:
    """key -> {prototype: default} over the five prototypes."""
    from legacy_states import prototypes

    out: dict[str, dict[str, object]] = {}
    for name in PROTOTYPES:
        for key, value in getattr(prototypes, name)().items():
            out.setdefault(key, {})[name] = value
    return out


def port_reads(known) -> dict[str, str]:
    """key -> the first file of the port that names it (see the module docstring; a file,
    not a line: the table stays true while the code around a read moves)."""
    out: dict[str, str] = {}
    files = sorted((REPO / "groundhog_port").rglob("*.py")) + sorted(
        p for p in (REPO / "legacy_states").rglob("*.py") if p.name != "prototypes.py"
    )
    for path in files:
        rel = path.relative_to(REPO).as_posix()
        for line in path.read_text(encoding="utf-8").splitlines():
            names = set(_READ.findall(line)) | {n for n in _LITERAL.findall(line) if n in known}
            for name in sorted(names):
                out.setdefault(name, rel)
            for name in _PORT_PREFIXED.findall(line):  # model/config.py's prefix_lookup
                for p in PREFIXES:
                    out.setdefault(f"{p}_{name}", f"{rel} (prefixed)")
    return out


def scan_original(groundhog: Path) -> dict[str, list[str]]:
    """key -> ``file:line`` of every read in :data:`ORIGINAL_FILES` at :data:`COMMIT`."""
    out: dict[str, list[str]] = {}
    for rel in ORIGINAL_FILES:
        text = subprocess.run(
            ["git", "-C", str(groundhog), "show", f"{COMMIT}:{rel}"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        for number, line in enumerate(text.splitlines(), 1):
            where = f"{rel}:{number}"
            names = set(_READ.findall(line)) | set(_IN.findall(line))
            for prefix, name in _PREFIXED.findall(line):
                prefix = prefix.strip().strip("'\"")
                names |= {name} | (
                    {f"{prefix}_{name}"} if prefix in PREFIXES
                    else {f"{p}_{name}" for p in PREFIXES}
                )  # fmt: skip
            for name in names:
                out.setdefault(name, []).append(where)
    return dict(sorted(out.items()))


def original_reads() -> dict[str, list[str]]:
    return json.loads(READS_FILE.read_text(encoding="utf-8"))


def all_keys() -> list[str]:
    """Every key of a prototype, every key the original reads, and every key the port reads
    (its ``state[...]`` reads: a literal that merely equals a name is not an option)."""
    protos, orig = prototype_keys(), original_reads()
    return sorted(set(protos) | set(orig) | set(port_reads(protos)))


def variants(unlike_prototype_state: bool = False) -> dict[str, list[str]]:
    """key -> the variants of ``tools/numpy_trace_producer.py`` that change it; with
    ``unlike_prototype_state``, only those giving it another value than
    ``prototype_state()`` does (a port that read that default instead fails there)."""
    sys.path.insert(0, str(REPO / "tools"))
    from numpy_trace_producer import VARIANTS

    from legacy_states import prototype_state

    default = prototype_state()
    out: dict[str, list[str]] = {}
    for name, changes in sorted(VARIANTS.items()):
        for key, value in changes.items():
            if key == "prototype":
                continue
            # a prefixed key (in no prototype) is unlike by being there: it is read instead
            if unlike_prototype_state and key in default and repr(value) == repr(default[key]):
                continue
            out.setdefault(key, []).append(name)
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def table() -> str:
    protos = prototype_keys()
    port = port_reads(protos)
    orig = original_reads()
    lines = [
        "# State options",
        "",
        "Every option of the five prototypes (`legacy_states/prototypes.py`), every option the",
        "port reads and every option the original reads (GroundHog 4d2433b:",
        "`experiments/nmt/{state,encdec,sample,score,train}.py`, `SGD_adadelta.py`, `mainLoop.py`,",
        "`LM_model.py`), with what shows the port uses it as the original does: a **recording**",
        "(`parity --case`), a **derivation** test (the original's formula computed independently),",
        "a **variant** (a tiny model with the key changed, recorded by the numpy stand-in written",
        "from the original, `tools/numpy_groundhog.py`, passes parity:",
        "`parity_tests/parity/test_state_options.py`, the variants named in brackets), a",
        "**refusal** (a value the port cannot run is one error line), or why it is **inert**",
        "(cannot change an output). Generated by `python tools/option_table.py --write`;",
        "`parity_tests/packaging/test_option_table.py` fails when a key the port reads has no row,",
        "or a variant row has no variant. `python tools/mutation_sweep.py --state-keys` ignores",
        "each recorded or varied key in turn (the prototype's value read instead) and shows the",
        "recording or the variant's test fails.",
        "",
        "| key | default (prototype_state) | read by the port | in the original (state.py: defined; elsewhere: read) | evidence |",
        "|---|---|---|---|---|",
    ]
    varied = variants()
    for key in all_keys():
        default = protos.get(key, {}).get("prototype_state", "-" if key not in protos else None)
        kind, why = EVIDENCE.get(key, ("MISSING", "no evidence"))
        if kind == V:
            why = f"{why} [{', '.join(varied.get(key, ['NO VARIANT']))}]"
        where = orig.get(key, [])
        shown = ", ".join(where[:2]) + (f" (+{len(where) - 2})" if len(where) > 2 else "")
        lines.append(
            f"| `{key}` | `{_cell(repr(default))}` | {port.get(key, 'no')} | {shown or 'no'} "
            f"| {kind}: {_cell(why)} |"
        )
    return "\n".join(lines) + "\n"


def missing() -> list[str]:
    """Keys of the table (a prototype's, the port's, the original's) with no evidence line,
    a variant row no variant changes, and a varied key whose row does not say so."""
    varied = variants()
    gaps = [k for k in all_keys() if k not in EVIDENCE]
    gaps += [
        f"{k} (no variant)" for k, (kind, _) in EVIDENCE.items() if kind == V and k not in varied
    ]
    gaps += [f"{k} (varied, not a variant row)" for k in varied if EVIDENCE.get(k, ("",))[0] != V]
    unlike = variants(unlike_prototype_state=True)
    gaps += [
        f"{k} (no variant unlike prototype_state)"
        for k, (kind, _) in EVIDENCE.items()
        if kind == V and k in varied and k not in unlike
    ]
    return gaps


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--write", action="store_true", help=f"write {DOC.relative_to(REPO)}")
    p.add_argument(
        "--scan", action="store_true", help=f"rescan the original into {READS_FILE.name}"
    )
    p.add_argument("--groundhog", type=Path, help="a git checkout of lisa-groundhog/GroundHog")
    args = p.parse_args(argv)
    if args.scan:
        if args.groundhog is None:
            p.error("--scan needs --groundhog DIR")
        READS_FILE.write_text(json.dumps(scan_original(args.groundhog), indent=1) + "\n")
    gaps = missing()
    if gaps:
        print(f"keys without evidence: {', '.join(gaps)}", file=sys.stderr)
    if args.write:
        DOC.write_text(table(), encoding="utf-8")
    else:
        sys.stdout.write(table())
    return 1 if gaps else 0


if __name__ == "__main__":
    sys.exit(main())
