"""A bounded load test of a running translation server (``tools/load_test.py``).

``clients`` threads send ``requests`` requests in all (alternating the JSON API and the
demo's GET API, or one of them), each with a sentence of the list in turn, to a server on
a loopback address only; every answer is checked (status 200, and the translation equal
to the expected line when expectations are given, else equal for equal sentences).  The
run stops by itself: after the requests, or at ``deadline_s``.  It reports throughput,
latency percentiles and the server's batching counters (from ``/health``).
"""

import http.client
import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import quote_plus, unquote, urlsplit

import numpy as np

from groundhog_port.serve.text import MosesText


def check_loopback(url):
    """``(host, port)`` of ``url``, refused unless every address it names is loopback."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"{url}: expected http://HOST:PORT/")
    port = parts.port or 80
    for info in socket.getaddrinfo(parts.hostname, port, proto=socket.IPPROTO_TCP):
        if not ipaddress.ip_address(info[4][0]).is_loopback:
            raise ValueError(
                f"{url}: {info[4][0]} is not a loopback address; the load test "
                "only targets this machine"
            )
    return parts.hostname, port


def _request(host, port, method, path, body=None, timeout=60.0):
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def health(url):
    host, port = check_loopback(url)
    status, body = _request(host, port, "GET", "/health")
    return json.loads(body) if status == 200 else None


def run(
    url,
    sentences,
    expected=None,
    requests=200,
    clients=8,
    api="mixed",
    beam_size=None,
    deadline_s=300.0,
    target_lang="fr",
):
    """Send the requests; returns a report dict (see :func:`format_report`).

    ``sentences`` are tokenized source lines (as in ``test.en``): the JSON API gets them
    with ``"tokenized": true``, the GET API their detokenized text (the server tokenizes
    it back).  ``expected`` (optional) are the translations ``translate`` writes for them.
    """
    host, port = check_loopback(url)
    text = MosesText("en", target_lang)
    from sacremoses import MosesDetokenizer

    raw = [MosesDetokenizer(lang="en").detokenize(s.split()) for s in sentences]
    before = health(url)
    lock = threading.Lock()
    counter = iter(range(requests))
    latencies, errors, answers, lost = [], [], {}, []
    t_end = time.monotonic() + deadline_s

    def one(i):
        k = i % len(sentences)
        kind = api if api != "mixed" else ("json" if i % 2 == 0 else "legacy")
        if kind == "json":
            payload = {"text": sentences[k], "tokenized": True, "attention": False}
            if beam_size:
                payload["beam_size"] = beam_size
            status, body = _request(host, port, "POST", "/translate", json.dumps(payload).encode())
            if status != 200:
                return kind, k, status, body, None
            r = json.loads(body)["results"][0]
            return kind, k, status, body, (None if r["error"] else r["translation"])
        path = "/?source=" + quote_plus(raw[k]) + (f"&beamwidth={beam_size}" if beam_size else "")
        status, body = _request(host, port, "GET", path)
        if status != 200:
            return kind, k, status, body, None
        return kind, k, status, body, unquote(body.decode("ascii")).split("\n")[0]

    def client():
        while time.monotonic() < t_end:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            t0 = time.monotonic()
            try:
                kind, k, status, body, translation = one(i)
            except (OSError, http.client.HTTPException, ValueError) as err:
                with lock:
                    errors.append(f"request {i}: {type(err).__name__}: {err}")
                    lost.append(i)
                continue
            ms = 1000 * (time.monotonic() - t0)
            with lock:
                latencies.append(ms)
                if status != 200:
                    errors.append(
                        f"request {i} ({kind}, sentence {k + 1}): HTTP {status} {body[:200]!r}"
                    )
                    continue
                if kind == "legacy" and expected is not None:
                    want = text.detokenize(expected[k])
                elif expected is not None:
                    want = expected[k]
                else:
                    want = answers.setdefault((kind, k), translation)
                if translation != want:
                    errors.append(
                        f"request {i} ({kind}, sentence {k + 1}): got {translation!r}, "
                        f"expected {want!r}"
                    )

    t0 = time.monotonic()
    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, t_end - time.monotonic()) + 5)
    wall = time.monotonic() - t0
    after = health(url)
    lat = np.array(latencies) if latencies else np.zeros(1)
    batches = sentences_done = None
    if before and after:
        batches = after["batches"]["batches"] - before["batches"]["batches"]
        sentences_done = after["batches"]["sentences"] - before["batches"]["sentences"]
    done = len(latencies)
    return {
        "requests": requests,
        "answered": done,
        "clients": clients,
        "api": api,
        "errors": errors,
        "unfinished": requests - done - len(lost),
        "wall_s": wall,
        "throughput_rps": done / wall if wall > 0 else 0.0,
        "latency_ms": {p: float(np.percentile(lat, p)) for p in (50, 90, 99)}
        | {"mean": float(lat.mean()), "max": float(lat.max())},
        "decoder_batches": batches,
        "mean_batch": (sentences_done / batches) if batches else None,
        "largest_batch": after["batches"]["largest_batch"] if after else None,
    }


def format_report(r):
    lat = r["latency_ms"]
    lines = [
        f"{r['answered']}/{r['requests']} requests from {r['clients']} clients ({r['api']} API) "
        f"in {r['wall_s']:.2f} s: {r['throughput_rps']:.1f} requests/s",
        f"latency ms: p50 {lat[50]:.1f}  p90 {lat[90]:.1f}  p99 {lat[99]:.1f}  "
        f"mean {lat['mean']:.1f}  max {lat['max']:.1f}",
    ]
    if r["decoder_batches"]:
        lines.append(
            f"decoder: {r['decoder_batches']} batches, {r['mean_batch']:.2f} sentences "
            f"per batch on average, largest {r['largest_batch']}"
        )
    lines.append(f"errors: {len(r['errors'])}, not sent (deadline): {r['unfinished']}")
    lines.extend(f"  {e}" for e in r["errors"][:10])
    return "\n".join(lines)


def heavy_sentences(sentences, n, tokens):
    """``n`` sentences of ``tokens`` tokens each, cut from the tokenized ``sentences`` in turn."""
    words = " ".join(sentences).split()
    out = []
    for i in range(n):
        start = (i * 7) % max(1, len(words) - tokens)
        out.append(" ".join((words * (1 + tokens // max(1, len(words))))[start : start + tokens]))
    return out


@dataclass(frozen=True)
class Heavy:
    """The heavy load of issue 25's scenarios: ``requests`` JSON requests sent at once, each
    of ``sentences`` sentences of ``tokens`` tokens, at beam ``beam`` (``--heavy RxSxT@B``
    of tools/load_test.py)."""

    requests: int
    sentences: int
    tokens: int
    beam: int

    @classmethod
    def parse(cls, text):
        """``"RxSxT@B"`` -> ``Heavy(R, S, T, B)``."""
        return cls(*(int(x) for x in text.replace("@", "x").split("x")))

    def payload(self, sentences, **more):
        """The JSON body of one heavy request, cut from the tokenized ``sentences``."""
        texts = heavy_sentences(sentences, self.sentences, self.tokens)
        return {"texts": texts, "tokenized": True, "beam_size": self.beam, **more}


@dataclass(frozen=True)
class Light:
    """The light client of the fairness scenario: at most ``requests`` requests of one
    ``words``-word sentence, one after the other with ``gap_s`` seconds between them."""

    requests: int = 10
    words: int = 5
    gap_s: float = 0.25


def fairness(
    url,
    sentences,
    heavy=Heavy(9, 32, 100, 50),
    light=Light(),
    heavy_from="127.0.0.2",
    light_from="127.0.0.3",
    start_after_s=1.0,
    deadline_s=600.0,
):
    """Issue 25's scenario: the ``heavy`` requests, all at once from one client address,
    then -- ``start_after_s`` later, while they are being decoded -- the ``light`` requests
    from another address (every 127/8 address is this machine's loopback), for as long as
    heavy requests are unanswered.  Reports the latencies of those light requests
    (p50/p90/max), the heavy answers' statuses and times."""
    host, port = check_loopback(url)
    for addr in (heavy_from, light_from):
        if not ipaddress.ip_address(addr).is_loopback:
            raise ValueError(f"{addr} is not a loopback address")
    light_text = " ".join(sentences[0].split()[: light.words])

    def post(payload, source):
        conn = http.client.HTTPConnection(
            host, port, timeout=deadline_s, source_address=(source, 0)
        )
        try:
            conn.request(
                "POST",
                "/translate",
                json.dumps(payload).encode(),
                {"Content-Type": "application/json"},
            )
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    heavy_payload = heavy.payload(sentences, attention=False)
    heavy_out = []
    t0 = time.monotonic()

    def one_heavy():
        t = time.monotonic()
        try:
            status, _ = post(heavy_payload, heavy_from)
        except (OSError, http.client.HTTPException) as err:
            status = f"{type(err).__name__}"
        heavy_out.append((status, time.monotonic() - t))

    threads = [threading.Thread(target=one_heavy, daemon=True) for _ in range(heavy.requests)]
    for t in threads:
        t.start()
    time.sleep(start_after_s)
    light_ms, light_status = [], []
    while len(light_ms) < light.requests and any(t.is_alive() for t in threads):
        t = time.monotonic()
        status, _ = post({"text": light_text, "tokenized": True, "attention": False}, light_from)
        light_ms.append(1000 * (time.monotonic() - t))
        light_status.append(status)
        time.sleep(light.gap_s)
    light_running = sum(1 for t in threads if t.is_alive())
    for t in threads:
        t.join(max(0.0, t0 + deadline_s - time.monotonic()))
    # a refused light request (503) was not answered: it counts as never answered
    lat = np.array(
        [ms if st == 200 else np.inf for ms, st in zip(light_ms, light_status)] or [np.nan]
    )
    return {
        "heavy": {
            "requests": heavy.requests,
            "sentences": heavy.sentences,
            "tokens": heavy.tokens,
            "beam": heavy.beam,
            "statuses": sorted(str(s) for s, _ in heavy_out),
            "seconds_max": max((d for _, d in heavy_out), default=None),
            "still_running_after_light": light_running,
        },
        "light": {
            "requests": len(light_ms),
            "words": light.words,
            "statuses": light_status,
            "latencies_ms": [round(ms, 1) for ms in light_ms],
            "latency_ms": {p: float(np.percentile(lat, p)) for p in (50, 90)}
            | {"max": float(lat.max())},
        },
        "wall_s": time.monotonic() - t0,
    }


def format_fairness(r):
    h, li = r["heavy"], r["light"]
    lat = li["latency_ms"]
    return "\n".join(
        [
            f"heavy: {h['requests']} requests x {h['sentences']} sentences x {h['tokens']} tokens "
            f"at beam {h['beam']} from one client: statuses {h['statuses']}, the slowest "
            f"{h['seconds_max']:.1f} s; {h['still_running_after_light']} still running after the "
            "light requests",
            f"light: {li['requests']} requests of {li['words']} words from another client while "
            f"the heavy ones ran, one after the other: {li['statuses'].count(200)} answered; "
            f"latency (a refusal counts as never answered) p50 {lat[50]:.0f} ms, p90 {lat[90]:.0f} "
            f"ms, max {lat['max']:.0f} ms; statuses {sorted(set(li['statuses']))}",
            f"wall {r['wall_s']:.1f} s",
        ]
    )


def sigterm_under_load(serve_argv, sentences, heavy=Heavy(3, 32, 100, 50), after_s=3.0, env=None):
    """Start ``python -m groundhog_port serve SERVE_ARGV --port 0`` on 127.0.0.1, send
    the ``heavy`` requests at once, SIGTERM it ``after_s`` later; report its exit status,
    the seconds from the signal to its end and what each client got."""
    with serve_process([*serve_argv, "--host", "127.0.0.1"], env) as (proc, url):
        host, port = check_loopback(url)
        body = json.dumps(heavy.payload(sentences)).encode()
        answers, took, err = sigterm_during(
            proc,
            lambda: _request(host, port, "POST", "/translate", body, 300)[0],
            heavy.requests,
            after_s,
            timeout=300,
        )
    return {
        "exit": proc.returncode,
        "seconds": took,
        "answers": answers,
        "terminate_called": "terminate called" in err,
        "last_line": (err.strip().splitlines() or [""])[-1][:300],
    }


@contextmanager
def serve_process(serve_argv, env=None, cwd=None):
    """``python -m groundhog_port serve SERVE_ARGV --port 0`` in a process of its own (stdout
    and stderr piped, unbuffered): yields ``(process, url)`` once it says where it listens;
    the process is killed if it still runs when the block ends."""
    env = dict(os.environ if env is None else env, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "groundhog_port", "serve", *map(str, serve_argv), "--port", "0"],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        if "listening on " not in line:
            raise ValueError(f"the server did not start: {proc.stderr.read()[-500:]}")
        yield proc, line.split("listening on ")[1].split()[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def sigterm_during(proc, send, clients, after_s, timeout, ready=None):
    """``clients`` threads call ``send()`` (one request; returns its status) at once, and
    ``after_s`` seconds later -- or, given ``ready``, once ``ready()`` has returned (it
    waits until the server is where the signal should find it) -- the server process
    ``proc`` gets SIGTERM.  Returns what each client got (a status, or the name of the
    error), the seconds from the signal to the process's end (at most ``timeout``) and its
    stderr."""
    answers = []

    def one():
        try:
            answers.append(send())
        except (OSError, http.client.HTTPException) as err:
            answers.append(type(err).__name__)

    threads = [threading.Thread(target=one, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    if ready is None:
        time.sleep(after_s)
    else:
        ready()
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=timeout)
    took = time.monotonic() - t0
    for t in threads:
        t.join(60)
    return answers, took, err
