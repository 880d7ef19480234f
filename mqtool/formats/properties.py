"""The message properties string (spec §2.5, §2.6; `MessageDecoder.string2messageProperties`).

`name \\x01 value \\x02` repeated. Parsing follows RocketMQ's skipping rules; building keeps any
order given, and `hashmap_order` gives the order a broker-side re-put produces.
"""

from collections.abc import Iterable
from typing import NamedTuple

from mqtool.formats.javahash import hashmap_order

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"


def parse_pairs(s: str) -> list[tuple[str, str]]:
    """Every (name, value) pair RocketMQ would read, in stored order, duplicates kept."""
    pairs = []
    for seg in s.split(PROPERTY_SEPARATOR):
        if len(seg) < 3:  # too short to hold a name, the separator and a value
            continue
        i = seg.find(NAME_VALUE_SEPARATOR)
        if i <= 0 or i == len(seg) - 1:  # no name, or no value: RocketMQ skips the segment
            continue
        pairs.append((seg[:i], seg[i + 1 :]))
    return pairs


def parse_properties(s: str) -> dict[str, str]:
    """Properties as a dict in stored order; a repeated name keeps its last value."""
    out: dict[str, str] = {}
    for k, v in parse_pairs(s):
        out[k] = v
    return out


def build_properties(pairs: Iterable[tuple[str, str]] | dict[str, str]) -> str:
    """The stored string for these pairs, in the order given (`messageProperties2String`)."""
    items = pairs.items() if isinstance(pairs, dict) else pairs
    return "".join(f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}" for k, v in items)


def broker_properties(
    pairs: Iterable[tuple[str, str]] | dict[str, str], capacity: int = 128, trailing: bool = True
) -> str:
    """The string a broker writes after round-tripping the pairs through a `HashMap(capacity)`.

    5.1+ maps start at 128 buckets, 4.x at 16 (spec §2.6); `trailing=False` is 4.9.8, whose
    `messageProperties2String` drops the last separator.
    """
    items = list(pairs.items() if isinstance(pairs, dict) else pairs)
    raw = build_properties(hashmap_order(items, capacity))
    return raw if trailing else raw.removesuffix(PROPERTY_SEPARATOR)


class KeyOrder(NamedTuple):
    """What the properties string of a map with these keys needs (`key_order`)."""

    order: tuple[str, ...] | None  # the keys in HashMap order, None when that is the insertion order
    keys_len: int  # the UTF-8 length of the keys


# (keys in insertion order, map capacity) -> their `KeyOrder`. Re-puts of one kind always carry the same keys, so
# this stays small.
_ORDER: dict[tuple[tuple[str, ...], int], KeyOrder] = {}


def key_order(keys: tuple[str, ...], capacity: int) -> KeyOrder:
    """The order `broker_properties` writes a map with these keys in, and their UTF-8 length (remembered)."""
    hit = _ORDER.get((keys, capacity))
    if hit is None:
        order = tuple(k for k, _ in hashmap_order([(k, "") for k in keys], capacity))
        hit = KeyOrder(None if order == keys else order, len("".join(keys).encode("utf-8", "surrogateescape")))
        _ORDER[(keys, capacity)] = hit
    return hit


def broker_properties_length(props: dict[str, str], capacity: int, trailing: bool = True) -> int:
    """UTF-8 length of `broker_properties(props, capacity)` without building it; `trailing=False` is 4.9.8,
    whose `messageProperties2String` drops the last separator."""
    keys_len = key_order(tuple(props), capacity).keys_len
    values = "".join(props.values())
    n = len(values) if values.isascii() else len(values.encode("utf-8", "surrogateescape"))
    n += keys_len + 2 * len(props)
    return n if trailing or not props else n - 1
