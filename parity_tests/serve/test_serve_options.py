"""``groundhog-port serve``'s options, given on its command line to a server process of its
own (issue 53, item 2; ``tools/flag_table.py``): each changes an answer -- a limit set below
its default refuses what the default takes, the default beam gives the original's
translation at that beam, the languages choose Moses' rules, the hosts and origins the
checks -- so that a server started without it answers otherwise."""

import json
import os
import shutil
import signal
import socket
from urllib.parse import urlsplit

import numpy as np
import pytest
from sacremoses import MosesDetokenizer, MosesTokenizer

from parity_tests.support import loadtest
from parity_tests.support.cases import LEGACY_ROOT, REPO
from parity_tests.support.command_lines import FX, MODEL, STATE
from parity_tests.support.models import upper_cased_vocabularies
from parity_tests.support.serve import TEST_EN, TRANS10, request, serve_exit_status

#: the server's flags (``--port 0`` is added); every limit below its default
LIMITED = ["--beam-size", "1", "--max-beam", "6", "--max-sentences", "2", "--max-tokens", "12",
           "--max-chars", "60", "--max-body", "400", "--max-steps", "300",
           "--allow-host", "example.test", "--allow-origin", "http://friend.example",
           "--source-lang", "fr", "--target-lang", "en"]  # fmt: skip
CASE = LEGACY_ROOT / "search"


@pytest.fixture(scope="module")
def limited():
    """The shared ``search`` model served with :data:`LIMITED`: ``url``."""
    if not (CASE / "trans_beam1.txt").is_file():
        pytest.skip(f"the shared search recording is not at {CASE}")
    argv = ["--state", CASE / "search_state.pkl", CASE / "search_model.npz", *LIMITED]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    with loadtest.serve_process(argv, env, cwd=REPO) as (proc, url):
        yield url


def _post(url, payload, headers=None):
    head = {"Content-Type": "application/json", **(headers or {})}
    status, hdrs, body = request(url, "POST", "/translate", payload, head)
    return status, hdrs, json.loads(body)


def test_beam_size_is_the_default_beam(limited):
    """``--beam-size 1``: a request naming no beam gets sample.py's beam-1 translation (on
    the sentences where beam 1 and the default 10 differ in the recording)."""
    src = (CASE / "test.en").read_text(encoding="utf-8").splitlines()
    one = (CASE / "trans_beam1.txt").read_text(encoding="utf-8").splitlines()
    ten = (CASE / "trans_beam10.txt").read_text(encoding="utf-8").splitlines()
    differ = [i for i in range(min(len(one), len(ten))) if one[i] != ten[i] and one[i]][:2]
    assert differ
    for i in differ:
        status, _, got = _post(limited, {"text": src[i], "tokenized": True})
        assert status == 200 and got["results"][0]["translation"] == one[i], got


@pytest.mark.parametrize(
    "payload, headers, status, words",
    [
        ({"text": "a", "beam_size": 7}, {}, 400, "outside 1..6"),  # --max-beam
        ({"texts": ["a", "b", "c"]}, {}, 413, "at most 2"),  # --max-sentences
        ({"text": "a " * 13}, {}, 413, "at most 12"),  # --max-tokens
        ({"text": "a" * 61}, {}, 413, "61 characters"),  # --max-chars
        (b"x" * 10, {"Content-Length": "401"}, 413, "at most 400"),  # --max-body
        # --max-steps: 2 sentences x beam 6 x 3 x 11 steps = 396 > 300, refused undecoded
        ({"texts": ["a b c d e f g h i j"] * 2, "beam_size": 6}, {}, 413, "at most 300"),
    ],
    ids=["max-beam", "max-sentences", "max-tokens", "max-chars", "max-body", "max-steps"],
)
def test_limits_below_their_defaults_refuse(limited, payload, headers, status, words):
    head = {"Content-Type": "application/json", **headers}
    got, _, body = request(limited, "POST", "/translate", payload, head)
    assert got == status and words in body.decode(), body[:400]


