"""The ``groundhog-port`` command line; argparse lives here and nowhere else.

* :mod:`.commands` -- Sub-commands of ``groundhog-port`` (see :mod:`groundhog_port.cli.main`).
* :mod:`.main` -- ``groundhog-port`` command line: one sub-command per module in :mod:`groundhog_port.cli.commands`.
* :mod:`.sample` -- ``groundhog-port translate`` without ``--beam-search``: sample.py's sampling mode.
"""
