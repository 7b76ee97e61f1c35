"""User-facing errors: the CLI prints them as one line, without a traceback, and exits non-zero."""


class HaseError(Exception):
    """A problem the user can fix; the message names the problem and the fix in one line."""
