#!/usr/bin/env python3
"""Mutation sweep: does `groundhog-port parity` catch plausible porting mistakes?

Each mutation is a small text patch (old -> new, each ``old`` must occur exactly once: a
patch that no longer applies because the code moved stops the sweep with exit 2) applied
to a SCRATCH COPY of ``groundhog_port/`` (the worktree is never touched).  For each one:

* **caught by**: ``groundhog-port parity --case <case>`` is run with the mutated copy on the
  mutation's shared cases (``../shared/legacy_traces/<case>``, ``pending_traces/grconv``);
  the failing rows are listed with the margin ``error / bound`` at their worst element
  (``n_bad`` for exact rows);
* **changes outputs?**: the user-visible outputs of the mutation's first case are recomputed
  with the mutated copy and compared byte for byte with the unmutated port's: ``translate``
  (batched beam search, beam 5 with its n-best costs; beam 10 ``--normalize``; beam 5
  ``--ignore-unk``), ``score --mode batch``, random sampling (``translate`` without
  ``--beam-search``, 5 samples per sentence, costs printed), the interactive sampler at
  inverse temperatures 0.5 and 2.0 (with and without ``--normalize``), ``score --mode txt
  --verbose``, and one ``train`` update (the saved parameters);
* a mutation no recording can show to parity names **tests** that must fail (run with the
  mutated copy and its own ``parity_tests``): a failing test counts as caught.

With ``--flags`` the mutations are generated from ``tools/flag_table.py``: each command-line
option that the table says a test pins is reset to its default right after parsing ("option
ignored"), and the row's tests must fail.  With ``--state-keys`` they come from
``tools/option_table.py``: each state key shown by a variant or a recording has its value
replaced by the prototype's right after the state is loaded ("state key ignored"), and the
variant's parity test, or parity on a recorded case holding another value, must fail.

Target: every mutation that changes an output is caught.  A mutation that changes no output
and is not caught is harmless (a rewrite with the same values).  Exit status: 0 when every
output-changing mutation is caught, 1 otherwise, 2 when a patch does not apply or the
unmutated port fails (parity on a case, or an output command): a sweep on top of a failing
baseline would mean nothing.

Usage::

    python tools/mutation_sweep.py                      # all mutations (~1 h on 2 cores)
    python tools/mutation_sweep.py --only gru_update_gate_swap,sampler_3len --jobs 2
    python tools/mutation_sweep.py --list
    python tools/mutation_sweep.py --fast               # each mutation's --only groups
    python tools/mutation_sweep.py --flags --jobs 2     # every option ignored in turn
    python tools/mutation_sweep.py --state-keys --jobs 2  # every varied state key ignored
"""

import argparse
import collections
import concurrent.futures
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
LEGACY = Path(os.environ.get("GROUNDHOG_LEGACY_TRACES", SHARED / "legacy_traces"))
PENDING = Path(os.environ.get("GROUNDHOG_PENDING_TRACES", LEGACY.parent / "pending_traces"))
EXIT_OK, EXIT_MISSED, EXIT_USAGE = 0, 1, 2

#: ``fast_groups``: what ``--fast`` gives ``parity --only`` (a group, optionally followed by
#: ``--beam-labels ...``): the group where the mistake shows first
#: ``tests``: pytest node ids (under ``parity_tests/``) that must fail with the mutation, for
#: the mistakes no recording can show to parity (run on the scratch copy with its own tests)
Mutation = collections.namedtuple("Mutation", "name kind patches cases fast_groups tests")

S, D, A = "search/", "sampling/", "tasks/archive/"
SEARCH_CASES = ("search",)


def m(name, kind, patches, cases=SEARCH_CASES, fast_groups=None, tests=()):
    """``patches``: ``[(path under groundhog_port/, old, new), ...]``."""
    return Mutation(name, kind, tuple(patches), tuple(cases), fast_groups, tuple(tests))


