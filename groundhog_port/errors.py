"""Errors the port raises for bad legacy input, and the CLI's exit codes.

Every loader reports a problem with a file as :class:`LegacyInputError`, whose
message names the file, what is wrong and (where it helps) what was expected.
The CLI turns it into one line on stderr and exit code ``EXIT_INPUT``.
"""

from __future__ import annotations

EXIT_OK = 0
#: a parity check or comparison failed
EXIT_MISMATCH = 1
#: usage error or bad input file
EXIT_INPUT = 2
#: some sentences could not be translated (the original would have crashed)
EXIT_PARTIAL = 3


#: longest value quoted whole in an error (:func:`quoted`)
MAX_QUOTED = 200
#: longest problem text of one error line; a longer one is cut in its middle, saying how much
#: was cut (a 30 MB state value was once quoted whole: a 30,000,220-byte line, issue 25)
MAX_PROBLEM = 2000
#: longest file name shown whole (PATH_MAX is 4096: a longer "path" from a state names no file)
MAX_PATH = 4096


def cut(text: str, limit: int, what: str = "characters") -> str:
    """``text`` if at most ``limit`` long, else its start and end around ``[N <what> cut]``."""
    if len(text) <= limit:
        return text
    head, tail = limit * 2 // 3, limit // 3
    return f"{text[:head]} ...[{len(text) - head - tail} {what} cut]... {text[-tail:]}"


def quoted(value: object, limit: int = MAX_QUOTED) -> str:
    """``repr(value)`` for an error line, at most about ``limit`` characters; when cut, the
    value's full length is said (``'xxxx...' (30000000 characters)``).  Containers are
    shown through :mod:`reprlib` (never repr'd whole first)."""
    import reprlib

    if isinstance(value, (str, bytes, bytearray)):
        if len(value) <= limit:
            return repr(value)
        unit = "characters" if isinstance(value, str) else "bytes"
        return f"{value[:limit]!r}... ({len(value)} {unit})"
    r = reprlib.Repr()
    r.maxstring = r.maxother = limit
    r.maxlist = r.maxtuple = r.maxdict = r.maxset = r.maxfrozenset = 10
    text = r.repr(value)
    try:
        size: int | None = len(value)  # type: ignore[arg-type]  # a TypeError when unsized
    except TypeError:
        size = None
    if size is not None and size > 10:
        text += f" ({size} items)"
    return text


def shown(text: str) -> str:
    """``text`` (a path, a name) printable anywhere: bytes of a file name that are not UTF-8,
    which Python keeps as surrogates (``os.fsdecode``), shown as ``\\xff``; a printer or a
    JSON writer would otherwise raise ``UnicodeEncodeError`` on them."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        try:
            return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:  # a surrogate no file name decodes to
            return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def shown_all(value: object) -> object:
    """``value`` (a JSON-able structure) with every string, key or value, made printable by
    :func:`shown` (a report naming a folder whose bytes are not UTF-8 raised
    ``UnicodeEncodeError`` when written)."""
    if isinstance(value, str):
        return shown(value)
    if isinstance(value, dict):
        return {shown_all(k): shown_all(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [shown_all(v) for v in value]
    return value


def unshown(text: str) -> str:
    """:func:`shown` undone: ``\\xNN`` (NN from 80 to ff) back to the byte a file name holds
    (Python's surrogate for it).  A name that really holds a backslash, ``x`` and two hex
    digits reads differently: callers try the name as written first."""
    import re

    return re.sub(r"\\x([89a-f][0-9a-f])", lambda m: chr(0xDC00 + int(m.group(1), 16)), text)


class LegacyInputError(Exception):
    """A legacy file (or a value in it) that the port refuses to use.

    ``str(err)`` is ``"<path>: <problem>"`` -- one line, ready for the CLI, at most about
    :data:`MAX_PATH` + :data:`MAX_PROBLEM` characters whatever the file holds.
    """

    def __init__(self, path: object, problem: object) -> None:
        self.path = cut(shown(str(path)), MAX_PATH) if path is not None else None
        # one line whatever the problem quotes (e.g. an exception message holding a newline)
        problem = shown(str(problem)).replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
        self.problem = problem = cut(problem, MAX_PROBLEM)
        super().__init__(f"{self.path}: {problem}" if self.path else problem)


class UnsupportedModelError(LegacyInputError):
    """A state option the port (or the original) cannot run."""


def allocation_failure(err: BaseException) -> str | None:
    """A one-line description when ``err`` is a failed memory allocation, else ``None``.

    Python raises :class:`MemoryError`; torch's CPU allocator a ``RuntimeError`` ("...
    DefaultCPUAllocator: can't allocate memory: you tried to allocate N bytes ..."), CUDA a
    ``torch.OutOfMemoryError`` (a ``RuntimeError`` saying "out of memory").  A state or an
    option asking for more than the machine has is a usage error (exit 2), not a crash."""
    import re

    text = " ".join(str(err).split())
    if isinstance(err, MemoryError):
        return "out of memory" + (f" ({text[:200]})" if text else "")
    if isinstance(err, RuntimeError) and any(
        sign in text for sign in ("can't allocate memory", "not enough memory", "out of memory")
    ):
        asked = re.search(r"allocate (\d+) bytes", text)
        size = f": tried to allocate {int(asked.group(1)) / 2**30:.1f} GiB" if asked else ""
        return (
            f"out of memory{size} (do the state's sizes -- dim, rank_n_approx, n_sym_*, bs "
            "-- or the options ask for more than this machine has?)"
        )
    return None
