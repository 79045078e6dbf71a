"""``groundhog-port serve`` against a real server on a loopback port: the web demo's GET API
answered as sample_server.py answered, the JSON API equal to ``translate``, limits and
errors, concurrency through the batched search."""

import json
import os
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote_plus, unquote

import numpy as np
import pytest
from sacremoses import MosesDetokenizer

from groundhog_port.harness.trace import TraceFile
from groundhog_port.serve.text import MosesText
from parity_tests.support import loadtest
from parity_tests.support.cases import LEGACY_ROOT, REPO
from parity_tests.support.command_lines import FX, MODEL, STATE
from parity_tests.support.serve import (
    RAW_EN,
    TEST_EN,
    TRANS10,
    ManualClock,
    clocked_server,
    post_json,
    request,
    running_server,
    send_raw,
    serve_exit_status,
    unknown_by_vocabulary,
    until,
)

#: Python 2's urllib.quote leaves these bytes alone (and '/', its default safe)
PY2_SAFE = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-/")


def py2_quote(text):
    return "".join(chr(b) if b in PY2_SAFE else f"%{b:02X}" for b in text.encode("utf-8"))


@pytest.fixture(scope="module")
def server(one_thread):
    with running_server("--max-sentences", "40") as srv:
        yield srv


# -- tokenization -----------------------------------------------------------------------


def test_sacremoses_tokenizes_the_shared_test_sentences_as_test_en():
    """Each test.en line, written out as plain text, tokenizes back to the line."""
    files = sorted(LEGACY_ROOT.glob("*/test.en")) + [FX / "test.en"]
    text = MosesText("en", "fr")
    lines = {l for f in files for l in f.read_text(encoding="utf-8").splitlines()}
    assert len(lines) >= 40
    det = MosesDetokenizer(lang="en")
    for line in sorted(lines):
        raw = det.detokenize(line.split())
        assert raw != line or "&" not in line
        assert text.tokenize(raw) == line.split(), raw


@pytest.mark.parametrize(
    "raw, perl",
    [
        # right-hand sides: tokenizer.perl -l en -q of the GroundHog commit (web-demo/)
        (
            "I don't think Mr. Smith's cat (the big one) costs $5,300.50 -- really?!",
            "I don &apos;t think Mr. Smith &apos;s cat ( the big one ) costs $ 5,300.50 -- really ? !",
        ),
        (
            'He said "hello" & left <quickly> [sic] | ok...',
            "He said &quot; hello &quot; &amp; left &lt; quickly &gt; &#91; sic &#93; &#124; ok ...",
        ),
        ("It's the 1990's, isn't it?", "It &apos;s the 1990 &apos;s , isn &apos;t it ?"),
        ("Dr. Who vs. Mr. T. No. 5 is here.", "Dr. Who vs. Mr. T. No. 5 is here ."),
    ],
)
def test_tokenizer_matches_tokenizer_perl(raw, perl):
    assert MosesText("en", "fr").tokenize(raw) == perl.split()


@pytest.mark.parametrize(
    "tokens, perl",
    [
        # right-hand sides: detokenizer.perl -l fr -q of the GroundHog commit (web-demo/)
        ("il a dit &quot; bonjour &quot; ( oui ) : 5 % ?", 'il a dit "bonjour" (oui) : 5 % ?'),
        (
            "l&apos; homme c&apos; est aujourd&apos; hui , n&apos; est-ce pas !",
            "l'homme c'est aujourd'hui, n'est-ce pas !",
        ),
        ("</s> oui", "</s> oui"),
    ],
)
def test_detokenizer_matches_detokenizer_perl(tokens, perl):
    assert MosesText("en", "fr").detokenize(tokens) == perl


# -- the web demo's GET API -------------------------------------------------------------


