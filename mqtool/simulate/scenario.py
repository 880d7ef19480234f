"""Scenario files (TOML, every key optional): broker overrides, check rounds, producer answers, faults.

```toml
[broker]                      # overrides of broker.conf settings, same (Java) names
transactionCheckInterval = 30000
[transaction]
check_at = ["+3s", "+10s"]    # explicit check rounds instead of the interval
default_answer = "none"       # commit | rollback | unknown | none (no answer)
answer_delay_ms = 0           # how long a producer takes to answer a check request
[[transaction.answers]]       # first match wins; producer_group, uniq_key, key (globs), probability
producer_group = "PG_TX"
key = "order-*"
answer = "commit"
[[consumers]]                 # a consumer group (docs/simulation.md, Consumers); group and topic required
group = "GID_orders"
topic = "TopicA"
mode = "pop"                  # push | pop; outcome, fail_times, match, consume_delay, invisible_time,
poll_interval = "100ms"       # max_reconsume_times, batch_size, client = "proxy" | "remoting", pop_random
[[faults]]                    # kind = put_failure | crash | clock_jump
kind = "put_failure"
from = "+5s"
until = "+8s"
probability = 1.0             # put_failure: also service = "schedule|timer|transaction", topic,
                              # status = "UNKNOWN_ERROR" | "SERVICE_NOT_AVAILABLE" | ...
```
Times are ISO-8601, relative to `--start` (`+90s`, `+3d`), or integers: epoch ms when at least
10^11, otherwise ms after `--start`. A crash fault stops the broker at `from` and restarts it at
`until` (default: at once); a clock jump (`at` or `from`, `delta` = ms or `+1h`/`-30s`) moves the
broker's clock, not the virtual time. Randomness comes only from `random.Random(seed)`.
"""

from __future__ import annotations

import fnmatch
import random
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from mqtool.errors import MqtoolError
from mqtool.times import TimeFormatError, parse_duration_ms, parse_time

ANSWERS = ("commit", "rollback", "unknown", "none")
FAULT_KINDS = ("put_failure", "crash", "clock_jump")
CLIENTS = ("proxy", "remoting")
EPOCH_MIN = 10**11


class ScenarioError(MqtoolError, ValueError):
    """A scenario file that cannot be used; says which key is wrong."""


def _globs(name: str | None, uniq: str | None, key: str | None, value, uniq_key, keys: list[str]) -> bool:
    """Whether a message matches the globs given (None: any): `name` its group or tag, `uniq` its UNIQ_KEY
    (case-insensitive), `key` one of its KEYS."""
    return (
        (name is None or fnmatch.fnmatchcase(value or "", name))
        and (uniq is None or fnmatch.fnmatchcase((uniq_key or "").upper(), uniq.upper()))
        and (key is None or any(fnmatch.fnmatchcase(k, key) for k in keys))
    )


@dataclass(frozen=True)
class AnswerRule:
    answer: str
    producer_group: str | None = None
    uniq_key: str | None = None
    key: str | None = None
    probability: float = 1.0

    def matches(self, group: str | None, uniq_key: str | None, keys: list[str]) -> bool:
        return _globs(self.producer_group, self.uniq_key, self.key, group, uniq_key, keys)


@dataclass(frozen=True)
class Fault:
    kind: str
    start: int
    end: int
    probability: float = 1.0
    service: str | None = None
    topic: str | None = None
    status: str = "UNKNOWN_ERROR"
    delta: int = 0


@dataclass(frozen=True)
class ConsumerSpec:
    """One `[[consumers]]` entry: a group's behaviour on a topic (or on the messages `match` selects)."""

    group: str
    topic: str
    start: str | int = "first"  # "first" | "last" | a queue offset: where a queue without a committed offset starts
    outcome: str = "ok"
    fail_times: int = 0
    match: dict[str, str] = field(default_factory=dict)
    consume_delay_ms: int = 0
    mode: str = "push"
    invisible_time_ms: int = 60_000
    max_reconsume_times: int | None = None
    poll_interval_ms: int = 0  # push: the pull period, pop: the request period; 0 = long polling (at once)
    batch_size: int = 32  # pop: maxMsgNums of a request (a default client's, DefaultMQPushConsumer.popBatchNums)
    client: str | None = None  # pop: "proxy" (gRPC: the proxy forwards to the DLQ) | "remoting"; None = by mode
    pop_random: int | None = None  # pop: a fixed 0-99 draw for the broker's random choices; None = from --seed

    @property
    def client_kind(self) -> str:
        """The client that applies the limit: a push consumer is a remoting client, a POP one the proxy's."""
        return self.client or ("proxy" if self.mode == "pop" else "remoting")

    def matches(self, keys: list[str], uniq_key: str | None, tag: str | None) -> bool:
        m = self.match
        return _globs(m.get("tag"), m.get("uniq_key"), m.get("key"), tag, uniq_key, keys)

    def fails(self, reconsume_times: int) -> bool:
        """Whether the delivery with this reconsume count fails."""
        return self.outcome == "fail" or reconsume_times < self.fail_times


