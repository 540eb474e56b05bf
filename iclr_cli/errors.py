"""Errors that carry their own exit code and a message fit for the terminal.

Exit codes (project rule): 0 ok, 1 failure, 2 usage or input error, 130 interrupted.
"""

from __future__ import annotations


class IclrError(Exception):
    """A failure the CLI reports as one line and exit code :attr:`exit_code` (1)."""

    exit_code = 1


class UsageError(IclrError):
    """The command line asks for something that cannot be done (exit 2)."""

    exit_code = 2


class InputError(IclrError):
    """Input that cannot be read as the format it claims to be (exit 2).

    The message always names the file and, where known, the 1-based line and the JSON field,
    as ``FILE:LINE: field FIELD: problem``.
    """

    exit_code = 2

    def __init__(self, source: str, problem: str, *, line: int | None = None, field: str | None = None):
        self.source = source
        self.line = line
        self.field = field
        self.problem = problem
        where = source if line is None else f"{source}:{line}"
        what = problem if field is None else f"field {field!r}: {problem}"
        super().__init__(f"{where}: {what}")

    @property
    def summary(self) -> str:
        """The problem's first line, without the colon that introduces what follows it (an
        unknown format's message goes on to list every format tried): for one-line lists
        of files passed over."""
        return self.problem.split("\n", 1)[0].rstrip().rstrip(":")


class Interrupted(IclrError):
    """Ctrl-C (SIGINT) stopped a command (exit 130); the message says what was kept."""

    exit_code = 130
