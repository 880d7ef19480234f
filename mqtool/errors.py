"""The one base of every error a user can cause (a wrong path, an unreadable or broken file, a bad time).

The CLI turns an `MqtoolError` into one `Error: ...` line and exit code 2, and catches nothing else:
any other exception is a bug and shows as one (a traceback, exit 1). So the library raises a subclass
of `MqtoolError`, with a one-line message naming the path as the user gave it, for every mistake the
user can fix, and lets everything else through.
"""


class MqtoolError(Exception):
    """An input or environment problem the user can fix; `str(e)` is the whole one-line message."""


class ConfigFileError(MqtoolError, ValueError):
    """A config file that cannot be read; says what is wrong and, for text, where (1-based line/col).

    Here, not with the JSON parsers (`formats/offsets_json.py`): broker.conf's reader, which every command
    imports, raises it too."""

    def __init__(self, reason: str, line: int | None = None, col: int | None = None) -> None:
        self.reason, self.line, self.col = reason, line, col
        where = f" at line {line} col {col}" if line is not None else ""
        super().__init__(reason + where)