@dataclass
class Scenario:
    broker: dict[str, Any] = field(default_factory=dict)
    check_at: list[int] | None = None
    default_answer: str = "none"
    answer_delay_ms: int = 0
    answers: list[AnswerRule] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    consumers: list[ConsumerSpec] = field(default_factory=list)

    def answer_for(self, group: str | None, uniq_key: str | None, keys: list[str], rng: random.Random) -> str:
        for rule in self.answers:
            if rule.matches(group, uniq_key, keys):
                if rule.probability >= 1.0 or rng.random() < rule.probability:
                    return rule.answer
        return self.default_answer

    def put_failure(self, now: int, service: str, topic: str, rng: random.Random) -> str | None:
        """The failure status of a put at `now`, or None when it succeeds."""
        for f in self.faults:
            if f.kind != "put_failure" or not f.start <= now < f.end or f.service not in (None, service):
                continue
            if f.topic in (None, topic) and (f.probability >= 1.0 or rng.random() < f.probability):
                return f.status
        return None


Read = Callable[[Any, str], Any]  # a typed reader: the value of a key, `where` naming the key in its error


def _number(value: Any, where: str, what: str) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ScenarioError(f"{where}: expected {what}, got {value!r}")
    return value


def _parsed(parse: Callable, where: str, *args) -> int:
    try:
        return parse(*args)
    except TimeFormatError as e:
        raise ScenarioError(f"{where}: {e}") from None


def _time(value: Any, where: str, start_ms: int) -> int:
    if isinstance(value, str):
        return _parsed(parse_time, where, value, start_ms)
    value = int(_number(value, where, "a time"))
    return value if value >= EPOCH_MIN else start_ms + value


def _times(value: Any, where: str, start_ms: int) -> list[int]:
    if not isinstance(value, list):
        raise ScenarioError(f"{where} must be a list of times")
    return sorted(_time(v, f"{where}[{i}]", start_ms) for i, v in enumerate(value))


def _delta(value: Any, where: str, lo: int | None = None) -> int:
    """A duration in ms: an integer, or a text such as `+1h`, `-30s`, `250ms`; at least `lo`."""
    if isinstance(value, str):
        text = value.strip()
        sign = -1 if text.startswith("-") else 1
        value = sign * _parsed(parse_duration_ms, where, text.lstrip("+-"))
    value = int(_number(value, where, "a duration"))
    if lo is not None and value < lo:
        raise ScenarioError(f"{where} must be at least {lo} ms, got {value}")
    return value


def _choice(value: Any, where: str, choices: tuple) -> Any:
    if value not in choices:
        raise ScenarioError(f"{where} must be one of {', '.join(map(str, choices))}, got {value!r}")
    return value


def _integer(value: Any, where: str, lo: int, hi: int | None = None) -> int:
    """`value`, an integer (not a bool) of at least `lo` and at most `hi`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < lo or hi is not None and value > hi:
        bounds = f"from {lo} to {hi}" if hi is not None else f"of at least {lo}"
        raise ScenarioError(f"{where} must be an integer {bounds}, got {value!r}")
    return value


def _probability(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ScenarioError(f"{where} must be a number from 0 to 1, got {value!r}")
    return float(value)


def _text(value: Any, where: str) -> str:
    """A name or a glob: a non-empty string."""
    if not isinstance(value, str) or not value:
        raise ScenarioError(f"{where} must be a name (a non-empty string), got {value!r}")
    return value


def _table(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise ScenarioError(f"{where} must be a table")
    return value


def _tables(value: Any, where: str) -> list[dict]:
    """An array of tables (`[[where]]`), each entry checked to be a table."""
    if not isinstance(value, list):
        raise ScenarioError(f"{where} must be an array of tables ([[{where}]])")
    return [_table(entry, f"{where}[{i}]") for i, entry in enumerate(value)]


def _queue_offset(value: Any, where: str) -> str | int:
    return value if value in ("first", "last") else _integer(value, f'{where} ("first", "last" or a queue offset)', 0)


def _entry(entry: dict, readers: dict[str, Read], where: str, required: tuple[str, ...] = ()) -> dict[str, Any]:
    """The values of a table's keys, each by its reader; an unknown key or a required one missing is an error."""
    unknown = set(entry) - set(readers)
    if unknown:
        raise ScenarioError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    for key in required:
        if key not in entry:
            raise ScenarioError(f"{where}.{key} is required")
    return {key: read(entry[key], f"{where}.{key}") for key, read in readers.items() if key in entry}


