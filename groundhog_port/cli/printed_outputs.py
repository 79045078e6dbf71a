"""``groundhog-port parity --case``: the original's printed outputs, run again through the port.

A case folder (and the recordings of user outputs that belong to it) may hold what the
original scripts printed.  Each such file names the command that printed it; this module
runs that command through ``groundhog-port`` itself (in this process: :func:`groundhog_port.cli.main.main`,
stdout captured, the interactive input fed from ``interactive_stdin.txt``) and compares
what it printed with :func:`groundhog_port.harness.printed.compare_printed`: one row per
file, named by the command.  The same command also runs on the float64 shadow and on the
float32 probe of the model (the experiment's model replaced while it runs): their printed
numbers set the derived bound, never the compared values.

Files and commands (``S``/``M`` the case's state and model, ``test.en``/``test.fr`` the
test files the trace names; docs/recordings.md, "Printed outputs"):

=========================================================  =====================================
``trans_[holdout_]beamN[_normalize][_ignore_unk][_verbose][_runK].txt``  ``translate --beam-search --beam-size N [...] --source test.en --trans F``: the file
``sample_[holdout_]beamN[...]_stdout.txt``                 the same command's standard output
``sample_interactive[_normalize]_stdout.txt``              ``translate [--normalize] < interactive_stdin.txt``
``score_txt[_verbose][_print_probs]_stdout.txt``           ``score --mode txt --src test.en --trg test.fr --allow-unk [...]``
``scores_batch[_holdout][_print_probs][_runK].txt``        ``score --mode batch --src ... --trg ... --allow-unk [...]``
``scores_h5_trainN[_runK].txt``                            ``score --mode batch`` over the first N batches of the shuffled training ``.h5``
=========================================================  =====================================

The n-best list: for a ``trans_beam*`` file whose flags the trace records under ``/beam``
(``10_normalize``...), the same command also writes ``--n-best`` and its hypotheses must
come in the original's order with its costs (the ones ``sample()`` returned, recorded in
``trace.h5``).

Where the original crashed on a line (the beam-doubling crash, docs/recordings.md), it
stopped printing: the port's output is compared up to that line (the port writes an empty
line, goes on and exits 3).  The interactive sampler's last prompt (the port meets the end
of input there and stops; the original looped on it forever) is left out.
"""

from __future__ import annotations

import contextlib
import copy
import io
import logging
import os
import re
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .. import lookup
from ..errors import EXIT_OK, EXIT_PARTIAL
from ..harness.printed import compare_printed, strip_eof_prompt
from ..harness.report import Row, Rows
from ..harness.trace import Tolerance, TraceFile
from ..legacy.experiment import Experiment
from ..untrusted import read_text

if TYPE_CHECKING:
    from ..harness.check import CaseFiles
    from ..model.encdec import RNNEncoderDecoder
    from ..outputs import Progress

logger = logging.getLogger(__name__)

#: the folder of user-output recordings of case ``X`` (besides the case folder itself)
RECORDING = "user_outputs_{case}"
STDIN = "interactive_stdin.txt"

_BEAM = re.compile(
    r"(?P<kind>trans|sample)_(?P<holdout>holdout_)?beam(?P<n>\d+)"
    r"(?P<flags>(?:_normalize|_ignore_unk|_verbose)*)(?:_run\d+)?(?P<stdout>_stdout)?\.txt"
)
_INTERACTIVE = re.compile(r"sample_interactive(?P<normalize>_normalize)?_stdout\.txt")
_SCORE_TXT = re.compile(r"score_txt(?P<flags>(?:_verbose|_print_probs)*)_stdout\.txt")
_SCORE_BATCH = re.compile(
    r"scores_batch(?P<holdout>_holdout)?(?P<probs>_print_probs)?(?:_run\d+)?\.txt"
)
_SCORE_H5 = re.compile(r"scores_h5_train(?P<n>\d+)(?:_run\d+)?\.txt")
H5_FILES = ("binarized_text.shuffled.en.h5", "binarized_text.shuffled.fr.h5")


@dataclass(frozen=True)
class Command:
    """A ``groundhog-port`` command line (file arguments as placeholders) and its input."""

    args: tuple  # strings; "{trans}" / "{nbest}" are filled with scratch files
    shown: str  # how the row names it
    stdin: str | None = None