def test_legacy_get_answers_as_sample_server(server):
    """Every test sentence, sent as the demo's front end sent it (plain text, urlencoded),
    8 at a time: the body is urllib.quote(detokenized sample.py translation + newline from
    the detokenizer + newline + unknown words)."""
    text = MosesText("en", "fr")

    def get(i):
        return request(server.url, "GET", f"/?ignore_unk=0&source={quote_plus(RAW_EN[i])}")

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(get, range(len(TEST_EN))))
    with_unk = 0
    for i, (status, headers, body) in enumerate(answers):
        assert status == 200 and headers["Content-Type"] == "text/html"
        unknown = unknown_by_vocabulary(TEST_EN[i])
        with_unk += bool(unknown)
        expected = text.detokenize(TRANS10[i]) + "\n" + "\n" + ",".join(unknown)
        assert body.decode("ascii") == py2_quote(expected), i + 1
        assert unquote(body.decode("ascii")).split("\n")[0] == text.detokenize(TRANS10[i])
    assert with_unk >= 8  # MANIFEST: 9 test sentences hold unknown words


def test_legacy_query_quirks(server):
    """A later parameter wins; beamwidth is per request; a part without '=' that is not a
    known parameter is ignored; pre-tokenized text with tokenized=1 (an extension)."""
    i = 1
    base = f"/?source=nothing&junk&beamwidth=1&source={quote_plus(RAW_EN[i])}&beamwidth=10"
    status, _, body = request(server.url, "GET", base)
    assert status == 200
    assert unquote(body.decode()).split("\n")[0] == MosesText().detokenize(TRANS10[i])
    status, _, body2 = request(server.url, "GET", f"/?tokenized=1&source={quote_plus(TEST_EN[i])}")
    assert (status, body2) == (200, body)


def test_legacy_answer_is_the_raw_cost_best_despite_normalize(server):
    """sample_server passes normalize=True but answers trans[0], the raw-cost best."""
    status, data = post_json(
        server.url, {"texts": TEST_EN, "tokenized": True, "normalize": True, "attention": False}
    )
    assert status == 200
    differ = [i for i, r in enumerate(data["results"]) if r["translation"] != TRANS10[i]]
    assert differ, "normalisation changes no choice on this test set: the check is empty"
    i = differ[0]
    _, _, body = request(server.url, "GET", f"/?source={quote_plus(RAW_EN[i])}")
    assert unquote(body.decode()).split("\n")[0] == MosesText().detokenize(TRANS10[i])


# -- the JSON API -----------------------------------------------------------------------


def test_json_api_equals_translate(server):
    """All test sentences in one request: sample.py's recorded translations; the n-best
    lists and costs are those of the literal sample.py loop (groundhog-port translate
    --batch-size 1), float for float."""
    from groundhog_port.search.translator import Translator

    status, data = post_json(server.url, {"texts": TEST_EN, "tokenized": True})
    assert status == 200 and data["beam_size"] == 10
    assert [r["translation"] for r in data["results"]] == TRANS10
    exp = server.engine.exp
    literal = Translator(exp, 10, batch_size=1)
    for i in (0, 5, 12, 33):
        [t] = literal.translate_seqs([exp.parse_source(TEST_EN[i])[0]])
        r = data["results"][i]
        assert [(h["translation"], h["cost"]) for h in r["nbest"]] == t.nbest
        assert r["cost"] == t.cost and r["error"] is None


@pytest.mark.skipif(
    not (LEGACY_ROOT / "search" / "trans_beam10_normalize.txt").is_file(),
    reason=f"recorded traces not found at {LEGACY_ROOT}",
)
def test_json_api_normalize_equals_recorded():
    recorded = (
        (LEGACY_ROOT / "search" / "trans_beam10_normalize.txt")
        .read_text(encoding="utf-8")
        .splitlines()
    )
    with running_server("--max-sentences", "40") as srv:
        status, data = post_json(
            srv.url, {"texts": TEST_EN, "tokenized": True, "normalize": True, "attention": False}
        )
    assert status == 200
    assert [r["translation"] for r in data["results"]] == recorded
    for r in data["results"]:
        for h in r["nbest"]:
            n = len(h["translation"].split()) + 1  # end-of-sequence counted
            assert h["cost"] == pytest.approx(h["raw_cost"] / n, rel=1e-15)


