"""WMT test sets kept as SGML / XML (issue 50, item 4): their segments are the sentences.

The SGML files are made here from the shared ``search`` case's ``test.en`` / ``test.fr`` (in
two documents, WMT's layout: ``<srcset>``/``<refset>``, ``<doc>``, ``<p>``, ``<seg id=N>``),
named as WMT names them (``newstest2012-src.en.sgm``, ``newstest2012-ref.fr.sgm``).  Golden
data: the recorded ``trans_beam*.txt`` and ``scores_batch.txt`` of the original on the
plain files, sacrebleu's BLEU on the plain files, and sacrebleu's own readers of SGML
(``FakeSGMLDataset``) and of WMT's XML (``WMTXMLDataset``, lxml) on the same files.

The shared test sets hold Moses' ``&apos;`` (test.en twice, test.fr twelve times) and no
raw ``&``, ``"``, ``<``; an SGML segment is read as sacrebleu reads it, its text as it is,
so these files give the plain lines back -- the small files of
:func:`test_segments_are_read_as_sacrebleu_reads_them` hold ``&amp; &lt; &gt; &quot; &apos;``,
spaces to collapse, and the XML form's entities, each compared with sacrebleu's reader.
"""

import gzip
import json

import pytest

from groundhog_port import lookup
from groundhog_port.legacy.data import read_text_lines
from groundhog_port.tasks.rescore import read_lines
from parity_tests.support.cases import assert_scores_match
from parity_tests.support.command_lines import sample_py_args, score_py_args
from parity_tests.support.inprocess import run_cli as cli

pytestmark = pytest.mark.usefixtures("one_thread")

SRC_SGM, REF_SGM = "newstest2012-src.en.sgm", "newstest2012-ref.fr.sgm"


def sgml(lines, root, lang):
    """WMT's SGML of ``lines`` (two documents, one ``<seg>`` a line, text as given)."""
    attrs = 'setid="newstest2012" srclang="any"' + (
        f' trglang="{lang}"' if root != "srcset" else ""
    )
    out = [f"<{root} {attrs}>"]
    for d, part in enumerate((lines[:20], lines[20:])):
        out += [f'<doc sysid="ref" docid="news/{d}" genre="news" origlang="en">', "<p>"]
        out += [f'<seg id="{i + 1}">{line}</seg>' for i, line in enumerate(part)]
        out += ["</p>", "</doc>"]
    return "\n".join(out + [f"</{root}>"]) + "\n"


def _plain(path):
    return path.read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def search(legacy_root):
    return legacy_root / "search"


@pytest.fixture
def sets(search, tmp_path):
    """``(source, reference)``: the search case's test set as WMT's SGML files."""
    src, ref = tmp_path / SRC_SGM, tmp_path / REF_SGM
    src.write_text(sgml(_plain(search / "test.en"), "srcset", "en"), encoding="utf-8")
    ref.write_text(sgml(_plain(search / "test.fr"), "refset", "fr"), encoding="utf-8")
    return src, ref


def _checkpoint(search):
    return search / "search_state.pkl", search / "search_model.npz"


# ----------------------------------------------------------------------------------------
# the reader, against sacrebleu's
# ----------------------------------------------------------------------------------------
SMALL_SGML = """<refset setid="t" srclang="any" trglang="fr">
<doc sysid="ref" docid="a" genre="news" origlang="en">
<p>
<seg id="1">AT&amp;T &lt;b&gt; said &quot;yes&quot; &apos;n&apos; no</seg>
<seg id="2">   spaces   inside\tand  around   </seg>
<seg id="3">raw & and " and ' kept</seg>
</p>
</doc>
<doc sysid="ref" docid="b" genre="news" origlang="en">
<seg id="1">c&apos; est tout</seg>
</doc>
</refset>
"""

SMALL_XML = """<?xml version="1.0" encoding="utf-8"?>
<dataset id="t">
<collection id="general">
<doc id="d1" origlang="en">
<src lang="en"><p>
<seg id="1">AT&amp;T &lt;b&gt; said &quot;yes&quot;</seg>
<seg id="2"> c&amp;apos; est &#233;t&#xE9; </seg>
</p></src>
<ref lang="fr" translator="A"><p>
<seg id="1">AT&amp;T a dit &quot;oui&quot;</seg>
<seg id="2">c&amp;apos; est</seg>
</p></ref>
</doc>
</collection>
</dataset>
"""


