"""``translate --beam-search`` and ``reproduce`` options, given on the command line, against
the original's recorded translation files (issue 53, item 2; ``tools/flag_table.py``).

Each option is run only on the sentences where it changes what ``sample.py`` wrote (the
recorded file with the option against the one without): there, a port that dropped the
option would write the other file's line.  The whole files are compared elsewhere
(``test_legacy_cases.py``, ``parity --case``); these tests are about the option reaching the
search."""

import json

import pytest

from groundhog_port.cli.main import main
from parity_tests.support.cases import FIXTURES
from parity_tests.support.fuzzing import run_cli_inprocess

#: id -> (case, the recorded file with the options, the recorded file without, the options)
RECORDED = {
    "normalize": (
        "phrase",
        "trans_beam10_normalize.txt",
        "trans_beam10.txt",
        ["--beam-size", "10", "--normalize"],
    ),  # fmt: skip
    "ignore_unk": (
        "phrase",
        "trans_beam5_ignore_unk.txt",
        "trans_beam5.txt",
        ["--beam-size", "5", "--ignore-unk"],
    ),  # fmt: skip
    "beam_size": ("search", "trans_beam1.txt", "trans_beam5.txt", ["--beam-size", "1"]),
}


def _where_the_option_matters(legacy_root, tmp_path, key):
    """``(model arguments, source file, the recorded lines there, options)``."""
    case, recorded, plain, flags = RECORDED[key]
    d = legacy_root / case
    if not (d / recorded).is_file():
        pytest.skip(f"{d / recorded} is not recorded")
    src = (d / "test.en").read_text(encoding="utf-8").split("\n")[:-1]
    want = (d / recorded).read_text(encoding="utf-8").split("\n")[:-1]
    other = (d / plain).read_text(encoding="utf-8").split("\n")[:-1]
    # beam 1 crashed on a line in the original (docs/recordings.md): its file stops there
    lines = [i for i in range(min(len(want), len(other))) if want[i] != other[i]][:4]
    assert lines, f"{recorded} and {plain} do not differ"
    source = tmp_path / "src.txt"
    source.write_text("".join(src[i] + "\n" for i in lines), encoding="utf-8")
    model = ["--state", next(d.glob("*_state.pkl")), next(d.glob("*_model.npz"))]
    return model, source, "".join(want[i] + "\n" for i in lines), flags


@pytest.mark.parametrize("key", list(RECORDED))
def test_translate_writes_the_recorded_lines(legacy_root, tmp_path, key):
    model, source, want, flags = _where_the_option_matters(legacy_root, tmp_path, key)
    trans = tmp_path / "trans.txt"
    argv = ["translate", *model, "--beam-search", *flags, "--source", source, "--trans", trans]
    rc, _, err = run_cli_inprocess(main, [str(a) for a in argv])
    assert rc == 0, err
    assert trans.read_text(encoding="utf-8") == want


@pytest.mark.parametrize("key", list(RECORDED))
def test_reproduce_finds_the_recorded_lines_identical(legacy_root, tmp_path, key):
    """``reproduce`` with the options the archived file was made with: identical, exit 0."""
    model, source, want, flags = _where_the_option_matters(legacy_root, tmp_path, key)
    archived = tmp_path / "archived.txt"
    archived.write_text(want, encoding="utf-8")
    argv = ["reproduce", *model, "--source", source, "--archived-trans", archived, *flags]
    rc, out, err = run_cli_inprocess(main, [str(a) for a in argv])
    assert rc == 0, out + err


def _nbest(text):
    """``{sentence: [(words, cost), ...]}`` of an ``--n-best`` file, in its order."""
    out = {}
    for line in text.splitlines():
        i, words, cost, _ = line.split(" ||| ")
        out.setdefault(int(i), []).append((words, float(cost.split("= ")[1])))
    return out


