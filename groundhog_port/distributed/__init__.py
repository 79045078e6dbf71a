"""Running translate / score / archive under torchrun: the world of processes and the sharded runs.

* :mod:`.sharded` -- ``translate`` and ``score --mode batch`` dealt out over a torchrun world.
* :mod:`.world` -- Re-scoring and re-translating past one process: ``torchrun ... -m groundhog_port``.
"""