#: the catalogue (issue 24's classes first); ``kind`` says what kind of mistake it is
MUTATIONS = (
    # -- the four that passed parity before issue 24 ---------------------------------------
    m(
        "normalize_len_plus_1",
        "normalisation",
        [
            (
                S + "common.py",
                "lengths = np.array([len(t) for t in trans], dtype=np.float64)",
                "lengths = np.array([len(t) + 1 for t in trans], dtype=np.float64)",
            )
        ],
        fast_groups="beam --beam-labels 10_normalize",
    ),
    m(
        "batched_search_ignores_ignore_unk",
        "default path",
        [
            (
                S + "batched.py",
                "_Job(i, int(n), bool(ignore_unk), int(m))",
                "_Job(i, int(n), False, int(m))",
            )
        ],
        # on search no beam-5 hypothesis holds UNK: --ignore-unk changes nothing there
        cases=("phrase",),
        fast_groups="beam --beam-labels 5_ignore_unk",
    ),
    m(
        "adadelta_rho_swap",
        "optimizer",
        [
            (
                "training/adadelta.py",
                'self.rho = const(np.float32(state["adarho"]))',
                'self.rho = const(np.float32(1.0 - state["adarho"]))',
            ),
            (
                "training/adadelta.py",
                'self.one_minus_rho = const(np.float32(1.0 - state["adarho"]))',
                'self.one_minus_rho = const(np.float32(state["adarho"]))',
            ),
        ],
        fast_groups="train_step",
    ),
    m(
        "sampler_3len_steps",
        "sampler",
        [(D + "draw.py", "    return 3 * (len(seq) - 1)\n", "    return 3 * len(seq)\n")],
        fast_groups="sampler",
    ),
    # -- recurrent layer -------------------------------------------------------------------
    m(
        "gru_update_gate_swap",
        "GRU gates",
        [
            (
                "model/functional.py",
                "h = ops.add(ops.mul(z, h), ops.mul(ops.one_minus(z), h_prev))",
                "h = ops.add(ops.mul(ops.one_minus(z), h), ops.mul(z, h_prev))",
            )
        ],
        fast_groups="repr",
    ),
    m(
        "reset_after_matmul",
        "reset placement",
        [
            (
                "model/functional.py",
                'h = ops.mm(ops.mul(r, h_prev), weight("W"))',
                'h = ops.mul(r, ops.mm(h_prev, weight("W")))',
            )
        ],
        fast_groups="repr",
    ),
    m(
        "mask_zeroes_state",
        "masks",
        [("model/layers.py", "h = mask * h + (1 - mask) * h_prev", "h = mask * h")],
        # RNNsearch's annotations never read a padded state; RNNencdec's last forward state does
        cases=("encdec", "search"),
        fast_groups="batch",
    ),
    m(
        "context_not_fed_to_update_gate",
        "GRU gates",
        [("model/functional.py", 'x_z = ops.add(x_z, layer("dec_updater", ctx))', "x_z = x_z")],
        fast_groups="steps",
    ),
    # -- encoder / annotations ---------------------------------------------------------------
    m(
        "backward_encoder_not_reversed",
        "backward-encoder reversal",
        [
            (
                "model/encoder.py",
                "model, x, x.flip(0), x_mask, None if x_mask is None else x_mask.flip(0)",
                "model, x, x, x_mask, x_mask",
            )
        ],
        fast_groups="repr",
    ),
    m(
        "encoder_not_reversed_within_length",
        "backward-encoder reversal (decoding's ragged encoder: every search and sampler)",
        [
            (
                "model/encoder.py",
                "x_rev[: len(s), b] = t.flip(0)  # reversed within its own length",
                "x_rev[: len(s), b] = t",
            )
        ],
        fast_groups="beam --beam-labels 5",
    ),
    m(
        "annotation_concat_order",
        "annotation concatenation order",
        [
            (
                "model/encoder.py",
                "return torch.cat(parts, dim=-1)",
                "return torch.cat(parts[::-1], dim=-1)",
            )
        ],
        fast_groups="repr",
    ),
    m(
        "initial_state_from_last_annotation",
        "initial-state source",
        [
            (
                "model/decoder.py",
                "init_c = c[0, :, -self.cfg.dim :]",
                "init_c = c[-1, :, -self.cfg.dim :]",
            )
        ],
        fast_groups="repr",
    ),
    # -- attention ---------------------------------------------------------------------------
    m(
        "attention_without_tanh",
        "attention",
        [
            (
                "model/attention.py",
                "return ops.project(ops.tanh(p), D)",
                "return ops.project(p, D)",
            )
        ],
        fast_groups="pairs",
    ),
    m(
        "attention_mask_dropped",
        "attention / masks",
        [("model/attention.py", "energy = ops.mul(energy, c_mask)", "energy = energy")],
        fast_groups="batch",
    ),
    m(
        "attention_max_subtracted",
        "attention (same math, overflow differs)",
        [
            (
                "model/attention.py",
                "energy = ops.exp(ops.sub(e, ops.position_max(e)) if stable else e)",
                "energy = ops.exp(ops.sub(e, ops.position_max(e)))",
            )
        ],
        fast_groups="pairs",
    ),
    m(
        "attention_torch_sum",
        "float accumulation order",
        [
            (
                "model/attention.py",
                "        return sum_positions(e)\n",
                "        return e.sum(0, keepdim=True)\n",
            )
        ],
        fast_groups="pairs",
    ),
    # -- readout / output --------------------------------------------------------------------
    m(
        "readout_from_new_state",
        "readout state",
        [
            (
                "model/decoder.py",
                "            states.append(s)\n            signals = x[t]",
                "            signals = x[t]",
            ),
            (
                "model/decoder.py",
                "            s = self.transition.step(*signals, s, at(y_mask, t))\n",
                "            s = self.transition.step(*signals, s, at(y_mask, t))\n            states.append(s)\n",
            ),
        ],
        fast_groups="pairs",
    ),
    m(
        "maxout_strided_groups",
        "maxout grouping",
        [
            (
                "model/activations.py",
                "return x.reshape(*x.shape[:-1], dim // k, k).amax(dim=-1)",
                "return x.reshape(*x.shape[:-1], k, dim // k).amax(dim=-2)",
            )
        ],
        fast_groups="pairs",
    ),
    m(
        "first_word_check_ge",
        "first-word y>0 check",
        [
            (
                "model/functional.py",
                "return (ids > 0).to(like.dtype)[:, None]",
                "return (ids >= 0).to(like.dtype)[:, None]",
            )
        ],
        fast_groups="steps",
    ),
    m(
        "encdec_context_last_row",
        "context position (RNNencdec: all rows equal)",
        [("model/decoder.py", "ctx = c[min(step, c.shape[0] - 1)]", "ctx = c[-1]")],
        cases=("encdec",),
        fast_groups="steps",
    ),
    # -- search / lengths / vocabulary -------------------------------------------------------
    m(
        "minlen_without_eos",
        "length limits",
        [
            (S + "batched.py", "[len(s) // 2 for s in seqs]", "[(len(s) - 1) // 2 for s in seqs]"),
            (S + "literal.py", "minlen=len(seq) // 2)", "minlen=(len(seq) - 1) // 2)"),
        ],
        fast_groups="beam",
    ),
    m(
        "beam_cost_float32",
        "float32 cost accumulation",
        [
            (
                S + "common.py",
                "return costs[:, None] - log_probs.double()",
                "return (costs[:, None].float() - log_probs).double()",
            )
        ],
        fast_groups="steps",
    ),
    m(
        "beam_log_float32",
        "float32 log (1 ulp)",
        [
            (
                S + "common.py",
                "return torch.log(probs.double()).to(probs.dtype)",
                "return torch.log(probs)",
            )
        ],
        fast_groups="steps",
    ),
    m(
        "unk_mapping_by_target_size",
        "UNK mapping",
        [
            (
                "legacy/vocab.py",
                "if idx >= n_sym_source:",
                'if idx >= max(n_sym_source, state["n_sym_target"]):',
            )
        ],
        fast_groups="pairs",
    ),
    # -- sampler -----------------------------------------------------------------------------
    m(
        "sampler_stream_order",
        "sampler stream order",
        [
            (
                D + "sampler.py",
                "unis = [self.stream.uniform(n_samples) for _ in range(n_steps)]",
                "unis = list(self.stream.uniform(n_samples * n_steps).reshape(n_samples, n_steps).T)",
            ),
            (
                D + "sampler.py",
                "todo.append((i, steps, [self.stream.uniform(n_samples) for _ in range(steps)]))",
                "todo.append((i, steps, list(self.stream.uniform(n_samples * steps).reshape(n_samples, steps).T)))",
            ),
        ],
        fast_groups="sampler",
    ),
    m(
        "sample_cost_float64_sum",
        "float64 vs float32 accumulation (printed digits)",
        [
            (
                D + "sampler.py",
                "costs.append(-np.sum(probs))  # numpy's float32 sum",
                "costs.append(-np.sum(probs.astype(np.float64)))",
            )
        ],
        fast_groups="sampler",
    ),
    m(
        "temperature_divides",
        "sampler temperature (alpha=1: same values)",
        [
            (
                "model/layers.py",
                "t = None if T is None else torch.as_tensor(T, dtype=x.dtype, device=x.device)",
                "t = None if T is None else 1 / torch.as_tensor(T, dtype=x.dtype, device=x.device)",
            )
        ],
        # the recorded /sampler runs at alpha 1 only; the transcripts at 0.5 / 2.0 show it
        fast_groups="outputs --outputs-matching sample_interactive_stdout.txt",
    ),
    # -- training ----------------------------------------------------------------------------
    m(
        "clipping_threshold_ignored",
        "gradient clipping",
        [
            (
                "training/adadelta.py",
                "self.cutoff = None if cutoff is None or not cutoff > 0 else const(np.float32(cutoff))",
                "self.cutoff = None if cutoff is None or not cutoff > 0 else const(np.float32(1.0))",
            )
        ],
        fast_groups="train_step",
    ),
    m(
        "clipping_scale_rounding",
        "float32 rounding order (clipping)",
        [
            (
                "training/adadelta.py",
                "return norm, [g * c / norm for g in grads]",
                "return norm, [g * (c / norm) for g in grads]",
            )
        ],
        cases=("encdec",),
        fast_groups="train_step",
    ),
    m(
        "batch_order_stable_sort",
        "batch order",
        [
            (
                "legacy/data.py",
                "order = legacy_argsort(lens)",
                "order = np.argsort(lens, kind='stable')",
            )
        ],
        fast_groups="train_step",
    ),
    # -- what users see (issue 36): printed outputs against the original's ----------------
    m(
        "temperature_before_bias",
        "sampler temperature placement (alpha=1: same values)",
        [
            (
                "model/functional.py",
                'z = ops.affine(h, weight("W2" if low_rank else "W"), weight("b"))',
                'z = ops.affine(h, weight("W2" if low_rank else "W"), '
                'weight("b") if T is None else weight("b") / T)',
            ),
        ],
        fast_groups="outputs --outputs-matching sample_interactive_stdout.txt",
    ),
    m(
        "sample_normalize_words_plus_1",
        "sampling normalisation",
        [
            (
                D + "sampler.py",
                'counts = [len(s.strip().split(" ")) for s in sentences]',
                'counts = [len(s.strip().split(" ")) + 1 for s in sentences]',
            )
        ],
        fast_groups="outputs --outputs-matching sample_interactive_normalize_stdout.txt",
    ),
    m(
        "sample_cost_without_eos",
        "EOS in costs",
        [
            (
                D + "sampler.py",
                "probs = np.array(draw.neg_log_probs[: len(words) + 1, i])",
                "probs = np.array(draw.neg_log_probs[: len(words), i])",
            )
        ],
        fast_groups="outputs --outputs-matching sample_interactive_stdout.txt",
    ),
    m(
        "sample_probs_without_eos",
        "EOS in the --verbose probability list",
        [
            (
                D + "sampler.py",
                "word_probs.append(probabilities_of_costs(probs))",
                "word_probs.append(probabilities_of_costs(probs[:-1]))",
            )
        ],
        fast_groups="outputs --outputs-matching sample_interactive_stdout.txt",
    ),
    m(
        "nbest_resorted",
        "n-best order",
        [
            (
                S + "translator.py",
                "nbest = [(s, float(c)) for s, c in zip(sentences, hyps.costs)]",
                "nbest = sorted(\n        [(s, float(c)) for s, c in zip(sentences, hyps.costs)], key=lambda x: x[1]\n    )",
            )
        ],
        fast_groups="outputs --outputs-matching trans_beam10_normalize.txt",
    ),
    m(
        "txt_printer_sign",
        "printer sign (score --mode txt)",
        [
            (
                "cli/commands/score.py",
                "cost = -np.sum(np.log(probs))",
                "cost = np.sum(np.log(probs))",
            )
        ],
        fast_groups="outputs --outputs-matching score_txt_verbose_stdout.txt",
    ),
    m(
        "txt_printer_float64_digits",
        "printer format (score --mode txt)",
        [
            (
                "cli/commands/score.py",
                "print(cost, file=scores)",
                "print(repr(float(cost)), file=scores)",
            )
        ],
        fast_groups="outputs --outputs-matching score_txt_verbose_stdout.txt",
    ),
    m(
        "sample_cost_numpy_str",
        "printer format (interactive sampler)",
        [(D + "sampler.py", "    return repr(float(x))\n", "    return str(x)\n")],
        fast_groups="outputs --outputs-matching sample_interactive_stdout.txt",
    ),
    m(
        "adadelta_accumulators_reset",
        "Adadelta state between updates",
        [
            (
                "training/adadelta.py",
                "self.gnorm2 = [self.decay(gn2, g) for gn2, g in zip(self.gnorm2, self.gs)]",
                "self.gnorm2 = [self.decay(0 * gn2, g) for gn2, g in zip(self.gnorm2, self.gs)]",
            ),
            (
                "training/adadelta.py",
                "self.dnorm2[i] = self.decay(self.dnorm2[i], delta)",
                "self.dnorm2[i] = self.decay(0 * self.dnorm2[i], delta)",
            ),
        ],
        cases=("search_variant",),
        fast_groups="continued",
        tests=(
            "parity_tests/parity/test_training_fidelity.py::test_continued_training_is_groundhogs_for_30_updates",
        ),
    ),
    m(
        "input_split_on_space",
        "input whitespace",
        [
            (
                "legacy/vocab.py",
                'return [w.decode("utf-8") for w in line.encode("utf-8").split()]',
                'return [w.decode("utf-8") for w in line.encode("utf-8").split(b" ")]',
            )
        ],
        fast_groups="repr",
        tests=("parity_tests/unit/test_vocab.py::test_split_words_is_python2_split",),
    ),
    # -- options of bleu that reach sacrebleu (no recording: the sacrebleu CLI is the
    #    reference, parity_tests/unit/test_bleu_cli.py) ----------------------------------
    m(
        "chrf_lowercase_dropped",
        "bleu option",
        [("tasks/rescore.py", "ch = CHRF(lowercase=lowercase)", "ch = CHRF()")],
        cases=(),
        tests=(
            "parity_tests/unit/test_bleu_cli.py::test_bleu_flag_equals_the_sacrebleu_cli[lowercase]",
        ),
    ),
    m(
        "sacrebleu_unescape_dropped",
        "bleu option",
        [
            (
                "cli/commands/bleu.py",
                "hyps, refs = read_parallel(args.hyp, args.ref, unescape=args.unescape)",
                "hyps, refs = read_parallel(args.hyp, args.ref, unescape=False)",
            )
        ],
        cases=(),
        tests=(
            "parity_tests/unit/test_bleu_cli.py::test_bleu_flag_equals_the_sacrebleu_cli[unescape]",
        ),
    ),
    m(
        "sacrebleu_tokenizer_ignored",
        "bleu option",
        [
            (
                "tasks/rescore.py",
                "bleu = BLEU(tokenize=tokenize, lowercase=lowercase)",
                'bleu = BLEU(tokenize="13a", lowercase=lowercase)',
            )
        ],
        cases=(),
        tests=(
            "parity_tests/unit/test_bleu_cli.py::test_bleu_flag_equals_the_sacrebleu_cli[tokenize none]",
        ),
    ),
    # -- state options no recording uses: derived from the original's formula
    #    (parity_tests/unit/test_option_derivations.py) --------------------------------
    m(
        "cutoff_rescale_length_ignored",
        "state option",
        [("training/adadelta.py", "        if self.rescale_length:", "        if False:")],
        cases=(),
        tests=(
            "parity_tests/unit/test_option_derivations.py::test_clipping_with_and_without_cutoff_rescale_length[3.0-1]",
        ),
    ),
    m(
        "target_oov_hard_coded",
        "state option",
        [
            (
                "legacy/vocab.py",
                '    out[state["unk_sym_target"]] = state["oov"]',
                '    out[state["unk_sym_target"]] = "UNK"',
            )
        ],
        cases=(),
        tests=(
            "parity_tests/unit/test_option_derivations.py::test_target_oov_word_is_the_states[<unk>]",
        ),
    ),
    # -- the archive by content (issue 50): what no recording shows, the labs built by the
    #    tests (test_lab_habits, test_lab_archive) and the inventory's unit tests ----------
    m(
        "archive_models_paired_by_name",
        "archive by content",
        [
            (
                A + "pairing.py",
                "fit_ids = [i for i in range(len(states)) if reasons[i] is None]",
                "fit_ids = list(range(len(states)))",
            )
        ],
        cases=(),
        tests=(
            "parity_tests/unit/test_inventory.py::test_renamed_states_and_models_pair_by_content",
            "parity_tests/unit/test_inventory.py::test_an_encdec_model_does_not_fit_a_search_state",
        ),
    ),
    m(
        "archive_name_believed_over_content",
        "archive by content",
        [
            (
                A + "outputs.py",
                "alive = [s for s in order if finder._confirm(archived, s)(source) is None]",
                "alive = [s for s in order if finder._confirm(archived, s)(source) is None][:1]",
            )
        ],
        cases=(),
        tests=(
            "parity_tests/cli/test_lab_habits.py::test_every_output_is_redone_with_no_option_but_out",
            "parity_tests/cli/test_lab_habits.py::test_names_only_order_what_the_content_decides",
        ),
    ),
    m(
        "archive_candidates_any_language",
        "archive by content",
        [(A + "outputs.py", "    lines = first_text_lines(path, SAMPLE_LINES)", "    return None")],
        cases=(),
        tests=(
            "parity_tests/unit/test_inventory.py::test_only_a_target_language_text_is_a_candidate_output",
            "parity_tests/cli/test_lab_habits.py::test_every_file_and_member_has_one_row",
        ),
    ),
    m(
        "archive_post_processing_ignored",
        "archive by content",
        [(A + "outputs.py", "    if n == 0:", "    if True:")],
        cases=(),
        tests=(
            "parity_tests/cli/test_lab_habits.py::test_every_output_is_redone_with_no_option_but_out",
            "parity_tests/cli/test_lab_habits.py::test_every_file_and_member_has_one_row",
            "parity_tests/cli/test_lab_habits.py::test_names_only_order_what_the_content_decides",
        ),
    ),
    m(
        "archive_skipped_members_unaccounted",
        "archive by content",
        [
            (
                A + "accounting.py",
                '    rows += [Account(name, "-", f"not used: {why}") for name, why in skipped]',
                "    rows += []",
            )
        ],
        cases=(),
        tests=(
            "parity_tests/cli/test_packed.py::test_members_not_written_have_their_inventory_rows",
        ),
    ),
    m(
        "archive_crash_log_any_state",
        "archive by content",
        [
            (
                A + "checks.py",
                "        if row is None and entry.others:\n"
                "            continue  # a folder of several states: the crash of another state's output\n",
                "",
            )
        ],
        cases=(),
        tests=("parity_tests/cli/test_lab_habits.py::test_every_file_and_member_has_one_row",),
    ),
    m(
        "archive_by_content_plan_not_completed",
        "archive by content",
        [
            (
                A + "plan.py",
                '    wanted = [o for o in outputs if o["kind"] == "trans" and by_content(o)]',
                "    return outputs",
            )
        ],
        cases=(),
        tests=(
            "parity_tests/cli/test_lab_archive.py::test_plan_round_trips_where_an_output_matches_no_setting",
        ),
    ),
)