def test_segments_are_read_as_sacrebleu_reads_them(tmp_path):
    """SGML: the text of each ``<seg>`` as it is (``&amp;`` stays), stripped, spaces
    collapsed -- sacrebleu's ``FakeSGMLDataset``; XML: entities unescaped, spaces kept --
    sacrebleu's ``WMTXMLDataset`` (lxml).  The same lines from the bleu, the translate and the
    multi-bleu readers; the markup never a line."""
    pytest.importorskip("lxml", reason="sacrebleu's WMT XML reader needs lxml")
    from sacrebleu.dataset.fake_sgml import FakeSGMLDataset
    from sacrebleu.dataset.wmt_xml import WMTXMLDataset

    from groundhog_port.tasks.rescore import perl_lines

    sgm = tmp_path / "small.sgm"
    sgm.write_text(SMALL_SGML, encoding="utf-8")
    FakeSGMLDataset("t")._convert_format(str(sgm), str(tmp_path / "sacre.txt"))
    expected = _plain(tmp_path / "sacre.txt")
    assert len(expected) == 4 and "&amp;" in expected[0]  # sacrebleu's rule, as documented
    assert read_lines(sgm) == expected
    assert read_text_lines(sgm) == expected
    assert [ln.encode("latin-1").decode("utf-8") for ln in perl_lines(sgm)] == expected

    xml = tmp_path / "small.xml"
    xml.write_text(SMALL_XML, encoding="utf-8")
    fields = WMTXMLDataset._unwrap_wmt21_or_later(str(xml))
    assert fields["src"][0] == 'AT&T <b> said "yes"'
    assert read_lines(xml) == fields["src"]
    assert read_lines(xml, part="ref") == fields["ref:A"]
    assert read_text_lines(xml) == [s.strip() for s in fields["src"]]


def test_markup_is_told_by_content_never_by_name(tmp_path, sets):
    """An SGML test set named ``test.en`` is read as one; a plain file named ``x.sgm``
    line by line (its first line is no test set's element)."""
    src, _ = sets
    renamed = tmp_path / "test.en"
    renamed.write_bytes(src.read_bytes())
    assert read_text_lines(renamed) == read_text_lines(src)
    assert len(read_text_lines(renamed)) == lookup.line_count(renamed) == 40
    plain = tmp_path / "notes.sgm"
    plain.write_text("<b>not a test set</b>\nsecond\n", encoding="utf-8")
    assert read_text_lines(plain) == ["<b>not a test set</b>", "second"]


# ----------------------------------------------------------------------------------------
# every command that reads sentences
# ----------------------------------------------------------------------------------------
def test_translate_sgml_gives_the_recorded_translations(search, sets, tmp_path):
    """``translate --source newstest2012-src.en.sgm``: sample.py's ``trans_beam5.txt`` byte for
    byte (markup lines translated as sentences would make 46 lines)."""
    state, model = _checkpoint(search)
    out = tmp_path / "trans.txt"
    r = cli(*sample_py_args(5, state, sets[0], out, model))
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == (search / "trans_beam5.txt").read_bytes()


def test_score_sgml_gives_the_recorded_scores(search, sets):
    """``score --mode=batch --src SGML --trg SGML``: score.py's ``scores_batch.txt`` (made on
    the plain test.en / test.fr)."""
    state, model = _checkpoint(search)
    r = cli(*score_py_args(state, model, *sets))
    assert r.returncode == 0, r.stderr
    assert_scores_match(r.stdout, (search / "scores_batch.txt").read_text())


