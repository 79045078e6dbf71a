"""Sub-commands of ``groundhog-port`` (see :mod:`groundhog_port.cli.main`)."""
