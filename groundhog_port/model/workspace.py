"""Scratch tensors reused across the steps of one decoding call.

A fresh ``(rows, V)`` CPU allocation every step costs its page faults (at 1,000 rows x
30,001 words, 120 MB of float32 logits and twice that as doubles): the decoding interface
(:mod:`.decoding`) writes logits, attention blocks and the normaliser's doubles into the
buffers of one :class:`Workspace`, which the caller (a search, a sampler) keeps for a call
and releases after it.
"""

from __future__ import annotations

import math

import torch


class Workspace:
    """Named scratch tensors on ``device``, grown on demand, never shrunk until
    :meth:`release`."""

    def __init__(self, device: torch.device | str = "cpu") -> None:
        self.device = torch.device(device)
        self._buffers: dict[str, torch.Tensor] = {}

    def buffer(self, name: str, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """A tensor of ``shape`` and ``dtype`` (contents undefined), the first elements of
        the buffer ``name``."""
        numel = math.prod(shape)
        buf = self._buffers.get(name)
        if buf is None or buf.numel() < numel or buf.dtype != dtype:
            buf = torch.empty(max(numel, 1), dtype=dtype, device=self.device)
            self._buffers[name] = buf
        return buf[:numel].view(shape)

    def release(self) -> None:
        """Drop every buffer (after a call: they can be large)."""
        self._buffers.clear()
