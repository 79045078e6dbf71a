"""The plan of each experiment (:mod:`.plan_file` writes and reads it): the files it takes
and why, each output's settings and test set found by content, what is missing with the
line to add."""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ... import lookup
from ...errors import LegacyInputError
from ...file_names import (
    SCORES_NAME,
    TEST_SET_NAMES,
    VOCABULARY_FILE_KEYS,
    output_kind,
    snapshot_number,
)
from ...harness.print_noise import PrintNoise
from ..rescore import read_lines
from .context import Options, Run, not_read
from .discover import Entry
from .inputs import Opened, experiment_dirs, folder_key, given_test_set, open_model, places
from .outputs import disambiguate, language_of, post_processed, readme_hints, settings_order
from .plan_file import BY_CONTENT
from .result import Result

if TYPE_CHECKING:
    from ...legacy.experiment import Experiment

#: an experiment's test sets: name -> (source, reference, how they were chosen)
TestSets = Mapping[str, tuple[Path | None, Path | None, str | None]]

logger = logging.getLogger("groundhog_port.tasks.archive")


def plan_experiment(run: Run, entry: Entry, opts: Options, opened: Opened | None = None) -> dict:
    """The plan entry of one experiment (:mod:`groundhog_port.tasks.archive.plan_file`): the files it
    takes and why, each output with the settings it stands for and its test set, what is
    missing with the line to add.  Test sets and settings are found by content (first lines
    re-translated, :class:`~groundhog_port.tasks.reproduce.SourceFinder`)."""
    opened = Opened() if opened is None else opened
    res = Result(run, entry)  # scratch: paths relative to ROOT, the test sets' misses
    rel = lambda p: res.rel(p) if p else ""  # noqa: E731
    e: dict = {
        "id": entry.id,
        "folder": folder_key(run, entry),
        "state": rel(entry.state),
        "state_why": entry.state_why or "a GroundHog state under ROOT: one experiment",
        "model": rel(entry.model),
        "model_why": entry.model_why,
        "snapshots": [rel(s) for s in entry.snapshots],
        "snapshots_why": SNAPSHOTS_WHY if entry.snapshots else "",
        "changes": list(opts.changes),
        "missing": [],
        "not_outputs": [],
        "output": [],
    }
    outputs = [
        {"file": rel(p), "kind": entry.kinds.get(p) or output_kind(p.name)} for p in entry.outputs
    ]
    e["output"] = outputs
    unread = {name for name, _ in entry.refused}
    if entry.model is None or entry.state.name in unread or entry.model.name in unread:
        if entry.model is None:
            e["missing"].append('model = "PATH"  (no *model.npz beside the state)')
        return e
    dirs = experiment_dirs(run, entry, opts)
    try:
        exp = open_model(entry, entry.model, e["changes"], dirs, opts, opened)
    except LegacyInputError as err:
        e["missing"].append(f"opening the experiment: {err.problem}")
        return e
    exp.data_dirs = tuple(dirs) + lookup.unique_file_dirs(
        exp.state, VOCABULARY_FILE_KEYS, run.root, "under the archive ROOT"
    )
    missing = []
    for key in VOCABULARY_FILE_KEYS:
        try:
            e[key], e[key + "_why"] = rel(exp.path(key)), "the file the state names (lookup)"
        except LegacyInputError:
            missing.append(key)
    if missing:
        from ...legacy import vocab_match

        found = vocab_match.find_by_content(
            exp.state,
            missing,
            [run.root, *(d for d in opts.data_dirs if not isinstance(d, lookup.ImplicitDir))],
            lookup.languages(exp.state),
            near=entry.folder,
        )
        for key in missing:
            if key in found:
                e[key], e[key + "_why"] = rel(found[key].path), found[key].why
            else:
                e[key] = ""
                e[key + "_why"] = (
                    f"not found: no file named {Path(str(exp.state.get(key))).name} and no "
                    "pickle whose words and ids fit the state under ROOT or a --data-dir"
                )
                e["missing"].append(f'{key} = "PATH"  (the state\'s {key})')
        if set(found) != set(missing):
            return e
        try:
            exp = open_model(entry, entry.model, plan_changes(run, e), dirs, opts, opened)
        except LegacyInputError as err:
            e["missing"].append(f"opening the experiment: {err.problem}")
            return e
        exp.data_dirs = tuple(dirs) + lookup.unique_file_dirs(
            exp.state, VOCABULARY_FILE_KEYS, run.root, "under the archive ROOT"
        )
    snaps = _snapshot_exps(entry, e, dirs, opts, opened, run)
    tests: dict = {}
    for name in TEST_SET_NAMES:
        src, ref, how = given_test_set(run, entry, opts, name)
        if src is not None and ref is None:
            assert how is not None  # said with every given source
            ref, why = lookup.reference_for(src, *lookup.languages(exp.state))
            how += f"; reference: {why}"
        tests[name] = (src, ref, how)
    _plan_trans(res, run, entry, e, exp, snaps, tests, opts)
    chosen = [o["snapshot"] for o in e["output"] if o.get("snapshot")]
    if chosen:  # the scores, plots and parity: the snapshot that reproduces most outputs
        best = max(dict.fromkeys(chosen), key=chosen.count)
        if best != e["model"]:
            e["model"] = best
            e["model_why"] = (
                "the snapshot whose re-translations reproduce the archived outputs "
                f"({chosen.count(best)} of {len(chosen)}): the scores, plots and parity use it"
            )
            exp = dict(snaps)[run.abs(best)]()
    for name, key in (("test", "test"), ("holdout", "holdout")):
        src, ref, how = tests[name]
        e[f"{key}_source"], e[f"{key}_reference"] = rel(src), rel(ref)
        e[f"{key}_source_why"] = relative_why(res, how) if how else ""
    _plan_scores(res, run, entry, e, exp, tests, opts, dirs)
    return e


