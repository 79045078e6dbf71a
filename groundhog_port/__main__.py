"""``python -m groundhog_port``: the ``groundhog-port`` command."""

from __future__ import annotations

import sys

from .cli.main import main

sys.exit(main())
