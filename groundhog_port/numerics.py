"""Float32 kernels whose result for one row does not depend on the other rows.

The batched search must return exactly what the literal search returns, so a
hypothesis' numbers may not change with the number of rows it is computed with.
``torch.mm`` breaks that on CPU (measured with MKL on this project's machines): it picks other inner kernels for row counts that are not a multiple of
  4 (a row computed alone differs from the same row in a bigger product by up to
  ~1e-4 at dim 1000).  :func:`mm` pads the rows up to a multiple of 4 with zeros,
  which selects the same kernel for every row count.

(``torch.sigmoid`` is position dependent too -- its vectorised body and scalar
tail round differently -- which is one more reason the activations use
``1 / (1 + exp(-x))``, see :func:`groundhog_port.activations.theano_sigmoid`.)

``parity_tests/test_batched_search.py`` checks the property on random models.
"""
import torch

ROW_BLOCK = 4


def mm(x, w):
    """``x @ w`` for ``x (..., k)`` and ``w (k, n)``, row-count invariant."""
    lead = x.shape[:-1]
    x2 = x.reshape(-1, x.shape[-1])
    rows = x2.shape[0]
    pad = -rows % ROW_BLOCK
    if pad:
        x2 = torch.cat([x2, x2.new_zeros((pad, x2.shape[1]))])
    return torch.mm(x2, w)[:rows].reshape(*lead, w.shape[1])

