"""Runs of ``groundhog-port`` under ``torchrun`` (two CPU processes, gloo) for the tests."""

import os
import subprocess
import sys

from parity_tests.support.cases import REPO

ENV = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}


def torchrun(*argv, nproc=2):
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            str(nproc),
            "--standalone",
            "-m",
            "groundhog_port",
            *map(str, argv),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        cwd=REPO,
    )


def finish(proc, timeout=600):
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err
