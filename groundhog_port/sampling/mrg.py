"""MRG31k3p exactly as Theano 1.0.5 computes it on the CPU (``theano/sandbox/rng_mrg.py``).

L'Ecuyer & Touzin's combined multiple recursive generator, as Theano's ``mrg_uniform``
C kernel runs it (rng_mrg.py:411-491)::

    component 1 (mod M1 = 2^31 - 1):      x1_n = (2^22 x1_{n-2} + (2^7 + 1) x1_{n-3}) mod M1
    component 2 (mod M2 = 2^31 - 21069):  x2_n = (2^15 x2_{n-1} + (2^15 + 1) x2_{n-3}) mod M2
    output:  d = x1_n - x2_n (+ M1 if x1_n <= x2_n),   u = float32(d) * 4.6566126e-10f

The state of one stream is six int32 ``[x11, x12, x13, x21, x22, x23]`` (newest first).
Theano computes the products with 32-bit shifts, masks and *wrapping* int32 additions
(the ``y < 0 ||`` tests catch the overflow); :func:`next_states` does the same additions
in int64 and wraps them to int32 at the same points, so every bit of the state and of
the float32 output is Theano's.

Streams (``MRG_RandomStreams``, rng_mrg.py:663): ``seed`` -> ``rstate = [seed] * 6``.
Every random op created from it gets its own shared state matrix of ``n_streams`` rows
(``get_substream_rstates``, rng_mrg.py:764): row 0 is the current ``rstate``, row ``i``
is row ``i - 1`` jumped ahead by 2^72 draws; then ``rstate`` itself jumps 2^134 draws
(``inc_rstate``) for the next op.  The jumps are the one-step transition matrices raised
to 2^72 / 2^134 mod M, computed here by exact integer exponentiation (Theano ships them
as the constants ``A1p72``, ``A2p72``, ``A1p134``, ``A2p134``).  A draw of ``n`` values
uses element ``i``'s stream ``i % n_streams`` in increasing ``i`` (rng_mrg.py:436), each
use advancing that row by one step.
"""

from __future__ import annotations

import numpy as np

#: moduli and the float32 normaliser of the C kernel (rng_mrg.py:203-211, 488)
M1 = 2147483647  # 2^31 - 1
M2 = 2147462579  # 2^31 - 21069
MASK12, MASK13, MASK2, MULT2 = 511, 16777215, 65535, 21069
#: ``4.6566126e-10f``: the float32 just below 2^-31, so that float32(M1) * NORM < 1
NORM32 = np.float32(4.6566126e-10)
#: streams of a draw whose size is symbolic (``guess_n_streams``, rng_mrg.py:621: 60 * 256)
DEFAULT_N_STREAMS = 60 * 256

#: one-step transition matrices on (x11, x12, x13) and (x21, x22, x23)
A1 = ((0, 1 << 22, (1 << 7) + 1), (1, 0, 0), (0, 1, 0))
A2 = ((1 << 15, 0, (1 << 15) + 1), (1, 0, 0), (0, 1, 0))


#: a 3x3 integer matrix as nested tuples (exact Python integers)
Matrix3 = tuple[tuple[int, ...], ...]


def _matmul_mod(a: Matrix3, b: Matrix3, m: int) -> Matrix3:
    return tuple(
        tuple(sum(a[i][k] * b[k][j] for k in range(3)) % m for j in range(3)) for i in range(3)
    )


def matpow_mod(a: Matrix3, e: int, m: int) -> Matrix3:
    """``a ** e mod m`` for a 3x3 integer matrix (Python integers: exact)."""
    result: Matrix3 = ((1, 0, 0), (0, 1, 0), (0, 0, 1))
    while e:
        if e & 1:
            result = _matmul_mod(result, a, m)
        a = _matmul_mod(a, a, m)
        e >>= 1
    return result


#: jumps ahead by 2^72 (between substreams) and 2^134 (between streams)
JUMP72 = (matpow_mod(A1, 1 << 72, M1), matpow_mod(A2, 1 << 72, M2))
JUMP134 = (matpow_mod(A1, 1 << 134, M1), matpow_mod(A2, 1 << 134, M2))


def apply_jump(jump: tuple[Matrix3, Matrix3], states: np.ndarray) -> np.ndarray:
    """``states (k, 6)`` jumped ahead: each half times its matrix mod its modulus.

    Like Theano's ``DotModulo`` (rng_mrg.py:79): every product reduced mod m, then the
    sum of the three reduced mod m (int64 never overflows: products < 2^62).
    """
    s = np.asarray(states, dtype=np.int64).reshape(-1, 6)
    out = np.empty_like(s)
    for half, (mat, m) in enumerate(zip(jump, (M1, M2))):
        v = s[:, 3 * half : 3 * half + 3]
        for i in range(3):
            acc = np.zeros(len(s), dtype=np.int64)
            for j in range(3):
                acc += (v[:, j] * mat[i][j]) % m
            out[:, 3 * half + i] = acc % m
    return out


