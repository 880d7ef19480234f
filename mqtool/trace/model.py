"""What a trace returns: the query, the records found, the stages of the timeline and the verdict.

Plain dataclasses; `Trace.as_dict()` is the `--json` document (`mqtool/schemas/trace.json`).
Times are epoch milliseconds (None when the store cannot tell, e.g. when a group consumed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mqtool.errors import MqtoolError
from mqtool.formats.message import MessageRecord

JSON_VERSION = 1

# Stage names, in the order a message usually meets them (docs/trace.md explains each).
STAGES = (
    "born", "stored", "parked", "rolled", "cancel_requested", "cancelled", "put_back", "committed",
    "rolled_back", "op", "discarded", "delivered", "skipped", "retry_scheduled", "retry", "dead_lettered",
    "consumed", "not_consumed", "consume_failed", "popped", "acked", "revived",
)

# Verdict states.
STATES = (
    "delivered", "waiting", "overdue", "skipped", "cancelled", "committed", "rolled_back", "discarded",
    "pending", "dead_lettered", "cancel_request", "unknown", "consumed", "never",
)


class TraceError(MqtoolError, ValueError):
    """A query that cannot be run (bad msgId, empty key, unusable index): an input error."""


@dataclass(frozen=True)
class TraceQuery:
    """Exactly one of the four ways to name a message."""

    uniq_key: str | None = None
    key: str | None = None
    offset: int | None = None
    msg_id: str | None = None
    topic: str | None = None  # --key only: the topic the key was sent to (queryMsgByKey's topic)

    def __post_init__(self) -> None:
        given = [n for n in ("uniq_key", "key", "offset", "msg_id") if getattr(self, n) is not None]
        if len(given) != 1:
            got = f" (got {', '.join('--' + n.replace('_', '-') for n in given)})" if given else ""
            raise TraceError("give exactly one of --uniq-key, --key, --offset, --msg-id" + got)
        if self.offset is not None and self.offset < 0:
            raise TraceError(f"a physical offset is never negative: {self.offset}")
        for n in ("uniq_key", "key", "msg_id"):
            v = getattr(self, n)
            if v is not None and not v.strip():
                raise TraceError(f"--{n.replace('_', '-')} must not be empty")
        if self.topic is not None and (self.key is None or not self.topic.strip()):
            raise TraceError("--topic narrows a --key lookup: give it with --key and a topic name")

    def as_dict(self) -> dict[str, Any]:
        for n in ("uniq_key", "key", "offset", "msg_id"):
            v = getattr(self, n)
            if v is not None:
                return {"by": n, "value": v, **({"topic": self.topic} if self.topic is not None else {})}
        raise AssertionError("unreachable")  # pragma: no cover


@dataclass
class Stage:
    """One step of the timeline. `place` fields are None when the step has no record of its own."""

    time: int | None
    stage: str
    topic: str | None = None
    queue_id: int | None = None
    queue_offset: int | None = None
    physical_offset: int | None = None
    detail: str = ""
    simulated: bool = False

    @classmethod
    def at(cls, time: int | None, stage: str, rec: MessageRecord | None, detail: str) -> Stage:
        """A stage placed at a record (its topic, queue, queue offset and physical offset)."""
        if rec is None:
            return cls(time, stage, detail=detail)
        return cls(time, stage, rec.topic, rec.queue_id, rec.queue_offset, rec.physical_offset, detail)

    @property
    def place(self) -> str | None:
        """`topic/queue@offset`, as operators write it."""
        if self.topic is None:
            return None
        if self.queue_offset is None:  # a simulated stage whose record's queue offset is not known
            return f"{self.topic}/{self.queue_id}"
        return f"{self.topic}/{self.queue_id}@{self.queue_offset}"

    def as_dict(self) -> dict[str, Any]:
        d = {"time": self.time, "stage": self.stage, "topic": self.topic, "queue_id": self.queue_id,
             "queue_offset": self.queue_offset, "physical_offset": self.physical_offset, "detail": self.detail}
        if self.simulated:
            d["simulated"] = True
        return d


@dataclass
class Verdict:
    """One line that answers "where is my message?"; `due` is set for waiting/pending states."""

    state: str
    text: str
    due: int | None = None

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"state": self.state, "text": self.text}
        if self.due is not None:
            d["due"] = self.due
        return d


@dataclass
class TracedRecord:
    """A record of the message and what it is in the message's life (`role`)."""

    record: MessageRecord
    role: str


@dataclass
class Trace:
    """The whole life of one logical message as far as the store shows it."""

    query: TraceQuery
    uniq_keys: list[str]
    records: list[TracedRecord]
    stages: list[Stage]
    verdict: Verdict
    as_of: int
    until: int | None = None
    notes: list[str] = field(default_factory=list)
    lookup: str | None = None  # which finder found the records (indexfile, sqlite, scan, with "+scan")

    def as_dict(self, record_dict) -> dict[str, Any]:
        """The `--json` document; `record_dict(rec)` renders one record (the `messages` contract)."""
        q = self.query.as_dict()
        q["uniq_keys"] = self.uniq_keys
        q["as_of"] = self.as_of
        if self.until is not None:
            q["until"] = self.until
        if self.lookup is not None:
            q["lookup"] = self.lookup
        recs = []
        for tr in self.records:
            d = {"role": tr.role}
            d.update(record_dict(tr.record))
            recs.append(d)
        doc: dict[str, Any] = {
            "version": JSON_VERSION,
            "query": q,
            "records": recs,
            "stages": [s.as_dict() for s in self.stages],
            "verdict": self.verdict.as_dict(),
        }
        if self.notes:
            doc["notes"] = self.notes
        return doc
