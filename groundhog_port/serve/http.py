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
milliseconds, and what was asked (beam size, the sentences, shortened).
"""
import json
import logging
import sys
import threading
import time
from concurrent.futures import CancelledError, TimeoutError as FutureTimeout
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources

from . import legacy_api
from .batcher import Batcher, Busy
from .engine import Job, RequestError

logger = logging.getLogger("groundhog_port.serve")

STATIC = {"index.html": "text/html; charset=utf-8",
          "app.js": "text/javascript; charset=utf-8",
          "app.css": "text/css; charset=utf-8"}
JSON_FIELDS = {"text", "texts", "beam_size", "ignore_unk", "normalize", "tokenized",
               "attention", "n_best"}
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}
#: characters of a sentence quoted in the access log
LOG_CHARS = 80


def _one_line(text):
    return " ".join(str(text).split())


def _shown(texts):
    out = []
    for t in texts:
        t = _one_line(t)
        out.append(json.dumps(t if len(t) <= LOG_CHARS else t[:LOG_CHARS - 1] + "\u2026",
                              ensure_ascii=False))
    return " ".join(out)


class TranslationServer(ThreadingHTTPServer):
    """A threading HTTP server holding the engine and its decoding thread."""
    daemon_threads = True
    request_queue_size = 64

    def __init__(self, address, engine, wait_s=0.005, max_batch=32, max_pending=256,
                 timeout_s=120.0, socket_timeout_s=30.0):
        super().__init__(address, Handler)
        self.engine = engine
        self.batcher = Batcher(engine, wait_s, max_batch, max_pending)
        self.timeout_s, self.socket_timeout_s = timeout_s, socket_timeout_s
        self.started = time.time()
        self.requests = 0
        self._count_lock = threading.Lock()

    @property
    def url(self):
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/"

    def count(self):
        with self._count_lock:
            self.requests += 1

    def handle_error(self, request, client_address):
        # an exception outside the handler's own guards: one log line, the server goes on
        err = sys.exc_info()[1]
        logger.error("%s: connection error: %s: %s", client_address[0], type(err).__name__,
                     _one_line(err))

    def server_close(self):
        super().server_close()
        if getattr(self, "batcher", None) is not None:   # absent when binding failed
            self.batcher.close()


def start_in_thread(server):
    """Serve in a daemon thread (tests, tools); returns the thread."""
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                         name="groundhog-http", daemon=True)
    t.start()
    return t


class Handler(BaseHTTPRequestHandler):
    server_version = "groundhog-port"
    error_content_type = "application/json"

    def version_string(self):
        return self.server_version

    def setup(self):
        self.timeout = self.server.socket_timeout_s
        self._t0 = time.monotonic()
        self._logged = False
        super().setup()

    def parse_request(self):
        self._t0 = time.monotonic()
        self._logged = False
        return super().parse_request()

    # -- answers and the log --------------------------------------------------------------
    def log_request(self, code="-", size="-"):
        pass                              # one line per request from _log instead

    def log_message(self, format, *args):
        logger.debug("%s %s", self.client_address[0], format % args)

    def _log(self, status, size, note=""):
        if self._logged:
            return
        self._logged = True
        self.server.count()
        ms = 1000 * (time.monotonic() - self._t0)
        path = _one_line(getattr(self, "path", "") or "")
        if len(path) > 200:
            path = path[:199] + "\u2026"
        logger.info('%s "%s %s" %d %dB %.1fms%s', self.client_address[0],
                    getattr(self, "command", None) or "-", path, status, size, ms,
                    f" {note}" if note else "")

    def _send(self, status, body, ctype, headers=None, note=""):
        try:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
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

    def _json(self, status, obj, note="", headers=None):
        body = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
        self._send(status, body, "application/json; charset=utf-8", headers, note)

    def _error(self, status, message, note="", headers=None):
        self._json(status, {"error": _one_line(message)}, note, headers)

    def send_error(self, code, message=None, explain=None):
        """http.server's own refusals (bad request line, 414, 501 ...) as one JSON line."""
        try:
            phrase = HTTPStatus(code).phrase
        except ValueError:
            phrase = ""
        self._error(code, message or phrase)

    def _guard(self, route):
        try:
            route()
        except RequestError as err:
            self._error(err.status, err)
        except TimeoutError:
            self._error(408, "the request was not received in time")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            self._log(499, 0, "(client gone)")
        except Exception as err:           # never let a request take the server down
            logger.exception("internal error answering %s", _one_line(self.path)[:200])
            self._error(500, f"internal error: {type(err).__name__}: {err}")

    def do_GET(self):
        self._guard(self._get)

    def do_HEAD(self):
        self._guard(self._get)

    def do_POST(self):
        self._guard(self._post)

    # -- routes ---------------------------------------------------------------------------
    def _get(self):
        path, sep, query = self.path.partition("?")
        if path == "/" and sep:
            return self._legacy(query)
        if path in ("/", "/index.html"):
            return self._static("index.html")
        if path.startswith("/static/") and path[len("/static/"):] in STATIC:
            return self._static(path[len("/static/"):])
        if path == "/health":
            return self._health()
        if path == "/translate":
            raise RequestError(405, "POST a JSON object to /translate")
        raise RequestError(404, f"no such page: {path[:100]}")

    def _post(self):
        path = self.path.partition("?")[0]
        if path != "/translate":
            raise RequestError(404 if path not in ("/", "/health") else 405,
                               f"POST goes to /translate, not {path[:100]}")
        payload = self._read_json()
        self._translate(payload)

    def _static(self, name):
        body = resources.files(__package__).joinpath("static", name).read_bytes()
        self._send(200, body, STATIC[name], PAGE_HEADERS)

    def _health(self):
        eng, srv = self.server.engine, self.server
        cfg = eng.exp.cfg
        self._json(200, {
            "status": "ok",
            "model": str(eng.exp.state_path.name),
            "attention": eng.has_attention,
            "beam_size": eng.beam_size,
            "limits": vars(eng.limits),
            "source_vocabulary": cfg.n_sym_source, "target_vocabulary": cfg.n_sym_target,
            "pretokenized": eng.pretokenized,
            "languages": [eng.text.source_lang, eng.text.target_lang],
            "uptime_s": round(time.time() - srv.started, 1),
            "requests": srv.requests,
            "pending": srv.batcher.pending,
            "batches": dict(srv.batcher.stats),
        }, headers={"Cache-Control": "no-store"})

    # -- decoding -------------------------------------------------------------------------
    def _decode(self, jobs):
        try:
            futures = self.server.batcher.submit(jobs)
        except Busy as err:
            raise RequestError(503, err) from None
        deadline = time.monotonic() + self.server.timeout_s
        try:
            return [f.result(timeout=max(0.0, deadline - time.monotonic())) for f in futures]
        except (FutureTimeout, CancelledError):
            for f in futures:
                f.cancel()
            raise RequestError(503, f"no translation within {self.server.timeout_s:g} s") from None

    def _legacy(self, query):
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
        if job.outcome.error:
            raise RequestError(422, f"the original sample.py fails on this sentence "
                                    f"({job.outcome.error})")
        body = eng.legacy_answer(job).encode("ascii")
        self._send(200, body, "text/html", note=note)

    def _read_json(self):
        limits = self.server.engine.limits
        if self.headers.get("Transfer-Encoding"):
            raise RequestError(411, "send the body with a Content-Length")
        length = self.headers.get("Content-Length")
        if length is None:
            raise RequestError(411, "Content-Length required")
        try:
            length = int(length)
        except ValueError:
            raise RequestError(400, f"bad Content-Length {length[:40]!r}") from None
        if length < 0:
            raise RequestError(400, "bad Content-Length")
        if length > limits.max_body:
            raise RequestError(413, f"body of {length} bytes; at most {limits.max_body}")
        raw = self.rfile.read(length)
        if len(raw) < length:
            raise RequestError(400, f"body ended after {len(raw)} of {length} bytes")
        try:
            payload = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as err:
            raise RequestError(400, f"the body is not UTF-8 JSON: {err}") from None
        if not isinstance(payload, dict):
            raise RequestError(400, "the body must be a JSON object such as "
                                    '{"text": "..."} or {"texts": ["...", "..."]}')
        return payload

    def _translate(self, payload):
        eng = self.server.engine
        unknown = sorted(set(payload) - JSON_FIELDS)
        if unknown:
            raise RequestError(400, f"unknown field(s) {', '.join(map(repr, unknown))}; "
                                    f"expected {', '.join(sorted(JSON_FIELDS))}")
        if ("text" in payload) == ("texts" in payload):
            raise RequestError(400, 'give either "text" (one sentence) or "texts" (a list)')
        texts = [payload["text"]] if "text" in payload else payload["texts"]
        if not isinstance(texts, list) or not texts:
            raise RequestError(400, '"texts" must be a non-empty list of strings')
        if len(texts) > eng.limits.max_sentences:
            raise RequestError(413, f"{len(texts)} sentences; at most {eng.limits.max_sentences} "
                                    "per request")
        flags = {}
        for name, default in (("ignore_unk", False), ("normalize", False),
                              ("tokenized", eng.pretokenized), ("attention", True)):
            flags[name] = payload.get(name, default)
            if not isinstance(flags[name], bool):
                raise RequestError(400, f'"{name}" must be true or false')
        beam = eng.check_beam(payload.get("beam_size", eng.beam_size))
        n_best = payload.get("n_best")
        if n_best is not None and (isinstance(n_best, bool) or not isinstance(n_best, int)
                                   or n_best < 1):
            raise RequestError(400, '"n_best" must be a positive integer')
        sources = [eng.prepare(t, flags["tokenized"]) for t in texts]
        jobs = self._decode([Job(s, beam, flags["ignore_unk"], flags["normalize"],
                                 attention=flags["attention"]) for s in sources])
        t_ms = round(1000 * (time.monotonic() - self._t0), 1)
        self._json(200, {
            "results": [eng.result_json(j, n_best) for j in jobs],
            "beam_size": beam, "ignore_unk": flags["ignore_unk"],
            "normalize": flags["normalize"], "tokenized": flags["tokenized"], "elapsed_ms": t_ms,
        }, note=f"beam={beam} n={len(texts)} src={_shown(texts)}")
