"""User-facing errors: the CLI prints them as one line, without a traceback, and exits non-zero."""


class HaseError(Exception):
    """A problem the user can fix; the message names the problem and the fix in one line."""


def first_line(exc: BaseException, *, last: bool = False) -> str:
    """One line of an exception's message (the first non-empty one, or the last with `last=True`, which is where
    OpenVINO and some ORT errors put the cause), at most 300 characters; the type name when it has no message."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    if not lines:
        return type(exc).__name__
    return (lines[-1] if last else lines[0])[:300]
