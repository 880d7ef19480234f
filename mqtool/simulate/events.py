"""The simulator's event records and their JSON Lines form (`mqtool/schemas/simulate-event.json`).

One line per event, keys in this order: `time` (virtual epoch ms), `service`
(`schedule|timer|transaction|broker`), `event`, `topic`, `queue_id`, `uniq_key`,
`physical_offset`, `new_physical_offset`, then event-specific detail keys.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from mqtool.formats.names import ACK_TAG

SERVICES = ("schedule", "timer", "transaction", "broker", "consumer")
EVENTS = ("deliver", "enqueue", "roll", "cancel", "check", "put_back", "commit", "rollback", "discard",
          "skip", "put_failed", "persist", "crash", "restart", "clock_jump", "consume", "send_back", "dlq",
          "drop", "pop", ACK_TAG, "revive")  # the ack event is named like the ack record's tag


@dataclass(slots=True)
class SimEvent:
    time: int
    service: str
    event: str
    topic: str | None = None
    queue_id: int | None = None
    uniq_key: str | None = None
    physical_offset: int | None = None
    new_physical_offset: int | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        d = {"time": self.time, "service": self.service, "event": self.event, "topic": self.topic,
             "queue_id": self.queue_id, "uniq_key": self.uniq_key, "physical_offset": self.physical_offset,
             "new_physical_offset": self.new_physical_offset}
        for k, v in self.detail.items():
            if k not in d:
                d[k] = v
        return d

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), ensure_ascii=False, separators=(",", ":"))


class EventLog:
    """The ordered event history; `keep=False` only counts (benchmarks)."""

    def __init__(self, keep: bool = True) -> None:
        self.keep = keep
        self.events: list[SimEvent] = []
        self.count = 0
        self.by_kind: dict[str, int] = {}

    def emit(self, time: int, service: str, event: str, topic: str | None = None, queue_id: int | None = None,
             uniq_key: str | None = None, physical_offset: int | None = None,
             new_physical_offset: int | None = None, **detail: Any) -> None:
        self.count += 1
        self.by_kind[event] = self.by_kind.get(event, 0) + 1
        if self.keep:
            self.events.append(SimEvent(time, service, event, topic, queue_id, uniq_key, physical_offset,
                                        new_physical_offset, detail))

    def tally(self, event: str) -> None:
        """Count an event without recording it: the hot paths call this instead of `emit` when
        `keep` is False, so that the event's details are not even computed."""
        self.count += 1
        self.by_kind[event] = self.by_kind.get(event, 0) + 1

    def __iter__(self):
        return iter(self.events)

    def __len__(self) -> int:
        return self.count

    def jsonl(self) -> str:
        return "".join(e.to_json() + "\n" for e in self.events)
