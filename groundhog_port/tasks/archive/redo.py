"""Re-doing one experiment: its plan entry (discovered when none is given) run, every
output reproduced and compared, what cannot be done said once per cause."""

from __future__ import annotations

import os
from pathlib import Path

from ... import lookup
from ...errors import LegacyInputError
from ...file_names import TEST_SET_NAMES, VOCABULARY_FILE_KEYS
from .checks import attention_plots, check_scores, crash_logs, parity_check
from .context import OUTSIDE, Options, Run, not_read
from .discover import Entry
from .inputs import Opened, experiment_dirs, open_model
from .plan import by_content, complete, error_log, plan_changes, plan_experiment
from .plan_file import BY_CONTENT
from .result import Result, ResultRecord, attempt


def redo(run: Run, entry: Entry, opts: Options, out: str | os.PathLike[str]) -> ResultRecord:
    """Everything :mod:`groundhog_port.tasks.archive` re-does for one experiment.
    What cannot be done is logged once per cause (:meth:`Result.flush`)."""
    res = Result(run, entry)
    plan = opts.plan.get(entry.id) if opts.plan is not None else None
    try:
        _redo(res, run, entry, opts, out, plan)
    finally:
        res.flush()
    return res.data


def _refused(res, entry):
    """The files :func:`not_read` refused: one entry per cause -- the links leading outside
    the archive together, naming the folders they lead to (one ``--data-dir`` each fixes
    them), each special file on its own."""
    vital = {entry.state.name, entry.model.name if entry.model is not None else None}
    then = "; nothing of the experiment is re-done without its state and model"
    outside = [(n, why) for n, why in entry.refused if why.startswith(OUTSIDE)]
    for name, why in entry.refused:
        if not why.startswith(OUTSIDE):
            res.not_done(name, why + (then if name in vital else ""))
    if outside:
        folders = dict.fromkeys(
            str(Path(why[len(OUTSIDE) :].split(", outside the archive", 1)[0]).parent)
            for _, why in outside
        )
        res.not_done(
            ", ".join(n for n, _ in outside),
            f"lead{'s' if len(outside) == 1 else ''} through links into "
            f"{', '.join(folders)}, outside the archive: not read (pass "
            + ("that folder" if len(folders) == 1 else "each folder")
            + " with --data-dir to have it read)"
            + (then if vital & {n for n, _ in outside} else ""),
        )


def _redo(res, run, entry, opts, out, plan=None):
    """Run plan entry ``plan`` of ``entry`` (discovered here when ``None``)."""
    _refused(res, entry)
    unread = {name for name, _ in entry.refused}
    if entry.state.name in unread or (entry.model is not None and entry.model.name in unread):
        return  # said with its cause (_refused)
    opened = Opened()
    if plan is None:
        res.data["origin"] = "discovered"
        plan = attempt(res, "everything", plan_experiment, run, entry, opts, opened)
        if plan is None:
            return
    else:
        res.data["origin"] = "from the plan"
    res.data["not_outputs"] = list(plan.get("not_outputs", []))
    model = run.abs(plan.get("model", ""))
    if model is None:
        res.not_done(
            "everything",
            "no *model.npz beside the state (or several, none with the state's prefix, and no "
            'GroundHog snapshot prefix + model%d.npz); add model = "PATH" in the plan',
        )
        return
    res.data["model"] = res.rel(model)
    dirs = experiment_dirs(run, entry, opts)
    changes = plan_changes(run, plan)
    exp = attempt(
        res, "opening the experiment", open_model, entry, model, changes, dirs, opts, opened
    )
    if exp is None:
        return
    exp.data_dirs = tuple(dirs) + lookup.unique_file_dirs(
        exp.state, VOCABULARY_FILE_KEYS, run.root, "under the archive ROOT"
    )
    if not _vocabularies(res, exp, entry):
        return
    tests = {}
    for name in TEST_SET_NAMES:
        src, ref = (
            run.abs(plan.get(f"{name}_source", "")),
            run.abs(plan.get(f"{name}_reference", "")),
        )
        if src is not None:
            res.data["files"][name] = {
                "source": res.rel(src),
                "reference": res.rel(ref) if ref else None,
                "how": plan.get(f"{name}_source_why", "") or "given in the plan",
            }
        tests[name] = (src, ref)
    if res.data["origin"] == "from the plan":  # "by content" settings found as discovery does
        found = attempt(res, "outputs by content", complete, run, entry, opts, plan, opened)
        plan = {**plan, "output": found if found is not None else plan.get("output", [])}
    outputs = _plan_outputs(run, entry, plan)
    attempt(
        res, "reproduction", _reproduction, res, run, exp, entry, plan, outputs, opts, opened, dirs
    )
    for p, o in outputs:
        if o["kind"] == "scores":
            src, ref = run.abs(o.get("source", "")), run.abs(o.get("reference", ""))
            name = o.get("test_set", "test")
            found = None
            if name == BY_CONTENT:  # a score file of any name: its own test set
                found = (src, ref)
            elif src is not None:
                tests[name] = (src, ref)
            attempt(
                res, p.name, check_scores, res, exp, entry, p, tests, opts, o.get("why", ""), found
            )
    crash_logs(res, entry)
    if opts.plots > 0:
        attempt(res, "attention plots", attention_plots, res, exp, entry, tests["test"], opts, out)
    if entry.trace is not None:
        attempt(res, "parity", parity_check, res, exp, entry, tests["test"], opts)
    else:
        res.data["parity"] = None