def test_n_best_lists_the_originals_hypotheses_in_its_order(legacy_root, tmp_path):
    """``--n-best F``: every hypothesis ``sample()`` returned at beam 5, in its order
    (recorded in ``trace.h5``'s ``/beam/5``), with its cost (float32 sums: to 1e-5)."""
    from groundhog_port.cli.printed_outputs import nbest_text
    from groundhog_port.harness.trace import TraceFile
    from groundhog_port.legacy.loading import open_experiment

    d = legacy_root / "search"
    src = (d / "test.en").read_text(encoding="utf-8").split("\n")[:3]
    source, nbest = tmp_path / "src.txt", tmp_path / "nbest.txt"
    source.write_text("".join(s + "\n" for s in src), encoding="utf-8")
    argv = ["translate", "--state", d / "search_state.pkl", d / "search_model.npz",
            "--beam-search", "--beam-size", "5", "--source", source, "--trans",
            tmp_path / "t.txt", "--n-best", nbest]  # fmt: skip
    rc, _, err = run_cli_inprocess(main, [str(a) for a in argv])
    assert rc == 0, err
    with TraceFile(d / "trace.h5") as tr:
        exp = open_experiment(d / "search_state.pkl", d / "search_model.npz")
        recorded = _nbest(nbest_text(tr, "5", exp.trg_idx2word))
    got = _nbest(nbest.read_text(encoding="utf-8"))
    assert sorted(got) == [0, 1, 2]
    for i, hyps in got.items():
        assert [w for w, _ in hyps] == [w for w, _ in recorded[i]]
        assert all(abs(a - b) <= 1e-5 * abs(b) for (_, a), (_, b) in zip(hyps, recorded[i]))


def test_reproduce_reference_and_max_diffs(legacy_root, tmp_path):
    """``--ref``: the BLEU of the report is sacrebleu's against that file (here the recorded
    translations themselves: 100); ``--max-diffs 1``: one differing line shown of four."""
    model, source, want, flags = _where_the_option_matters(legacy_root, tmp_path, "beam_size")
    ref = tmp_path / "ref.txt"
    ref.write_text(want, encoding="utf-8")
    archived = tmp_path / "archived.txt"
    archived.write_text(want, encoding="utf-8")
    argv = ["reproduce", *model, "--source", source, "--archived-trans", archived, *flags,
            "--ref", ref, "--json"]  # fmt: skip
    rc, out, err = run_cli_inprocess(main, [str(a) for a in argv])
    assert rc == 0, err
    (row,) = json.loads(out)["files"]
    assert row["reference"] == str(ref)
    assert row["bleu"]["reproduced_vs_reference"]["multi_bleu"] == 100.0
    wrong = "".join("x " + line + "\n" for line in want.splitlines())
    archived.write_text(wrong, encoding="utf-8")
    argv = ["reproduce", *model, "--source", source, "--archived-trans", archived, *flags]
    shown = [
        run_cli_inprocess(main, [str(a) for a in argv + extra])[1]
        for extra in ([], ["--max-diffs", "1"])
    ]
    assert "first differing lines (4 of 4)" in shown[0], shown[0]
    assert "first differing lines (1 of 4)" in shown[1], shown[1]


def test_alpha_is_the_samplers_inverse_temperature(tmp_path):
    """``translate --source F --n-samples N --alpha A``: the samples and costs ``sample()``
    draws at inverse temperature A (sample.py:163, its ``alpha``; the literal sampler, whose
    transcripts at 0.5 and 2.0 parity compares with the original's), not those at 1."""
    from groundhog_port.cli.sample import format_line
    from groundhog_port.legacy.loading import open_experiment
    from groundhog_port.sampling.sampler import Sampler

    fx = FIXTURES / "search"
    state, model = fx / "search_state.pkl", fx / "search_model.npz"
    lines = (fx / "test.en").read_text(encoding="utf-8").splitlines()[:2]
    source, trans = tmp_path / "src.txt", tmp_path / "samples.txt"
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    argv = ["translate", "--state", state, model, "--source", source, "--trans", trans,
            "--n-samples", "3", "--alpha", "0.5"]  # fmt: skip
    rc, _, err = run_cli_inprocess(main, [str(a) for a in argv])
    assert rc == 0, err
    exp = open_experiment(state, model)

    def drawn(alpha):
        sampler = Sampler(exp)
        out = []
        for i, line in enumerate(lines):
            s = sampler.sample(exp.parse_source(line)[0], 3, alpha)
            out += [format_line(i, w, c) + "\n" for w, c in zip(s.sentences, s.costs)]
        return "".join(out)

    got = trans.read_text(encoding="utf-8")
    assert got == drawn(0.5) and got != drawn(1.0)


