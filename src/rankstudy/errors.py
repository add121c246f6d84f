"""User-facing errors: the CLI prints their message and exits non-zero, without a traceback."""


class StudyError(Exception):
    """Bad input or configuration that the user must fix; the message says what and where."""
