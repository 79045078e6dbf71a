"""Errors the port raises for bad legacy input, and the CLI's exit codes.

Every loader reports a problem with a file as :class:`LegacyInputError`, whose
message names the file, what is wrong and (where it helps) what was expected.
The CLI turns it into one line on stderr and exit code ``EXIT_INPUT``.
"""

EXIT_OK = 0
#: a parity check or comparison failed
EXIT_MISMATCH = 1
#: usage error or bad input file
EXIT_INPUT = 2
#: some sentences could not be translated (the original would have crashed)
EXIT_PARTIAL = 3


class LegacyInputError(Exception):
    """A legacy file (or a value in it) that the port refuses to use.

    ``str(err)`` is ``"<path>: <problem>"`` -- one line, ready for the CLI.
    """

    def __init__(self, path, problem):
        self.path = str(path) if path is not None else None
        # one line whatever the problem quotes (e.g. an exception message holding a newline)
        problem = str(problem).replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
        self.problem = problem
        super().__init__(f"{self.path}: {problem}" if self.path else problem)


class UnsupportedModelError(LegacyInputError):
    """A state option the port (or the original) cannot run."""


def allocation_failure(err):
    """A one-line description when ``err`` is a failed memory allocation, else ``None``.

    Python raises :class:`MemoryError`; torch's CPU allocator a ``RuntimeError`` ("...
    DefaultCPUAllocator: can't allocate memory: you tried to allocate N bytes ..."), CUDA a
    ``torch.OutOfMemoryError`` (a ``RuntimeError`` saying "out of memory").  A state or an
    option asking for more than the machine has is a usage error (exit 2), not a crash."""
    import re
    text = " ".join(str(err).split())
    if isinstance(err, MemoryError):
        return "out of memory" + (f" ({text[:200]})" if text else "")
    if isinstance(err, RuntimeError) and ("can't allocate memory" in text or "out of memory" in text):
        asked = re.search(r"allocate (\d+) bytes", text)
        size = f": tried to allocate {int(asked.group(1)) / 2 ** 30:.1f} GiB" if asked else ""
        return (f"out of memory{size} (do the state's sizes -- dim, rank_n_approx, n_sym_*, bs "
                "-- or the options ask for more than this machine has?)")
    return None