@pytest.mark.skipif(
    not (LEGACY_ROOT / "search" / "trace.h5").is_file(),
    reason=f"recorded traces not found at {LEGACY_ROOT}",
)
def test_attention_equals_recorded_alignment(server):
    """Where the translation is the reference sentence, its attention is the alignment
    Theano recorded for that pair (trace.h5 /pairs, atol 1e-5)."""
    status, data = post_json(server.url, {"texts": TEST_EN, "tokenized": True})
    checked = 0
    with TraceFile(LEGACY_ROOT / "search" / "trace.h5") as tr:
        for i in tr.pair_indices():
            pair = tr.pairs(i)
            k = TEST_EN.index(pair["src_line"]) if pair["src_line"] in TEST_EN else None
            if k is None or data["results"][k]["translation"] != pair["trg_line"]:
                continue
            att = data["results"][k]["attention"]
            assert att["source"] == TEST_EN[k].split() + ["<eos>"]
            assert att["target"] == pair["trg_line"].split() + ["<eos>"]
            np.testing.assert_allclose(
                np.array(att["weights"]), pair["alignment"][:, :, 0], rtol=0, atol=1e-5
            )
            checked += 1
    assert checked >= 3


def test_json_unknown_words_and_options(server):
    k = next(i for i, l in enumerate(TEST_EN) if len(unknown_by_vocabulary(l)) >= 2)
    status, data = post_json(
        server.url, {"text": RAW_EN[k], "beam_size": 3, "n_best": 2, "ignore_unk": True}
    )
    assert status == 200 and data["beam_size"] == 3 and data["ignore_unk"] is True
    r = data["results"][0]
    assert r["tokens"] == TEST_EN[k].split()
    assert r["unknown_words"] == unknown_by_vocabulary(TEST_EN[k])
    assert [r["tokens"][p] for p in r["unknown_positions"]] == r["unknown_words"]
    assert len(r["nbest"]) <= 2 and "UNK" not in r["translation"].split()
    assert r["detokenized"] == MosesText().detokenize(r["translation"])


# -- limits and errors ------------------------------------------------------------------


BAD = [
    ("GET", "/?ignore_unk=0", None, {}, 400, "no source parameter"),
    ("GET", "/?source", None, {}, 400, "without a value"),
    ("GET", "/?source=a&beamwidth=ten", None, {}, 400, "not an integer"),
    ("GET", "/?source=a&beamwidth=0", None, {}, 400, "outside 1..50"),
    ("GET", "/?source=a&beamwidth=51", None, {}, 400, "outside 1..50"),
    ("GET", "/?source=" + "a+" * 101, None, {}, 413, "at most 100"),
    ("GET", "/nowhere", None, {}, 404, "no such page"),
    ("GET", "/translate", None, {}, 405, "POST"),
    ("PUT", "/translate", b"{}", {}, 501, "Unsupported method"),
    ("POST", "/translate", b"{", {}, 400, "not UTF-8 JSON"),
    ("POST", "/translate", b"\xff\xfe", {}, 400, "not UTF-8 JSON"),
    ("POST", "/translate", b"[1]", {}, 400, "JSON object"),
    # issue 40: a body nested at any depth, or a number of thousands of digits, was a 500
    # with a traceback in the log (RecursionError / ValueError of int())
    ("POST", "/translate", b"[" * 30000 + b"]" * 30000, {}, 400, "nested deeper than 8"),
    ("POST", "/translate", b'{"text": [[[[[[[[["a"]]]]]]]]]}', {}, 400, "nested deeper than 8"),
    (
        "POST",
        "/translate",
        b'{"text": "a", "n_best": ' + b"9" * 5000 + b"}",
        {},
        400,
        "a number of 5000",
    ),
    ("POST", "/translate", b'{"text": "a", "n_best": NaN}', {}, 400, "NaN is not JSON"),
    ("POST", "/translate", {"txt": "a"}, {}, 400, "unknown field"),
    ("POST", "/translate", {"text": "a", "texts": ["b"]}, {}, 400, "either"),
    ("POST", "/translate", {"texts": []}, {}, 400, "non-empty list"),
    ("POST", "/translate", {"texts": ["a"] * 41}, {}, 413, "at most 40"),
    ("POST", "/translate", {"text": "a " * 101}, {}, 413, "at most 100"),
    ("POST", "/translate", {"text": "a" * 2001}, {}, 413, "2001 characters"),
    ("POST", "/translate", {"text": "a", "beam_size": "10"}, {}, 400, "integer"),
    ("POST", "/translate", {"text": "a", "beam_size": True}, {}, 400, "integer"),
    ("POST", "/translate", {"text": "a", "normalize": 1}, {}, 400, "true or false"),
    ("POST", "/translate", {"text": "a", "n_best": 0}, {}, 400, "positive"),
    ("POST", "/translate", {"text": None}, {}, 400, "must be a string"),
    ("POST", "/health", b"{}", {}, 405, "POST goes to /translate"),
    ("POST", "/translate", b"x" * 10, {"Content-Length": "70000"}, 413, "at most 65536"),
]


