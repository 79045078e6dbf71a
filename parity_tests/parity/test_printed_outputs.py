"""Printed outputs against the original's (``groundhog-port parity --case``, group ``outputs``).

The comparison itself (:mod:`groundhog_port.harness.printed`) on small texts: words and blank
lines ``==``, numbers printed as the original printed them and within the bound plus one
printed digit, equal-cost samples matched by index.  Then the recordings of
``user_outputs_search`` (interactive sampling at inverse temperatures 0.5 and 2.0 with and
without ``--normalize``, ``score --mode txt --verbose``, ``--beam-search --verbose``) through
:func:`groundhog_port.cli.printed_outputs.check_printed`: every row passes, and three porting
mistakes of issue 36 (the temperature applied before the output bias, sampling
``--normalize`` by words + 1, a re-sorted n-best list) each fail the row of the output they
change.
"""

import numpy as np
import pytest
import torch

from groundhog_port import lookup
from groundhog_port.cli import printed_outputs
from groundhog_port.harness import printed
from groundhog_port.harness.check import find_case
from groundhog_port.harness.report import Rows
from groundhog_port.harness.trace import TraceFile
from groundhog_port.legacy.loading import open_experiment
from groundhog_port.model.layers import SoftmaxLayer
from groundhog_port.sampling import draw, sampler
from groundhog_port.search import translator
from parity_tests.support.cases import recording_dir

pytestmark = pytest.mark.usefixtures("one_thread")


def _row(recorded, port, p64=None, probe=None):
    rows = Rows()
    return printed.compare_printed(
        rows, "outputs/x", "cmd", recorded, port, p64 or port, probe or port, name="x.txt"
    )


SAMPLES = (
    "Input Sequence: How many samples? Inverse Temperature? Parsed Input: a b 7 . <eos>\n"
    "0: 15.752870559692383 [0.80200523 0.119921   0.27560425 0.204219   0.00234021 0.01137945\n"
    " 0.9995086  0.99999785] nous 7 voitures .\n"
    "2: 2.199019432067871 [0.9999999  0.9663978  1.        ] la rivière .\n"
    "3: 2.199019432067871 [0.9999999  0.9663978  1.        ] la rivière .\n"
    "\n"
)


def test_records_words_and_numbers():
    recs = printed.parse(SAMPLES)
    assert [r.line for r in recs] == [1, 2, 4, 5, 6]  # the wrapped array is one record
    assert recs[0].numbers == []  # "Parsed Input:" is text ("7" too)
    assert [t.text for t in recs[1].numbers][:2] == ["15.752870559692383", "0.80200523"]
    assert "7" in recs[1].words and "nous" in recs[1].words  # after the array: the sentence
    assert recs[1].key == (1, 0) and recs[3].key == (1, 3)
    assert recs[4].toks[0].text == printed.BLANK
    align = printed.parse("3.5                 [0.142 0.141]\n")[0]
    assert align.words[0] == "3.5" and len(align.numbers) == 2  # an alignment row's word
    nbest = printed.parse("0 ||| la 0.5 rivière ||| cost= 0.25 ||| -0.25\n")[0]
    assert [t.text for t in nbest.numbers] == ["0.25", "-0.25"]


def test_the_same_text_passes_and_a_near_tie_may_swap():
    assert _row(SAMPLES, SAMPLES).passed
    swapped = (
        SAMPLES.replace("2: 2.199", "X").replace("3: 2.199", "2: 2.199").replace("X", "3: 2.199")
    )
    row = _row(SAMPLES, swapped)
    assert row.passed and any("matched by sample index" in n for n in row.notes)
    # costs far apart: the order is compared
    a, b = "2.4000000953674316", "2.5009999275207520"
    far = SAMPLES.replace("3: 2.199019432067871", f"3: {b}").replace(
        "2: 2.199019432067871", f"2: {a}"
    )
    far_swapped = far.replace(f"2: {a}", "X").replace(f"3: {b}", f"2: {a}").replace("X", f"3: {b}")
    assert not _row(far, far_swapped).passed


@pytest.mark.parametrize(
    "change, why",
    [
        (("15.752870559692383", "15.752871"), "digits"),  # numpy's str of the float32
        (("15.752870559692383", "15.752970559692383"), "value"),
        (("15.752870559692383", "-15.752870559692383"), "sign"),
        (("nous 7 voitures", "nous 8 voitures"), "word"),
        (("la rivière .\n\n", "la rivière .\n"), "blank line"),
        (("0.119921  ", "0.1199    "), "array precision / value"),
    ],
)
def test_each_difference_fails(change, why):
    row = _row(SAMPLES, SAMPLES.replace(*change))
    assert not row.passed, why


def test_one_printed_digit_is_allowed():
    assert _row("4.784238\n", "4.784239\n").passed  # str of a float32: its last digit
    assert not _row("4.784238\n", "4.784258\n").passed
    assert _row("Probs:  [0.81  0.999]\n", "Probs:  [0.811 0.999]\n").passed  # precision 3
    assert not _row("Probs:  [0.81  0.999]\n", "Probs:  [0.813 0.999]\n").passed
    assert _row("inf\n", "inf\n").passed and not _row("inf\n", "4.5\n").passed
    # an array whose elements all print short: the text's precision is its longest element's
    two = "Probs:  [0.5 1. ]\nProbs:  [0.123 0.2  ]\n"
    assert _row(two, two.replace("[0.5 1. ]", "[0.501 1.   ]")).passed
    assert not _row(two, two.replace("[0.123 0.2  ]", "[0.1234 0.2   ]")).passed  # precision


