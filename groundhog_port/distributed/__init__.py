"""Running translate / score / archive in one process or under torchrun: the world of
processes and the one runner.

* :mod:`.runner` -- ``translate`` and ``score --mode batch``, in one process or dealt out over
  a torchrun world (a plain process is a world of one).
* :mod:`.world` -- Re-scoring and re-translating past one process: ``torchrun ... -m groundhog_port``.
"""
