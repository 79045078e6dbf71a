"""``groundhog-port serve``: a translation server and page replacing GroundHog's web demo."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING

from ...errors import EXIT_OK, LegacyInputError
from .common import add_model_arguments, open_from_args

if TYPE_CHECKING:
    from ...serve.http import TranslationServer

NAME = "serve"
HELP = (
    "serve translations over HTTP: the web demo's GET /?source=... API, a JSON API "
    "(POST /translate), /health and a page with the attention heatmap"
)
logger = logging.getLogger(__name__)

#: the whole-number options, each at least 1 (:func:`build` checks them), by --help group:
#: ``(flag, default, help)``
BEAM_SIZE = ("--beam-size", 10, "beam size when a request names none (default 10, the demo's)")
LIMITS = (
    ("--max-beam", 50, "largest beam a request may ask"),
    ("--max-sentences", 32, "sentences per JSON request"),
    ("--max-tokens", 100, "tokens per sentence"),
    ("--max-chars", 2000, "characters per sentence"),
    ("--max-body", 65536, "bytes of a JSON request body"),
    ("--max-pending", 256, "sentences waiting to be decoded before requests get 503"),
    (
        "--max-steps",
        32 * 50 * 3 * 101,
        "a request's budget in hypothesis-steps (beam x decoder steps, summed "
        "over its sentences and sample.py's retries; default 484800: the most "
        "the other default limits allow)",
    ),
)
BATCH_COUNTS = (
    ("--batch-size", 32, "most sentences decoded together (default 32)"),
    (
        "--batch-rows",
        320,
        "most hypotheses (beam sizes summed) decoded together (default 320: 32 "
        "sentences at the default beam): bounds the time one batch takes, so "
        "a light request waits little behind a heavy client",
    ),
)


def _add_counts(group, *counts):
    for flag, default, text in counts:
        group.add_argument(flag, type=int, default=default, help=text)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arguments(p)
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; the original used all)",
    )
    p.add_argument("--port", type=int, default=8888, help="port (default 8888; 0: any free one)")
    _add_counts(p, BEAM_SIZE)
    p.add_argument(
        "--pretokenized",
        action="store_true",
        help="sources arrive tokenized: split on whitespace, no Moses tokenizer "
        '(requests may also say so: tokenized=1 / "tokenized": true)',
    )
    p.add_argument("--source-lang", default="en", help="Moses tokenizer language (default en)")
    p.add_argument("--target-lang", default="fr", help="Moses detokenizer language (default fr)")
    g = p.add_argument_group("limits")
    _add_counts(g, *LIMITS)
    g.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="seconds a request waits for its translation before a 503",
    )
    g.add_argument(
        "--client-timeout",
        type=float,
        default=30.0,
        help="seconds a client has to send a whole request (and to take an answer)",
    )
    g.add_argument(
        "--drain",
        type=float,
        default=5.0,
        help="on SIGTERM/Ctrl-C: seconds the batch being decoded may take to finish "
        "before it is stopped (waiting requests are answered 503 at once)",
    )
    o = p.add_argument_group("origins and hosts")
    o.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="also answer pages of ORIGIN (e.g. https://example.org; * for any), "
        "with CORS headers; by default only the server's own page may call it",
    )
    o.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also accept Host: NAME[:port] (a DNS name of this server); other "
        "names are refused (DNS rebinding)",
    )
    b = p.add_argument_group("batching")
    b.add_argument(
        "--batch-wait-ms",
        type=float,
        default=5.0,
        help="how long the decoder gathers concurrent requests (default 5 ms)",
    )
    _add_counts(b, *BATCH_COUNTS)


def build(args: argparse.Namespace) -> TranslationServer:
    """The server the arguments describe (bound, not yet serving)."""
    from ...serve.engine import Engine, Limits
    from ...serve.http import TranslationServer

    for flag, _, _ in (BEAM_SIZE, *LIMITS, *BATCH_COUNTS):
        if getattr(args, flag[2:].replace("-", "_")) < 1:
            raise LegacyInputError(None, f"{flag} must be at least 1")
    if not 0 <= args.port <= 65535:
        raise LegacyInputError(None, f"--port {args.port}: expected 0..65535")
    if args.beam_size > args.max_beam:
        raise LegacyInputError(
            None, f"--beam-size {args.beam_size} is above --max-beam {args.max_beam}"
        )
    if args.batch_wait_ms < 0 or args.timeout <= 0 or args.client_timeout <= 0 or args.drain < 0:
        raise LegacyInputError(
            None, "--batch-wait-ms and --drain must be >= 0, --timeout and --client-timeout > 0"
        )
    exp = open_from_args(args)
    limits = Limits(
        args.max_beam,
        args.max_sentences,
        args.max_tokens,
        args.max_chars,
        args.max_body,
        args.max_steps,
    )
    engine = Engine(
        exp,
        args.beam_size,
        limits,
        args.pretokenized,
        args.source_lang,
        args.target_lang,
        args.batch_size,
    )
    engine.warm_up()
    try:
        return TranslationServer(
            (args.host, args.port),
            engine,
            args.batch_wait_ms / 1000,
            args.batch_size,
            args.max_pending,
            args.timeout,
            args.client_timeout,
            args.batch_rows,
            args.allow_origin,
            args.allow_host,
        )
    except OSError as err:
        raise LegacyInputError(
            None, f"cannot listen on {args.host}:{args.port} ({err.strerror or err})"
        ) from None


def run(args: argparse.Namespace) -> int:
    server = build(args)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        logger.warning("listening on %s: reachable from other machines", args.host)

    stopper: list[threading.Thread] = []

    def now(signum, frame):
        # a second Ctrl-C (or SIGTERM) while draining: leave at once.  os._exit, not
        # SystemExit: the decoding thread is still inside torch, and a normal interpreter
        # exit under it ended in SIGABRT ("terminate called without an active exception")
        logger.warning(
            "second %s while stopping: exiting now, the batch in progress is dropped",
            signal.Signals(signum).name,
        )
        logging.shutdown()
        sys.stderr.flush()
        os._exit(128 + signum)

    def stop(signum=None, frame=None):
        # serve_forever must return in its own thread: stop from another one
        if not stopper:
            for sig in (signal.SIGINT, signal.SIGTERM):  # before the line that announces it
                signal.signal(sig, now)
            logger.info(
                "stopping: no new connections; the batch in progress may take %g s "
                "(Ctrl-C again to exit at once)",
                args.drain,
            )
            stopper.append(
                threading.Thread(target=server.stop, args=(args.drain,), name="groundhog-stop")
            )
            stopper[0].start()

    signal.signal(signal.SIGTERM, stop)
    print(
        f"groundhog-port serve: listening on {server.url} (page {server.url}, "
        f"JSON POST {server.url}translate, legacy GET {server.url}?source=...)",
        flush=True,
    )
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        stop()
    finally:
        if stopper:
            stopper[0].join()  # the decoding thread is joined: no torch work at exit
        server.server_close()
    logger.info(
        "stopped after %d requests (%d sentences cancelled by the shutdown)",
        server.requests,
        server.batcher.stats["cancelled"],
    )
    return EXIT_OK
