"""The report of ``groundhog-port archive``: ``report.json``, ``report.md`` and a
self-contained ``report.html`` (one section per experiment with its tables, the attention
plots inline as ``data:`` URIs, and what could not be done and why).

Everything here is computed from the per-experiment results of
:mod:`groundhog_port.tasks.archive` alone (no timings, no dates), so an interrupted and resumed
run writes the same bytes as an uninterrupted one.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ... import __version__
from ...errors import shown_all
from ...outputs import atomic_write_text, file_in

if TYPE_CHECKING:
    from .result import ResultRecord

#: one table of the report: its title, header and rows of cells
Table = tuple[str, list[str], list[list[str]]]

TITLE = "GroundHog archive re-done by groundhog-port"


def _num(x, fmt="{:.2f}"):
    """``x`` formatted; ``None`` as "-", a non-finite number (stored as text) as it is."""
    if x is None:
        return "-"
    return x if isinstance(x, str) else fmt.format(x)


def _bleu(b):
    if not b:
        return "-"
    return f"{b['sacrebleu']:.2f} (multi-bleu {b['multi_bleu']:.2f})"


def _settings(s):
    flags = [f"beam {s['beam_size']}"] + [
        k.replace("_", "-") for k in ("normalize", "ignore_unk") if s[k]
    ]
    return ", ".join(flags)


def _cost(r):
    """The port's total cost, and sample.py's where it printed one for the same lines."""
    text = str(r["total_cost"])
    if r["archived_total_cost"] is not None and r.get("limited") is None:
        text += f" (sample.py printed {r['archived_total_cost']})"
    return text


def _snapshot_note(r):
    """Which snapshot reproduces the output, and what the others gave."""
    if not r.get("snapshot"):
        return None
    others = [
        f"{x['model']}: {x['status']}" for x in r.get("snapshots", []) if x["status"] != "this row"
    ]
    return f"re-done with snapshot {r['snapshot']}" + (f" ({'; '.join(others)})" if others else "")


def overview(report: Mapping[str, Any]) -> Table:
    """One row per experiment: outputs re-done, identical, BLEU, parity, not done."""
    rows = []
    for r in report["experiments"]:
        rep = r["reproduction"]
        bleu = [row["bleu"]["reproduced_vs_reference"] for row in rep]
        bleu = [b for b in bleu if b]
        rows.append(
            [
                r["id"],
                f"{len(rep) + len(r['scores'])}",
                f"{sum(x['all_identical'] for x in rep)}/{len(rep)} translations, "
                f"{sum(bool(x.get('within_print_noise')) for x in r['scores'])}/{len(r['scores'])}"
                " score files within print noise",
                _bleu(bleu[0]) if bleu else "-",
                "-" if r["parity"] is None else ("PASS" if r["parity"]["ok"] else "FAIL"),
                str(len(r["not_done"])),
                r.get("origin", "discovered"),
            ]
        )
    return (
        "Overview",
        [
            "experiment",
            "outputs re-done",
            "identical",
            "BLEU (first file, reproduced-ref)",
            "parity",
            "not done",
            "entry",
        ],
        rows,
    )


def _first_diff(rows):
    if not rows:
        return "-"
    d = rows[0]
    return f"line {d['line']}: archived {d['archived']!r} / reproduced {d.get('reproduced')!r}"


def _noise(s):
    within = s.get("within_print_noise")
    return "-" if within is None else ("yes" if within else "NO: beyond parity's bounds")


def tables(result: Mapping[str, Any]) -> list[Table]:  # a ResultRecord, as JSON
    """``[(title, header, rows)]`` of one experiment: the tables both renderings show."""
    out = []
    files = result["files"]
    rows = [
        ["entry", result.get("origin", "discovered")],
        ["state", result["state"]],
        ["model", result["model"] or "-"],
    ]
    rows += [[k, v or "-"] for k, v in files.items() if not isinstance(v, dict)]
    for name in ("test", "holdout"):
        t = files.get(name)
        if t and (name == "test" or t["source"]):  # a missing holdout set is no news
            rows.append(
                [f"{name} set", f"{t['source'] or '-'} / {t['reference'] or '-'} ({t['how']})"]
            )
    out.append(("Files", ["what", "file"], rows))
    if result["reproduction"]:
        out.append(
            (
                "Reproduction (sample.py)",
                [
                    "file",
                    "settings",
                    "identical",
                    "first difference",
                    "BLEU archived-ref",
                    "BLEU reproduced-ref",
                    "total cost",
                    "note",
                ],
                [
                    [
                        r["file"],
                        _settings(r["settings"]),
                        f"{r['identical']}/{r['compared']}",
                        _first_diff(r["first_differences"]),
                        _bleu(r["bleu"]["archived_vs_reference"]),
                        _bleu(r["bleu"]["reproduced_vs_reference"]),
                        _cost(r),
                        "; ".join(
                            x
                            for x in (
                                r.get("limited"),
                                r.get("crash_not_rechecked"),
                                _snapshot_note(r),
                                r.get("settings_why")
                                if r.get("settings_why", "").startswith("by content")
                                else None,
                            )
                            if x
                        )
                        or "-",
                    ]
                    for r in result["reproduction"]
                ],
            )
        )
    if result["scores"]:
        out.append(
            (
                "Scores (score.py)",
                [
                    "file",
                    "how",
                    "identical",
                    "within print noise (parity's batch/scores bounds)",
                    "more than 1 unit of the last digit apart",
                    "max rel diff",
                    "first difference",
                ],
                [
                    [
                        s["file"],
                        s["how"],
                        f"{s['identical']}/{s['compared']} (of {s['archived_lines']})",
                        _noise(s),
                        str(s["beyond_last_digit"]),
                        _num(s["max_rel_diff"], "{:.1e}"),
                        _first_diff(s["first_differences"]),
                    ]
                    for s in result["scores"]
                ],
            )
        )
    if result["crash_logs"]:
        out.append(
            (
                "Crash logs",
                ["file", "the original died with", "re-checked"],
                [[c["file"], c["last_line"] or "-", c["status"]] for c in result["crash_logs"]],
            )
        )
    p = result["parity"]
    if p:
        out.append(
            (
                f"Parity with {p['trace']} ({'PASS' if p['ok'] else 'FAIL'})",
                ["quantity", "n", "max abs err", "max rel err", "tolerance", "result"],
                [
                    [
                        r["quantity"],
                        str(r["n"]),
                        _num(r["max_abs"], "{:.2e}"),
                        _num(r["max_rel"], "{:.2e}"),
                        r["tolerance"],
                        r["status"],
                    ]
                    for r in p["rows"]
                ],
            )
        )
    if result["notes"]:
        out.append(("Notes", ["note"], [[n] for n in result["notes"]]))
    if result["not_done"]:
        out.append(
            ("Not done", ["what", "why"], [[n["what"], n["why"]] for n in result["not_done"]])
        )
    return out


def signatures(results: Sequence[Mapping[str, Any]]) -> list[str]:  # ResultRecords
    """The sacrebleu signatures the report's BLEU numbers carry."""
    return sorted(
        {
            b["signature"]
            for r in results
            for row in r["reproduction"]
            for b in row["bleu"].values()
            if b
        }
    )