@pytest.mark.parametrize("method, path, body, headers, status, words", BAD)
def test_bad_requests_get_a_4xx_with_one_json_line(
    server, method, path, body, headers, status, words
):
    got, hdrs, raw = request(server.url, method, path, body, headers)
    assert got == status
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1 and b"Traceback" not in raw
    assert words in json.loads(raw)["error"]
    assert hdrs["Content-Type"].startswith("application/json")


def test_broken_requests_never_crash_the_server(server):
    answers = [
        send_raw(
            server,
            b"POST /translate HTTP/1.1\r\nHost: localhost:%d\r\n\r\n"  # no length
            % server.server_address[1],
        ),
        send_raw(server, b'POST /translate HTTP/1.1\r\nContent-Length: 9\r\n\r\n{"te'),  # cut short
        send_raw(server, b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n"),  # too long
        send_raw(
            server, b"POST /translate HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        ),
    ]
    # an HTTP/0.9-style line: the answer is the body alone (no status line in HTTP/0.9)
    assert "Bad request syntax" in json.loads(send_raw(server, b"GARBAGE\r\n"))["error"]
    for a, status in zip(answers, (411, 400, 414, 411)):
        head, _, body = a.partition(b"\r\n\r\n")
        assert head.split()[1] == str(status).encode(), a[:200]
        assert "error" in json.loads(body)
    status, data = post_json(server.url, {"text": RAW_EN[0]})
    assert status == 200 and data["results"][0]["translation"] == TRANS10[0]


def test_health(server):
    status, headers, body = request(server.url, "GET", "/health")
    h = json.loads(body)
    assert status == 200 and h["status"] == "ok" and h["attention"] is True
    assert h["beam_size"] == 10 and h["limits"]["max_beam"] == 50 and h["requests"] >= 1


def test_page_and_its_files_are_served_locally(server):
    status, headers, body = request(server.url, "GET", "/")
    page = body.decode()
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert "default-src 'self'" in headers["Content-Security-Policy"]
    assert "http://" not in page and "https://" not in page  # no CDN
    for name in ("app.js", "app.css"):
        assert f"/static/{name}" in page
        status, _, body = request(server.url, "GET", f"/static/{name}")
        assert status == 200 and b"https://" not in body and b"http://" not in body


def test_load_test_small(server):
    """The load test tool, small: 40 requests from 4 clients, both APIs, all answers equal
    to sample.py's translations, no error.  (Whether its requests happened to share a batch
    depends on the machine's speed: test_concurrent_requests_share_one_batch shows it.)"""
    report = loadtest.run(server.url, TEST_EN, TRANS10, requests=40, clients=4, api="mixed")
    assert report["errors"] == [] and report["answered"] == 40 and report["unfinished"] == 0


def test_concurrent_requests_share_one_batch(one_thread):
    """Requests that arrive while the decoder gathers (--batch-wait-ms) are decoded in one
    batch, both APIs together, each answered as alone.  Ordered by events, not by time: the
    server's clock is a ManualClock, so the gathering window that the first request opens
    ends only when the test lets the clock run, once all 4 requests are queued."""
    clock = ManualClock()
    answers = {}

    def ask(i):
        if i % 2:
            _, _, body = request(srv.url, "GET", f"/?source={quote_plus(RAW_EN[i])}")
            answers[i] = unquote(body.decode("ascii")).split("\n")[0]
        else:
            answers[i] = post_json(srv.url, {"text": TEST_EN[i], "tokenized": True})[1]

    with clocked_server(clock) as srv:
        batcher = srv.batcher
        clients = [threading.Thread(target=ask, args=(i,), daemon=True) for i in range(4)]
        clients[0].start()
        clock.wait_sleeps(1)  # the decoder holds the first request and gathers
        for c in clients[1:]:
            c.start()
        until(lambda: batcher.pending == 4, "the 4 requests queued")
        assert batcher.stats["batches"] == 0
        clock.run_free()  # the window ends (and no later one waits for the test)
        for c in clients:
            c.join(120)
        stats = dict(batcher.stats)
    assert stats["batches"] == 1 and stats["largest_batch"] == 4, stats
    assert stats["sentences"] == 4 and stats["failures"] == 0, stats
    text = MosesText()
    for i in (0, 2):
        assert answers[i]["results"][0]["translation"] == TRANS10[i]
    for i in (1, 3):
        assert answers[i] == text.detokenize(TRANS10[i])


def test_a_batch_mixing_ignore_unk_answers_each_request_as_alone(one_thread):
    """Requests that differ in a per-request option (``ignore_unk``) decoded in one batch:
    each gets the n-best list of its own option, what it gets alone.  The output layer's
    bias of the unknown word is raised first, so that ``UNK`` wins often and the option
    changes the n-best lists (the case tells the options apart)."""
    import torch

    clock = ManualClock()
    flags = [False, True, False, True]
    together, alone = {}, {}

    def ask(i, into):
        payload = {"text": TEST_EN[i // 2], "tokenized": True, "ignore_unk": flags[i]}
        into[i] = post_json(srv.url, dict(payload, n_best=5, beam_size=5))[1]["results"][0]

    with clocked_server(clock) as srv:
        exp = srv.engine.exp
        with torch.no_grad():
            exp.model.decoder.output_layer.b[exp.state["unk_sym_target"]] += 12.0
        batcher = srv.batcher
        clients = [threading.Thread(target=ask, args=(i, together), daemon=True) for i in range(4)]
        clients[0].start()
        clock.wait_sleeps(1)  # the decoder holds the first request and gathers
        for c in clients[1:]:
            c.start()
        until(lambda: batcher.pending == 4, "the 4 requests queued")
        clock.run_free()
        for c in clients:
            c.join(120)
        assert batcher.stats["largest_batch"] == 4, dict(batcher.stats)
        for i in range(4):  # one at a time now: each its own batch
            ask(i, alone)
    assert together == alone
    assert together[0]["nbest"] != together[1]["nbest"]  # ignore_unk changed the lists
    assert any("UNK" in h["translation"] for h in together[0]["nbest"])


# -- the command ------------------------------------------------------------------------


def test_serve_command_starts_answers_and_stops_on_sigterm():
    env = dict(os.environ, OMP_NUM_THREADS="1")
    with loadtest.serve_process(["--state", STATE, MODEL], env, cwd=REPO) as (proc, url):
        assert url.startswith("http://127.0.0.1:"), url
        try:
            status, _, body = request(url, "GET", f"/?source={quote_plus(RAW_EN[2])}")
            assert status == 200
            assert unquote(body.decode()).split("\n")[0] == MosesText().detokenize(TRANS10[2])
        finally:
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    log = [l for l in err.splitlines() if "groundhog_port.serve:" in l]
    assert any('"GET /?source=' in l and " 200 " in l and "ms" in l and "src=" in l for l in log)


@pytest.mark.parametrize(
    "args, words",
    [
        (["--beam-size", "0"], "--beam-size must be at least 1"),
        (["--beam-size", "60"], "above --max-beam"),
        (["--port", "70000"], "expected 0..65535"),
    ],
)
def test_serve_usage_errors_are_one_line(args, words, capsys):
    assert serve_exit_status(["--state", str(STATE), str(MODEL), *args]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_serve_port_in_use_is_one_line(server, capsys):
    port = str(server.server_address[1])
    assert serve_exit_status(["--state", str(STATE), str(MODEL), "--port", port]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"cannot listen on 127.0.0.1:{port}" in err[0]
