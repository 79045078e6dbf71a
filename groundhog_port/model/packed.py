"""Products by a weight matrix packed once: onnxruntime's MLAS ``sgemm`` on pre-packed ``W``.

Decoding multiplies a few rows (a batch's hypotheses) by the same weights at every step.
MKL, under ``torch.mm``, packs ``W`` into its panels again on every call; with 20-40 rows
that packing is a large share of the product.  MLAS (onnxruntime's CPU kernels) packs a
constant ``W`` once, when the session is made, and multiplies by the packed panels
afterwards.  Measured on the 2-core AMD EPYC (issue 54, one thread,
``[rows, 620] @ [620, 30001]``, the output layer of RNNsearch-50): MKL 46.8 GFLOP/s at 20
rows and 63.3 at 40 (its best, in 2048-column blocks); MLAS packed 66.0 and 79.4.  A beam-1
decode of 20 sentences took 3.5-4.3 s instead of 5.0-5.8 s.

Every product ``x @ W`` by a :class:`torch.nn.Parameter` ``W`` that needs no gradient
(search, scoring, sampling: :func:`~groundhog_port.model.numerics.mm`) runs here, so the
literal and the batched search, and the beam of any size, multiply by the same kernel.
A row's result does not depend on the other rows of the product: MLAS computes each output
element as one sum over ``k`` in a fixed order (blocks of ``k`` and of 16 columns, whatever
the number of rows), which ``parity_tests/unit/test_numerics.py`` checks for the shapes of
the search (1-1000 rows).  Training's products (gradients needed) stay torch's.

The session is one ``MatMul`` node whose ``W`` is handed to onnxruntime as an external
initializer from the parameter's memory (no serialised copy): the model proto is a few
hundred bytes, written here (:func:`matmul_model`) so that ``import onnx`` (a second on
this machine) is never needed.  A packed weight is remade when the parameter changes (its
version counter: in-place updates; its storage: ``param.data = ...``).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Iterable

import numpy as np
import torch

#: ONNX's numbers: TensorProto.FLOAT, TensorProto.EXTERNAL, the IR version and opset used
_FLOAT, _EXTERNAL, _IR_VERSION, _OPSET = 1, 1, 8, 17


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, value: int | bytes | str) -> bytes:
    """One protobuf field: a varint (int) or a length-delimited value (bytes, str)."""
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    data = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _value_info(name: str, dims: tuple[int | str, ...]) -> bytes:
    """ValueInfoProto: a float tensor of ``dims`` (an int, or a str for a free dimension)."""
    shape = b"".join(_field(1, _field(1 if isinstance(d, int) else 2, d)) for d in dims)
    tensor_type = _field(1, _FLOAT) + _field(2, shape)
    return _field(1, name) + _field(2, _field(1, tensor_type))


def matmul_model(k: int, n: int) -> bytes:
    """The serialised ModelProto of ``y = MatMul(x, W)``: ``x (M, k)`` an input, ``W (k, n)``
    an initializer whose data is external (given to the session from memory)."""
    node = _field(1, "x") + _field(1, "W") + _field(2, "y") + _field(4, "MatMul")
    external = b"".join(
        _field(13, _field(1, key) + _field(2, value))
        for key, value in (("location", "W"), ("offset", "0"), ("length", str(4 * k * n)))
    )
    weight = _field(1, k) + _field(1, n) + _field(2, _FLOAT) + _field(8, "W") + external
    weight += _field(14, _EXTERNAL)
    graph = (
        _field(1, node)
        + _field(2, "packed_matmul")
        + _field(5, weight)
        + _field(11, _value_info("x", ("M", k)))
        + _field(12, _value_info("y", ("M", n)))
    )
    opset = _field(1, "") + _field(2, _OPSET)
    return _field(1, _IR_VERSION) + _field(7, graph) + _field(8, opset)


class PackedWeight:
    """``x @ W`` by onnxruntime's MLAS on ``W`` packed when this is made."""

    def __init__(self, weight: np.ndarray, threads: int) -> None:
        """``weight``: a C-contiguous float32 ``(k, n)`` array (a parameter's memory)."""
        import onnxruntime as ort

        k, n = weight.shape
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # its warnings about the graph are not the user's
        # threads that spin between products take a core another process may need
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # onnxruntime copies W into its packed panels while the session is made
        options.add_external_initializers(["W"], [ort.OrtValue.ortvalue_from_numpy(weight)])
        self.session = ort.InferenceSession(
            matmul_model(k, n), options, providers=["CPUExecutionProvider"]
        )
        self.k, self.n = k, n
        #: what it was made from (:func:`_source`), set by whoever made it
        self.source: tuple[int, int, int] | None = None

    def __call__(self, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """``x (rows, k) @ W`` written into ``out (rows, n)`` (both contiguous float32)."""
        binding = self.session.io_binding()
        binding.bind_input("x", "cpu", 0, np.float32, list(x.shape), x.data_ptr())
        binding.bind_output("y", "cpu", 0, np.float32, list(out.shape), out.data_ptr())
        self.session.run_with_iobinding(binding)
        return out


#: id(parameter) -> (a weak reference to it, its packed forms by thread count); an entry goes
#: with its parameter (a WeakKeyDictionary would compare tensors with ``==``)
_PACKED: dict[int, tuple[weakref.ref[torch.Tensor], dict[int, PackedWeight]]] = {}
_LOCK = threading.Lock()


def packs(x: torch.Tensor, w: torch.Tensor) -> bool:
    """Whether ``x @ w`` is a product by a packed weight: ``w`` a parameter (made outside
    inference mode), both float32 on the CPU, no gradient needed."""
    return (
        isinstance(w, torch.nn.Parameter)
        and w.device.type == "cpu"
        and x.device.type == "cpu"
        and x.dtype == w.dtype == torch.float32
        and w.dim() == 2
        and not w.is_inference()  # made in inference mode: no version counter to follow
        and not (torch.is_grad_enabled() and (x.requires_grad or w.requires_grad))
    )


def _forgetter(key: int) -> Callable[[weakref.ref[torch.Tensor]], None]:
    """The weak reference's callback: the entry goes with its parameter."""

    def forget(_: weakref.ref[torch.Tensor]) -> None:
        _PACKED.pop(key, None)

    return forget


def _source(w: torch.Tensor) -> tuple[int, int, int]:
    """What a packed form was made from: ``w``'s storage, its place in it, its version."""
    return (w.untyped_storage().data_ptr(), w.data_ptr(), w._version)


def _forms_of(w: torch.Tensor) -> dict[int, PackedWeight]:
    """Parameter ``w``'s packed forms by thread count (a new, empty entry the first time);
    the caller holds ``_LOCK``."""
    key = id(w)
    entry = _PACKED.get(key)
    if entry is None or entry[0]() is not w:
        entry = _PACKED[key] = (weakref.ref(w, _forgetter(key)), {})
    return entry[1]


def packed(w: torch.Tensor, threads: int) -> PackedWeight:
    """The packed form of parameter ``w`` for products on ``threads`` threads, made on first
    use and remade when ``w`` has changed since."""
    now = _source(w)
    with _LOCK:
        forms = _forms_of(w)
        form = forms.get(threads)
        if form is None or form.source != now:
            form = forms[threads] = PackedWeight(np.ascontiguousarray(w.detach().numpy()), threads)
            form.source = now
        return form


class PackingAhead:
    """Weights packed on a thread while the model file is still being read.

    Reading a model file is mostly system calls and CRC-32s, which release the GIL;
    making a packed form holds it.  So the reader hands each array over as it lands
    (:meth:`submit`), a thread packs it meanwhile, and once the parameters have taken the
    arrays' memory (``checkpoint.load_into``) :meth:`adopt` gives each parameter the form
    packed from its own memory (issue 54, RNNsearch-50, one process: the read and the
    packing one after the other 0.55-0.67 s, overlapped 0.42-0.50 s).  A parameter whose memory is not an array handed over here (a
    converted old vintage, a copy) is packed on first use as before; nothing handed over
    outlives :meth:`close`."""

    def __init__(self, threads: int) -> None:
        from concurrent.futures import Future, ThreadPoolExecutor

        self.threads = threads
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="packing")
        # each array is kept with its form until adopted or closed: its memory cannot be
        # freed and reused by another array at the same address meanwhile
        self._forms: dict[tuple[int, tuple[int, ...]], tuple[np.ndarray, Future[PackedWeight]]] = {}

    def submit(self, a: np.ndarray) -> None:
        """Pack ``a`` (a float32 matrix of the model file) on the thread."""
        if a.dtype == np.float32 and a.ndim == 2 and a.flags.c_contiguous and a.size:
            self._forms[(a.ctypes.data, a.shape)] = (
                a,
                self._pool.submit(PackedWeight, a, self.threads),
            )

    def adopt(self, params: Iterable[torch.Tensor]) -> None:
        """Give every parameter of ``params`` that holds a submitted array's memory (same
        place, same shape, contiguous float32 on the CPU) the form packed from it."""
        for w in params:
            found = self._forms.pop((w.data_ptr(), tuple(w.shape)), None)
            if (
                found is not None
                and isinstance(w, torch.nn.Parameter)
                and w.device.type == "cpu"
                and w.dtype == torch.float32
                and w.is_contiguous()
                and not w.is_inference()
            ):
                form = found[1].result()
                form.source = _source(w)
                with _LOCK:
                    _forms_of(w)[self.threads] = form

    def close(self) -> None:
        """Wait for the thread, drop whatever was not adopted."""
        self._pool.shutdown(wait=True)
        self._forms.clear()

    def __enter__(self) -> PackingAhead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def product(x2: torch.Tensor, w: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``x2 (rows, k) @ w`` by the packed ``w`` (:func:`packs` must hold), on torch's
    thread count of threads; into ``out[:rows]`` when given."""
    rows, n = x2.shape[0], w.shape[1]
    y = x2.new_empty((rows, n)) if out is None else out[:rows]
    if rows == 0:
        return y
    x2 = x2.contiguous()
    target = y if y.is_contiguous() else x2.new_empty((rows, n))
    packed(w, torch.get_num_threads())(x2, target)
    if target is not y:
        y.copy_(target)
    return y


def _forget_threaded() -> None:
    """A forked child has none of its parent's threads: sessions of more than one thread
    are made again there (one-thread sessions have none and stay, in copy-on-write memory)."""
    with _LOCK:
        for _, forms in _PACKED.values():
            for threads in [t for t in forms if t > 1]:
                del forms[threads]


os.register_at_fork(after_in_child=_forget_threaded)