# ----------------------------------------------------------------------------------------
# scratch copies
# ----------------------------------------------------------------------------------------
class PatchError(Exception):
    """A patch whose ``old`` text does not occur exactly once (the code moved)."""


#: the kind of the generated mutations: one option reset to its default after parsing
OPTION_IGNORED = "option ignored"


def flag_mutations():
    """The "option ignored" mutation of every test row of ``tools/flag_table.py``: the option
    reset to its parser's default right after parsing; one of the row's tests must fail."""
    sys.path.insert(0, str(REPO / "tools"))
    import flag_table

    out = []
    for flag in flag_table.all_flags():
        kind, tests = flag_table.EVIDENCE.get(flag.key, (None, ()))
        if kind == flag_table.T:
            name = "ignored:" + flag.key.replace(" ", ":")
            nodes = tuple("parity_tests/" + t for t in tests)
            out.append(m(name, OPTION_IGNORED, [flag_table.ignored_patch(flag)], (), None, nodes))
    return out


#: the kind of the generated state-key mutations: the state's value replaced by the prototype's
STATE_KEY_IGNORED = "state key ignored"
_LOADED = "    state.update(parsed)\n    return state\n"
_BUILT = "    state.update(changes)\n    return state, frozenset(changes)\n"
VARIANT_TEST = "parity_tests/parity/test_state_options.py::test_variant_passes_parity[{}]"


