"""`config/delayOffset.json` and `config/consumerOffset.json`: RocketMQ's fastjson dialect (spec §4.7, §5).

Mirrors `DelayOffsetSerializeWrapper` (written by `ScheduleMessageService.encode`), `ConsumerOffsetManager`
and `DataVersion`, serialised by fastjson 1.2.x `JSON.toJSONString(obj, prettyFormat=true)` and persisted
through `ConfigManager.persist` / `MixAll.string2File`. fastjson writes integer map keys unquoted, so the
files are not JSON: a small tolerant recursive-descent reader (`loads_lenient`) reads them and every other
ConfigManager file (topics.json, timermetrics, ...). The dumpers reproduce fastjson's pretty format and
Java's `ConcurrentHashMap` / `HashMap` iteration order byte for byte. Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mqtool.errors import ConfigFileError
from mqtool.formats.javahash import java_string_hash

__all__ = [
    "DELAY_TABLE_SIZE",
    "FRESH_CONSUMER_TABLE_SIZE",
    "LOADED_TABLE_SIZE",
    "ConfigFileError",
    "ConsumerOffsets",
    "DataVersion",
    "DelayOffsets",
    "derive_group_topic_map",
    "dump_consumer_offsets",
    "dump_delay_offsets",
    "loads_lenient",
    "parse_consumer_offsets",
    "parse_delay_offsets",
]

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1


# --------------------------------------------------------------------------- data model


@dataclass(frozen=True)
class DataVersion:
    """`DataVersion`: 4.x has no `stateVersion` (None = not written)."""

    counter: int
    state_version: int | None
    timestamp: int


@dataclass(frozen=True)
class DelayOffsets:
    """`DelayOffsetSerializeWrapper`: delay level -> next ConsumeQueue offset of `SCHEDULE_TOPIC_XXXX`."""

    offset_table: dict[int, int]
    data_version: DataVersion | None = None

    def offset(self, level: int) -> int:
        """Offset of a level; 0 when absent, as `ScheduleMessageService` starts such a level at 0."""
        return self.offset_table.get(level, 0)


@dataclass(frozen=True)
class ConsumerOffsets:
    """`ConsumerOffsetManager`: "TOPIC@GROUP" -> queue id -> committed offset."""

    offset_table: dict[str, dict[int, int]]
    data_version: DataVersion | None = None
    group_topic_map: dict[str, list[str]] | None = None

    def offset(self, topic: str, group: str, queue_id: int) -> int | None:
        """Committed offset, None when the group never committed one for that queue."""
        return self.offset_table.get(f"{topic}@{group}", {}).get(queue_id)

    def with_offset(self, topic: str, group: str, queue_id: int, offset: int) -> ConsumerOffsets:
        """A copy with one offset set; a present groupTopicMap is re-derived as the broker's getter does."""
        key = f"{topic}@{group}"
        table = {k: dict(v) for k, v in self.offset_table.items()}
        table.setdefault(key, {})[queue_id] = offset
        gtm = None if self.group_topic_map is None else derive_group_topic_map(table)
        return ConsumerOffsets(table, self.data_version, gtm)


def derive_group_topic_map(offset_table: Mapping[str, Mapping[int, int]]) -> dict[str, list[str]]:
    """`ConsumerOffsetManager.getGroupTopicMap()` (5.x): group -> topics, from keys "TOPIC@GROUP"."""
    out: dict[str, list[str]] = {}
    for key in offset_table:
        parts = key.split("@")
        while parts and parts[-1] == "":  # Java String.split drops trailing empty strings
            parts.pop()
        if len(parts) == 2 and parts[0] not in out.setdefault(parts[1], []):
            out[parts[1]].append(parts[0])
    return out


# --------------------------------------------------------------------------- tolerant reader


@dataclass(frozen=True)
class _Node:
    """A parsed value with its position, so that semantic errors can say where they are."""

    value: Any  # dict/list payloads hold _Node children; objects are list[tuple[_Node, _Node]]
    kind: str  # "object", "array", "string", "int", "float", "bool", "null", "name"
    line: int
    col: int