def _plan_outputs(run, entry, plan):
    """``[(path, output entry)]`` of a plan entry, in the plan's order."""
    return [(run.abs(o["file"]), o) for o in plan.get("output", [])]


def _vocabularies(res, exp, entry):
    """Find the four vocabularies; when some are missing, one "not done" naming them all and
    where they were looked for (nothing else can be done without them)."""
    missing = []
    for key in VOCABULARY_FILE_KEYS:
        try:
            res.data["files"][key] = res.rel(exp.path(key))
        except LegacyInputError:
            res.data["files"][key] = None
            missing.append(key)
    if not missing:
        return True
    names = [Path(str(exp.state.get(k))).name for k in missing]
    stored = sorted({str(Path(str(exp.state.get(k))).parent) for k in missing})
    looked = [*stored] + [
        f"{Path(c).parent} ({where})"
        for c, where in lookup.candidates(names[0], entry.state, exp.data_dirs)
    ]
    res.not_done(
        "everything (translations, scores, plots, parity)",
        f"vocabularies not found: {', '.join(dict.fromkeys(names))} (looked in "
        f"{', '.join(dict.fromkeys(looked))}, for a single file of each name under the "
        "archive ROOT, and for a pickle whose words and ids fit the state); pass --data-dir "
        'DIR, the folder holding them, --changes "'
        + ",".join(f"{k}='FILE'" for k in missing)
        + '", or '
        + ", ".join(f'{k} = "PATH"' for k in missing)
        + " in the plan",
    )
    return False


