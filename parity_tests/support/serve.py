"""A real `groundhog-port serve` on a loopback port for the serve tests, and HTTP helpers."""

import http.client
import json
from contextlib import contextmanager
from urllib.parse import urlsplit

from sacremoses import MosesDetokenizer

from groundhog_port.cli.commands import serve
from groundhog_port.cli.main import build_parser
from groundhog_port.legacy.vocab import load_word2idx
from groundhog_port.serve.http import start_in_thread
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


def post_json(url, payload, **kw):
    status, headers, body = request(
        url, "POST", "/translate", payload, {"Content-Type": "application/json"}, **kw
    )
    return status, json.loads(body)
