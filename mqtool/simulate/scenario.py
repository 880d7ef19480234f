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
from pathlib import Path
from typing import Any

from mqtool.errors import MqtoolError
from mqtool.times import TimeFormatError, parse_duration_ms, parse_time

ANSWERS = ("commit", "rollback", "unknown", "none")
FAULT_KINDS = ("put_failure", "crash", "clock_jump")
CLIENTS = ("proxy", "remoting")
DEFAULT_BATCH_SIZE = 32  # PopMessageRequestHeader.maxMsgNums of a default client (DefaultMQPushConsumer.popBatchNums)
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
    batch_size: int = DEFAULT_BATCH_SIZE  # pop: maxMsgNums of a request
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


def _time(value: Any, start_ms: int, where: str) -> int:
    if isinstance(value, bool):
        raise ScenarioError(f"{where}: expected a time, got {value!r}")
    if isinstance(value, int | float):
        return int(value) if value >= EPOCH_MIN else start_ms + int(value)
    if isinstance(value, str):
        try:
            return parse_time(value, start_ms)
        except TimeFormatError as e:
            raise ScenarioError(f"{where}: {e}") from None
    raise ScenarioError(f"{where}: expected a time, got {value!r}")


def _delta(value: Any, where: str) -> int:
    if isinstance(value, bool):
        raise ScenarioError(f"{where}: expected a duration")
    if isinstance(value, int | float):
        return int(value)
    if isinstance(value, str):
        t = value.strip()
        sign = -1 if t.startswith("-") else 1
        try:
            return sign * parse_duration_ms(t.lstrip("+-"))
        except TimeFormatError as e:
            raise ScenarioError(f"{where}: {e}") from None
    raise ScenarioError(f"{where}: expected a duration, got {value!r}")


def _choice(value: Any, choices: tuple, where: str) -> Any:
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


def _table(doc: dict, name: str) -> dict:
    v = doc.get(name, {})
    if not isinstance(v, dict):
        raise ScenarioError(f"[{name}] must be a table")
    return v


def _tables(value: Any, where: str) -> list[dict]:
    """An array of tables (`[[where]]`), each entry checked to be a table."""
    if not isinstance(value, list):
        raise ScenarioError(f"{where} must be an array of tables ([[{where}]])")
    for i, entry in enumerate(value):
        if not isinstance(entry, dict):
            raise ScenarioError(f"{where}[{i}] must be a table")
    return value


def parse_scenario(doc: dict[str, Any], start_ms: int) -> Scenario:
    """A Scenario from a parsed TOML document; times relative to `start_ms`."""
    unknown = set(doc) - {"broker", "transaction", "faults", "consumers"}
    if unknown:
        raise ScenarioError(f"unknown scenario section(s): {', '.join(sorted(unknown))}")
    sc = Scenario(broker=dict(_table(doc, "broker")))
    tx = _table(doc, "transaction")
    if "check_at" in tx:
        if not isinstance(tx["check_at"], list):
            raise ScenarioError("transaction.check_at must be a list of times")
        sc.check_at = sorted(_time(v, start_ms, f"transaction.check_at[{i}]") for i, v in enumerate(tx["check_at"]))
    sc.default_answer = _choice(tx.get("default_answer", "none"), ANSWERS, "transaction.default_answer")
    sc.answer_delay_ms = int(_delta(tx.get("answer_delay_ms", 0), "transaction.answer_delay_ms"))
    for i, a in enumerate(_tables(tx.get("answers", []), "transaction.answers")):
        answer = _choice(a.get("answer"), ANSWERS, f"transaction.answers[{i}].answer")
        probability = _probability(a.get("probability", 1.0), f"transaction.answers[{i}].probability")
        sc.answers.append(AnswerRule(answer, a.get("producer_group"), a.get("uniq_key"), a.get("key"), probability))
    sc.faults = [_fault(f, start_ms, f"faults[{i}]") for i, f in enumerate(_tables(doc.get("faults", []), "faults"))]
    sc.consumers = _consumers(_tables(doc.get("consumers", []), "consumers"))
    return sc


def _fault(f: dict, start_ms: int, where: str) -> Fault:
    """One `[[faults]]` entry: a put failure lasts until `until` (default: the end of the run), a crash restarts
    at `until` (default: at once)."""
    kind = _choice(f.get("kind"), FAULT_KINDS, f"{where}.kind")
    first = f.get("from", f.get("at"))
    start = _time(first, start_ms, f"{where}.from") if first is not None else start_ms
    if kind == "crash" and first is None:
        raise ScenarioError(f"{where}: a crash needs `from` (the crash time)")
    if kind == "clock_jump" and "delta" not in f:
        raise ScenarioError(f"{where}: a clock_jump needs `delta`")
    default_end = start if kind != "put_failure" else 2**62
    end = _time(f["until"], start_ms, f"{where}.until") if "until" in f else default_end
    if end < start:
        raise ScenarioError(f"{where}: until is before from")
    probability = _probability(f.get("probability", 1.0), f"{where}.probability")
    status, delta = str(f.get("status", "UNKNOWN_ERROR")), _delta(f.get("delta", 0), f"{where}.delta")
    return Fault(kind, start, end, probability, f.get("service"), f.get("topic"), status, delta)


def _poll_interval(value: Any, where: str) -> int:
    poll = _delta(value, where)
    if poll < 0:
        raise ScenarioError(f"{where} must not be negative")
    return poll


def _queue_offset(value: Any, where: str) -> str | int:
    return value if value in ("first", "last") else _integer(value, f'{where} ("first", "last" or a queue offset)', 0)


# a `[[consumers]]` key beside group, topic and match: (its `ConsumerSpec` field, its check); an absent key
# leaves the field's default
CONSUMER_FIELDS: dict[str, tuple[str, Callable[[Any, str], Any]]] = {
    "from": ("start", _queue_offset),
    "outcome": ("outcome", lambda v, where: _choice(v, ("ok", "fail"), where)),
    "fail_times": ("fail_times", lambda v, where: _integer(v, where, 0)),
    "consume_delay": ("consume_delay_ms", _delta),
    "mode": ("mode", lambda v, where: _choice(v, ("push", "pop"), where)),
    "invisible_time": ("invisible_time_ms", _delta),
    "max_reconsume_times": ("max_reconsume_times", lambda v, where: _integer(v, where, -1)),  # -1: the default
    "poll_interval": ("poll_interval_ms", _poll_interval),
    "batch_size": ("batch_size", lambda v, where: _integer(v, where, 1)),
    "client": ("client", lambda v, where: _choice(v, CLIENTS, where)),
    "pop_random": ("pop_random", lambda v, where: _integer(v, where, 0, 99)),
}


def _consumers(entries: list[dict]) -> list[ConsumerSpec]:
    out = []
    for i, c in enumerate(entries):
        where = f"consumers[{i}]"
        unknown = set(c) - {"group", "topic", "match", *CONSUMER_FIELDS}
        if unknown:
            raise ScenarioError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        for key in ("group", "topic"):
            if not isinstance(c.get(key), str) or not c[key]:
                raise ScenarioError(f"{where}.{key} is required (a name)")
        match = c.get("match", {})
        if not isinstance(match, dict) or set(match) - {"key", "uniq_key", "tag"}:
            raise ScenarioError(f"{where}.match is a table of key, uniq_key and tag globs")
        spec = {name: check(c[key], f"{where}.{key}") for key, (name, check) in CONSUMER_FIELDS.items() if key in c}
        out.append(ConsumerSpec(c["group"], c["topic"], match={k: str(v) for k, v in match.items()}, **spec))
    return out


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