def summary(results: Sequence[ResultRecord]) -> dict[str, Any]:
    rep = [row for r in results for row in r["reproduction"]]
    return {
        "experiments": len(results),
        "trans_files": len(rep),
        "trans_files_identical": sum(row["all_identical"] for row in rep),
        "scores_files": sum(len(r["scores"]) for r in results),
        "scores_files_identical": sum(s["all_identical"] for r in results for s in r["scores"]),
        "scores_files_within_noise": sum(
            bool(s.get("within_print_noise")) for r in results for s in r["scores"]
        ),
        "scores_lines": sum(s["compared"] for r in results for s in r["scores"]),
        "scores_lines_identical": sum(s["identical"] for r in results for s in r["scores"]),
        "scores_max_rel_diff": max(
            (s["max_rel_diff"] for r in results for s in r["scores"]), key=_magnitude, default=None
        ),
        "parity_checked": sum(r["parity"] is not None for r in results),
        "parity_passed": sum(bool(r["parity"] and r["parity"]["ok"]) for r in results),
        "plots": sum(len(r["plots"]) for r in results),
        "not_done": sum(len(r["not_done"]) for r in results),
    }


def _magnitude(x):
    """Order for max-rel-diff values, which are numbers or (non-finite) text."""
    return float(x)


def summary_text(s: Mapping[str, Any]) -> str:
    """The report's verdict in one sentence (also what ``archive`` prints): first the
    outputs re-done, identical and differing, and what was not done (never "all identical"
    while something was left undone), then the translations, score files and parity."""
    n, within = s["scores_files"], s["scores_files_within_noise"]
    scores = (
        "no score files"
        if n == 0
        else (
            f"{within}/{n} score files within print noise"
            if within == n
            else f"{n - within}/{n} score files BEYOND parity's bounds"
        )
        + (
            f" ({s['scores_lines_identical']}/{s['scores_lines']} lines identical as printed; "
            "score.py printed float32 sums with 6 digits, judged by parity's batch/scores bounds)"
        )
    )
    redone = s["trans_files"] + n
    same = s["trans_files_identical"] + within
    return (
        f"{s['experiments']} experiment{'' if s['experiments'] == 1 else 's'}: "
        f"{redone} output{'' if redone == 1 else 's'} re-done ({same} identical or within "
        f"print noise, {redone - same} differ{'s' if redone - same == 1 else ''}), "
        f"{s['not_done']} not done; {s['trans_files_identical']}/{s['trans_files']} "
        f"translation files identical; {scores}; parity {s['parity_passed']}/"
        f"{s['parity_checked']}; {s['plots']} attention plots; {s['not_done']} not done."
        + (
            f" {s['from_cache']} experiment result{'' if s['from_cache'] == 1 else 's'} from "
            "OUT/cache, made before from the same inputs, options and code (--fresh re-does "
            "them)."
            if s.get("from_cache")
            else ""
        )
    )


