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