def test_hosts_and_origins_allowed(limited):
    """``--allow-host example.test``: a Host naming it is answered (another name: 421);
    ``--allow-origin``: a page of that origin is answered with the CORS header."""
    port = urlsplit(limited).port
    status, _, _ = _post(limited, {"text": "a"}, {"Host": f"example.test:{port}"})
    assert status == 200
    status, _, _ = _post(limited, {"text": "a"}, {"Host": f"other.test:{port}"})
    assert status == 421
    origin = {"Origin": "http://friend.example", "Content-Type": "text/plain"}
    status, hdrs, _ = request(limited, "POST", "/translate", json.dumps({"text": "a"}), origin)
    assert status == 200 and hdrs.get("Access-Control-Allow-Origin") == "http://friend.example"


def test_source_and_target_languages_choose_moses_rules(limited):
    """``--source-lang fr``: Moses' French tokenizer ("house's" -> "house'" "s"; English
    would give "house" "'s"); ``--target-lang en``: its English detokenizer (no space
    before "?", which the French one keeps)."""
    text = "the house's door ?"
    status, _, got = _post(limited, {"text": text})
    result = got["results"][0]
    assert result["tokens"] == MosesTokenizer(lang="fr").tokenize(text), result
    words = result["translation"].split()
    assert result["detokenized"] == MosesDetokenizer(lang="en").detokenize(words)
    assert "?" in words or "." in words  # where the two detokenizers differ
    assert result["detokenized"] != MosesDetokenizer(lang="fr").detokenize(words)


def test_pretokenized_splits_on_whitespace(tmp_path):
    """``--pretokenized``: the source's tokens are its whitespace-separated words (the
    default would run Moses' tokenizer: "house's" -> "house" "'s")."""
    argv = ["--state", CASE / "search_state.pkl", CASE / "search_model.npz", "--pretokenized"]
    if not CASE.is_dir():
        pytest.skip(f"the shared search recording is not at {CASE}")
    with loadtest.serve_process(argv, dict(os.environ, OMP_NUM_THREADS="1"), cwd=REPO) as (_, url):
        status, _, got = _post(url, {"text": "the house's door"})
    assert status == 200 and got["results"][0]["tokens"] == ["the", "house's", "door"], got


def _model(tmp_path, name, edit):
    """The fixture's model with ``edit(arrays)`` applied, saved as ``name``."""
    with np.load(MODEL) as z:
        arrays = {k: z[k] for k in z.files}
    edit(arrays)
    path = tmp_path / f"{name}_model.npz"
    np.savez(path, **arrays)
    return path


