"""The HTTP side: routes, request limits, one-line JSON errors, the access log.

Routes (``docs/serve.md``):

* ``GET /?source=...`` -- the web demo's query API, answered as sample_server.py did
  (:mod:`.legacy_api`);
* ``POST /translate`` -- JSON: one (``text``) or many (``texts``) sentences; per sentence
  the translation, the n-best list with costs, unknown words and attention weights;
* ``GET /health`` -- JSON: model, settings, queue and batch counters;
* ``GET /`` -- the page (``static/index.html`` with its script and style, all served here).

Every refused request gets a 4xx (or 503 when the server is saturated) whose body is one
line of JSON ``{"error": "..."}``; an unexpected exception answers 500 the same way and
the server goes on.  Each request is logged on one line: client, request, status, size,
milliseconds, and what was asked (beam size, the sentences, shortened), with every
unprintable character escaped (``\x1b``), so that no request can write to the terminal.

Who may ask (``docs/serve.md``, "Origins and hosts"): the ``Host`` header must name this
server (a DNS-rebinding page names its own domain), and a request from a page of another
origin (``Origin``, or ``Sec-Fetch-Site: cross-site``) is refused unless ``--allow-origin``
names that origin; allowed origins get CORS headers and preflight answers.

A request must arrive whole (line, headers and body) within the client timeout, counted
from its first byte's wait, not per received piece: a client trickling bytes is cut there.
That deadline, like the decoder's gathering window, is read from the server's
:class:`~.batcher.Clock` (the :mod:`time` module unless a test injects one); measured
durations (the log's milliseconds) and real waits (an answer's ``--timeout``, joining
threads at shutdown) use :func:`time.monotonic` itself.
"""

import io
import ipaddress
import json
import logging
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import CancelledError
from concurrent.futures import TimeoutError as FutureTimeout
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

from ..errors import LegacyInputError
from ..untrusted import load_json
from . import legacy_api
from .batcher import Batcher, Busy, Clock, ShuttingDown
from .engine import Budget, Engine, Job, RequestError, estimated_steps

logger = logging.getLogger("groundhog_port.serve")

STATIC = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}
JSON_FIELDS = {
    "text",
    "texts",
    "beam_size",
    "ignore_unk",
    "normalize",
    "tokenized",
    "attention",
    "n_best",
}
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}
#: characters of a sentence quoted in the access log
LOG_CHARS = 80
#: deepest JSON body parsed (a request needs 2: {"texts": [...]})
MAX_BODY_DEPTH = 8

