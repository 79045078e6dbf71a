"""``groundhog-port bleu``: BLEU/chrF of a translation file (sacrebleu), or multi-bleu.perl's number.

Examples::

    groundhog-port bleu --hyp trans_beam10.txt --ref test.fr
    groundhog-port bleu --hyp trans_beam10.txt --ref test.fr --multi-bleu
    groundhog-port bleu --hyp out.txt --ref ref0 --ref ref1 --tokenize none --json
"""

from __future__ import annotations

import argparse
import json
import logging

from ...errors import EXIT_MISMATCH, EXIT_OK, LegacyInputError
from ...tasks.rescore import (
    DIES_ON_EMPTY_HYPOTHESIS,
    bleu_tokenizers,
    multi_bleu_files,
    read_parallel,
    sacre_scores,
)

NAME = "bleu"
HELP = (
    "BLEU and chrF of a hypothesis file against reference file(s) with sacrebleu, or "
    "--multi-bleu for the number Moses' multi-bleu.perl prints on tokenized text"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--hyp",
        required=True,
        metavar="FILE",
        help="hypothesis file, one sentence per line (UTF-8)",
    )
    parser.add_argument(
        "--ref",
        required=True,
        action="append",
        metavar="FILE",
        help="reference file with the same number of lines; repeat for several references",
    )
    parser.add_argument(
        "--tokenize",
        default=None,
        choices=bleu_tokenizers(),
        help="sacrebleu tokenizer for BLEU (default 13a; 'none' for text that is "
        "already tokenized).  Not used with --multi-bleu, which splits on whitespace",
    )
    parser.add_argument(
        "--lowercase",
        action="store_true",
        help="case-insensitive scores (sacrebleu lowercase; with --multi-bleu: its -lc, "
        "which lowercases ASCII letters only, as Perl's lc on bytes)",
    )
    parser.add_argument(
        "--multi-bleu",
        action="store_true",
        help="print what Moses' multi-bleu.perl prints for these files "
        "('BLEU = 25.31, 60.1/31.2/18.0/10.4 (BP=1.000, ratio=1.012, hyp_len=..., "
        "ref_len=...)') and its exit code, computed by our re-implementation "
        "(checked against the script's output on 54 corpora): files are read as "
        "bytes, a final line without a newline loses its last byte (Perl's "
        "chop), and files with other line counts are scored as the script "
        "scores them, with a warning",
    )
    parser.add_argument(
        "--unescape",
        action="store_true",
        help="turn Moses escapes (&apos; &quot; &amp; &lt; &gt; &#124; &#91; &#93;) back "
        "into characters in hypotheses and references before scoring (off by default: "
        "GroundHog's corpora and outputs keep them, e.g. 'c&apos; est')",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def run(args: argparse.Namespace) -> int:
    if args.multi_bleu:
        if args.tokenize not in (None, "none"):
            raise LegacyInputError(
                None,
                f"--tokenize {args.tokenize} does not apply to --multi-bleu "
                "(multi-bleu.perl scores whitespace-separated tokens)",
            )
        res = multi_bleu_files(args.hyp, args.ref, lowercase=args.lowercase, unescape=args.unescape)
        if res.note == DIES_ON_EMPTY_HYPOTHESIS:
            raise LegacyInputError(
                args.hyp,
                "no words in the hypothesis file: multi-bleu.perl "
                "dies here (Illegal division by zero)",
            )
        if args.json:
            print(
                json.dumps(
                    {
                        "hyp": args.hyp,
                        "refs": args.ref,
                        "unescape": args.unescape,
                        "multi_bleu": res.to_dict(),
                    },
                    ensure_ascii=False,
                )
            )
        else:
            print(res.format())
            if res.note:
                logging.getLogger(__name__).warning("%s", res.note)
        # multi-bleu.perl exits 1 after its zero line when the references have no words
        return EXIT_MISMATCH if res.ref_len == 0 else EXIT_OK

    hyps, refs = read_parallel(args.hyp, args.ref, unescape=args.unescape)
    tokenize = args.tokenize or "13a"
    scores = sacre_scores(hyps, refs, tokenize=tokenize, lowercase=args.lowercase)
    if args.json:
        print(
            json.dumps(
                {
                    "hyp": args.hyp,
                    "refs": args.ref,
                    "lines": len(hyps),
                    "unescape": args.unescape,
                    **{k: v.to_dict() for k, v in scores.items()},
                },
                ensure_ascii=False,
            )
        )
    else:
        for m in scores.values():
            print(m.text)
            print(f"  signature: {m.signature}")
    return EXIT_OK