#: why snapshots are listed (groundhog/mainLoop.py:233-234 at 4d2433b)
SNAPSHOTS_WHY = (
    "prefix + model%d.npz: GroundHog's MainLoop.save with overwrite=False "
    "(groundhog/mainLoop.py:233-234); forks also write timing%d.npz, algo%d.npz"
)


#: an output's settings: each a value or :data:`~.plan_file.BY_CONTENT`
SETTING_KEYS = ("beam_size", "normalize", "ignore_unk")


def by_content(o: Mapping[str, object]) -> bool:
    """Whether a plan's trans output leaves its settings or test set to be found."""
    return not o.get("source") or any(o.get(k, BY_CONTENT) == BY_CONTENT for k in SETTING_KEYS)


def complete(
    run: Run, entry: Entry, opts: Options, plan: dict, opened: Opened
) -> list[dict[str, Any]]:
    """A plan's outputs whose settings or test set are ``"by content"`` (or left out),
    found as discovery finds them, the plan's other choices kept: an unedited
    ``--plan-only`` plan runs as discovered, and an output added by hand needs only its
    ``file``.  Returns the plan's outputs, completed."""
    outputs = [dict(o) for o in plan.get("output", [])]
    wanted = [o for o in outputs if o["kind"] == "trans" and by_content(o)]
    if not wanted:
        return outputs
    files = [run.abs(o["file"]) for o in outputs]
    extra = [p for p in files if p is not None and p not in entry.outputs]
    found = plan_experiment(run, replace(entry, outputs=[*entry.outputs, *extra]), opts, opened)
    by_file = {o["file"]: o for o in found["output"]}
    for o in wanted:
        d = by_file.get(o["file"], {})
        for k in (*SETTING_KEYS, "settings_why"):
            if o.get(k, BY_CONTENT) in (BY_CONTENT, "") and k in d:
                o[k] = d[k]
        if not o.get("source"):
            for k in ("source", "reference", "why", "snapshot", "snapshot_why", "test_set"):
                if k in d:
                    o[k] = d[k]
    return outputs


def plan_changes(run: Run, e: Mapping[str, Any]) -> list[str]:
    """The state changes a plan entry runs with: its ``changes``, then each vocabulary it
    names (``word_indx='...'``, the path made absolute)."""
    out = list(e.get("changes", []))
    for key in VOCABULARY_FILE_KEYS:
        p = run.abs(e.get(key, ""))
        if p is not None:
            out.append(f"{key}={str(os.path.abspath(p))!r}")
    return out


