"""Java's number parsing as the broker's rules use it: `Integer.parseInt` / `Long.parseLong`.

Python's `int()` also takes spaces, underscores and any size; Java refuses them, and the broker's
rules depend on the refusal (e.g. `getInt` turns it into -1).
"""

import re

_DECIMAL = re.compile(r"[+-]?\d+")
INT_MIN, INT_MAX = -2**31, 2**31 - 1
LONG_MIN, LONG_MAX = -2**63, 2**63 - 1


def parse_int(text: str | None) -> int | None:
    """`Integer.parseInt(text)`, None where Java throws (null, not a decimal, out of int range)."""
    return _parse(text, INT_MIN, INT_MAX)


def parse_long(text: str | None) -> int | None:
    """`Long.parseLong(text)`, None where Java throws."""
    return _parse(text, LONG_MIN, LONG_MAX)


def _parse(text: str | None, lo: int, hi: int) -> int | None:
    if text is None or not _DECIMAL.fullmatch(text):
        return None
    v = int(text)
    return v if lo <= v <= hi else None