def substream_states(rstate: np.ndarray, n_streams: int) -> np.ndarray:
    """``get_substream_rstates`` (rng_mrg.py:764) without the ``inc_rstate``: ``(n, 6)`` int32,
    row ``i`` = ``rstate`` jumped ``i * 2^72`` draws ahead (computed by doubling)."""
    if not 0 < n_streams < 2**72:
        raise ValueError(f"n_streams must be positive, got {n_streams}")
    rows = np.asarray(rstate, dtype=np.int64).reshape(1, 6)
    jump: tuple[Matrix3, Matrix3] = JUMP72
    while len(rows) < n_streams:
        rows = np.concatenate([rows, apply_jump(jump, rows)])
        jump = (_matmul_mod(jump[0], jump[0], M1), _matmul_mod(jump[1], jump[1], M2))
    return rows[:n_streams].astype(np.int32)


def _wrap32(x: np.ndarray) -> np.ndarray:
    """Two's-complement int32 wrap of int64 values (what the C kernel's additions do)."""
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _reduce(y: np.ndarray, m: int) -> np.ndarray:
    """``if (y < 0 || y >= m) y -= m;`` in int32."""
    return np.where((y < 0) | (y >= m), _wrap32(y - m), y)


def next_states(states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One MRG31k3p step of every row of ``states (k, 6)``: ``(new_states, d)``.

    ``d`` (int64, 1..M1) is the integer the kernel turns into the float sample.
    """
    s = np.asarray(states, dtype=np.int64)
    x11, x12, x13, x21, x22, x23 = (s[:, i] for i in range(6))
    # first component (rng_mrg.py:455-464)
    y1 = _wrap32(((x12 & MASK12) << 22) + (x12 >> 9) + ((x13 & MASK13) << 7) + (x13 >> 24))
    y1 = _reduce(y1, M1)
    y1 = _reduce(_wrap32(y1 + x13), M1)
    x13, x12, x11 = x12, x11, y1
    # second component (rng_mrg.py:466-477)
    y1 = _reduce(_wrap32(((x21 & MASK2) << 15) + _wrap32(MULT2 * (x21 >> 16))), M2)
    y2 = _reduce(_wrap32(((x23 & MASK2) << 15) + _wrap32(MULT2 * (x23 >> 16))), M2)
    y2 = _reduce(_wrap32(y2 + x23), M2)
    y2 = _reduce(_wrap32(y2 + y1), M2)
    x23, x22, x21 = x22, x21, y2
    new = np.stack([x11, x12, x13, x21, x22, x23], axis=1)
    d = np.where(x11 <= x21, _wrap32(x11 - x21 + M1), _wrap32(x11 - x21))
    return new, d


def to_float32(d: np.ndarray) -> np.ndarray:
    """``d * 4.6566126e-10f`` in float32 (rng_mrg.py:481-488): the int32 is rounded to
    float32 first, then multiplied and rounded again -- never 1.0."""
    out: np.ndarray = np.asarray(d).astype(np.float32) * NORM32
    return out


class StateMatrix:
    """One random op's shared state (``(n_streams, 6)`` int32) and its uniform draws."""

    def __init__(self, rows: np.ndarray) -> None:
        rows = np.array(rows, dtype=np.int32)
        if rows.ndim != 2 or rows.shape[1] != 6 or len(rows) == 0:
            raise ValueError(f"an MRG state matrix has shape (n_streams, 6), got {rows.shape}")
        self.rows = rows

    @property
    def n_streams(self) -> int:
        return len(self.rows)

    def copy(self) -> StateMatrix:
        return StateMatrix(self.rows.copy())

    def uniform(self, n: int) -> np.ndarray:
        """``n`` float32 uniforms as ``mrg_uniform`` draws them (dtype float32), advancing
        the rows used: element ``i`` from row ``i % n_streams``, in order."""
        out = np.empty(n, dtype=np.float32)
        ns = self.n_streams
        for start in range(0, n, ns):
            k = min(ns, n - start)
            new, d = next_states(self.rows[:k])
            self.rows[:k] = new
            out[start : start + k] = to_float32(d)
        return out


class MRGRandomStreams:
    """``MRG_RandomStreams(seed)`` (rng_mrg.py:663): the generator of a layer's ``trng``."""

    def __init__(self, seed: int) -> None:
        seed = int(seed)
        if seed == 0:
            raise ValueError("MRG_RandomStreams: seed should not be 0 (rng_mrg.py:699)")
        if not 0 < seed < M2:
            raise ValueError(f"MRG_RandomStreams: seed must be in 1..{M2 - 1}, got {seed}")
        self.rstate = np.full(6, seed, dtype=np.int32)

    def inc_rstate(self) -> None:
        """Jump the base state 2^134 draws ahead (rng_mrg.py:753)."""
        self.rstate = apply_jump(JUMP134, self.rstate)[0].astype(np.int32)

    def new_state_matrix(self, n_streams: int = DEFAULT_N_STREAMS) -> StateMatrix:
        """The state of the next random op created (``uniform`` / ``multinomial``)."""
        rows = substream_states(self.rstate, n_streams)
        self.inc_rstate()
        return StateMatrix(rows)