def _bleu(*args):
    r = cli("bleu", *args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_bleu_on_sgml_is_sacrebleu_on_the_plain_text(search, sets, tmp_path):
    """``bleu --ref SGML`` (and the hypothesis as a ``<tstset>``): sacrebleu's own score of the
    plain files; ``--multi-bleu``: the same numbers as on the plain files."""
    import sacrebleu

    hyp = search / "trans_beam5.txt"
    expected = sacrebleu.corpus_bleu(_plain(hyp), [_plain(search / "test.fr")])
    got = _bleu("--hyp", hyp, "--ref", sets[1])
    assert got["lines"] == 40
    assert got["bleu"]["score"] == pytest.approx(expected.score, abs=1e-9)
    tst = tmp_path / "hyp.sgm"
    tst.write_text(sgml(_plain(hyp), "tstset", "fr"), encoding="utf-8")
    assert _bleu("--hyp", tst, "--ref", sets[1])["bleu"]["score"] == pytest.approx(
        expected.score, abs=1e-9
    )
    plain_mb = _bleu("--hyp", hyp, "--ref", search / "test.fr", "--multi-bleu")["multi_bleu"]
    assert _bleu("--hyp", tst, "--ref", sets[1], "--multi-bleu")["multi_bleu"] == plain_mb


def _reproduce(*args):
    r = cli("--log-level", "WARNING", "reproduce", "--batch-size", "1", *args, "--json")
    return r, (json.loads(r.stdout) if r.stdout.strip() else None)


def test_reproduce_sgml_source_and_reference(search, sets):
    """``reproduce --source SGML --ref SGML --archived-trans`` says identical, 40/40 (was:
    markup lines translated, "the original stopped after 40 lines (source: 46)"); its BLEU
    against the SGML reference is sacrebleu's on the plain files."""
    import sacrebleu

    state, model = _checkpoint(search)
    trans = search / "trans_beam5.txt"
    r, rep = _reproduce(
        "--state", state, "--model", model, "--source", sets[0], "--ref", sets[1],
        "--archived-trans", trans, "--beam-size", "5",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    (f,) = rep["files"]
    assert (f["identical"], f["compared"], f["source_lines"]) == (40, 40, 40)
    assert f["original_stopped_after"] is None
    expected = sacrebleu.corpus_bleu(_plain(trans), [_plain(search / "test.fr")])
    assert f["bleu"]["archived_vs_reference"]["sacrebleu"] == pytest.approx(expected.score)


def _sgml_case(search, sets, folder, files=("trans_beam1.txt", "trans_beam5.txt")):
    """An experiment folder holding only the SGML test set, the state, model, vocabularies
    and recorded outputs (nothing called test.en, no ../data)."""
    folder.mkdir()
    for name in ("search_state.pkl", "search_model.npz", "vocab.en.pkl", "vocab.fr.pkl",
                 "ivocab.en.pkl", "ivocab.fr.pkl", *files):  # fmt: skip
        (folder / name).write_bytes((search / name).read_bytes())
    for p in sets:
        (folder / p.name).write_bytes(p.read_bytes())
    return folder


def test_reproduce_case_finds_the_sgml_test_set_by_content(search, sets, tmp_path):
    """``reproduce --case``: the SGML source found by its segments (40, as many as the
    outputs' lines), its reference by WMT's naming; every recorded line identical."""
    case = _sgml_case(search, sets, tmp_path / "run1")
    r, rep = _reproduce("--case", case)
    assert r.returncode == 0, r.stderr
    assert [f["file"] for f in rep["files"]] == ["trans_beam1.txt", "trans_beam5.txt"]
    for f in rep["files"]:
        assert (f["identical"], f["compared"]) == (40, 40), f["file"]
        assert f["source"] == str(case / SRC_SGM)
        assert f["reference"] == str(case / REF_SGM)
    assert rep["skipped"] == []


def test_compressed_sgml(search, sets, tmp_path):
    """A gzip-compressed SGML test set is SGML too (told by its bytes): 40 segments, its
    reference ``newstest2012-ref.fr.sgm.gz`` found beside it, every line identical."""
    src, ref = (tmp_path / "gz" / (p.name + ".gz") for p in sets)
    src.parent.mkdir()
    for p, q in zip(sets, (src, ref)):
        q.write_bytes(gzip.compress(p.read_bytes()))
    assert lookup.line_count(src) == lookup.line_count(ref) == 40
    assert lookup.reference_for(src, "en", "fr")[0] == ref
    state, model = _checkpoint(search)
    r, rep = _reproduce(
        "--state", state, "--model", model, "--source", src,
        "--archived-trans", search / "trans_beam1.txt", "--beam-size", "1",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    (f,) = rep["files"]
    assert (f["identical"], f["compared"], f["reference"]) == (40, 40, str(ref))


def test_reference_by_wmt_name_needs_as_many_segments(sets, tmp_path):
    """The ``-src.en.sgm`` -> ``-ref.fr.sgm`` name pairs files only when their segment counts
    agree."""
    src, ref = sets
    text = ref.read_text(encoding="utf-8").replace(
        '<seg id="20">', '<seg id="X">x</seg>\n<seg id="20">', 1
    )
    ref.write_text(text, encoding="utf-8")
    assert lookup.line_count(ref) == 41
    found, why = lookup.reference_for(src, "en", "fr")
    assert found is None and why.endswith(f"{ref} has 41 segments, its source 40"), why


MALFORMED = {
    "seg never closed": ('<seg id="3">a dog', "line 6: a <seg> not closed on its line"),
    "nested seg": ('<seg id="3">a <seg id="4">dog</seg></seg>', "line 6: a <seg> inside a <seg>"),
    "unknown element": ("<table>", "line 6: <table> outside a <seg>"),
    "text outside a seg": ("a dog .", "line 6: text 'a dog .' outside a <seg>"),
    "truncated": (None, "line 7: the file ends before </srcset>"),
}


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_malformed_sgml_is_one_line(search, tmp_path, kind):
    """A malformed SGML test set: one line naming the file and the line, exit 2 -- never a
    traceback, never the segments read up to the damage."""
    bad_line, where = MALFORMED[kind]
    lines = [
        '<srcset setid="x" srclang="any">',
        '<doc sysid="ref" docid="d" genre="news" origlang="en">',
        "<p>",
        '<seg id="1">we have four hot schools .</seg>',
        '<seg id="2">this horse has 7 churches .</seg>',
        bad_line,
        "</p>",
        "</doc>",
        "</srcset>",
    ]
    if bad_line is None:  # the file stops after </doc>
        lines = lines[:5] + lines[6:8]
    bad = tmp_path / "bad.sgm"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    state, model = _checkpoint(search)
    r = cli("--log-level", "WARNING", *sample_py_args(1, state, bad, tmp_path / "t.txt", model))
    assert r.returncode == 2, (r.stdout, r.stderr)
    errors = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(errors) == 1 and "Traceback" not in r.stderr, r.stderr
    assert str(bad) in errors[0] and where in errors[0], errors[0]
    assert not (tmp_path / "t.txt").exists()
    assert lookup.line_count(bad) is None  # never a candidate test set either


def test_a_file_of_blank_lines_is_not_held_to_tell_its_kind(tmp_path):
    """Telling SGML from plain text reads at most ``MAX_SNIFF_LINES`` blank lines: a gzip of
    a million empty lines (the fuzzer's "gzip bomb as a text file") was held whole before its
    kind was decided (+412 MiB for 64 MiB of them)."""
    import gzip

    from groundhog_port import lookup
    from groundhog_port.untrusted import iter_sentences
    from parity_tests.support.memory import peak

    plain, packed = tmp_path / "blank.en", tmp_path / "blank.en.gz"
    plain.write_bytes(b"\n" * (1 << 20))
    packed.write_bytes(gzip.compress(b"\n" * (1 << 20), compresslevel=9))

    n, held = peak(lambda: sum(1 for _ in iter_sentences(plain, whole=False)))
    assert n == 1 << 20
    assert held < 16 << 20, f"{held / 2**20:.0f} MiB held"
    # compressed, the same lines are a bomb (1 MiB from 1 KB: over 200 times its size,
    # untrusted.MAX_TEXT_RATIO): no text, stopped at the ratio
    n, held = peak(lambda: lookup.line_count(packed))
    assert n is None
    assert held < 16 << 20, f"{held / 2**20:.0f} MiB held"