def state_key_mutations():
    """The "state key ignored" mutation of every variant and recording row of
    ``tools/option_table.py``: right after the state is loaded
    (``legacy_states.load_state``, and ``train``'s own ``build_state``), the key's value is replaced by ``prototype_state()``'s (a key no
    prototype has is removed, so the un-prefixed one is read, as ``prefix_lookup``).  A
    variant row runs the parity tests of its variants; a recording row runs parity on the
    shared cases whose value differs from ``prototype_state()``'s (none: it cannot be
    caught, and the sweep says so)."""
    sys.path.insert(0, str(REPO / "tools"))
    import option_table

    from legacy_states import load_stored_state, prototype_state

    proto = prototype_state()
    varied = option_table.variants(unlike_prototype_state=True)
    recorded = {}
    for root in (LEGACY, PENDING):
        for case in sorted(root.glob("*/trace.h5")):
            states = sorted(case.parent.glob("*_state.pkl"))
            if states:
                recorded[case.parent.name] = {**proto, **load_stored_state(states[0])}
    out = []
    for key, (kind, why) in sorted(option_table.EVIDENCE.items()):
        ignore = (
            f"    state[{key!r}] = prototype_state()[{key!r}]"
            if key in proto
            else f"    state.pop({key!r}, None)"
        ) + f"  # mutation: state[{key!r}] ignored\n"
        patch = [
            (
                "legacy_states/load.py",
                _LOADED,
                _LOADED.replace("    return", ignore + "    return"),
            ),
            (  # train's own state (train.py's prototype, the pickle, the changes)
                "cli/commands/train.py",
                _BUILT,
                _BUILT.replace(
                    "    return",
                    ignore.replace("prototype_state()", "legacy_states.prototype_state()")
                    + "    return",
                ),
            ),
        ]
        name = "ignored-state:" + key
        if kind == option_table.V:
            tests = tuple(VARIANT_TEST.format(v) for v in varied.get(key, ()))
            out.append(m(name, STATE_KEY_IGNORED, patch, (), None, tests))
        elif kind == option_table.D:  # the derivation test the row names
            out.append(m(name, STATE_KEY_IGNORED, patch, (), None, ("parity_tests/" + why,)))
        elif kind == option_table.R:
            cases = tuple(
                c for c, st in recorded.items() if repr(st.get(key)) != repr(proto.get(key))
            )
            out.append(m(name, STATE_KEY_IGNORED, patch, cases[:1], None, ()))
    return out