#: what socketserver hands a server per connection (a TCP server: the socket), and the
#: peer's address (IPv4: host, port; IPv6: host, port, flow info, scope id)
_Request = socket.socket | tuple[bytes, socket.socket]
_Address = tuple[str, int] | tuple[str, int, int, int]


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def printable(text: object) -> str:
    """``text`` with every character that is not printable escaped as Python writes it
    (``\x1b``, ``\u2028``, a lone surrogate ``\ud800``): a log line stays one line and
    never carries terminal control sequences."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def _shown(texts: Iterable[str]) -> str:
    out = []
    for t in texts:
        t = _one_line(t)
        out.append(
            json.dumps(
                t if len(t) <= LOG_CHARS else t[: LOG_CHARS - 1] + "\u2026", ensure_ascii=False
            )
        )
    return printable(" ".join(out))


def _lone_surrogate(obj: object) -> str | None:
    """The first string in a parsed JSON value that is not Unicode text (a lone surrogate
    such as ``"\ud800"``, which JSON's escapes allow), or None."""
    if isinstance(obj, str):
        try:
            obj.encode("utf-8")
        except UnicodeEncodeError:
            return obj
        return None
    items = obj.items() if isinstance(obj, dict) else obj if isinstance(obj, list) else ()
    for item in items:
        for part in item if isinstance(obj, dict) else (item,):
            bad = _lone_surrogate(part)
            if bad is not None:
                return bad
    return None


class _DeadlineSocketReader(io.RawIOBase):
    """The connection's input, every ``recv`` bounded by the time left to the handler's
    deadline for the whole request (a per-``recv`` timeout alone lets a client that sends
    a byte every few seconds stay for ever)."""

    def __init__(self, sock: socket.socket, handler: "Handler") -> None:
        self._sock, self._handler = sock, handler

    def readable(self) -> bool:
        return True

    def readinto(self, b: "WriteableBuffer") -> int:
        deadline = self._handler.deadline
        if deadline is not None:
            left = deadline - self._handler.server.clock.monotonic()
            if left <= 0:
                raise TimeoutError("the request was not received in time")
            self._sock.settimeout(left)
        return self._sock.recv_into(b)


def _hosts_of(host: str, port: int, extra: Iterable[str] = ()) -> set[str]:
    """The ``Host`` header values that name this server (lower case)."""
    names = {host.lower(), *[h.lower() for h in extra]}
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    if ip is not None and ip.is_loopback:
        names |= {"localhost", "127.0.0.1", "::1"}
    if ip is not None and ip.is_unspecified:  # every address: any of this machine's
        names |= {"localhost", socket.gethostname().lower(), socket.getfqdn().lower()}
    out = set()
    for name in names:
        shown = f"[{name}]" if ":" in name else name
        out.add(f"{shown}:{port}")
        if port == 80:
            out.add(shown)
    return out


class TranslationServer(ThreadingHTTPServer):
    """A threading HTTP server holding the engine and its decoding thread.

    ``clock`` (the :mod:`time` module unless a test injects one, see
    :class:`~.batcher.Clock`) decides the decoder's gathering window, the shutdown's grace
    period and each request's client-timeout deadline."""

    daemon_threads = True
    request_queue_size = 64

    def __init__(
        self,
        address: tuple[str, int],
        engine: Engine,
        wait_s: float = 0.005,
        max_batch: int = 32,
        max_pending: int = 256,
        timeout_s: float = 120.0,
        socket_timeout_s: float = 30.0,
        max_rows: int = 320,
        allow_origins: Iterable[str] = (),
        allow_hosts: Iterable[str] = (),
        clock: Clock = time,
    ) -> None:
        super().__init__(address, Handler)
        self.engine = engine
        self.clock = clock
        self.batcher = Batcher(engine, wait_s, max_batch, max_pending, max_rows, clock)
        self.timeout_s, self.socket_timeout_s = timeout_s, socket_timeout_s
        self.allow_origins = {o.rstrip("/").lower() for o in allow_origins}
        host, port = str(self.server_address[0]), self.server_address[1]  # bound: a str
        self.hosts = _hosts_of(host, port, allow_hosts)
        self.any_ip_host = ipaddress.ip_address(host).is_unspecified if _is_ip(host) else False
        self.started = time.time()
        self.requests = 0
        self.stopping = False
        self._count_lock = threading.Lock()
        self._handlers: set[threading.Thread] = set()

    def process_request(self, request: _Request, client_address: _Address) -> None:
        """A thread per connection (as ThreadingHTTPServer), remembered so that a shutdown
        can wait for the answers in flight."""
        t = threading.Thread(
            target=self._handle_and_forget, args=(request, client_address), daemon=True
        )
        with self._count_lock:
            self._handlers.add(t)
        t.start()

    def _handle_and_forget(self, request: _Request, client_address: _Address) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self._count_lock:
                self._handlers.discard(threading.current_thread())

    def host_allowed(self, value: str) -> bool:
        """Whether a ``Host`` header names this server."""
        value = value.strip().lower()
        if value in self.hosts:
            return True
        if self.any_ip_host:  # listening on every address: an IP literal
            name = (
                value.rpartition(":")[0]
                if value.count(":") == 1 or value.startswith("[")
                else value
            )
            return _is_ip(name.strip("[]"))
        return False

    def stop(self, grace_s: float = 5.0) -> None:
        """Stop accepting (from another thread than serve_forever's), answer or cancel the
        work in flight within ``grace_s`` and wait (briefly) for the answers to be sent."""
        self.stopping = True
        self.shutdown()
        self.batcher.close(grace_s)
        deadline = time.monotonic() + 2.0
        with self._count_lock:
            handlers = list(self._handlers)
        for t in handlers:  # idle keep-alive connections: not waited for
            t.join(max(0.0, deadline - time.monotonic()))

    @property
    def url(self) -> str:
        """``http://HOST:PORT/`` of the bound address."""
        host, port = str(self.server_address[0]), self.server_address[1]  # bound: a str
        return f"http://{host}:{port}/"

    def count(self) -> None:
        """One more request answered (``/health``'s ``requests``)."""
        with self._count_lock:
            self.requests += 1

    def handle_error(self, request: _Request, client_address: _Address) -> None:
        # an exception outside the handler's own guards: one log line, the server goes on
        err = sys.exc_info()[1]
        logger.error(
            "%s: connection error: %s: %s",
            client_address[0],
            type(err).__name__,
            printable(_one_line(err))[:300],
        )

    def server_close(self) -> None:
        super().server_close()
        if getattr(self, "batcher", None) is not None:  # absent when binding failed
            self.batcher.close()


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def start_in_thread(server: socketserver.BaseServer) -> threading.Thread:
    """Serve in a daemon thread (tests, tools); returns the thread."""
    t = threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": 0.1},
        name="groundhog-http",
        daemon=True,
    )
    t.start()
    return t