_WS = " \t\n\r\f\b\ufeff"
_ESCAPES = {
    '"': '"',
    "'": "'",
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "0": "\0",
}
_LITERALS = {"true": True, "false": False, "null": None}
_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?(?![0-9A-Za-z_.])")
_DECIMAL = re.compile(r"[+-]?[0-9]+")


class _Reader:
    """Recursive descent over fastjson's lenient syntax: bare integer/identifier keys, ' quotes, a trailing
    comma. Positions are 1-based line/column (a tab counts as one column)."""

    def __init__(self, text: str) -> None:
        self.text, self.pos = text, 0

    def where(self, pos: int | None = None) -> tuple[int, int]:
        p = self.pos if pos is None else pos
        line = self.text.count("\n", 0, p) + 1
        return line, p - (self.text.rfind("\n", 0, p) + 1) + 1

    def fail(self, reason: str, pos: int | None = None) -> ConfigFileError:
        return ConfigFileError(reason, *self.where(pos))

    def peek(self) -> str:
        while self.pos < len(self.text) and self.text[self.pos] in _WS:
            self.pos += 1
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, ch: str) -> None:
        got = self.peek()
        if got != ch:
            raise self.fail(f"expected {ch!r} but found {_show(got)}")
        self.pos += 1

    def document(self) -> _Node:
        if not self.peek():
            raise self.fail("empty document")
        node = self.value()
        if self.peek():
            raise self.fail(f"unexpected {_show(self.peek())} after the end of the document")
        return node

    def value(self) -> _Node:
        ch = self.peek()
        if ch == "{":
            return self.node(self.object, "object")
        if ch == "[":
            return self.node(self.array, "array")
        return self.scalar(ch, allow_name=False)

    def key(self) -> _Node:
        return self.scalar(self.peek(), allow_name=True)

    def scalar(self, ch: str, allow_name: bool) -> _Node:
        """A string, number or literal; as a key also a bare identifier (fastjson's unquoted field names)."""
        line, col = self.where()
        if ch and ch in "\"'":
            return _Node(self.string(), "string", line, col)
        if ch == "-" or "0" <= ch <= "9":
            return self.number(line, col)
        word = self.word()
        if word and not allow_name and word in _LITERALS:
            return _Node(_LITERALS[word], "null" if word == "null" else "bool", line, col)
        if word and allow_name:
            return _Node(word, "name", line, col)
        expected = "a key" if allow_name else "a value"
        raise self.fail(f"expected {expected} but found {_show(word or ch)}", self.pos - len(word))

    def node(self, read: Callable[[], Any], kind: str) -> _Node:
        line, col = self.where()
        return _Node(read(), kind, line, col)

    def object(self) -> list[tuple[_Node, _Node]]:
        self.expect("{")
        entries: list[tuple[_Node, _Node]] = []
        while self.peek() != "}":
            if entries and self.separator("}"):
                break
            key = self.key()
            self.expect(":")
            entries.append((key, self.value()))
        self.pos += 1
        return entries

    def array(self) -> list[_Node]:
        self.expect("[")
        items: list[_Node] = []
        while self.peek() != "]":
            if items and self.separator("]"):
                break
            items.append(self.value())
        self.pos += 1
        return items

    def separator(self, close: str) -> bool:
        """Consume the ',' between members; True when a trailing comma precedes `close` (fastjson allows)."""
        got = self.peek()
        if got != ",":
            raise self.fail(f"expected ',' or {close!r} but found {_show(got)}")
        self.pos += 1
        return self.peek() == close

    def word(self) -> str:
        start = self.pos
        while self.pos < len(self.text) and (self.text[self.pos].isalnum() or self.text[self.pos] in "_$"):
            self.pos += 1
        return self.text[start : self.pos]

    def number(self, line: int, col: int) -> _Node:
        match = _NUMBER.match(self.text, self.pos)
        if not match:
            raise self.fail(f"malformed number {self.text[self.pos : self.pos + 12]!r}")
        self.pos = match.end()
        if match.group(1) or match.group(2):
            return _Node(float(match.group()), "float", line, col)
        return _Node(int(match.group()), "int", line, col)

    def string(self) -> str:
        quote, start = self.text[self.pos], self.pos
        self.pos += 1
        out: list[str] = []
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            self.pos += 1
            if ch == quote:
                return "".join(out)
            out.append(self.escape() if ch == "\\" else ch)
        raise self.fail("unterminated string", start)

    def escape(self) -> str:
        ch = self.text[self.pos : self.pos + 1]
        self.pos += 1
        if ch in _ESCAPES:
            return _ESCAPES[ch]
        width = {"u": 4, "x": 2}.get(ch)
        digits = self.text[self.pos : self.pos + width] if width else ""
        if width and len(digits) == width and all(c in "0123456789abcdefABCDEF" for c in digits):
            self.pos += width
            return chr(int(digits, 16))
        raise self.fail(f"invalid escape \\{ch}", self.pos - 2)