def _snapshot_exps(entry, e, dirs, opts, opened, run):
    """``[(path, opener)]`` (``opener()``: the experiment) of the snapshots to check, newest first (``--snapshot``:
    ``latest`` the newest only, ``N`` model N only, else all); ``[]`` without snapshots."""
    snaps = [run.abs(s) for s in e.get("snapshots", [])]
    snaps = [s for s in snaps if s is not None][::-1]
    if not snaps:
        return []
    if opts.snapshot == "latest":
        snaps = snaps[:1]
    elif opts.snapshot not in ("auto", "all"):
        snaps = [s for s in snaps if snapshot_number(s) == int(opts.snapshot)]
    out = []
    changes = plan_changes(run, e)
    for s in snaps:  # each opened once to check it, then as needed (``opened`` holds few)
        try:
            open_model(entry, s, changes, dirs, opts, opened)
        except LegacyInputError as err:
            e["missing"].append(f"snapshot {s.name}: {err.problem}")
            continue
        out.append((s, functools.partial(open_model, entry, s, changes, dirs, opts, opened)))
    return out


def _plan_trans(res, run, entry, e, exp, snaps, tests, opts):
    """Each translation output's settings, test set and model, found by content
    (:mod:`.outputs`): the outputs sample.py's names mark, then the texts of any name beside
    the state (``entry.candidates``; in a folder of several states every output is one), a
    candidate kept only where some setting confirms it or it was post-processed."""
    from ..reproduce import Settings, SourceFinder, inferable_settings, parse_trans_name

    dirs = experiment_dirs(run, entry, opts)
    # the files the user named (--source/--ref, --test-sets, the plan) are read where they
    # are; a file found by content must lie in ROOT or a --data-dir (not_read)
    named_by_user = {str(f) for pair in tests.values() for f in pair[:2] if f is not None}
    allowed = run.allowed()
    by_name = {n: lookup.find_named(TEST_SET_NAMES[n][0], entry.folder, dirs) for n in tests}

    def fix(name):
        return (
            "; pass "
            + ("--source FILE --ref FILE (every experiment), " if name == "test" else "")
            + f"a line '{folder_key(run, entry)}{'' if name == 'test' else ':' + name} "
            "SOURCE REFERENCE' in --test-sets FILE, --data-dir DIR (the folder holding it), "
            'or source = "PATH" in the plan'
        )

    models = snaps or [(entry.model, lambda: exp)]
    langs, words = lookup.languages(exp.state), exp.trg_idx2word
    finders = [
        SourceFinder(
            None,
            places(run, entry, opts),
            entry.folder,
            by_name=by_name,
            fix=fix,
            opener=opener,
            langs=langs,
            words=words,
        )
        for _, opener in models
    ]
    hints = readme_hints(entry.candidates, run.row)
    shared = entry.others > 0  # several states: each output is the one whose model gives it
    items = [
        (run.abs(o["file"]), o, parse_trans_name(Path(o["file"]).name), shared)
        for o in e["output"]
        if o["kind"] == "trans"
    ]
    for p in entry.candidates:
        if _numeric(run, p):  # score.py's, maybe: _plan_scores
            continue
        try:
            why = language_of(exp, p)
        except LegacyInputError as err:
            why = f"unreadable: {res.run.said(err.problem)}"
        if why is not None:
            e["not_outputs"].append(f"{res.rel(p)}: {why}")
            continue
        o = {"file": res.rel(p), "kind": "trans"}
        e["output"].append(o)
        items.append((p, o, None, True))
    # outputs whose names say their settings first: their test sets are tried first for
    # the others (SourceFinder reuses a choice)
    items.sort(key=lambda t: t[2] is None)

    def one(p, o, parsed, candidate):
        error = error_log(entry, p)
        name = parsed[1] if parsed is not None else "test"
        if parsed is not None:
            order = [parsed[0], *(s for s in inferable_settings() if s != parsed[0])]
            hint, hint_from = parsed[0], "its name"
        else:
            order, hint, hint_from = settings_order(p.name, hints, Settings, inferable_settings())
        o["test_set"] = name
        given = tests[name]
        choice, settings, model, why_not = None, None, None, []
        # the first (the test sets chosen for the others first, then any; each setting in
        # order; each model, newest first) that gives the first lines.  Model by model, so
        # that one snapshot is open at a time: a model tries only what comes before the best
        # found so far (the same choice as trying every model at each step), and nothing is
        # noted until the choice is made.
        steps = [(reuse_only, s) for reuse_only in (True, False) for s in order]
        best = None  # (step, model index, choice)
        for mi, finder in enumerate(finders):
            for step, (reuse_only, s) in enumerate(steps):
                if best is not None and step >= best[0]:
                    break
                try:
                    if given[0] is not None and str(given[0]) in named_by_user:
                        if finder._confirm(read_lines(p), s)(given[0]) is not None:
                            continue
                        c = lookup.TestSetChoice(given[0], given[1], given[2])
                    else:  # found by content (a test set chosen before is tried first)
                        c = finder.find(
                            p, s, name, error, by_name=False, reuse_only=reuse_only, note=False
                        )
                except LegacyInputError as err:
                    if not reuse_only:
                        why_not.append(err.problem)
                    continue
                best = (step, mi, c)
                break
        if best is not None:
            step, mi, choice = best
            settings, model = steps[step][1], models[mi][0]
            finders[mi].note(choice, p.name)
        if choice is None:
            found = post_processed(
                finders[0], read_lines(p), order, places(run, entry, opts), entry.folder,
                p.name, finders[0].langs,
            )  # fmt: skip
            if found is not None:
                choice, settings, how = found
                model = models[0][0]
                o["post_processed"] = how
        if choice is None and parsed is not None and not candidate:
            # the name's settings, the test set by its standard name, unconfirmed: a model
            # that no longer reproduces its outputs is a result, not a missing input
            try:
                choice = finders[-1].find(p, parsed[0], name, error, by_name=True)
                settings, model = parsed[0], models[-1][0]
            except LegacyInputError as err:
                why_not.append(err.problem)
            if choice is None and given[0] is not None:
                choice = lookup.TestSetChoice(given[0], given[1], given[2], confirmed=False)
                settings, model = parsed[0], models[0][0]
        if choice is None and candidate:
            o["_drop"] = True
            e["not_outputs"].append(
                f"{o['file']}: no setting gives its first lines from any test set found "
                "(tried " + ", ".join(x.describe() for x in order[:4]) + ", ...)"
            )
            return
        if choice is None:
            o["source"] = o["reference"] = ""
            if parsed is not None:  # what the name says, though no test set confirms it
                o.update(beam_size=parsed[0].beam_size, normalize=parsed[0].normalize)
                o["ignore_unk"] = parsed[0].ignore_unk
            for k in SETTING_KEYS:  # written so; a --plan run searches again
                o.setdefault(k, BY_CONTENT)
            o["why"] = res.run.said(
                f"its test set: {why_not[0]}"
                if parsed is not None and why_not
                else "no setting tried (beams 1, 5, 10, 12, 20, with and without --normalize "
                "/ --ignore-unk) gives its first lines from any test set found; add "
                'beam_size = N (normalize, ignore_unk) and source = "PATH"',
            )
            e["missing"].append(f'{o["file"]}: source = "PATH"  ({o["why"][:200]})')
            return
        why = None
        if str(choice.source) not in named_by_user:
            why = not_read(choice.source, allowed) or not_read(choice.reference, allowed)
        if why is not None:
            o["source"] = o["reference"] = ""
            o["why"] = f"its test set {res.rel(choice.source)}: {why}"
            return
        if choice.confirmed and "post_processed" not in o:
            finder = finders[[m for m, _ in models].index(model)]
            settings, agree, also = disambiguate(
                finder, read_lines(p), choice.source, order, opts.max_sentences
            )
            o["settings_why"] = (
                f"by content: {agree} re-translated with {settings.describe()} are the "
                "archived ones (settings tried: "
                + (f"{hint_from}'s first, then " if hint is not None else "")
                + "beams 1, 5, 10, 12, 20, each without and with --normalize / --ignore-unk; "
                "where several give the first lines, the first giving every line is taken)"
                + (
                    f"; the first {min(lookup.CONFIRM_LINES, len(read_lines(p)))} lines are "
                    f"also those of {'; '.join(also)} (not checked further)"
                    if also
                    else ""
                )
            )
        elif "post_processed" in o:
            o["settings_why"] = (
                f"by content: its first lines are the re-translation with "
                f"{settings.describe()} {o['post_processed']} by hand"
            )
        else:
            o["settings_why"] = "read from the file name (no test set confirms it)"
        if hint is not None and settings != hint:
            said = f"{hint_from} says {hint.describe()}, its lines say {settings.describe()}"
            o["settings_why"] += f"; {said}"
            logger.warning("%s: %s: %s (the lines are believed)", entry.id, o["file"], said)
        o.update(beam_size=settings.beam_size, normalize=settings.normalize)
        o["ignore_unk"] = settings.ignore_unk
        o["source"], o["reference"] = (
            res.rel(choice.source),
            res.rel(choice.reference) if choice.reference else "",
        )
        o["why"] = relative_why(res, choice.why)
        if snaps:
            o["snapshot"] = res.rel(model)
            o["snapshot_why"] = _snapshot_why(p, settings, choice.source, model, models, finders)
        if tests[name][0] is None and (choice.confirmed or parsed) and "post_processed" not in o:
            tests[name] = (choice.source, choice.reference, choice.why)

    for p, o, parsed, candidate in items:
        try:
            one(p, o, parsed, candidate)
        except LegacyInputError as err:  # an unreadable output is one line, never the run's end
            why = res.run.said(err.problem)
            if candidate:
                o["_drop"] = True
                e["not_outputs"].append(f"{o['file']}: {why}")
                continue
            o["source"] = o["reference"] = ""
            for k in SETTING_KEYS:
                o.setdefault(k, BY_CONTENT)
            o["why"] = why
            e["missing"].append(f"{o['file']}: {why[:200]}")
    e["output"] = [o for o in e["output"] if not o.get("_drop")]
    for finder in finders:  # which test set serves which files, and why: once
        finder.announce(f"{entry.id}: ")