def _answer(argv, text=None):
    """Start ``serve ARGV`` (its own process), translate ``text`` (the fixture's third test
    sentence by default), return the answer's ``results[0]``; None if it did not start."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    try:
        with loadtest.serve_process(argv, env, cwd=REPO) as (_, url):
            status, _, got = _post(url, {"text": text or TEST_EN[2], "tokenized": True})
    except ValueError as err:  # "the server did not start": the refusal's line in it
        return str(err)
    assert status == 200, got
    return got["results"][0]


def test_loading_options_reach_the_server(tmp_path):
    """Each of the model-loading options (``commands/common.py``) changes whether and how the
    server starts: as ``translate`` (``cli/test_model_options.py`` pins what they mean)."""
    # --lenient: a missing parameter is refused; Container.load keeps it zero
    missing = _model(tmp_path, "missing", lambda a: a.pop("b_0_dec_hid_readout_0"))
    assert "missing b_0_dec_hid_readout_0" in _answer(["--state", STATE, missing])
    assert isinstance(_answer(["--state", STATE, missing, "--lenient"]), dict)
    # --allow-nonfinite: NaN in the embedding row of a word the sentence does not hold
    nan = _model(tmp_path, "nan", lambda a: a["W_0_enc_approx_embdr"].__setitem__(199, np.nan))
    assert "NaN" in _answer(["--state", STATE, nan])
    kept = _answer(["--state", STATE, nan, "--allow-nonfinite"])
    assert kept["translation"] == TRANS10[2]
    # --stable-softmax: attention energies past exp's float32 range decode to words
    big = _model(
        tmp_path,
        "big",
        lambda a: a.__setitem__("D_dec_transition_0", a["D_dec_transition_0"] * 1e4),
    )
    stable = _answer(["--state", STATE, big, "--stable-softmax"])
    assert stable["translation"] and stable["error"] is None
    assert _answer(["--state", STATE, big]) != stable
    # --strict and --device: refused before serving (else the command would serve)
    assert serve_exit_status(["--state", STATE, MODEL, "loopIter=5", "--strict"]) == 2
    assert serve_exit_status(["--state", STATE, MODEL, "--device", "cuda:99"]) == 2


def test_model_changes_data_dir_and_checkpoint_reach_the_server(tmp_path):
    """MODEL / ``--model`` and CHANGES / ``--changes`` (the target vocabulary changed to an
    upper-cased one: the answer is the recorded translation upper-cased), ``--data-dir``
    (the vocabularies of a state moved away from them) and ``--checkpoint`` (an export)."""
    upper, _ = upper_cased_vocabularies(FX / "ivocab.fr.pkl", tmp_path)
    change = f"indx_word_target='{upper}'"
    for form in ([MODEL, change], ["--model", MODEL, "--changes", change]):
        got = _answer(["--state", STATE, *form])
        assert got["translation"] == TRANS10[2].upper(), (form, got)
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(STATE, alone / STATE.name)
    assert "vocab" in _answer(["--state", alone / STATE.name, MODEL])
    moved = _answer(["--state", alone / STATE.name, MODEL, "--data-dir", FX])
    assert moved["translation"] == TRANS10[2]
    from parity_tests.support.inprocess import run_cli

    r = run_cli(
        "export", "--format", "safetensors", "--state", STATE, MODEL, "--out", tmp_path / "x"
    )
    assert r.returncode == 0, r.stderr
    assert _answer(["--checkpoint", tmp_path / "x"])["translation"] == TRANS10[2]


def test_pending_timeout_and_client_timeout(tmp_path):
    """``--max-pending 1``: a request of two sentences is refused at once (503, "waiting");
    ``--timeout 0.001``: one sentence is not decoded within it (503, "no translation within");
    ``--client-timeout 1``: a client that never finishes its request is cut (the connection
    closed) long before the default 30 s -- here within 15 s, a liveness bound."""
    argv = ["--state", STATE, MODEL, "--max-pending", "1", "--timeout", "0.001",
            "--client-timeout", "1"]  # fmt: skip
    with loadtest.serve_process(argv, dict(os.environ, OMP_NUM_THREADS="1"), cwd=REPO) as (_, url):
        status, _, got = _post(url, {"texts": [TEST_EN[0], TEST_EN[1]], "tokenized": True})
        assert status == 503 and "of your sentences are waiting" in got["error"], got
        status, _, got = _post(url, {"text": TEST_EN[0], "tokenized": True})
        assert status == 503 and "no translation within 0.001 s" in got["error"], got
        parts = urlsplit(url)
        with socket.create_connection((parts.hostname, parts.port), timeout=15) as s:
            s.sendall(b"POST /translate HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never ends
            assert s.recv(65536) == b""  # closed by the server (a timeout raises instead)


def test_drain_is_the_grace_the_shutdown_announces():
    """``--drain 0.5``: on SIGTERM the server says the batch in progress may take 0.5 s (the
    default 5) and exits 0; what it does with a batch past it is
    ``test_serve_hardening.py::test_sigterm_under_load_exits_0_after_draining``'s."""
    argv = ["--state", STATE, MODEL, "--drain", "0.5"]
    with loadtest.serve_process(argv, dict(os.environ, OMP_NUM_THREADS="1"), cwd=REPO) as (
        proc,
        _,
    ):
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "the batch in progress may take 0.5 s" in err, err