def _show(token: str) -> str:
    return repr(token) if token else "end of file"


def _plain(node: _Node) -> Any:
    if node.kind == "object":
        return {_plain(k): _plain(v) for k, v in node.value}
    if node.kind == "array":
        return [_plain(v) for v in node.value]
    return node.value


def loads_lenient(text: str) -> Any:
    """Any ConfigManager file as plain Python values (bare integer keys become int keys)."""
    return _plain(_Reader(text).document())


# --------------------------------------------------------------------------- typed readers


def _fields(node: _Node, what: str) -> dict[str, _Node]:
    """Object members by (string) name; later duplicates win, as fastjson's setters do."""
    if node.kind != "object":
        raise ConfigFileError(f"{what} must be an object, not {node.kind}", node.line, node.col)
    return {str(k.value): v for k, v in node.value}


def _integer(node: _Node, what: str, lo: int = LONG_MIN, hi: int = LONG_MAX) -> int:
    """A Java int/long: a number or a quoted decimal string, as fastjson converts them."""
    if node.kind == "int":
        value = node.value
    elif node.kind == "string" and _DECIMAL.fullmatch(node.value.strip()):
        value = int(node.value)
    else:
        raise ConfigFileError(f"{what} must be an integer, not {_describe(node)}", node.line, node.col)
    if not lo <= value <= hi:
        raise ConfigFileError(f"{what} {value} is out of range", node.line, node.col)
    return value


def _describe(node: _Node) -> str:
    return f"{node.kind} {node.value!r}" if node.kind not in ("object", "array") else node.kind


def _int_map(node: _Node, what: str) -> dict[int, int]:
    """`ConcurrentMap<Integer, Long>`: bare or quoted integer keys."""
    if node.kind != "object":
        raise ConfigFileError(f"{what} must be an object, not {_describe(node)}", node.line, node.col)
    table: dict[int, int] = {}
    for key, value in node.value:
        k = _integer(key, f"{what} key", INT_MIN, INT_MAX)
        table[k] = _integer(value, f"{what}[{k}]")
    return table


def _data_version(node: _Node | None) -> DataVersion | None:
    node = _present(node)
    if node is None:
        return None
    f = _fields(node, "dataVersion")
    state = f.get("stateVersion")
    return DataVersion(
        counter=_integer(f["counter"], "dataVersion.counter") if "counter" in f else 0,
        state_version=None if state is None else _integer(state, "dataVersion.stateVersion"),
        timestamp=_integer(f["timestamp"], "dataVersion.timestamp") if "timestamp" in f else 0,
    )


def _present(node: _Node | None) -> _Node | None:
    """A member that is absent or `null` leaves the Java default."""
    return None if node is None or node.kind == "null" else node