def error_log(entry: Entry, path: Path) -> Path | None:
    """The crash log sample.py's run of output ``path`` left: ``sample_<stem>_error.txt``
    for ``trans_<stem>.txt`` (the recordings' names), else ``<stem>_error.txt``."""
    stem = path.name[: -len(".txt")] if path.name.endswith(".txt") else path.name
    for name in (
        f"sample_{stem[len('trans_') :]}_error.txt" if stem.startswith("trans_") else None,
        f"{stem}_error.txt",
    ):
        if name and (entry.folder / name).is_file():
            return entry.folder / name
    return None


def _snapshot_why(path, settings, source, chosen, models, finders):
    """What the first-lines check says of each snapshot for one output."""
    parts = []
    for (m_path, _), finder in zip(models, finders):
        difference = finder._confirm(read_lines(path), settings)(source)
        n = min(lookup.CONFIRM_LINES, len(read_lines(path)))
        if difference is None:
            parts.append(f"{m_path.name}: its first {n} lines are the archived ones")
        else:
            parts.append(f"{m_path.name}: first-lines check only, {difference}")
    return f"{chosen.name}, the newest snapshot whose first lines reproduce it; " + "; ".join(parts)


def _numeric(run, p) -> bool:
    return bool(getattr(run.row(p).facts, "numeric", False))