def build(
    root: str | os.PathLike[str],
    options: dict[str, Any],
    results: Sequence[ResultRecord],
    inventory: Sequence[dict[str, str]] = (),
    from_cache: Collection[str] = (),
) -> dict[str, Any]:  # JSON-able
    """The report as one JSON-able dict, every string printable (names of files whose bytes
    are not UTF-8 quoted in what the lookup said are shown escaped: :func:`shown_all`);
    ``inventory``: every file and pack member with its role (:mod:`.accounting`);
    ``from_cache``: the ids of the experiments whose results were made before (OUT/cache)."""
    s = summary(results)
    s["from_cache"] = len(from_cache)
    s["files"] = len(inventory)
    s["files_used"] = sum(not a["role"].startswith(("not used", "not read")) for a in inventory)
    return cast(  # shown_all gives a dict the shape it is given
        "dict[str, Any]",
        shown_all(
            {
                "tool": f"groundhog-port {__version__}",
                "root": str(root),
                "options": options,
                "summary": s,
                "bleu_signatures": signatures(results),
                "experiments": results,
                "from_cache": sorted(from_cache),
                "inventory": list(inventory),
            }
        ),
    )


def inventory_table(report: Mapping[str, Any]) -> Table:
    """Every file of the archive, one row each: what it holds and its role."""
    rows = [[a["file"], a["kind"], a["role"]] for a in report.get("inventory", [])]
    return "Inventory: every file and pack member", ["file", "holds", "role"], rows


# ----------------------------------------------------------------------------------------
def md_text(x: object) -> str:
    """Text for report.md, escaped as report.html escapes it: ``&``, ``<``, ``>`` as
    entities (a Markdown renderer passes raw HTML through: a sentence holding ``<script>``
    ran in the page), the Markdown that could make a link, an image, code or a table cell
    of archive text (``[``, ``]``, a backquote, ``|``, ``\\``) backslash-escaped, and line
    breaks as spaces."""
    text = html.escape(" ".join(str(x).splitlines()), quote=False)
    return _MD_SPECIAL.sub(r"\\\g<0>", text)


_MD_SPECIAL = re.compile(r"[\\`\[\]|]")


def _md_cell(x):
    return md_text(x)