class Handler(BaseHTTPRequestHandler):
    """One connection's requests (a thread each, :class:`TranslationServer`)."""

    server: TranslationServer
    _cors: dict[str, str]  # the CORS headers of an allowed origin (set by _checked)
    server_version = "groundhog-port"
    error_content_type = "application/json"

    def version_string(self) -> str:
        return self.server_version

    def setup(self) -> None:
        # per server, not per class (typeshed declares it a ClassVar)
        self.timeout = self.server.socket_timeout_s  # type: ignore[misc]
        self._t0 = time.monotonic()
        self._logged = False
        #: clock time by which the request being read must be whole (None: not reading)
        self.deadline: float | None = None
        super().setup()
        self.rfile.close()  # the socket's own reader: replaced, and its reference dropped
        self.rfile = io.BufferedReader(_DeadlineSocketReader(self.connection, self))

    def handle_one_request(self) -> None:
        # the whole next request (line, headers, body) within the client timeout
        self.deadline = self.server.clock.monotonic() + self.server.socket_timeout_s
        try:
            super().handle_one_request()
        finally:
            self.deadline = None
            self.connection.settimeout(self.server.socket_timeout_s)
        if self.server.stopping:
            self.close_connection = True

    def parse_request(self) -> bool:
        self._t0 = time.monotonic()
        self._logged = False
        return super().parse_request()

    def _received(self) -> None:
        """The request is in: answering is bounded by the socket timeout, not the deadline."""
        self.deadline = None
        self.connection.settimeout(self.server.socket_timeout_s)

    # -- answers and the log --------------------------------------------------------------
    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass  # one line per request from _log instead

    def log_message(self, format: str, *args: object) -> None:
        logger.debug("%s %s", self.client_address[0], printable(format % args))

    def _log(self, status: int, size: int, note: str = "") -> None:
        if self._logged:
            return
        self._logged = True
        self.server.count()
        ms = 1000 * (time.monotonic() - self._t0)
        path = printable(_one_line(getattr(self, "path", "") or ""))
        if len(path) > 200:
            path = path[:199] + "\u2026"
        logger.info(
            '%s "%s %s" %d %dB %.1fms%s',
            self.client_address[0],
            printable(getattr(self, "command", None) or "-"),
            path,
            status,
            size,
            ms,
            f" {printable(note)}" if note else "",
        )

    def _send(
        self,
        status: int,
        body: bytes,
        ctype: str,
        headers: Mapping[str, str] | None = None,
        note: str = "",
    ) -> None:
        if self.deadline is not None:  # answering before the body was read (a refusal)
            self._received()
        try:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in {**getattr(self, "_cors", {}), **(headers or {})}.items():
                self.send_header(k, v)
            if status >= 400:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            if getattr(self, "command", None) != "HEAD":
                self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            note = (note + " " if note else "") + "(client gone)"
            self.close_connection = True
        self._log(status, len(body), note)

    def _json(
        self, status: int, obj: object, note: str = "", headers: Mapping[str, str] | None = None
    ) -> None:
        body = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
        self._send(status, body, "application/json; charset=utf-8", headers, note)

    def _error(
        self,
        status: int,
        message: object,
        note: str = "",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self._json(status, {"error": _one_line(message)}, note, headers)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own refusals (bad request line, 414, 501 ...) as one JSON line."""
        try:
            phrase = HTTPStatus(code).phrase
        except ValueError:
            phrase = ""
        self._error(code, message or phrase)

    def _guard(self, route: Callable[[], None]) -> None:
        try:
            route()
        except RequestError as err:
            self._error(err.status, err)
        except TimeoutError:
            self._error(408, "the request was not received in time")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            self._log(499, 0, "(client gone)")
        except Exception as err:  # never let a request take the server down
            logger.exception("internal error answering %s", printable(_one_line(self.path))[:200])
            self._error(500, f"internal error: {type(err).__name__}: {err}")

    def do_GET(self) -> None:
        self._guard(lambda: self._checked(self._get))

    def do_HEAD(self) -> None:
        self._guard(lambda: self._checked(self._get))

    def do_POST(self) -> None:
        self._guard(lambda: self._checked(self._post))

    def do_OPTIONS(self) -> None:
        self._guard(lambda: self._checked(self._preflight))

    # -- who may ask ----------------------------------------------------------------------
    def _checked(self, route: Callable[[], None]) -> None:
        self._cors = {}
        if self.command != "POST":
            self._received()
        host = self.headers.get("Host")
        # HTTP/1.0 clients may send none; browsers always do, and a DNS-rebinding page's
        # requests carry its own domain
        if host is not None and not self.server.host_allowed(host):
            raise RequestError(
                421,
                f"Host {printable(host)[:100]!r} does not name this server "
                "(a page renamed to reach it? DNS rebinding is refused); "
                "serve --allow-host NAME to accept another name",
            )
        origin = self.headers.get("Origin")
        fetch_site = (self.headers.get("Sec-Fetch-Site") or "").lower()
        if origin is not None:
            origin = origin.strip().rstrip("/").lower()
            own = host is not None and origin == f"http://{host.strip().lower()}"
            if not own:
                if origin not in self.server.allow_origins and "*" not in self.server.allow_origins:
                    raise RequestError(
                        403,
                        f"cross-origin request from {printable(origin)[:100]} "
                        "refused: only this server's own page may call it "
                        "(serve --allow-origin ORIGIN to allow that origin)",
                    )
                self._cors = {"Access-Control-Allow-Origin": origin, "Vary": "Origin"}
        elif fetch_site in ("cross-site", "same-site"):
            raise RequestError(
                403,
                "cross-site request refused: only this server's own page "
                "may call it (serve --allow-origin ORIGIN to allow one)",
            )
        route()

    def _preflight(self) -> None:
        if not self._cors:
            raise RequestError(
                405,
                "OPTIONS answers CORS preflights of allowed origins (serve --allow-origin ORIGIN)",
            )
        self._send(
            204,
            b"",
            "text/plain",
            {
                **self._cors,
                "Access-Control-Allow-Methods": "GET, POST",
                "Access-Control-Allow-Headers": "Content-Type",
                "Access-Control-Max-Age": "600",
            },
        )

    # -- routes ---------------------------------------------------------------------------
    def _get(self) -> None:
        path, sep, query = self.path.partition("?")
        if path == "/" and sep:
            return self._legacy(query)
        if path in ("/", "/index.html"):
            return self._static("index.html")
        if path.startswith("/static/") and path[len("/static/") :] in STATIC:
            return self._static(path[len("/static/") :])
        if path == "/health":
            return self._health()
        if path == "/translate":
            raise RequestError(405, "POST a JSON object to /translate")
        raise RequestError(404, f"no such page: {path[:100]}")

    def _post(self) -> None:
        path = self.path.partition("?")[0]
        if path != "/translate":
            raise RequestError(
                404 if path not in ("/", "/health") else 405,
                f"POST goes to /translate, not {path[:100]}",
            )
        payload = self._read_json()
        self._translate(payload)

    def _static(self, name: str) -> None:
        body = resources.files(__package__).joinpath("static").joinpath(name).read_bytes()
        self._send(200, body, STATIC[name], PAGE_HEADERS)

    def _health(self) -> None:
        eng, srv = self.server.engine, self.server
        cfg = eng.exp.cfg
        self._json(
            200,
            {
                "status": "ok",
                "model": str(eng.exp.state_path.name),
                "attention": eng.has_attention,
                "beam_size": eng.beam_size,
                "limits": vars(eng.limits),
                "source_vocabulary": cfg.n_sym_source,
                "target_vocabulary": cfg.n_sym_target,
                "pretokenized": eng.pretokenized,
                "languages": [eng.text.source_lang, eng.text.target_lang],
                "uptime_s": round(time.time() - srv.started, 1),
                "requests": srv.requests,
                "pending": srv.batcher.pending,
                "batches": dict(srv.batcher.stats),
            },
            headers={"Cache-Control": "no-store"},
        )

    # -- decoding -------------------------------------------------------------------------
    def _decode(self, jobs: list[Job]) -> list[Job]:
        limits = self.server.engine.limits
        need = estimated_steps(jobs)
        if need > limits.max_steps:
            raise RequestError(
                413,
                f"this request may take up to {need} hypothesis-steps "
                f"(beam x 3 x source length, summed); at most "
                f"{limits.max_steps}: fewer sentences or a smaller beam",
            )
        budget = Budget(limits.max_steps)
        for job in jobs:
            job.budget = budget
        try:
            futures = self.server.batcher.submit(jobs, client=self.client_address[0])
        except Busy as err:
            raise RequestError(503, err) from None
        except ShuttingDown as err:
            raise RequestError(503, err) from None
        deadline = time.monotonic() + self.server.timeout_s
        try:
            return [f.result(timeout=max(0.0, deadline - time.monotonic())) for f in futures]
        except ShuttingDown as err:
            raise RequestError(503, err) from None
        except (FutureTimeout, CancelledError):
            raise RequestError(503, f"no translation within {self.server.timeout_s:g} s") from None
        finally:
            for job, f in zip(jobs, futures):
                if not f.done():
                    f.cancel()
                    job.abandoned = True  # already decoding: stopped at the next step

    def _legacy(self, query: str) -> None:
        eng = self.server.engine
        try:
            q = legacy_api.parse_query(query, eng.beam_size)
        except legacy_api.QueryError as err:
            raise RequestError(400, err) from None
        if q is None:
            raise RequestError(400, "no source parameter (GET /?source=...)")
        eng.check_beam(q.beamwidth)
        src = eng.prepare(q.source, True if q.tokenized else None)
        [job] = self._decode([Job(src, q.beamwidth, q.ignore_unk, normalize=True, legacy=True)])
        note = f"legacy beam={q.beamwidth} ignore_unk={int(q.ignore_unk)} src={_shown([q.source])}"
        outcome, budget = job.outcome, job.budget
        assert outcome is not None and budget is not None  # decoded, with _decode's budget
        if outcome.error and budget.spent > budget.limit:
            raise RequestError(413, outcome.error)
        if outcome.error:
            raise RequestError(
                422, f"the original sample.py fails on this sentence ({outcome.error})"
            )
        body = eng.legacy_answer(job).encode("ascii")
        self._send(200, body, "text/html", note=note)

    def _read_json(self) -> dict[str, object]:
        limits = self.server.engine.limits
        if self.headers.get("Transfer-Encoding"):
            raise RequestError(411, "send the body with a Content-Length")
        header = self.headers.get("Content-Length")
        if header is None:
            raise RequestError(411, "Content-Length required")
        try:
            length = int(header)
        except ValueError:
            raise RequestError(400, f"bad Content-Length {header[:40]!r}") from None
        if length < 0:
            raise RequestError(400, "bad Content-Length")
        if length > limits.max_body:
            raise RequestError(413, f"body of {length} bytes; at most {limits.max_body}")
        raw = self.rfile.read(length)
        self._received()
        if len(raw) < length:
            raise RequestError(400, f"body ended after {len(raw)} of {length} bytes")
        try:  # bounded: depth, number length, no NaN (a deep body was a 500 traceback)
            payload = load_json(raw, None, "the body", max_depth=MAX_BODY_DEPTH)
        except LegacyInputError as err:
            raise RequestError(400, str(err)) from None
        bad = _lone_surrogate(payload)
        if bad is not None:
            raise RequestError(
                400,
                f"the JSON text {printable(bad)[:80]!r} holds a lone "
                "surrogate (a \\udXXX escape without its pair): not "
                "Unicode text",
            )
        if not isinstance(payload, dict):
            raise RequestError(
                400,
                "the body must be a JSON object such as "
                '{"text": "..."} or {"texts": ["...", "..."]}',
            )
        return payload

    def _translate(self, payload: dict[str, object]) -> None:
        eng = self.server.engine
        unknown = sorted(set(payload) - JSON_FIELDS)
        if unknown:
            raise RequestError(
                400,
                f"unknown field(s) {', '.join(map(repr, unknown))}; "
                f"expected {', '.join(sorted(JSON_FIELDS))}",
            )
        if ("text" in payload) == ("texts" in payload):
            raise RequestError(400, 'give either "text" (one sentence) or "texts" (a list)')
        texts = [payload["text"]] if "text" in payload else payload["texts"]
        if not isinstance(texts, list) or not texts:
            raise RequestError(400, '"texts" must be a non-empty list of strings')
        if len(texts) > eng.limits.max_sentences:
            raise RequestError(
                413, f"{len(texts)} sentences; at most {eng.limits.max_sentences} per request"
            )
        flags: dict[str, bool] = {}
        for name, default in (
            ("ignore_unk", False),
            ("normalize", False),
            ("tokenized", eng.pretokenized),
            ("attention", True),
        ):
            flag = payload.get(name, default)
            if not isinstance(flag, bool):
                raise RequestError(400, f'"{name}" must be true or false')
            flags[name] = flag
        beam_size = eng.check_beam(payload.get("beam_size", eng.beam_size))
        n_best = payload.get("n_best")
        if n_best is not None and (
            isinstance(n_best, bool) or not isinstance(n_best, int) or n_best < 1
        ):
            raise RequestError(400, '"n_best" must be a positive integer')
        sources = [eng.prepare(t, flags["tokenized"]) for t in texts]
        jobs = self._decode(
            [
                Job(
                    s,
                    beam_size,
                    flags["ignore_unk"],
                    flags["normalize"],
                    attention=flags["attention"],
                )
                for s in sources
            ]
        )
        t_ms = round(1000 * (time.monotonic() - self._t0), 1)
        self._json(
            200,
            {
                "results": [eng.result_json(j, n_best) for j in jobs],
                "beam_size": beam_size,
                "ignore_unk": flags["ignore_unk"],
                "normalize": flags["normalize"],
                "tokenized": flags["tokenized"],
                "elapsed_ms": t_ms,
            },
            note=f"beam={beam_size} n={len(texts)} src={_shown(texts)}",
        )