CONSUMER_KEYS: dict[str, Read] = (
    dict.fromkeys(("group", "topic"), _text)
    | {
        "match": lambda v, where: _entry(_table(v, where), dict.fromkeys(("key", "uniq_key", "tag"), _text), where),
        "from": _queue_offset,
        "outcome": partial(_choice, choices=("ok", "fail")),
        "fail_times": partial(_integer, lo=0),
        "mode": partial(_choice, choices=("push", "pop")),
        "max_reconsume_times": partial(_integer, lo=-1),  # -1: the default
        "poll_interval": partial(_delta, lo=0),
        "batch_size": partial(_integer, lo=1),
        "client": partial(_choice, choices=CLIENTS),
        "pop_random": partial(_integer, lo=0, hi=99),
    }
    | dict.fromkeys(("consume_delay", "invisible_time"), _delta)
)
# the `ConsumerSpec` fields of the `[[consumers]]` keys not named as their field
CONSUMER_FIELDS = {"from": "start", "consume_delay": "consume_delay_ms", "invisible_time": "invisible_time_ms"}
CONSUMER_FIELDS |= {"poll_interval": "poll_interval_ms"}


def parse_scenario(doc: dict[str, Any], start_ms: int) -> Scenario:
    """A Scenario from a parsed TOML document; times relative to `start_ms`."""
    top = _entry(doc, {"broker": _table, "transaction": _table, "faults": _tables, "consumers": _tables}, "scenario")
    choose_answer, time = partial(_choice, choices=ANSWERS), partial(_time, start_ms=start_ms)
    tx_keys = {"check_at": partial(_times, start_ms=start_ms), "default_answer": choose_answer}
    tx = _entry(top.get("transaction", {}), tx_keys | {"answer_delay_ms": _delta, "answers": _tables}, "transaction")
    answer_keys = {"answer": choose_answer, "probability": _probability}
    answer_keys |= dict.fromkeys(("producer_group", "uniq_key", "key"), _text)
    answers = [
        AnswerRule(**_entry(a, answer_keys, f"transaction.answers[{i}]", ("answer",)))
        for i, a in enumerate(tx.pop("answers", []))
    ]
    fault_keys = {"kind": partial(_choice, choices=FAULT_KINDS), "probability": _probability, "delta": _delta}
    fault_keys |= dict.fromkeys(("from", "at", "until"), time) | dict.fromkeys(("service", "topic", "status"), _text)
    faults = [
        _fault(_entry(f, fault_keys, f"faults[{i}]", ("kind",)), start_ms, f"faults[{i}]")
        for i, f in enumerate(top.get("faults", []))
    ]
    consumers = []
    for i, c in enumerate(top.get("consumers", [])):
        values = _entry(c, CONSUMER_KEYS, f"consumers[{i}]", ("group", "topic"))
        consumers.append(ConsumerSpec(**{CONSUMER_FIELDS.get(key, key): v for key, v in values.items()}))
    return Scenario(dict(top.get("broker", {})), answers=answers, faults=faults, consumers=consumers, **tx)


def _fault(f: dict[str, Any], start_ms: int, where: str) -> Fault:
    """One `[[faults]]` entry: a put failure lasts until `until` (default: the end of the run), a crash restarts
    at `until` (default: at once)."""
    kind = f.pop("kind")
    if kind == "crash" and "from" not in f and "at" not in f:
        raise ScenarioError(f"{where}: a crash needs `from` (the crash time)")
    if kind == "clock_jump" and "delta" not in f:
        raise ScenarioError(f"{where}: a clock_jump needs `delta`")
    start = f.pop("from", f.pop("at", start_ms))
    end = f.pop("until", start if kind != "put_failure" else 2**62)
    if end < start:
        raise ScenarioError(f"{where}: until is before from")
    return Fault(kind, start, end, **f)


def load_scenario(path: str | Path | None, start_ms: int) -> Scenario:
    if path is None:
        return Scenario()
    try:
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{path}: not valid TOML: {e}") from None
    except OSError as e:
        raise ScenarioError(f"{path}: cannot read ({e.strerror or e})") from None
    try:
        return parse_scenario(doc, start_ms)
    except ScenarioError as e:
        raise ScenarioError(f"{path}: {e}") from None
