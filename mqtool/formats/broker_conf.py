"""broker.conf: the settings of `BrokerConfig` / `MessageStoreConfig` that change store behaviour (spec §9).

`BrokerStartup` reads the file with `java.util.Properties.load` (ISO-8859-1, `key=value`, `key: value`,
`key value`, `#`/`!` comments, backslash continuations and escapes) and copies values onto the config
beans with `MixAll.properties2Object`. Defaults are those of the `rocketmq-all-5.3.1` tag. Unlike the
broker, which silently keeps the default when `Integer.parseInt` fails, a bad number here is an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from mqtool.errors import ConfigFileError

__all__ = ["BrokerConfig", "ConfigFileError", "load_broker_conf", "parse_broker_conf", "parse_properties"]

DEFAULT_MESSAGE_DELAY_LEVEL = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_JAVA_WS = "".join(map(chr, range(33)))  # String.trim() removes every char <= ' '
_DECIMAL = re.compile(r"[+-]?[0-9]+")
_RANGES = {"int": (-(1 << 31), (1 << 31) - 1), "long": (-(1 << 63), (1 << 63) - 1)}


def _java(name: str, kind: str) -> dict[str, str]:
    """Field metadata: the Java property name and its Java type ("int", "long", "bool", "str")."""
    return {"java": name, "kind": kind}


@dataclass(frozen=True)
class BrokerConfig:
    """The behaviour-changing broker settings, snake_case, with RocketMQ 5.3.1's defaults."""

    message_delay_level: str = field(default=DEFAULT_MESSAGE_DELAY_LEVEL, metadata=_java("messageDelayLevel", "str"))
    timer_precision_ms: int = field(default=1000, metadata=_java("timerPrecisionMs", "int"))
    timer_roll_window_slot: int = field(default=172800, metadata=_java("timerRollWindowSlot", "int"))
    timer_max_delay_sec: int = field(default=259200, metadata=_java("timerMaxDelaySec", "int"))
    timer_wheel_enable: bool = field(default=True, metadata=_java("timerWheelEnable", "bool"))
    transaction_timeout: int = field(default=6000, metadata=_java("transactionTimeOut", "long"))
    transaction_check_max: int = field(default=15, metadata=_java("transactionCheckMax", "int"))
    transaction_check_interval: int = field(default=30000, metadata=_java("transactionCheckInterval", "long"))
    transaction_op_batch_interval: int = field(default=3000, metadata=_java("transactionOpBatchInterval", "int"))
    file_reserved_time: int = field(default=72, metadata=_java("fileReservedTime", "int"))
    mapped_file_size_commitlog: int = field(default=1 << 30, metadata=_java("mappedFileSizeCommitLog", "int"))
    mapped_file_size_consume_queue: int = field(default=6_000_000, metadata=_java("mappedFileSizeConsumeQueue", "int"))
    mapped_file_size_timer_log: int = field(default=100 << 20, metadata=_java("mappedFileSizeTimerLog", "int"))
    flush_delay_offset_interval: int = field(default=10000, metadata=_java("flushDelayOffsetInterval", "long"))
    enable_schedule_async_deliver: bool = field(default=False, metadata=_java("enableScheduleAsyncDeliver", "bool"))
    schedule_async_deliver_max_pending_limit: int = field(
        default=2000, metadata=_java("scheduleAsyncDeliverMaxPendingLimit", "int")
    )
    max_message_size: int = field(default=4 << 20, metadata=_java("maxMessageSize", "int"))
    flush_consumer_offset_interval: int = field(default=5000, metadata=_java("flushConsumerOffsetInterval", "int"))
    # the broker's default name and address are the host's; the simulator's are fixed so that runs are repeatable
    broker_name: str = field(default="broker-a", metadata=_java("brokerName", "str"))
    broker_cluster_name: str = field(default="DefaultCluster", metadata=_java("brokerClusterName", "str"))
    broker_ip1: str = field(default="", metadata=_java("brokerIP1", "str"))
    listen_port: int = field(default=10911, metadata=_java("listenPort", "int"))  # NettyServerConfig, set by startup
    revive_queue_num: int = field(default=8, metadata=_java("reviveQueueNum", "int"))
    revive_interval: int = field(default=1000, metadata=_java("reviveInterval", "long"))
    revive_scan_time: int = field(default=10000, metadata=_java("reviveScanTime", "long"))
    revive_max_slow: int = field(default=3, metadata=_java("reviveMaxSlow", "long"))
    disappear_time_after_start: int = field(default=-1, metadata=_java("disappearTimeAfterStart", "int"))
    enable_retry_topic_v2: bool = field(default=False, metadata=_java("enableRetryTopicV2", "bool"))
    pop_from_retry_probability: int = field(default=20, metadata=_java("popFromRetryProbability", "int"))
    store_path_root_dir: str | None = field(default=None, metadata=_java("storePathRootDir", "str"))
    raw: dict[str, str] = field(default_factory=dict)

    @classmethod
    def for_version(cls, broker_version: str) -> BrokerConfig:
        """Defaults of a broker line: 4.x checks transactions every 60 s (5.x: 30 s) and has no timer."""
        if broker_version.startswith("4"):
            return cls(transaction_check_interval=60000)
        return cls()

    def with_overrides(self, mapping: dict[str, object], *, source: str = "override") -> BrokerConfig:
        """A copy with settings given by Java name (scenario files); unknown names only land in `raw`."""
        as_text = {k: _to_text(v) for k, v in mapping.items()}
        changes = _typed(as_text, source)
        return replace(self, **changes, raw={**self.raw, **as_text})

    def delay_levels_ms(self) -> list[int]:
        """`ScheduleMessageService.parseDelayLevel`: entry i (split on single spaces) is level i + 1."""
        entries = self.message_delay_level.split(" ")
        while entries and entries[-1] == "":  # Java String.split drops trailing empty strings
            entries.pop()
        if not entries:
            raise ConfigFileError("messageDelayLevel is empty")
        return [_delay_ms(i + 1, entry) for i, entry in enumerate(entries)]

    def timer_roll_window_slots(self) -> int:
        """`TimerMessageStore`'s window: a setting outside [2, slotsTotal - 60] becomes slotsTotal - 60."""
        from mqtool.formats.timerwheel import SLOTS_TOTAL, TIMER_BLANK_SLOTS  # here: the wheel's layout loads numpy

        limit = SLOTS_TOTAL - TIMER_BLANK_SLOTS
        slot = self.timer_roll_window_slot
        return limit if slot > limit or slot < 2 else slot


