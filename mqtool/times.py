"""Times as users write them (ISO-8601, epoch ms, relative `-2h`/`+30m`) and as mqtool prints them.

Relative times need an explicit `now`: the simulator passes its virtual clock, never the wall clock.
"""

import re
from datetime import UTC, datetime

from mqtool.errors import MqtoolError

_REL = re.compile(r"^([+-])\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


class TimeFormatError(MqtoolError, ValueError):
    """A time the user wrote that is none of the accepted forms."""


def parse_duration_ms(text: str) -> int:
    """`90s`, `3d`, `1500ms`, `2h` (no unit: milliseconds) as milliseconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*", text)
    if not m:
        raise TimeFormatError(f"not a duration: {text!r} (use e.g. 90s, 30m, 2h, 3d)")
    return int(float(m.group(1)) * _UNIT_MS[m.group(2) or "ms"])


def parse_time(text: str | int, now_ms: int | None = None, local: bool = False) -> int:
    """Epoch milliseconds for an ISO-8601 time, an epoch-ms integer, or `+/-N unit` relative to now_ms.

    An ISO time without an offset is UTC, or local time with `local` (as `--local` prints times, so a
    time copied from that output means what it showed).
    """
    if isinstance(text, int):
        return text
    t = text.strip()
    if re.fullmatch(r"-?\d{10,}", t):
        return int(t)
    m = _REL.match(t)
    if m:
        if now_ms is None:
            raise TimeFormatError(f"relative time {text!r} needs a reference time")
        delta = int(float(m.group(2)) * _UNIT_MS[m.group(3) or "ms"])
        return now_ms + delta if m.group(1) == "+" else now_ms - delta
    try:
        dt = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise TimeFormatError(
            f"not a time: {text!r} (use ISO-8601 like 2026-11-22T10:00:00Z, epoch ms, or -2h / +30m)"
        ) from None
    if dt.tzinfo is None:
        dt = dt.astimezone() if local else dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def format_time(ms: int | None, local: bool = False) -> str:
    """UTC ISO-8601 with milliseconds (`2026-11-22T10:00:00.000Z`); local time when asked."""
    if ms is None:
        return "-"
    dt = datetime.fromtimestamp(ms / 1000, UTC)
    if local:
        return dt.astimezone().isoformat(timespec="milliseconds")
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def format_duration(ms: int) -> str:
    """A short human duration: `1h58m`, `3d2h`, `45s`, `120ms`; negative with a leading `-`."""
    sign, ms = ("-", -ms) if ms < 0 else ("", ms)
    if ms < 1000:
        return f"{sign}{ms}ms"
    s = ms // 1000
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    parts = [f"{v}{u}" for v, u in ((d, "d"), (h, "h"), (m, "m"), (s, "s")) if v]
    return sign + ("".join(parts[:2]) or "0s")  # the two largest units: 62d7h, 1h58m, 45s
