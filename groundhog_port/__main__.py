"""``python -m groundhog_port``: the ``groundhog-port`` command."""

from __future__ import annotations

from .cli.main import run

run()
