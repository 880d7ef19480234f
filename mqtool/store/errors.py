"""Errors a user causes (wrong path, unreadable file): one clear line, never a traceback."""

from pathlib import Path

from mqtool.errors import MqtoolError


class StoreError(MqtoolError):
    """The store cannot be opened or a file cannot be read; the message names the file (and offset)."""

    def __init__(self, message: str, path: Path | str | None = None, offset: int | None = None):
        where = ""
        if path is not None:
            where = f"{path}" + (f" @{offset}" if offset is not None else "") + ": "
        super().__init__(where + message)
        self.path = path
        self.offset = offset
