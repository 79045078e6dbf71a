"""The README's first job runs as written (issue 39: the README's and the docs' code blocks are
run by tests): its ``sh`` block under "1. Load an old checkpoint and translate", executed by
bash in a scratch folder that sees the checkout's ``fixtures/`` and this interpreter's
environment as ``.venv``, must print that the translation is identical to the original's
(``cmp`` against the fixture's ``trans_beam10.txt``) and exit 0.  Proven: ``--beam-size 1`` in the block
fails it (``--beam-size 5`` would not: on the fixture it writes the beam-10 lines).  ~10 s (three commands).
"""

import os
import re
import subprocess
import sys
from pathlib import Path

from parity_tests.support.cases import REPO

JOB_1 = re.search(
    r"^### 1\. Load an old checkpoint and translate\n.*?```sh\n(.*?)```",
    (REPO / "README.md").read_text(encoding="utf-8"),
    re.S | re.M,
).group(1)


def test_job_1_runs_as_written(tmp_path):
    (tmp_path / "fixtures").symlink_to(REPO / "fixtures")
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    run = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", JOB_1],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "identical to the original's output" in run.stdout
    assert (tmp_path / "out.txt").read_bytes() == (
        REPO / "fixtures/search/trans_beam10.txt"
    ).read_bytes()
