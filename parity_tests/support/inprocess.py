"""``groundhog-port ARGS`` run in this process, for tests that are not about the process
boundary: a fresh ``python -m groundhog_port`` costs seconds of importing torch per call.

:func:`parity_tests.support.fuzzing.run_cli_inprocess` captures stdout and stderr at the file
descriptors and gives the exit status ``main`` returns; here the warnings a fresh process
would print on stderr (all but the categories Python hides by default) are recorded and
appended to stderr too, since pytest would otherwise swallow them.
"""

import subprocess
import warnings

import torch

from groundhog_port.cli.main import main
from parity_tests.support.fuzzing import run_cli_inprocess

#: what a fresh interpreter's default warning filters do not print
HIDDEN_WARNINGS = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)


def run_cli(*args, cwd=None):
    """``groundhog-port ARGS`` -> ``CompletedProcess(args, returncode, stdout, stderr)``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rc, out, err = run_cli_inprocess(main, [str(a) for a in args], cwd=cwd)
    err += "".join(
        warnings.formatwarning(w.message, w.category, w.filename, w.lineno)
        for w in caught
        if not issubclass(w.category, HIDDEN_WARNINGS)
    )
    return subprocess.CompletedProcess(list(args), rc, out, err)


def journal_header(*argv):
    """The fingerprint line (with its newline) that begins the journal ``groundhog-port ARGV``
    writes -- computed as the command computes it -- for tests that lay out the files an
    interrupted run leaves."""
    import json

    from groundhog_port import outputs
    from groundhog_port.cli import sample as sampling_cli
    from groundhog_port.cli.commands import score, translate
    from groundhog_port.cli.commands.common import open_from_args
    from groundhog_port.cli.main import build_parser
    from groundhog_port.legacy.data import read_text_lines
    from groundhog_port.sampling.sampler import Sampler

    args = build_parser().parse_args([str(a) for a in argv])
    exp = open_from_args(args)
    if args.command == "score":
        fp = score.batch_fingerprint(args, exp)
    elif args.beam_search:
        fp = translate.beam_fingerprint(args, exp, read_text_lines(args.source))
    else:
        fp = sampling_cli.batch_fingerprint(
            args, exp, read_text_lines(args.source), Sampler(exp, mrg_seed=args.seed).mrg_seed
        )
    return outputs.FINGERPRINT_TAG + json.dumps(fp, sort_keys=True) + "\n"


def run_here(*argv, log_level="INFO", cwd=None):
    """The command in this process on one thread (as ``OMP_NUM_THREADS=1`` processes run):
    (exit status, stdout, stderr)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        r = run_cli("--log-level", log_level, *argv, cwd=cwd)
    finally:
        torch.set_num_threads(threads)
    return r.returncode, r.stdout, r.stderr


def interrupted_here(monkeypatch, cls, name, after, *argv):
    """``run_here(*argv)`` with ``cls.name`` raising KeyboardInterrupt (Ctrl-C) at its call
    number ``after + 1``: an interruption at a known line, in this process -- so ``--workers
    auto`` (the default) finds one free core, as on a busy machine: on a quiet one it would
    fork workers, where the patch is not counted and the interruption not seen."""
    from groundhog_port.distributed import pool

    real = getattr(cls, name)
    calls = []

    def stop_after(*args, **kwargs):
        if len(calls) == after:
            raise KeyboardInterrupt
        calls.append(1)
        return real(*args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(cls, name, stop_after)
        m.setattr(pool.FreeCores, "count", lambda self: 1)
        return run_here(*argv)