def parse_delay_offsets(text: str) -> DelayOffsets:
    """Read delayOffset.json (5.x with dataVersion, 4.x without); unknown keys are ignored."""
    top = _fields(_Reader(text).document(), "the document")
    table = _present(top.get("offsetTable"))
    return DelayOffsets(
        offset_table={} if table is None else _int_map(table, "offsetTable"),
        data_version=_data_version(top.get("dataVersion")),
    )


def _nested_map(node: _Node, what: str) -> dict[str, dict[int, int]]:
    return {k: _int_map(v, f"{what}[{k!r}]") for k, v in _fields(node, what).items()}


def _group_topic_map(node: _Node | None) -> dict[str, list[str]] | None:
    node = _present(node)
    if node is None:
        return None
    out: dict[str, list[str]] = {}
    for group, topics in _fields(node, "groupTopicMap").items():
        if topics.kind != "array" or any(t.kind != "string" for t in topics.value):
            what = f"groupTopicMap[{group!r}] must be a list of strings"
            raise ConfigFileError(what, topics.line, topics.col)
        out[group] = [t.value for t in topics.value]
    return out


def parse_consumer_offsets(text: str) -> ConsumerOffsets:
    """Read consumerOffset.json (5.x adds dataVersion and groupTopicMap); unknown keys are ignored."""
    top = _fields(_Reader(text).document(), "the document")
    table = _present(top.get("offsetTable"))
    return ConsumerOffsets(
        offset_table={} if table is None else _nested_map(table, "offsetTable"),
        data_version=_data_version(top.get("dataVersion")),
        group_topic_map=_group_topic_map(top.get("groupTopicMap")),
    )


# --------------------------------------------------------------------------- Java iteration order


def _spread(h: int) -> int:
    """`ConcurrentHashMap.spread` / `HashMap.hash` on a signed 32-bit hashCode."""
    u = h & 0xFFFFFFFF
    return (u ^ (u >> 16)) & 0x7FFFFFFF


def _int_hash(k: int) -> int:
    return k  # Integer.hashCode()


def _chm_order(keys: Iterable[Any], hash_of: Callable[[Any], int], table: int) -> list[Any]:
    """`ConcurrentHashMap` iteration: bins ascending; ties keep the given order (put appends to a bin).

    `table` is the initial table size; the map doubles once the count reaches 0.75 × size.
    """
    keys = list(keys)
    while len(keys) >= table - (table >> 2):
        table <<= 1
    return sorted(keys, key=lambda k: _spread(hash_of(k)) & (table - 1))


def _hashmap_order(keys: Iterable[str], capacity: int) -> list[str]:
    """`HashMap`/`HashSet` iteration: bins ascending; grows when size exceeds 0.75 × capacity."""
    keys = list(keys)
    while len(keys) > capacity * 3 // 4:
        capacity <<= 1
    return sorted(keys, key=lambda k: _spread(java_string_hash(k)) & (capacity - 1))


# Table sizes: `new ConcurrentHashMap<>(32)` allocates 64 bins; a map fastjson created when the broker
# loaded the file (`new ConcurrentHashMap()`) starts at 16.
DELAY_TABLE_SIZE = 64
LOADED_TABLE_SIZE = 16
FRESH_CONSUMER_TABLE_SIZE = 1024  # ConsumerOffsetManager's own `new ConcurrentHashMap<>(512)`


# --------------------------------------------------------------------------- fastjson pretty writer


def _quote(s: str, browser_compatible: bool = False) -> str:
    """`SerializeWriter.writeStringWithDoubleQuote` with default features or, for the metrics files,
    BrowserCompatible: '/' escaped too, and every control and non-ASCII character as \\uXXXX of its
    UTF-16 units (default: only U+007F-U+009F and U+2028/9 beside the controls)."""
    out = ['"']
    for ch in s:
        code = ord(ch)
        if ch == '"' or ch == "\\" or (browser_compatible and ch == "/"):
            out.append("\\" + ch)
        elif ch in "\b\t\n\f\r":
            out.append("\\" + "btnfr"["\b\t\n\f\r".index(ch)])
        elif code < 0x20 or (code >= 0x7F if browser_compatible else 0x7F <= code < 0xA0 or ch in "\u2028\u2029"):
            out.extend(f"\\u{u:04X}" for u in _utf16(code))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _utf16(code: int) -> list[int]:
    if code < 0x10000:
        return [code]
    code -= 0x10000
    return [0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF)]


