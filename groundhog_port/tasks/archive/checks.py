"""The checks of one experiment beside its translations: score files re-scored line by
line, crash logs re-checked, attention plots, parity against a ``trace.h5``."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, cast

from ...file_names import SCORES_NAME, TEST_SET_NAMES, output_kind
from ...harness.print_noise import PrintNoise, last_digit
from ...outputs import file_in, folder_in
from .cache import safe_name
from .inputs import folder_key
from .plan_file import BY_CONTENT

if TYPE_CHECKING:
    from ...legacy.experiment import Experiment
    from .context import Options
    from .discover import Entry
    from .result import Parity, Result, ScoreDiff, TestSet

#: a test set: its source and reference (None where not found)
TestPair = tuple[Path | None, Path | None]


def check_scores(
    res: Result,
    exp: Experiment,
    entry: Entry,
    path: Path,
    tests: Mapping[str, TestPair],
    opts: Options,
    why: str = "",
    found: TestPair | None = None,
) -> None:
    """A ``scores*.txt`` of score.py, re-scored and compared line by line (the ``{:.5e}``
    text, and the largest relative difference of the numbers).  ``found``: ``(source,
    reference)`` of a score file of any name whose test set was found by content."""
    import numpy as np

    from ...search.scoring import batches_for, score_batch
    from ..rescore import read_lines

    m = SCORES_NAME.match(path.name)
    if found is not None:  # of any name: --mode=batch on the test set found by content
        name, train_batches, tests = BY_CONTENT, None, {BY_CONTENT: found}
    elif m is not None:
        name, train_batches = m.group("set") or "test", m.group("n")
    else:
        res.not_done(
            path.name,
            "the file name does not say how score.py was run (expected "
            "scores_batch[_holdout][_runK].txt or scores_h5_trainN[_runK].txt)",
        )
        return
    archived = read_lines(path)
    limit = len(archived) if opts.max_sentences is None else min(len(archived), opts.max_sentences)
    if train_batches:
        batches, how = (
            batches_for(exp, None, None, True, int(train_batches)),
            f"score.py --mode=batch on the training corpora, {train_batches} batches",
        )
    else:
        src, ref = tests[name]
        if src is None:
            key = folder_key(res.run, entry) + ("" if name == "test" else f":{name}")
            res.not_done(
                path.name,
                f"its {name} set: "
                + (why or res.missing.get(name, f"no {TEST_SET_NAMES[name][0]}"))
                + "; pass "
                + ("--source FILE --ref FILE (every experiment), " if name == "test" else "")
                + f"a line '{key} SOURCE REFERENCE' in --test-sets FILE, or --data-dir DIR "
                "(the folder holding it)",
                cause="test set",
            )
            return
        if ref is None:
            given = cast("dict[str, TestSet]", res.data["files"])[name]  # test or holdout
            res.not_done(
                path.name,
                f"its {name} set has no reference ({given['how']}); "
                f"pass --ref FILE, or a line '{folder_key(res.run, entry)} "
                f"{given['source']} REFERENCE' in --test-sets FILE",
            )
            return
        batches, how = (
            batches_for(exp, src, ref, True),
            f"score.py --mode=batch --allow-unk on {res.rel(src)} / {res.rel(ref)}",
        )
    lines: list[str] = []
    bound = PrintNoise(exp)
    for batch in batches:  # whole batches: score.py's padding decides the numbers
        if len(lines) >= limit:
            break
        cost = -score_batch(exp.model, batch).cost.numpy()
        first = len(lines)
        lines += [f"{float(s):.5e}" for s in cost]
        bound.add(batch, archived[first:limit], first)
    lines = lines[:limit]
    worst, off = 0.0, 0
    for a, b in zip(archived, lines):
        x, y = float(a), float(b)
        if math.isfinite(x) and math.isfinite(y):
            worst = max(worst, abs(x - y) / abs(x) if x else abs(y))
            off += abs(x - y) > last_digit(a, b)
        elif not (x == y or (np.isnan(x) and np.isnan(y))):
            worst, off = math.inf, off + 1
    identical = sum(a == b for a, b in zip(archived, lines))
    differences: list[ScoreDiff] = [
        {"line": i + 1, "archived": a, "reproduced": b}
        for i, (a, b) in enumerate(zip(archived, lines))
        if a != b
    ]
    res.data["scores"].append(
        {
            "file": path.name,
            "how": how,
            "compared": len(lines),
            "archived_lines": len(archived),
            "identical": identical,
            "all_identical": len(lines) == limit == identical,
            "beyond_last_digit": off,
            "max_rel_diff": worst,
            "within_print_noise": bound.ok(),
            "first_differences": differences[: opts.max_diffs],
        }
    )


def crash_logs(res: Result, entry: Entry) -> None:
    from ..reproduce import original_error

    rows = {r["file"]: r for r in res.data["reproduction"]}
    for p in entry.outputs:
        if (entry.kinds.get(p) or output_kind(p.name)) != "crash log":
            continue
        stem = p.name[: -len("_error.txt")] if p.name.endswith("_error.txt") else p.stem
        # its output: sample_<stem>_error.txt is trans_<stem>.txt's; <stem>_error.txt <stem>'s
        names = [f"{stem}.txt", stem]
        if stem.startswith("sample_"):
            names.insert(0, f"trans_{stem[len('sample_') :]}.txt")
        trans = next((n for n in names if n in rows), names[0])
        row = rows.get(trans)
        if row is None and entry.others:
            continue  # a folder of several states: the crash of another state's output
        if row is None:
            status = "no trans file of this run was re-done"
        elif row.get("crash_not_rechecked"):
            status = row["crash_not_rechecked"]
        elif row.get("crash_reproduced"):
            stopped = row["original_stopped_after"]
            assert stopped is not None  # a crash reproduced: the original stopped
            status = f"reproduced: the port fails on line {stopped + 1} too"
        else:
            status = "NOT reproduced"
        res.data["crash_logs"].append(
            {
                "file": p.name,
                "last_line": original_error(p),
                "trans": trans if row else None,
                "status": status,
            }
        )


def attention_plots(
    res: Result,
    exp: Experiment,
    entry: Entry,
    test: TestPair,
    opts: Options,
    out: str | os.PathLike[str],
) -> None:
    """Attention of the first ``opts.plots`` test pairs (source, archived/reference target)."""
    from ...search.scoring import parse_pair, score_pair
    from .. import plots

    src, ref = test
    if not exp.cfg.search:  # nothing left undone: there is nothing to plot (said first)
        res.data["notes"].append("no attention plots: an RNNencdec model has no attention")
        return
    if src is None or ref is None:
        res.not_done("attention plots", "no test set with references")
        return
    plots.require_matplotlib()
    from ...legacy.data import read_text_lines

    folder = folder_in(out, "plots", safe_name(entry.id))  # no link in OUT followed
    for i, (s, t) in enumerate(
        zip(read_text_lines(src)[: opts.plots], read_text_lines(ref)[: opts.plots])
    ):
        (src_seq, src_words), (trg_seq, trg_words) = parse_pair(exp, s, t, True)
        alignment = score_pair(exp.model, src_seq, trg_seq).alignment
        assert alignment is not None  # an RNNsearch model (exp.cfg.search)
        a = alignment.numpy()[:, :, 0]
        path = file_in(folder, plots.plot_file_name(i + 1, opts.plots))
        plots.plot_alignment(
            a,
            # parse_input gives the words as a list (no idx2word): its type says str | list
            cast("list[str]", src_words) + ["<eos>"],
            cast("list[str]", trg_words) + ["<eos>"],
            path,
            title=f"{entry.id}: test pair {i + 1}",
            dpi=opts.plot_dpi,
        )
        res.data["plots"].append({"sentence": i + 1, "file": path.relative_to(out).as_posix()})


def parity_check(res: Result, exp: Experiment, entry: Entry, test: TestPair, opts: Options) -> None:
    from ...harness.check import GROUPS, check
    from ...harness.trace import TraceFile

    groups = opts.parity_groups or GROUPS
    assert entry.trace is not None  # redo checks parity only where a trace is
    with TraceFile(entry.trace) as tr:
        groups = tuple(g for g in groups if tr.has(g) or (g == "batch" and tr.has("batch_all")))
        report = check(exp, tr, groups=groups, source=test[0], target=test[1])
    parity: Parity = {
        "trace": res.rel(entry.trace),
        "groups": list(groups),
        "ok": report.ok,
        "rows": [
            {
                "quantity": r.quantity,
                "n": r.n,
                "max_abs": r.max_abs,
                "max_rel": r.max_rel,
                "tolerance": r.tolerance_text,
                "status": r.status,
            }
            for r in report.rows
        ],
    }
    res.data["parity"] = parity