def test_y_noise_replaces_target_words_as_score_py(tmp_path):
    """``score --mode batch --y-noise P``: each batch's target ids, before scoring, are
    replaced where ``numpy.random.binomial(1, P)`` is 1 by ``numpy.random.randint(0, 100)``
    -- drawn in that order, over the whole ``y`` matrix, from numpy's global generator
    (score.py:162-167).  With the generator seeded, the file is the scores of exactly those
    targets (re-drawn here, scored without noise), not the clean ones."""
    import numpy as np

    from groundhog_port.legacy.loading import open_experiment
    from groundhog_port.search import scoring

    fx = FIXTURES / "search"
    state, model = fx / "search_state.pkl", fx / "search_model.npz"
    exp = open_experiment(state, model)

    def scored(noise, seed):
        out = tmp_path / f"scores_{noise}_{seed}.txt"
        argv = ["score", "--mode", "batch", "--state", state, model, "--src", fx / "test.en",
                "--trg", fx / "test.fr", "--scores", out, "--allow-unk"]  # fmt: skip
        np.random.seed(seed)
        rc, _, err = run_cli_inprocess(main, [str(a) for a in argv + ["--y-noise", str(noise)]])
        assert rc == 0, err
        return out.read_text(encoding="utf-8")

    def derived(noise, seed):
        np.random.seed(seed)
        lines = []
        for batch in scoring.batches_for(exp, fx / "test.en", fx / "test.fr", allow_unk=True):
            words = np.random.randint(0, 100, batch.y.shape).astype("int64")
            change = np.random.binomial(1, noise, batch.y.shape).astype("int64")
            batch.y = change * words + (1 - change) * batch.y
            lines += [f"{float(s):.5e}\n" for s in -scoring.score_batch(exp.model, batch).cost]
        return "".join(lines)

    noisy = scored(0.5, 7)
    assert noisy == derived(0.5, 7)
    assert noisy != derived(0.0, 7)  # the noise changed the scores


@pytest.mark.parametrize(
    "flags, batch_size",
    [
        (["--beam-size", "1"], 128),
        (["--beam-size", "5"], 32),
        (["--beam-size", "1", "--batch-size", "3"], 3),
    ],
)
def test_translate_batch_size_default_follows_the_beam(
    legacy_root, tmp_path, monkeypatch, flags, batch_size
):
    """``--batch-size`` by default: 128 sentences at beam 1 (128 hypotheses a group, issue
    54), 32 from beam 4 on; given, it is kept.  Read where the search is built; the lines are
    the recorded ones (the default changes no word)."""
    from groundhog_port.search import translator

    model, source, _, _ = _where_the_option_matters(legacy_root, tmp_path, "beam_size")
    seen = []
    init = translator.Translator.__init__

    def record(self, *args, **kwargs):
        seen.append(kwargs["batch_size"])
        init(self, *args, **kwargs)

    monkeypatch.setattr(translator.Translator, "__init__", record)
    trans = tmp_path / "trans.txt"
    argv = ["translate", *model, "--beam-search", *flags, "--source", source, "--trans", trans]
    argv += ["--workers", "1"]
    rc, _, err = run_cli_inprocess(main, [str(a) for a in argv])
    assert rc == 0, err
    assert seen == [batch_size]
    d = legacy_root / "search"
    recorded = "trans_beam1.txt" if flags[1] == "1" else "trans_beam5.txt"
    want = (d / recorded).read_text(encoding="utf-8").split("\n")
    src = (d / "test.en").read_text(encoding="utf-8").split("\n")
    got = trans.read_text(encoding="utf-8").split("\n")[:-1]
    picked = [want[src.index(line)] for line in source.read_text(encoding="utf-8").split("\n")[:-1]]
    assert got == picked