def _tabs(n: int) -> str:
    return "\t" * n


def _bean(fields: list[tuple[str, str]], indent: int) -> str:
    """`JavaBeanSerializer` pretty: one field per line, closing brace at the bean's own indent."""
    inner = ",\n" + _tabs(indent + 1)
    body = inner.join(f"{_quote(name)}:{value}" for name, value in fields)
    return "{\n" + _tabs(indent + 1) + body + "\n" + _tabs(indent) + "}"


def _int_key_map(table: Mapping[int, int], indent: int, size: int) -> str:
    """`MapSerializer` with Integer keys: no line breaks between entries, `}` on its own line."""
    if not table:
        return "{}"
    entries = ",".join(f"{k}:{table[k]}" for k in _chm_order(table, _int_hash, size))
    return "{" + entries + "\n" + _tabs(indent) + "}"


def _str_key_map(entries: list[tuple[str, str]], indent: int) -> str:
    """`MapSerializer` with String keys: each entry on its own line (values pre-rendered)."""
    if not entries:
        return "{}"
    sep = "\n" + _tabs(indent + 1)
    body = ",".join(sep + f"{_quote(k)}:{v}" for k, v in entries)
    return "{" + body + "\n" + _tabs(indent) + "}"


def _dump_data_version(dv: DataVersion, indent: int) -> str:
    fields = [("counter", str(dv.counter))]
    if dv.state_version is not None:
        fields.append(("stateVersion", str(dv.state_version)))
    fields.append(("timestamp", str(dv.timestamp)))
    return _bean(fields, indent)


def dump_delay_offsets(d: DelayOffsets) -> str:
    """delayOffset.json exactly as `ScheduleMessageService.persist()` writes it (no trailing newline)."""
    fields: list[tuple[str, str]] = []
    if d.data_version is not None:
        fields.append(("dataVersion", _dump_data_version(d.data_version, 1)))
    fields.append(("offsetTable", _int_key_map(d.offset_table, 1, DELAY_TABLE_SIZE)))
    return _bean(fields, 0)


def _dump_group_topic_map(gtm: Mapping[str, list[str]]) -> str:
    """`HashMap<>(128)` of groups to `HashSet<>(8)` of topics, as `getGroupTopicMap()` builds them."""
    entries = [
        (group, "[" + ",".join(_quote(t) for t in _hashmap_order(dict.fromkeys(gtm[group]), 8)) + "]")
        for group in _hashmap_order(gtm, 128)
    ]
    return _str_key_map(entries, 1)


def dump_consumer_offsets(c: ConsumerOffsets, *, table_size: int = LOADED_TABLE_SIZE) -> str:
    """consumerOffset.json exactly as `ConsumerOffsetManager.persist()` writes it (no trailing newline).

    `table_size` is the outer map's initial bin count: 16 when the broker loaded an existing file (fastjson
    made the map), `FRESH_CONSUMER_TABLE_SIZE` when it started without one. Inner maps are taken as loaded.
    """
    fields: list[tuple[str, str]] = []
    if c.data_version is not None:
        fields.append(("dataVersion", _dump_data_version(c.data_version, 1)))
    if c.group_topic_map is not None:
        fields.append(("groupTopicMap", _dump_group_topic_map(c.group_topic_map)))
    outer = _chm_order(c.offset_table, java_string_hash, table_size)
    entries = [(k, _int_key_map(c.offset_table[k], 2, LOADED_TABLE_SIZE)) for k in outer]
    fields.append(("offsetTable", _str_key_map(entries, 1)))
    return _bean(fields, 0)