@dataclass
class Printed:
    """A recorded printed output: the file, what it holds, the command that printed it."""

    path: Path
    what: str  # "stdout" | "trans"
    command: Command | None
    why_not: str | None = None  # the command cannot be run here (NOT COVERED)
    beam_label: str | None = None  # the trace's /beam label of its flags, for the n-best


def recording_dirs(
    case_dir: str | os.PathLike[str], given: Sequence[str | os.PathLike[str]] = ()
) -> list[Path]:
    """Where the printed outputs of a case are: the case folder, ``given`` folders, and
    ``user_outputs_<case>`` beside the case, else in ``../pending_traces/`` (where new
    recordings are delivered: the suite reads ``legacy_traces/<name>`` first)."""
    case_dir = Path(case_dir)
    out = [case_dir] + [Path(g) for g in given]
    name = RECORDING.format(case=case_dir.name)
    for cand in (case_dir.parent / name, case_dir.parent.parent / "pending_traces" / name):
        if cand.is_dir():
            out.append(cand)
            break
    return out


def discover(
    dirs: Sequence[str | os.PathLike[str]],
    source: Path | None,
    target: Path | None,
    data_dirs: Sequence[Path],
    case_dir: Path,
    match: str | None = None,
) -> list[Printed]:
    """Every printed-output file in ``dirs`` with its command (module docstring); ``match``:
    only the files whose name matches this glob pattern."""
    found: list[Printed] = []
    for d in dirs:
        for path in sorted(Path(d).glob(match or "*.txt")):
            p = _printed(path, source, target, data_dirs, case_dir)
            if p is not None:
                found += p if isinstance(p, list) else [p]
    return found


def _model_args(files):
    return ("--state", str(files.state), str(files.model))


def _printed(path, source, target, data_dirs, case_dir) -> Printed | list[Printed] | None:
    name = path.name
    m = _BEAM.fullmatch(name)
    if m:
        flags = re.findall(r"normalize|ignore_unk|verbose", m["flags"])
        src = source
        if m["holdout"]:
            src = lookup.find_named("holdout.en", case_dir, data_dirs)
        opts = ["--beam-size", m["n"]] + ["--" + f.replace("_", "-") for f in flags]
        shown = "translate --beam-search " + " ".join(opts)
        what = "stdout" if m["stdout"] else "trans"
        label = m["n"] + "".join(f"_{f}" for f in flags if f != "verbose")
        if src is None:
            return Printed(path, what, None, "holdout.en not found (pass --data-dir)")
        shown += f" --source {Path(src).name} --trans F"
        args = ("translate", "--beam-search", *opts, "--source", str(src), "--trans", "{trans}")
        args += ("--n-best", "{nbest}")
        return Printed(path, what, Command(args, shown), beam_label=label)
    m = _INTERACTIVE.fullmatch(name)
    if m:
        stdin = path.parent / STDIN
        if not stdin.is_file():
            return Printed(path, "stdout", None, f"no {STDIN} beside it: the input is unknown")
        opts = ["--normalize"] if m["normalize"] else []
        text = read_text(stdin, "the interactive input")
        # translate's default (the batched sampler), and the literal one (--batch-size 1)
        return [
            Printed(
                path,
                "stdout",
                Command(
                    ("translate", *opts, *size),
                    " ".join(["translate", *opts, *size, f"< {STDIN}"]),
                    text,
                ),
            )
            for size in ((), ("--batch-size", "1"))
        ]
    m = _SCORE_TXT.fullmatch(name)
    if m:
        flags = [f"--{f.replace('_', '-')}" for f in re.findall(r"verbose|print_probs", m["flags"])]
        return _score(path, ("--mode", "txt"), flags, source, target)
    m = _SCORE_BATCH.fullmatch(name)
    if m:
        flags = ["--print-probs"] if m["probs"] else []
        if m["holdout"]:
            source = lookup.find_named("holdout.en", case_dir, data_dirs)
            target = lookup.find_named("holdout.fr", case_dir, data_dirs)
        return _score(path, ("--mode", "batch"), flags, source, target)
    m = _SCORE_H5.fullmatch(name)
    if m:
        src, trg = (lookup.find_named(f, case_dir, data_dirs) for f in H5_FILES)
        return _score(path, ("--mode", "batch"), ["--n-batches", m["n"]], src, trg, allow_unk=False)
    return None


