"""The one protocol the runner and the faults drive every simulated broker service through: a service
mirrors one of the broker's `ServiceThread`s/managers (its start after the broker's recovery, its shutdown
or crash, its `ConfigManager.persist()` / checkpoint flush)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, Protocol, TypeVar, runtime_checkable

from mqtool.simulate.engine import PERSIST, Process

if TYPE_CHECKING:
    from mqtool.formats.offsets_json import ConsumerOffsets
    from mqtool.simulate.context import SimContext

K = TypeVar("K")
# the first scheduled persist, ms after the start: consumerOffset.json's (`BrokerController`), delayOffset.json's
# (`ScheduleMessageService.start`)
FIRST_PERSIST_MS = 10_000


@runtime_checkable
class Service(Protocol):
    def start(self) -> None:
        """Recover from what was last persisted and start the service's processes."""

    def stop(self, clean: bool) -> None:
        """End every process; persist when `clean`, else fall back to the last persisted state."""

    def persist(self) -> None:
        """Write the in-memory offsets or cursors to their file (the simulator keeps the copy)."""


@runtime_checkable
class ClockListener(Protocol):
    def on_clock_jump(self) -> None:
        """`System.currentTimeMillis()` jumped: re-time whatever sleeps until a broker time."""


class PersistedOffsets(Generic[K]):
    """A service's offset table as the broker keeps it: `offsets` in memory, `persisted` the copy on disk
    (its `ConfigManager` file), written at every `persist()` and at a clean stop; a crash falls back to it."""

    def __init__(self, ctx: SimContext, stored: dict[K, int], interval: int, first: int, name: str) -> None:
        self.ctx = ctx
        self.offsets: dict[K, int] = stored
        self.persisted: dict[K, int] = dict(stored)
        self.persist_interval, self._first_persist, self._persist_name = interval, first, name
        self.persister: Process | None = None

    def persist(self) -> None:
        self.persisted = dict(self.offsets)

    def start_persister(self) -> None:
        """The scheduled flush: `first` ms after the start, then every `interval` ms."""
        self.persister = self.ctx.engine.process(self._persist_loop(), PERSIST, self._first_persist, self._persist_name)

    def stop_persister(self, clean: bool) -> None:
        """Persist at a clean stop; after a crash the offsets are the last persisted ones again."""
        if self.persister is not None:
            self.persister.stop()
        if clean:
            self.persist()
        else:
            self.offsets = dict(self.persisted)

    def _persist_loop(self):
        while True:
            self.persist()
            yield self.persist_interval


def consumer_offset_rows(stored: ConsumerOffsets | None) -> dict[tuple[str, str, int], int]:
    """consumerOffset.json's `topic@group` table as (group, topic, queueId) -> offset."""
    rows = {}
    for key, table in (stored.offset_table if stored is not None else {}).items():
        topic, _, group = key.rpartition("@")
        for qid, off in table.items():
            rows[(group, topic, int(qid))] = int(off)
    return rows


def start_services(ctx: SimContext) -> None:
    """The broker (re)starts: every service in the broker's start order."""
    ctx.running = True
    for s in ctx.services:
        s.start()


def stop_services(ctx: SimContext, clean: bool) -> None:
    """The broker stops (`clean`) or crashes: every service, in the same order."""
    ctx.running = False
    for s in ctx.services:
        s.stop(clean=clean)
