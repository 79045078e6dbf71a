"""groundhog-port: GroundHog's RNNsearch / RNNencdec in PyTorch, with parity to the Theano original."""

__version__ = "0.1.0"