def _score(path, mode, flags, source, target, allow_unk=True) -> Printed:
    if source is None or target is None:
        return Printed(path, "stdout", None, "its source/target files were not found")
    unk = ["--allow-unk"] if allow_unk else []
    shown = (
        f"score {' '.join(mode)} --src {Path(source).name} --trg {Path(target).name} "
        + " ".join(unk + list(flags))
    ).strip()
    args = ("score", *mode, "--src", str(source), "--trg", str(target), *unk, *flags)
    return Printed(path, "stdout", Command(args, shown))


# --------------------------------------------------------------------------------------
# Running a command in this process, on one of the three models
# --------------------------------------------------------------------------------------
@dataclass
class Ran:
    code: int
    stdout: str
    trans: str | None = None
    nbest: str | None = None
    stderr: str = ""


@dataclass
class Runner:
    """Runs commands on the case's experiment with its model replaced (``"float32"``: the
    product; ``"float64"``: the shadow; ``"probe"``: the float32 probe), each once."""

    exp: Experiment
    files: object
    models: dict = field(default_factory=dict)
    done: dict = field(default_factory=dict)

    def model(self, variant: str) -> RNNEncoderDecoder:
        if variant not in self.models:
            m = self.exp.model
            self.models[variant] = {
                "float32": lambda: m,
                "float64": m.float64_shadow,
                "probe": m.float32_probe,
            }[variant]()
        return self.models[variant]

    def run(self, command: Command, variant: str) -> Ran:
        key = (command, variant)
        if key not in self.done:
            self.done[key] = self._run(command, variant)
        return self.done[key]

    def _run(self, command: Command, variant: str) -> Ran:
        from ..legacy import loading
        from . import main as cli

        exp = copy.copy(self.exp)  # everything it loaded (an export's vocabularies too)
        exp.model = self.model(variant)
        real_open = loading.open_experiment
        with tempfile.TemporaryDirectory(prefix="groundhog-printed-") as tmp:
            trans, nbest = Path(tmp) / "trans.txt", Path(tmp) / "nbest.txt"
            argv = [a.format(trans=trans, nbest=nbest) for a in command.args]
            argv += list(_model_args(self.files))
            if variant != "float32" and argv[0] == "translate" and "--batch-size" not in argv:
                # the double-precision runs take the literal search / sampler (the batched
                # ones are float32 only; both give the same hypotheses and draws)
                argv += ["--batch-size", "1"]
            out, err = io.StringIO(), io.StringIO()
            stdin = io.StringIO(command.stdin or "")
            loading.open_experiment = lambda *a, **k: exp
            old_stdin, old_disable = sys.stdin, logging.root.manager.disable
            logging.disable(logging.CRITICAL)
            try:
                sys.stdin = stdin
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    code = cli.main(argv)
            finally:
                sys.stdin = old_stdin
                loading.open_experiment = real_open
                logging.disable(old_disable)
            read = lambda p: p.read_text(encoding="utf-8") if p.is_file() else None
            return Ran(code, out.getvalue(), read(trans), read(nbest), err.getvalue())


# --------------------------------------------------------------------------------------
# The rows
# --------------------------------------------------------------------------------------
def _read(path) -> str:
    return read_text(path, "a recorded output")


def _first_failure(ran: Ran) -> int | None:
    """The 1-based source line where the port's search failed (the original crashed)."""
    if ran.code != EXIT_PARTIAL or ran.trans is None:
        return None
    for i, line in enumerate(ran.trans.split("\n")[:-1], start=1):
        if line == "":
            return i
    return None


def _until_crash(text: str, failed: int, what: str) -> str:
    """The port's output cut where the original stopped printing: the trans file before the
    failed line; stdout just after the failed line's ``Parsed Input:``."""
    lines = text.split("\n")
    if what == "trans":
        return "\n".join(lines[: failed - 1]) + ("\n" if failed > 1 else "")
    seen = 0
    for i, line in enumerate(lines):
        if line.startswith("Parsed Input:"):
            seen += 1
            if seen == failed:
                return "\n".join(lines[: i + 1]) + "\n"
    return ""