def _delay_ms(level: int, entry: str) -> int:
    unit, number = entry[-1:], entry[:-1]
    if unit not in _UNIT_MS:
        raise ConfigFileError(f'messageDelayLevel: level {level} "{entry}" has no valid unit (expected s, m, h or d)')
    if not _DECIMAL.fullmatch(number):
        raise ConfigFileError(f'messageDelayLevel: level {level} "{entry}" is not a number of {unit}')
    return int(number) * _UNIT_MS[unit]


def _to_text(value: object) -> str:
    """Scenario values as the properties text Java would have read (booleans lower-case)."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


_FIELDS = {f.metadata["java"]: f for f in fields(BrokerConfig) if "java" in f.metadata}


def _typed(props: dict[str, str], source: str) -> dict[str, Any]:
    """Known settings converted like `MixAll.properties2Object` (values trimmed)."""
    out: dict[str, Any] = {}
    for name, text in props.items():
        f = _FIELDS.get(name)
        if f is not None:
            out[f.name] = _convert(source, name, text.strip(_JAVA_WS), f.metadata["kind"])
    return out


def _convert(source: str, name: str, value: str, kind: str) -> Any:
    if kind == "str":
        return value
    if kind == "bool":
        return value.lower() == "true"  # Boolean.parseBoolean: anything else is false
    lo, hi = _RANGES[kind]
    if not _DECIMAL.fullmatch(value):
        raise ConfigFileError(f'{source}: {name} = "{value}" is not an integer')
    number = int(value)
    if not lo <= number <= hi:
        raise ConfigFileError(f'{source}: {name} = "{value}" does not fit in a Java {kind}')
    return number


# --------------------------------------------------------------------------- java.util.Properties


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """`Properties.LineReader`: (first line number, logical line) without comments and blank lines."""
    out: list[tuple[int, str]] = []
    pending: str | None = None
    start = 0
    for number, natural in enumerate(re.split(r"\r\n|\r|\n", text), 1):
        line = natural.lstrip(" \t\f")
        if pending is None:
            if not line or line[0] in "#!":
                continue
            start, pending = number, ""
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:
            pending += line[:-1]
            continue
        out.append((start, pending + line))
        pending = None
    if pending:
        out.append((start, pending))
    return out


def _key_end(line: str) -> int:
    """`Properties.load0`: the key ends at the first unescaped '=', ':' or white space."""
    i, escaped = 0, False
    while i < len(line) and not (line[i] in "=: \t\f" and not escaped):
        escaped = line[i] == "\\" and not escaped
        i += 1
    return i


def _split_key_value(line: str) -> tuple[str, str]:
    """`Properties.load0`: the key, then the value after one separator ('=', ':' or white space)."""
    i = _key_end(line)
    key = line[:i]
    if i < len(line) and line[i] in "=:":
        return key, line[i + 1 :].lstrip(" \t\f")
    rest = line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):  # `key = value`: one separator may follow the white space
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str, source: str, line: int) -> str:
    """`Properties.loadConvert`: \\t \\n \\r \\f \\uXXXX; any other escaped char stands for itself."""
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        i += 1
        if ch != "\\" or i >= len(text):
            out.append(ch)
            continue
        ch, i = text[i], i + 1
        if ch == "u":
            digits = text[i : i + 4]
            if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise ConfigFileError(f"{source}: malformed \\uxxxx escape at line {line}")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_SIMPLE_ESCAPES.get(ch, ch))
    return "".join(out)


def parse_properties(text: str, *, source: str = "broker.conf") -> dict[str, str]:
    """A Java properties text as key -> value (later keys win), values trimmed like `String.trim()`."""
    props: dict[str, str] = {}
    for number, line in _logical_lines(text):
        key, value = _split_key_value(line)
        props[_unescape(key, source, number)] = _unescape(value, source, number).strip(_JAVA_WS)
    return props


def parse_broker_conf(text: str, *, source: str = "broker.conf", base: BrokerConfig | None = None) -> BrokerConfig:
    """broker.conf text applied over `base` (5.3.1 defaults); keys this tool does not model stay in `raw`."""
    props = parse_properties(text, source=source)
    return replace(base or BrokerConfig(), **_typed(props, source), raw=props)


def load_broker_conf(path: str | Path, *, base: BrokerConfig | None = None) -> BrokerConfig:
    """Read a broker.conf (ISO-8859-1 like `Properties.load(InputStream)`); errors name the file."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise ConfigFileError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    text = data.decode("latin-1")
    check_properties_text(text, path.name)
    return parse_broker_conf(text, source=path.name, base=base)


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")  # C0 controls but \t \n \f \r, and DEL


def check_properties_text(text: str, source: str) -> None:
    """Refuse what is no properties text: `Properties.load` reads anything, so a binary file or a random one
    would silently leave every setting at its default. A control character (NUL, ...) is not text; a file
    whose lines all lack a separator and a value holds no setting. Comments only, or nothing, is fine."""
    bad = _CONTROL.search(text)
    if bad:
        raise ConfigFileError(
            f"{source}: not a properties text (byte 0x{ord(bad.group()):02x} at offset "
            f"{bad.start()}); a broker.conf holds key=value lines"
        )
    lines = _logical_lines(text)
    if lines and not any(_key_end(line) < len(line) for _, line in lines):
        raise ConfigFileError(
            f"{source}: no key=value line in {len(lines)} line(s) (line {lines[0][0]}: "
            f"{lines[0][1][:40]!r}); a broker.conf holds key=value lines"
        )
