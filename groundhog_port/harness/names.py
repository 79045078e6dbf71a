"""The names of the parity groups, in report order, for ``parity --help`` (``--only``) without
importing torch; :data:`groundhog_port.harness.check.GROUP_TABLE` holds the groups themselves
and checks that it has these names."""

from __future__ import annotations

GROUP_NAMES = ("repr", "pairs", "batch", "steps", "sampler", "train_step", "beam")