def _texts(p: Printed, runs: dict) -> tuple[list, list]:
    """The product's, shadow's and probe's text of ``p`` and the notes."""
    notes, texts = [], []
    failed = _first_failure(runs["float32"])
    for variant in ("float32", "float64", "probe"):
        ran = runs[variant]
        text = ran.trans if p.what == "trans" else ran.stdout
        text = text or ""
        if p.command is not None and p.command.stdin is not None:
            text, cut = strip_eof_prompt(text)
            if cut and variant == "float32":
                notes.append(
                    "the port's last prompt, answered by the end of input, left out (the "
                    "original repeats it forever)"
                )
        if failed is not None:
            text = _until_crash(text, failed, p.what)
            if variant == "float32":
                notes.append(
                    f"the original crashed on source line {failed}: compared up to it (the "
                    "port writes an empty line there and goes on, exit 3)"
                )
        texts.append(text)
    return texts, notes


def nbest_text(tr: TraceFile, label: str, idx2word: dict[int, str]) -> str | None:
    """The n-best list of the trace's ``/beam/{label}`` in ``--n-best``'s format (the
    hypotheses and costs ``sample()`` returned, in its order); None if not recorded."""
    from ..legacy.vocab import render_translation

    if label not in tr.beam_labels():
        return None
    run = tr.beam(label)
    out = []
    for i in sorted(run.sentences):
        s = run.sentences[i]
        if s.error is not None or not s.trans:
            continue
        for t, c in zip(s.trans, s.costs):
            c = float(c)
            out.append(f"{i} ||| {render_translation(idx2word, t)} ||| cost= {c!r} ||| {-c!r}")
    return "\n".join(out) + "\n" if out else ""


def check_printed(
    exp: Experiment,
    files: CaseFiles,
    tr: TraceFile | None,
    dirs: Sequence[str | os.PathLike[str]],
    data_dirs: Sequence[Path],
    progress: Progress | None = None,
    match: str | None = None,
) -> list[Row]:
    """The rows of every printed output found in ``dirs`` (module docstring; ``match``: a
    glob pattern of the file names to compare, default all)."""
    rows = Rows()
    runner = Runner(exp, files)
    found = discover(dirs, files.source, files.target, data_dirs, files.dir, match)
    nbest_done = set()
    for p in found:
        folder = p.path.parent.name
        quantity = f"outputs/{folder}/{p.path.name}"
        if p.command is None:
            row = rows.get("outputs", quantity, tol=Tolerance("n/a"))
            row.covered = False
            row.notes.append(str(p.why_not))
            continue
        quantity += f" ({p.command.shown})"
        runs = {v: runner.run(p.command, v) for v in ("float32", "float64", "probe")}
        main = runs["float32"]
        if main.code not in (EXIT_OK, EXIT_PARTIAL):
            row = rows.get("outputs", quantity, tol=Tolerance("n/a"))
            row.product = p.command.shown
            last = (main.stderr.strip().splitlines() or ["(nothing on stderr)"])[-1]
            row.mismatch(p.path.name, f"the port exited {main.code}: {last}")
            continue
        texts, notes = _texts(p, runs)
        compare_printed(
            rows, quantity, p.command.shown, _read(p.path), *texts, name=p.path.name, notes=notes
        )
        if (
            tr is not None
            and p.what == "trans"
            and p.beam_label is not None
            and p.beam_label not in nbest_done
        ):
            recorded = nbest_text(tr, p.beam_label, exp.trg_idx2word)
            if recorded is not None:
                nbest_done.add(p.beam_label)
                shown = p.command.shown + " --n-best F"
                compare_printed(
                    rows,
                    f"outputs/trace.h5/beam/{p.beam_label} ({shown})",
                    shown,
                    recorded,
                    main.nbest or "",
                    runs["float64"].nbest,
                    runs["probe"].nbest,
                    name=f"n-best {p.beam_label}",
                )
        if progress is not None:
            progress.update(1)
    return list(rows.rows.values())


def count_printed(
    dirs: Sequence[str | os.PathLike[str]],
    files: CaseFiles,
    data_dirs: Sequence[Path],
    match: str | None = None,
) -> int:
    return sum(
        1
        for p in discover(dirs, files.source, files.target, data_dirs, files.dir, match)
        if p.command is not None
    )