def _plan_scores(res, run, entry, e, exp, tests, opts, dirs):
    """Each score file's test set: the translations', else by name, else by content; then
    the texts of numbers of any name (:func:`scores_of_any_name`)."""
    scores_of_any_name(res, run, entry, e, exp, tests, opts)
    for o in e["output"]:
        if o["kind"] != "scores":
            continue
        p = run.abs(o["file"])
        m = SCORES_NAME.match(p.name)
        if m is None or m.group("n"):
            continue
        name = m.group("set") or "test"
        o["test_set"] = name
        src, ref, how = tests[name]
        if src is None:
            found = lookup.find_named(TEST_SET_NAMES[name][0], entry.folder, dirs)
            if not_read(found, run.allowed()) is not None:
                found = None
            if found is not None:
                ref, _ = lookup.reference_for(found, *lookup.languages(exp.state))
                src, how = (
                    found,
                    f"{TEST_SET_NAMES[name][0]} by its name (no translation file to confirm it)",
                )
            else:
                choice = test_set_of_scores(res, run, exp, entry, name, opts)
                if choice is not None:
                    src, ref, how = choice.source, choice.reference, choice.why
                    logger.info("%s: %s", entry.id, choice.why)
            if src is not None:
                tests[name] = (src, ref, how)
                e[f"{name}_source"], e[f"{name}_reference"] = (
                    res.rel(src),
                    res.rel(ref) if ref else "",
                )
                e[f"{name}_source_why"] = relative_why(res, how)
        o["source"] = res.rel(src) if src else ""
        o["reference"] = res.rel(ref) if ref else ""
        o["why"] = (
            relative_why(res, how)
            if src
            else res.missing.get(name, f"no {TEST_SET_NAMES[name][0]}")
        )


