"""A real `groundhog-port serve` on a loopback port for the serve tests, and HTTP helpers."""

import http.client
import json
import socket
import threading
import time
from contextlib import contextmanager
from urllib.parse import urlsplit

from sacremoses import MosesDetokenizer

from groundhog_port.cli.commands import serve
from groundhog_port.cli.main import build_parser
from groundhog_port.legacy.vocab import load_word2idx
from groundhog_port.serve.http import TranslationServer, start_in_thread
from parity_tests.support.command_lines import FX, MODEL, STATE

TEST_EN = (FX / "test.en").read_text(encoding="utf-8").splitlines()
#: what the original sample.py wrote for test.en at beam 10 (recorded with the fixture)
TRANS10 = (FX / "trans_beam10.txt").read_text(encoding="utf-8").splitlines()
#: test.en as plain text, as a person types it (the server tokenizes it back)
RAW_EN = [MosesDetokenizer(lang="en").detokenize(line.split()) for line in TEST_EN]


def unknown_by_vocabulary(line):
    """The tokens parse_input maps to UNK (id 1): not in vocab.en, or id >= n_sym_source."""
    w2i = load_word2idx(FX / "vocab.en.pkl")
    return [w for w in line.split() if w2i.get(w, 1) == 1 or w2i[w] >= 201]


@contextmanager
def running_server(*extra):
    """The fixture model served on 127.0.0.1 (a free port), in this process."""
    args = build_parser().parse_args(
        ["serve", "--state", str(STATE), str(MODEL), "--host", "127.0.0.1", "--port", "0", *extra]
    )
    server = serve.build(args)
    start_in_thread(server)
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def request(url, method, path, body=None, headers=None, timeout=120, source=None):
    """``(status, headers, body bytes)`` of one request (from the loopback address
    ``source``, e.g. ``127.0.0.2``, to be another client)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(
        parts.hostname, parts.port, timeout=timeout, source_address=(source, 0) if source else None
    )
    try:
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


def send_raw(server, data):
    """Send the bytes ``data`` to ``server`` on a connection of its own, end the sending
    side, and return every byte of the answer: read until the server closes the connection
    (which it does after logging the request)."""
    with socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=30) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)  # the server sees the end of what was sent
        chunks = []
        while True:
            c = s.recv(65536)
            if not c:
                break
            chunks.append(c)
    return b"".join(chunks)


def post_json(url, payload, **kw):
    status, headers, body = request(
        url, "POST", "/translate", payload, {"Content-Type": "application/json"}, **kw
    )
    return status, json.loads(body)


#: how long a test waits for an event that a working server brings at once (a machine
#: stalled this long fails the test: a liveness bound, not a measured speed)
PATIENCE_S = 120.0


def until(condition, what, timeout_s=PATIENCE_S):
    """Wait until ``condition()`` is true (polled); ``what`` names it when it never is."""
    end = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < end, f"never happened: {what}"
        time.sleep(0.002)


class ManualClock:
    """The server's clock in the tests that order by events (``groundhog_port.serve.batcher
    .Clock``): its time moves only when the test calls :meth:`advance`, and ``sleep(s)``
    returns once the test has moved it ``s`` past the call -- so the decoder's gathering
    window ends when the test says, after the requests it wants together are queued.
    :meth:`run_free` ends every sleep at once from then on (the decoder gathers nothing).
    ``sleeps`` counts the sleeps begun (the decoder's gathering windows), ``readings`` the
    times it was read (a request's deadline set, or checked before each receive)."""

    def __init__(self, start=1000.0):
        self._now = start
        self._free = False
        self._cond = threading.Condition()
        self.sleeps = 0
        self.readings = 0

    def monotonic(self):
        with self._cond:
            self.readings += 1
            return self._now

    def sleep(self, seconds, /):
        with self._cond:
            self.sleeps += 1
            self._cond.notify_all()
            end = self._now + seconds
            self._cond.wait_for(lambda: self._free or self._now >= end)

    def advance(self, seconds):
        with self._cond:
            self._now += seconds
            self._cond.notify_all()

    def run_free(self):
        with self._cond:
            self._free = True
            self._cond.notify_all()

    def wait_sleeps(self, n, timeout_s=PATIENCE_S):
        """Wait until ``n`` sleeps have begun (the decoder is in its ``n``-th window)."""
        with self._cond:
            assert self._cond.wait_for(lambda: self.sleeps >= n, timeout_s), (
                f"{self.sleeps} gathering windows began, not {n}"
            )


@contextmanager
def clocked_server(clock, **settings):
    """The fixture model served on 127.0.0.1 (a free port), in this process, on ``clock``
    (a :class:`ManualClock`); ``settings``: TranslationServer's (``max_pending=8`` ...).
    The clock runs free when the block ends, so that nothing waits on it any more."""
    from groundhog_port.legacy.loading import open_experiment
    from groundhog_port.serve.engine import Engine

    engine = Engine(open_experiment(STATE, MODEL))
    server = TranslationServer(("127.0.0.1", 0), engine, clock=clock, **settings)
    start_in_thread(server)
    try:
        yield server
    finally:
        clock.run_free()
        server.shutdown()
        server.server_close()


def serve_exit_status(argv, timeout=120):
    """``groundhog-port serve ARGV``'s exit status, from a thread: were an option that makes
    it refuse to start not used, it would serve forever (and this fails instead of hanging)."""
    from groundhog_port.cli import main as cli

    done = []

    def serve():
        try:
            done.append(cli.main(["serve", *map(str, argv)]))
        except BaseException as err:  # noqa: BLE001  (given to the test's thread below)
            done.append(err)

    run = threading.Thread(target=serve, daemon=True)
    run.start()
    run.join(timeout=timeout)
    assert done, f"serve {' '.join(map(str, argv))} did not stop within {timeout} s: it serves"
    if isinstance(done[0], BaseException):
        raise done[0]
    return done[0]