def markdown(report: Mapping[str, Any]) -> str:
    out = [
        f"# {TITLE}",
        "",
        f"Archive {md_text(report['root'])} ({md_text(report['tool'])}).",
        "",
        md_text(summary_text(report["summary"])) + " (Things not done are listed per experiment.)",
        "",
    ]
    if report["from_cache"]:
        out += [f"From OUT/cache: {md_text(', '.join(report['from_cache']))}.", ""]
    for sig in report["bleu_signatures"]:
        out.append(
            f"BLEU X (multi-bleu Y): X is sacrebleu {md_text(sig)}, Y is Moses' multi-bleu.perl "
            "on the tokenized text."
        )
    title, header, rows = overview(report)
    out += [f"## {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    for r in report["experiments"]:
        out += ["", f"## {md_text(r['id'])}", ""]
        for title, header, rows in tables(r):
            out += [
                f"### {md_text(title)}",
                "",
                "| " + " | ".join(header) + " |",
                "|" + "---|" * len(header),
            ]
            out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
            out.append("")
        for p in embeddable(report, r):
            out.append(f"![attention, test pair {p['sentence']}]({p['file']})")
    title, header, rows = inventory_table(report)
    out += ["", f"## {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(out) + "\n"


def embeddable(
    report: Mapping[str, Any],
    result: Mapping[str, Any],  # a ResultRecord, as JSON
    out: str | os.PathLike[str] | None = None,
) -> list[dict[str, Any]]:  # its Plots
    """The plots of ``result`` the report may show: each one a file this command writes,
    ``plots/<experiment>/align_NNNN.png`` of its pair, a regular PNG reached through no
    link (:func:`groundhog_port.tasks.archive.cache.plot_problem`; with ``out=None`` only
    the name is checked).  Anything else is left out, never read."""
    from ..plots import plot_file_name
    from .cache import plot_problem, safe_name

    total = report["options"]["plots"]
    shown = []
    for i, p in enumerate(result["plots"], start=1):
        bad: str | bool | None
        if out is not None:
            bad = plot_problem(out, result["id"], p, i, total)
        else:
            bad = p.get("file") != f"plots/{safe_name(result['id'])}/{plot_file_name(i, total)}"
        if not bad:
            shown.append(p)
    return shown


CSS = (
    "body{font-family:sans-serif;margin:2em;max-width:80em}table{border-collapse:collapse;"
    "margin:.5em 0 1.5em}td,th{border:1px solid #999;padding:.2em .5em;vertical-align:top;"
    "font-size:90%}th{background:#eee}section{border-top:2px solid #333;margin-top:2em}"
    "figure{display:inline-block;margin:.5em}.notdone td{background:#fee}"
)


def _html_table(title, header, rows, cls):
    """A whole-report table (the overview, the inventory) under its ``<h2>`` title."""
    e = html.escape
    return (
        f'<h2>{e(title)}</h2><table class="{cls}"><tr>'
        + "".join(f"<th>{e(h)}</th>" for h in header)
        + "</tr>"
        + "".join("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in row) + "</tr>" for row in rows)
        + "</table>"
    )


def html_page(report: Mapping[str, Any], out: str | os.PathLike[str]) -> str:
    """The self-contained page: the plots are read from ``out`` and inlined."""
    e = html.escape
    body = [
        f"<h1>{e(TITLE)}</h1>",
        f"<p>Archive <code>{e(report['root'])}</code> ({e(report['tool'])}). "
        f"{e(summary_text(report['summary']))}</p>",
    ]
    if report["from_cache"]:
        body.append(f"<p>From OUT/cache: {e(', '.join(report['from_cache']))}.</p>")
    body.append(_html_table(*overview(report), "overview"))
    for sig in report["bleu_signatures"]:
        body.append(
            f"<p>BLEU X (multi-bleu Y): X is sacrebleu <code>{e(sig)}</code>, Y is "
            "Moses' multi-bleu.perl on the tokenized text.</p>"
        )
    for r in report["experiments"]:
        body.append(f'<section class="experiment" data-id="{e(r["id"])}"><h2>{e(r["id"])}</h2>')
        for title, header, rows in tables(r):
            cls = ' class="notdone"' if title == "Not done" else ""
            body.append(
                f"<h3>{e(title)}</h3><table{cls}><tr>"
                + "".join(f"<th>{e(h)}</th>" for h in header)
                + "</tr>"
                + "".join(
                    "<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in row) + "</tr>" for row in rows
                )
                + "</table>"
            )
        for p in embeddable(report, r, out):
            data = base64.b64encode((Path(out) / p["file"]).read_bytes()).decode("ascii")
            n = e(str(p["sentence"]))
            body.append(
                f'<figure><img class="attention" alt="attention, test pair {n}" '
                f'src="data:image/png;base64,{data}"><figcaption>test pair {n}</figcaption>'
                "</figure>"
            )
        body.append("</section>")
    body.append(_html_table(*inventory_table(report), "inventory"))
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>'
        + e(TITLE)
        + f"</title><style>{CSS}</style></head><body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


#: what :func:`write` writes into ``--out``
REPORT_FILES = ("report.json", "report.md", "report.html")


def write(report: Mapping[str, Any], out: str | os.PathLike[str]) -> list[Path]:
    """``report.json``, ``report.md``, ``report.html`` in ``out``; returns their paths.  A
    link at one of these names is never followed (:func:`groundhog_port.outputs.file_in`)."""
    out = Path(out)
    paths = [file_in(out, name) for name in REPORT_FILES]
    atomic_write_text(
        paths[0],
        json.dumps(report, indent=1, sort_keys=True, allow_nan=False, ensure_ascii=False) + "\n",
    )
    atomic_write_text(paths[1], markdown(report))
    atomic_write_text(paths[2], html_page(report, out))
    return paths
