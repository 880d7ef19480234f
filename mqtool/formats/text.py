"""Java strings on disk: UTF-8, decoded losslessly so that a parse and a build give the same bytes."""

from construct import Adapter


class JavaUtf8(Adapter):
    """UTF-8 text; invalid bytes survive as surrogate escapes so a rebuild is byte-identical."""

    def _decode(self, obj, context, path):
        return bytes(obj).decode("utf-8", "surrogateescape")

    def _encode(self, obj, context, path):
        return utf8(obj)


def utf8(s: str) -> bytes:
    """The stored bytes of a string decoded by `JavaUtf8`."""
    return s.encode("utf-8", "surrogateescape")