def scores_of_any_name(
    res: Result,
    run: Run,
    entry: Entry,
    e: dict[str, Any],
    exp: Experiment,
    tests: TestSets,
    opts: Options,
) -> None:
    """A text of numbers of any name beside the state (``bleu_run.out``) is score.py's
    ``--mode=batch`` output when the batch scores of a test set give its first lines
    within print noise (the experiment's test sets first, then every candidate); else it
    is "not an output", saying so."""
    for p in entry.candidates:
        if not _numeric(run, p):
            continue
        file = res.rel(p)
        try:
            choice = test_set_of_scores(res, run, exp, entry, "test", opts, p, tests)
        except LegacyInputError as err:
            e["not_outputs"].append(f"{file}: unreadable: {res.run.said(err.problem)}")
            continue
        if choice is None:
            e["not_outputs"].append(
                f"{file}: numbers, but no test set's batch scores (score.py --mode=batch "
                "--allow-unk) give its first lines"
            )
            continue
        e["output"].append(
            {
                "file": file,
                "kind": "scores",
                "test_set": "by content",
                "source": res.rel(choice.source),
                "reference": res.rel(choice.reference) if choice.reference else "",
                "why": relative_why(res, choice.why),
            }
        )


def test_set_of_scores(
    res: Result,
    run: Run,
    exp: Experiment,
    entry: Entry,
    name: str,
    opts: Options,
    path: Path | None = None,
    tests: TestSets | None = None,
) -> lookup.TestSetChoice | None:
    """The test set of the experiment's ``scores_batch[_holdout]*.txt`` where no translation
    file told it: a text file of as many lines with its same-stem reference whose first batch
    scores give the archived first lines within print noise (:class:`PrintNoise`, the rule of
    parity's ``batch/scores``).  ``None`` when there is no such score file or nothing
    matches (the score file's "not done" then says why).  ``path``: a score file of any
    name instead, whose test set may be any (``tests``: the experiment's, tried first)."""
    from ...search.scoring import batches_for
    from ..rescore import read_lines

    scores = (
        [path]
        if path is not None
        else [
            p
            for p in entry.outputs
            if (m := SCORES_NAME.match(p.name))
            and not m.group("n")
            and (m.group("set") or "test") == name
        ]
    )
    if not scores:
        return None
    archived = read_lines(scores[0])
    if not archived:
        return None
    langs = lookup.languages(exp.state)
    k = min(lookup.CONFIRM_LINES, len(archived))
    noise = PrintNoise(exp)

    def confirm(src):
        ref, why = lookup.reference_for(src, *langs)
        if ref is None:
            return f"no reference: {why}"
        try:
            batch = next(iter(batches_for(exp, src, ref, True)), None)
        except LegacyInputError as err:
            return err.problem
        if batch is None:
            return "no sentence to score"
        noise.restart()
        noise.add(batch, archived[:k], 0)
        return None if noise.ok() else "its first scores are not the archived ones"

    for src, ref, how in (tests or {}).values():  # the experiment's test sets first
        if src is not None and (lookup.line_count(src) or 0) == len(archived):
            if confirm(src) is None:
                return lookup.TestSetChoice(src, ref, f"{how}; its batch scores give the first")
    try:
        return lookup.find_source(
            len(archived),
            confirm,
            places(run, entry, opts),
            entry.folder,
            scores[0].name,
            "scored as score.py --mode=batch --allow-unk (within print noise)",
            langs,
            allow_longer=False,
        )
    except LegacyInputError as err:
        res.missing[name] = err.problem
        return None


def relative_why(res: Result, why: str) -> str:
    """A choice's reason with the archive's paths relative to ROOT (the report's paths)."""
    root = os.path.abspath(res.run.root) + os.sep
    return res.run.said(why).replace(root, "")