def test_interactive_costs_print_all_float64_digits():
    """sample.py:186 ``"{}".format`` of a numpy float32 under Python 2 (the recording prints
    ``15.752870559692383``); ``--normalize`` divides the float32 cost by an int: a float32
    (every normalised cost in user_outputs_search is one)."""
    assert sampler.legacy_format(np.float32(15.752870559692383)) == "15.752870559692383"
    ids = np.array([[5], [6], [0]])
    nlp = np.array([[1.1], [0.2], [0.3]], dtype=np.float32)
    s = sampler.finish(draw.Draw(ids, nlp), {0: "<eol>", 5: "a", 6: "b"}, normalize=True)
    cost = -(np.float32(1.1) + np.float32(0.2) + np.float32(0.3))
    assert s.costs[0].dtype == np.float32 and s.costs[0] == cost / np.float32(2)
    assert s.verbose_lines()[0].startswith(f"0: {float(-s.costs[0])!r} [")


# ---------------------------------------------------------------------------------------
# the recordings
# ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def search_case():
    case = recording_dir("search")
    outputs = recording_dir("user_outputs_search")
    dirs = lookup.case_data_dirs(case)
    files = find_case(case, data_dirs=dirs)
    exp = open_experiment(files.state, files.model, data_dir=dirs)
    return exp, files, dirs, outputs


def _rows(search_case, match):
    exp, files, dirs, outputs = search_case
    with TraceFile(files.trace) as tr:
        return {
            r.quantity: r
            for r in printed_outputs.check_printed(exp, files, tr, [outputs], dirs, match=match)
        }


def test_user_outputs_search_every_row_passes(search_case):
    """~30 s of one core: 11 rows (7 files, the 2 interactive ones with both samplers, 2 n-best
    lists), three runs each."""
    rows = _rows(search_case, None)
    names = {
        f"outputs/user_outputs_search/{n}"
        for n in (
            "sample_interactive_stdout.txt",
            "sample_interactive_normalize_stdout.txt",
            "score_txt_verbose_stdout.txt",
            "sample_beam10_normalize_verbose_stdout.txt",
            "trans_beam10_normalize_verbose.txt",
            "sample_beam5_verbose_stdout.txt",
            "trans_beam5_verbose.txt",
        )
    } | {"outputs/trace.h5/beam/10_normalize", "outputs/trace.h5/beam/5"}
    assert {q.split(" (")[0] for q in rows} == names
    # the interactive transcripts: translate's default (batched) sampler and the literal one
    assert sum("--batch-size 1 < interactive_stdin.txt" in q for q in rows) == 2
    assert len(rows) == len(names) + 2
    bad = {q: r.notes for q, r in rows.items() if not r.passed}
    assert not bad, bad
    assert all(r.n > 0 for r in rows.values())


def _temperature_before_bias(real):
    def logits(self, x, workspace=None, T=None):
        if T is None:
            return real(self, x, workspace)
        z = real(self, x) - self.b
        return z * torch.as_tensor(T, dtype=z.dtype) + self.b

    return logits


def _normalize_by_words_plus_1(real):
    def finish(d, idx2word, normalize=False):
        s = real(d, idx2word, normalize)
        if normalize:
            words = [len(x.strip().split(" ")) for x in s.sentences]
            s.costs = [c * n / (n + 1) for c, n in zip(s.costs, words)]
            s.order = sampler.legacy_order(s.costs)
        return s

    return finish


def _resorted(real):
    def choose(hyps, idx2word):
        t = real(hyps, idx2word)
        t.nbest = sorted(t.nbest, key=lambda x: x[1])
        return t

    return choose


@pytest.mark.parametrize(
    "mistake, match, row",
    [
        ("temperature_before_bias", "sample_interactive_stdout.txt", "sample_interactive_stdout"),
        (
            "normalize_by_words_plus_1",
            "sample_interactive_normalize_stdout.txt",
            "sample_interactive_normalize_stdout",
        ),
        ("resorted_nbest", "trans_beam10_normalize_verbose.txt", "trace.h5/beam/10_normalize"),
    ],
)
def test_a_mistake_fails_its_output_row(search_case, monkeypatch, mistake, match, row):
    """Proof that the rows can fail: each mistake, patched in, fails the row of the output it
    changes (and only that: the others of the same command still pass)."""
    if mistake == "temperature_before_bias":
        monkeypatch.setattr(SoftmaxLayer, "logits", _temperature_before_bias(SoftmaxLayer.logits))
    elif mistake == "normalize_by_words_plus_1":
        monkeypatch.setattr(sampler, "finish", _normalize_by_words_plus_1(sampler.finish))
    else:
        monkeypatch.setattr(translator, "choose", _resorted(translator.choose))
    rows = _rows(search_case, match)
    failed = [q for q, r in rows.items() if not r.passed]
    assert failed and all(row in q for q in failed), {q: r.notes for q, r in rows.items()}
