"""Java's `String.hashCode()` and `HashMap` iteration order (spec §2.6, §3).

RocketMQ keys ConsumeQueue tagsCodes and TimerLog topic hashes on `String.hashCode()`, and re-put
records serialise their properties from a `HashMap`, so rebuilding their bytes needs both.
"""

from collections.abc import Iterable


def java_string_hash(s: str) -> int:
    """`String.hashCode()`: 31-polynomial over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    try:
        data = s.encode("utf-16-be")
    except UnicodeEncodeError:
        data = _java_decoded(s).encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _java_decoded(s: str) -> str:
    """The String Java holds for `s`: mqtool keeps undecodable bytes as surrogates
    (surrogateescape), where `new String(bytes, UTF_8)` has U+FFFD for each malformed sequence."""
    try:
        return s.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:  # a lone surrogate that is not an escaped byte: Java keeps the code unit
        return s


def _spread(h: int) -> int:
    """`HashMap.hash()`: `h ^ (h >>> 16)` on the unsigned 32-bit value."""
    u = h & 0xFFFFFFFF
    return u ^ (u >> 16)


def hashmap_capacity(initial: int, size: int) -> int:
    """Table size of a `new HashMap<>(initial)` after `size` insertions (load factor 0.75)."""
    cap = 1
    while cap < initial:
        cap <<= 1
    while size > cap * 3 // 4:
        cap <<= 1
    return cap


def hashmap_order(pairs: Iterable[tuple[str, str]], initial_capacity: int = 128) -> list[tuple[str, str]]:
    """Pairs in the order a Java `HashMap` built by inserting them (in order) iterates them.

    Buckets ascend; inside a bucket, insertion order (a resize split keeps relative order).
    A repeated key keeps its first position and its last value, as `put` does.
    """
    first: dict[str, int] = {}
    values: dict[str, str] = {}
    for i, (k, v) in enumerate(pairs):
        first.setdefault(k, i)
        values[k] = v
    cap = hashmap_capacity(initial_capacity, len(values))
    keys = sorted(values, key=lambda k: (_spread(java_string_hash(k)) & (cap - 1), first[k]))
    return [(k, values[k]) for k in keys]