def patch_path(rel):
    """A patch's file: under ``groundhog_port/``, or under another of :data:`PACKAGES` when
    ``rel`` starts with its name (``legacy_states/load.py``)."""
    return rel if rel.split("/", 1)[0] in PACKAGES else f"groundhog_port/{rel}"


def check_patches(mutation, root=REPO):
    """Raise :class:`PatchError` unless every patch of ``mutation`` applies to ``root``."""
    texts = {}
    for rel, old, new in mutation.patches:
        path = root / patch_path(rel)
        text = texts.get(rel, path.read_text(encoding="utf-8") if path.is_file() else None)
        if text is None:
            raise PatchError(f"{mutation.name}: {patch_path(rel)} does not exist")
        n = text.count(old)
        if n != 1:
            raise PatchError(
                f"{mutation.name}: {patch_path(rel)}: the text to replace occurs "
                f"{n} times (expected once; did the code move?): {old!r}"
            )
        texts[rel] = text.replace(old, new)
    return texts


#: the repository's top-level packages (pyproject.toml): all of them go into a scratch copy,
#: or the missing one would be imported from wherever groundhog-port is installed
PACKAGES = ("groundhog_port", "legacy_states")


def scratch_copy(dest, mutation=None, source=REPO):
    """``dest/<packages>``: a copy of ``source``'s packages, with ``mutation`` applied."""
    for package in PACKAGES:
        shutil.copytree(
            source / package, dest / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    if mutation is not None:
        for rel, text in check_patches(mutation, source).items():
            (dest / patch_path(rel)).write_text(text, encoding="utf-8")
    return dest


def case_dir(name):
    for root in (LEGACY, PENDING):
        if (root / name / "trace.h5").is_file():
            return root / name
    raise FileNotFoundError(f"case {name!r}: no trace.h5 in {LEGACY} or {PENDING}")


def run_port(code_root, args, cwd, timeout=1800, stdin=None):
    env = dict(os.environ, PYTHONPATH=str(code_root), PYTHONHASHSEED="0")
    return subprocess.run(
        [sys.executable, "-m", "groundhog_port"] + [str(a) for a in args],
        cwd=str(cwd),
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        input=stdin,
    )


# ----------------------------------------------------------------------------------------
# parity
# ----------------------------------------------------------------------------------------
def failing_rows(report):
    """``[(quantity, margin text), ...]`` of the failing rows of a ``--json`` report."""
    out = []
    for row in report.get("rows", []):
        if row.get("passed", True) or row.get("self_check") or row.get("status") == "NOT COVERED":
            continue
        err, allowed = row.get("worst_err"), row.get("worst_allowed")
        if err is not None and allowed and err > allowed:
            margin = f"{err / allowed:.3g}"
        elif err is not None:
            margin = f"err {err:.3g}"
        else:
            margin = f"{row.get('n_bad', '?')} bad"
        out.append((row["quantity"], margin))
    return out


def parity(code_root, case, work, groups=None):
    """``(caught, failing rows, note)`` of ``groundhog-port parity --case`` with ``code_root``."""
    out = work / f"parity_{case}.json"
    # NOT COVERED rows (what a recording cannot discriminate) catch nothing: not failures here
    args = ["parity", "--case", case_dir(case), "--json", out, "--allow-uncovered"]
    if groups:  # "GROUP [--beam-labels L ...]"
        args += ["--only"] + groups.split()
    run = run_port(code_root, args, work)
    if run.returncode == 0:
        return False, [], ""
    if not out.is_file():  # the port crashed or refused the input
        last = (run.stderr.strip().splitlines() or ["?"])[-1]
        return True, [("(parity exits %d)" % run.returncode, last[:80])], last
    return True, failing_rows(json.loads(out.read_text())), ""


def named_test(code_root, test, work, timeout=900):
    """``(caught, note)``: does the pytest node ``test`` fail with the mutated copy?  The
    tests are copied beside it (``parity_tests``, ``fixtures``, ``tools``, ``pyproject.toml``) so that
    they import the copy, not the worktree; the recordings are the shared ones."""
    for extra in ("parity_tests", "fixtures", "tools"):
        if not (code_root / extra).exists():
            shutil.copytree(
                REPO / extra, code_root / extra, ignore=shutil.ignore_patterns("__pycache__")
            )
    shutil.copy(REPO / "pyproject.toml", code_root / "pyproject.toml")
    env = dict(
        os.environ,
        PYTHONPATH=str(code_root),
        GROUNDHOG_LEGACY_TRACES=str(LEGACY),
        GROUNDHOG_PENDING_TRACES=str(PENDING),
        FUZZ_SECONDS="0",
    )
    try:
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", test],
            cwd=str(code_root),
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:  # e.g. a server that no longer stops: the suite would hang
        return True, f"hangs (> {timeout} s)"
    if run.returncode == 1:
        return True, "fails"
    if run.returncode != 0:  # not collected, or an error before the test ran: not a catch
        return False, f"pytest exit {run.returncode}"
    return False, "passes"


# ----------------------------------------------------------------------------------------
# user-visible outputs
# ----------------------------------------------------------------------------------------
def _state_model(case):
    d = case_dir(case)
    return next(d.glob("*state.pkl")), next(d.glob("*model.npz"))


def _digest_npz(path):
    import numpy as np

    h = hashlib.sha256()
    with np.load(path) as z:
        for k in sorted(z.files):
            h.update(k.encode() + np.ascontiguousarray(z[k]).tobytes())
    return h.hexdigest()


#: what the interactive sampler reads in the "changes outputs?" check: two sentences at
#: inverse temperatures 0.5 and 2.0 (as user_outputs_search/interactive_stdin.txt)
INTERACTIVE_INPUT = (
    "we have four hot schools .\n5\n0.5\nthe cold forest calls some white rivers .\n5\n2.0\n"
)


def output_commands(case, work):
    """``{kind: (args, files whose bytes are the output)}`` for one case."""
    d = case_dir(case)
    state, model = _state_model(case)
    src, trg = d / "test.en", d / "test.fr"
    common = ["--state", state, "--data-dir", d]
    data = LEGACY / "data"
    beam = lambda name, extra: (
        [
            "translate",
            "--beam-search",
            "--source",
            src,
            "--trans",
            work / f"{name}.txt",
            "--n-best",
            work / f"{name}.nbest",
        ]
        + common
        + extra
        + [model],
        [f"{name}.txt", f"{name}.nbest"],
    )
    return {
        "translate_beam5": beam("beam5", ["--beam-size", "5"]),
        "translate_beam10_normalize": beam("beam10n", ["--beam-size", "10", "--normalize"]),
        "translate_beam5_ignore_unk": beam("beam5u", ["--beam-size", "5", "--ignore-unk"]),
        "score_batch": (
            [
                "score",
                "--mode",
                "batch",
                "--src",
                src,
                "--trg",
                trg,
                "--allow-unk",
                "--scores",
                work / "scores.txt",
            ]
            + common
            + [model],
            ["scores.txt"],
        ),
        "sample": (
            [
                "translate",
                "--source",
                src,
                "--n-samples",
                "5",
                "--alpha",
                "1",
                "--verbose",
                "--trans",
                work / "samples.txt",
            ]
            + common
            + [model],
            ["samples.txt", "<stdout>"],
        ),
        # the interactive sampler at inverse temperatures 0.5 and 2 (user_outputs_search's
        # input), with --normalize, and score --mode txt --verbose
        "sample_interactive": (
            ["translate", "--normalize"] + common + [model],
            ["<stdout>"],
            INTERACTIVE_INPUT,
        ),
        "sample_interactive_plain": (
            ["translate"] + common + [model],
            ["<stdout>"],
            INTERACTIVE_INPUT,
        ),
        "score_txt_verbose": (
            ["score", "--mode", "txt", "--src", src, "--trg", trg, "--allow-unk", "--verbose"]
            + common
            + [model],
            ["<stdout>"],
        ),
        "train_1_update": (
            [
                "train",
                "--state",
                state,
                "--model",
                model,
                "--data-dir",
                d,
                "--data-dir",
                data,
                "--max-updates",
                "1",
                f"prefix='{work}/t_'",
            ],
            ["t_model.npz"],
        ),
    }


def outputs(code_root, case, work, must_succeed=False):
    """``{kind: digest}`` of every user-visible output (its exit status included);
    ``must_succeed``: raise :class:`BaselineError` when a command fails."""
    work.mkdir(parents=True, exist_ok=True)
    result = {}
    for kind, (args, files, *stdin) in output_commands(case, work).items():
        run = run_port(code_root, args, work, stdin=stdin[0] if stdin else None)
        # exit 3: sentences the original could not translate either (search_variant's 'hello')
        if must_succeed and (run.returncode not in (0, 3) or "Traceback" in run.stderr):
            raise BaselineError(
                f"the unmutated port's {kind} on {case} exits {run.returncode}: "
                + (run.stderr.strip().splitlines() or ["?"])[-1]
            )
        h = hashlib.sha256(f"rc={run.returncode}".encode())
        for f in files:
            if f == "<stdout>":
                h.update(run.stdout.encode())
            elif f.endswith(".npz") and (work / f).is_file():
                h.update(_digest_npz(work / f).encode())
            elif (work / f).is_file():
                h.update((work / f).read_bytes())
            else:
                h.update(b"<missing>")
        result[kind] = h.hexdigest()
    return result


# ----------------------------------------------------------------------------------------
# the sweep
# ----------------------------------------------------------------------------------------
Result = collections.namedtuple("Result", "name kind changed caught rows seconds")


def run_mutation(mutation, baseline, tmp_root, fast=False, check_outputs=True, source=REPO):
    """One mutation on a copy of ``source``'s package (the sweep's snapshot)."""
    t0 = time.time()
    # no ":" in the path: it would split PYTHONPATH, and the installed package be imported
    work = Path(tempfile.mkdtemp(prefix=mutation.name.replace(":", "_") + "_", dir=tmp_root))
    code = scratch_copy(work / "code", mutation, source)
    changed = None
    if check_outputs and mutation.cases:  # a mistake no recording shows has no outputs
        mine = outputs(code, mutation.cases[0], work / "out")
        changed = sorted(k for k in mine if mine[k] != baseline[mutation.cases[0]][k])
    caught, rows = False, []
    for case in mutation.cases:
        c, r = parity(code, case, work, mutation.fast_groups if fast else None)[:2]
        caught |= c
        rows += [(f"{case}:{q}", margin) for q, margin in r]
    for test in mutation.tests:
        c, margin = named_test(code, test, work)
        caught |= c
        if c:
            rows.append((f"test:{test.split('::')[-1]}", margin))
    shutil.rmtree(work, ignore_errors=True)
    return Result(mutation.name, mutation.kind, changed, caught, rows, time.time() - t0)


class BaselineError(Exception):
    """The unmutated port fails: a sweep on top of it would mean nothing."""


def baselines(cases, tmp_root, source, fast_groups=None, check_outputs=True):
    """The unmutated port's outputs per case (None without ``check_outputs``); raises
    :class:`BaselineError` unless they all run and parity passes on every case."""
    code = scratch_copy(
        Path(tempfile.mkdtemp(prefix="baseline_", dir=tmp_root)) / "code", source=source
    )
    for case in cases:
        caught, rows, note = parity(code, case, code.parent, fast_groups)
        if caught:
            raise BaselineError(
                f"parity fails on {case} without any mutation: "
                + (note or ", ".join(q for q, _ in rows[:5]))
            )
    if not check_outputs:
        return None
    return {c: outputs(code, c, code.parent / ("out_" + c), must_succeed=True) for c in cases}


def format_table(results):
    lines = [
        "| mutation | class | changes outputs? | caught by [failing rows] | margin (error/bound) |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        changed = "not checked" if r.changed is None else (", ".join(r.changed) or "no")
        caught = (
            ("**NOT CAUGHT**" if r.changed else "not caught")
            if not r.caught
            else ", ".join(q for q, _ in r.rows[:6])
            + (f" (+{len(r.rows) - 6} more)" if len(r.rows) > 6 else "")
        )
        margins = ", ".join(mg for _, mg in r.rows[:6]) or "-"
        lines.append(f"| `{r.name}` | {r.kind} | {changed} | {caught} | {margins} |")
    return "\n".join(lines)


def select(only, flags=False, state_keys=False):
    """The mutations ``--only`` names (by default all: the catalogue, or with ``flags`` /
    ``state_keys`` the generated "option ignored" / "state key ignored" ones)."""
    pool = flag_mutations() if flags else state_key_mutations() if state_keys else list(MUTATIONS)
    if not only:
        return pool
    names = [x.strip() for x in only.split(",") if x.strip()]
    known = {mu.name: mu for mu in pool}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(
            f"mutation_sweep.py: error: unknown mutation(s) {', '.join(unknown)} "
            f"(--list shows them)"
        )
    return [known[n] for n in names]


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="exit codes: 0 every output-changing mutation caught, "
        "1 one is missed, 2 a patch does not apply / usage",
    )
    p.add_argument("--only", help="comma-separated mutation names (default: all)")
    p.add_argument(
        "--flags",
        action="store_true",
        help='the generated "option ignored" mutations, one per test row of '
        "tools/flag_table.py (each runs the row's tests), instead of the catalogue",
    )
    p.add_argument(
        "--state-keys",
        action="store_true",
        help='the generated "state key ignored" mutations, one per variant row of '
        "tools/option_table.py (each runs its variants' parity tests) and per recorded "
        "architecture key (parity on a case holding another value), instead of the catalogue",
    )
    p.add_argument("--list", action="store_true", help="list the mutations and exit")
    p.add_argument(
        "--fast",
        action="store_true",
        help="parity only on each mutation's relevant group (--only GROUP)",
    )
    p.add_argument("--no-outputs", action="store_true", help="skip the user-visible output check")
    p.add_argument("--jobs", type=int, default=1, help="mutations run in parallel (default 1)")
    p.add_argument("--json", help="write the results as JSON here")
    args = p.parse_args(argv)
    if args.flags and args.state_keys:
        p.error("--flags and --state-keys are two sweeps: give one")
    chosen = select(args.only, args.flags, args.state_keys)
    if args.list:
        for mu in chosen:
            print(f"{mu.name:40s} {mu.kind:45s} cases {','.join(mu.cases)}")
        return EXIT_OK
    try:
        for mu in chosen:
            check_patches(mu)
    except PatchError as err:
        print(f"mutation_sweep.py: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="mutation_sweep_") as tmp:
        tmp = Path(tmp)
        # one snapshot of the package for the whole sweep: the worktree may change meanwhile
        snapshot = scratch_copy(tmp / "snapshot")
        try:
            base = baselines(
                sorted({c for mu in chosen for c in mu.cases}),
                tmp,
                snapshot,
                None,
                not args.no_outputs,
            )
        except BaselineError as err:
            print(f"mutation_sweep.py: error: {err}", file=sys.stderr)
            return EXIT_USAGE
        print(
            f"[sweep] {len(chosen)} mutations; baseline parity and outputs in "
            f"{time.time() - t0:.0f} s",
            file=sys.stderr,
            flush=True,
        )
        results = []
        with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
            futures = {
                pool.submit(
                    run_mutation, mu, base, tmp, args.fast, not args.no_outputs, snapshot
                ): mu
                for mu in chosen
            }
            for done, fut in enumerate(concurrent.futures.as_completed(futures), 1):
                r = fut.result()
                results.append(r)
                print(
                    f"[sweep] {done}/{len(chosen)} {r.name}: changed={r.changed} "
                    f"caught={r.caught} ({r.seconds:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )
                if args.json:  # after every mutation: a long sweep cut short keeps its results
                    Path(args.json).write_text(json.dumps([x._asdict() for x in results], indent=1))
    order = {mu.name: i for i, mu in enumerate(chosen)}
    results.sort(key=lambda r: order[r.name])
    print(format_table(results))
    # an ignored option is a change by construction: its row says a test shows it
    missed = [
        r.name
        for r in results
        if (r.changed or r.kind in (OPTION_IGNORED, STATE_KEY_IGNORED)) and not r.caught
    ]
    print(
        f"\n{len(results)} mutations, {sum(bool(r.changed) for r in results)} change outputs, "
        f"{sum(r.caught for r in results)} caught; missed: {', '.join(missed) or 'none'} "
        f"({time.time() - t0:.0f} s)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps([r._asdict() for r in results], indent=1))
    return EXIT_MISSED if missed else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