def _reproduction(res, run, exp, entry, plan, outputs, opts, opened, dirs):
    from ..reproduce import ArchivedFile, Settings, reproduce

    allowed = run.allowed()
    groups: dict = {}  # snapshot (or the model) -> [(ArchivedFile, output entry)]
    snaps = [run.abs(s) for s in plan.get("snapshots", [])]
    for p, o in outputs:
        if o["kind"] != "trans":
            continue
        src = run.abs(o.get("source", ""))
        if src is None or by_content(o):
            res.not_done(p.name, o.get("why", "no test set in the plan"), cause="test set")
            continue
        ref = run.abs(o.get("reference", ""))
        stem = p.name[len("trans_") : -len(".txt")] if p.name.startswith("trans_") else None
        stdout = entry.folder / f"sample_{stem}_stdout.txt" if stem is not None else None
        stdout = (
            stdout if stdout and stdout.is_file() and not_read(stdout, allowed) is None else None
        )
        error = error_log(entry, p)
        error = error if error is not None and not_read(error, allowed) is None else None
        settings = Settings(o["beam_size"], bool(o.get("normalize")), bool(o.get("ignore_unk")))
        f = ArchivedFile(p, settings, src, ref, stdout, error)
        model = run.abs(o.get("snapshot", "")) or run.abs(plan.get("model", ""))
        groups.setdefault(model, []).append((f, o))
    rows = {}
    for model, items in groups.items():
        m_exp = (
            exp
            if model == run.abs(plan.get("model", ""))
            else open_model(entry, model, plan_changes(run, plan), dirs, opts, opened)
        )
        m_exp.data_dirs = exp.data_dirs
        report = reproduce(
            m_exp,
            [f for f, _ in items],
            batch_size=opts.batch_size,
            max_diffs=opts.max_diffs,
            tokenize=opts.tokenize,
            max_lines=opts.max_sentences,
        )
        for (f, o), r in zip(items, report["files"]):
            row = _row(res, f, r)
            if o.get("settings_why"):
                row["settings_why"] = o["settings_why"]
            if o.get("post_processed"):
                row["status"] = f"differs: post-processed ({o['post_processed']})"
            if snaps and o.get("snapshot"):
                row["snapshot"] = res.rel(model)
                row["snapshots"] = _other_snapshots(
                    res, run, entry, plan, f, o, model, snaps, opts, opened, dirs, exp
                )
            rows[str(f.path)] = row
    for p, _ in outputs:
        if str(p) in rows:
            res.data["reproduction"].append(rows[str(p)])


def _other_snapshots(res, run, entry, plan, f, o, model, snaps, opts, opened, dirs, exp):
    """What each snapshot says of output ``f``: the chosen one reproduces it (the row);
    with ``--snapshot all`` every other one is re-translated in full ("N lines differ"),
    else the plan's first-lines check is quoted as it is."""
    from ..reproduce import reproduce

    out = []
    for s in snaps:
        if s == model:
            out.append({"model": res.rel(s), "status": "this row"})
            continue
        if opts.snapshot == "all":
            s_exp = open_model(entry, s, plan_changes(run, plan), dirs, opts, opened)
            s_exp.data_dirs = exp.data_dirs
            r = reproduce(s_exp, [f], batch_size=opts.batch_size, max_lines=opts.max_sentences)
            r = r["files"][0]
            status = (
                "reproduces it too"
                if r["all_identical"]
                else f"does not reproduce: {r['compared'] - r['identical']} of {r['compared']} lines differ"
            )
        else:
            said = [
                part
                for part in o.get("snapshot_why", "").split("; ")
                if part.startswith(s.name + ": ")
            ]
            status = (
                said[0][len(s.name) + 2 :].replace(
                    "first-lines check only, ", "does not reproduce (first-lines check only): "
                )
                if said
                else "not checked (--snapshot)"
            )
        out.append({"model": res.rel(s), "status": status})
    return out


def _row(res, f, r):
    from ...legacy.data import read_text_lines

    row = {
        k: r[k]
        for k in (
            "file",
            "settings",
            "compared",
            "identical",
            "all_identical",
            "first_differences",
            "bleu",
            "total_cost",
            "archived_total_cost",
            "original_stopped_after",
        )
    }
    row.update(
        source=res.rel(f.source),
        reference=res.rel(f.reference) if f.reference else None,
        crash_reproduced=r.get("crash_reproduced"),
        original_error=r.get("original_error"),
    )
    archived_lines = len(read_text_lines(f.path))
    source_lines = len(read_text_lines(f.source))
    if archived_lines > row["compared"]:
        row["limited"] = f"first {row['compared']} of {archived_lines} lines (--max-sentences)"
        if archived_lines < source_lines:
            row["crash_not_rechecked"] = (
                f"the original stopped after {archived_lines} "
                f"lines; not re-checked within the first "
                f"{row['compared']}"
            )
    return row
