"""User-facing errors: the CLI prints their message and exits non-zero, without a traceback."""


class StudyError(Exception):
    """Bad input or configuration that the user must fix; the message says what and where."""


def first_line(error: BaseException) -> str:
    """A library error's first line (its name if it has no message), for a one-line StudyError."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
