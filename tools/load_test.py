#!/usr/bin/env python3
"""Bounded load test of `groundhog-port serve` on this machine (loopback addresses only).

    python tools/load_test.py --url http://127.0.0.1:8888/ [--requests 200 --clients 8]
    python tools/load_test.py --state fixtures/search/search_state.pkl \\
        fixtures/search/search_model.npz          # starts its own server on 127.0.0.1

Sentences: the fixture's test.en (or --sentences F); answers are checked against
--expect F (default with the fixture: the translations sample.py recorded, trans_beam10.txt).
Prints throughput, latency percentiles and the server's batching; exits 1 on any error.
"""

import argparse
import json
import shlex
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from parity_tests.support import loadtest  # noqa: E402

FIXTURE = REPO / "fixtures" / "search"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", help="a running server (loopback only)")
    p.add_argument("--state", help="start a server for this state (with MODEL)")
    p.add_argument("model", nargs="?", help="the *_model.npz for --state")
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--api", choices=("mixed", "json", "legacy"), default="mixed")
    p.add_argument("--beam-size", type=int, help="beam per request (default: the server's)")
    p.add_argument(
        "--sentences",
        default=str(FIXTURE / "test.en"),
        help="tokenized source lines (default: the fixture's test.en)",
    )
    p.add_argument(
        "--expect",
        help="expected translations, one per line (default with the "
        "fixture's sentences and beam 10: its trans_beam10.txt)",
    )
    p.add_argument(
        "--serve-args",
        default="",
        help="extra `serve` options for the server --state starts, e.g. "
        '"--batch-size 1" (no batching) or "--batch-wait-ms 20"',
    )
    p.add_argument("--deadline", type=float, default=300.0, help="seconds before it stops")
    p.add_argument(
        "--fairness",
        action="store_true",
        help="instead: issue 25's fairness scenario -- heavy requests from one "
        "client address (127.0.0.2), then light ones from another (127.0.0.3)",
    )
    p.add_argument(
        "--heavy",
        default="9x32x100@50",
        metavar="RxSxT@B",
        help="--fairness: R requests of S sentences of T tokens at beam B "
        "(default 9x32x100@50, the issue's)",
    )
    p.add_argument(
        "--sigterm",
        type=float,
        metavar="S",
        help="instead: start `groundhog-port serve` (--state STATE MODEL, "
        "--serve-args) as a process, send the --heavy requests (R of them) "
        "and SIGTERM it S seconds later; prints its exit status and time",
    )
    p.add_argument(
        "--light",
        type=int,
        default=100,
        help="--fairness: most light requests (sent while heavy ones are unanswered)",
    )
    p.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    args = p.parse_args(argv)
    if bool(args.url) == bool(args.state):
        p.error("give --url or --state STATE MODEL")
    if args.requests < 1 or args.clients < 1:
        p.error("--requests and --clients must be at least 1")
    sentences = Path(args.sentences).read_text(encoding="utf-8").splitlines()
    if args.sigterm is not None:
        if not args.state:
            p.error("--sigterm needs --state STATE MODEL")
        report = loadtest.sigterm_under_load(
            ["--state", args.state, args.model or "", *shlex.split(args.serve_args)],
            sentences,
            loadtest.Heavy.parse(args.heavy),
            args.sigterm,
        )
        print(
            f"exit {report['exit']} {report['seconds']:.1f} s after SIGTERM; clients got "
            f"{report['answers']}; 'terminate called': {report['terminate_called']}; "
            f"last log line: {report['last_line']}"
        )
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
        return 0 if report["exit"] == 0 else 1
    expect = args.expect
    if (
        expect is None
        and Path(args.sentences).resolve() == (FIXTURE / "test.en").resolve()
        and args.beam_size in (None, 10)
    ):
        expect = FIXTURE / "trans_beam10.txt"
    expected = Path(expect).read_text(encoding="utf-8").splitlines() if expect else None
    server = None
    url = args.url
    if args.state:
        from groundhog_port.cli.commands import serve
        from groundhog_port.cli.main import build_parser
        from groundhog_port.serve.http import start_in_thread

        sargs = build_parser().parse_args(
            [
                "serve",
                "--state",
                args.state,
                args.model or "",
                "--port",
                "0",
                *shlex.split(args.serve_args),
            ]
        )
        import logging

        logging.basicConfig(level=logging.WARNING)
        server = serve.build(sargs)
        start_in_thread(server)
        url = server.url
    try:
        loadtest.check_loopback(url)
        if args.fairness:
            report = loadtest.fairness(
                url,
                sentences,
                loadtest.Heavy.parse(args.heavy),
                loadtest.Light(requests=args.light),
                deadline_s=args.deadline,
            )
        else:
            report = loadtest.run(
                url,
                sentences,
                expected,
                args.requests,
                args.clients,
                args.api,
                args.beam_size,
                args.deadline,
            )
    except ValueError as err:
        print(f"load_test: error: {err}", file=sys.stderr)
        return 2
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    if args.fairness:
        print(loadtest.format_fairness(report))
        return 0 if set(report["light"]["statuses"]) == {200} else 1
    print(loadtest.format_report(report))
    return 1 if report["errors"] or report["unfinished"] else 0


if __name__ == "__main__":
    sys.exit(main())
