"""The simulator's only event queue: a virtual clock in integer milliseconds (SimPy-style).

The queue is a `heapq` of `(time_ms, priority, seq, event)` tuples; `seq` comes from
`itertools.count()`, so the events themselves are never compared.

Tie order (documented, relied upon by the event log's byte-for-byte determinism):

1. `time_ms` — earlier first;
2. `priority` — lower first: `URGENT` (the `run(until)` sentinel, before every regular event at
   that time), then `BROKER` (faults: crash, restart, clock jump), then the services in the
   broker's order: `TIMER_ENQUEUE`, `TIMER_DEQUEUE`, `SCHEDULE`, `TRANSACTION`, `PRODUCER`
   (end-transaction answers), `PERSIST` (offset/checkpoint flushes), `NORMAL` (anything else);
3. `seq` — first scheduled, first run.

`run(until=T)` processes every event with `time_ms < T` (an event at exactly `T` stays queued,
as in SimPy) and is resumable. The engine never reads the wall clock.

Services are *processes* (`Process`): Python generators that `yield` a delay in ms and are resumed by
the engine.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Generator
from typing import Any

URGENT = 0
BROKER = 1
TIMER_ENQUEUE = 2
TIMER_DEQUEUE = 3
SCHEDULE = 4
TRANSACTION = 5
PRODUCER = 6
PERSIST = 7
NORMAL = 8


class StopSimulation(Exception):  # noqa: N818 - SimPy's name
    """Raised by the `run(until)` sentinel."""


def _stop() -> None:
    raise StopSimulation


class Engine:
    """A deterministic discrete-event engine; `now` only moves as `run` pops an event (and in `Process.advance`,
    which stands for a pop of that process's own resumption next)."""

    def __init__(self, initial_time: int = 0) -> None:
        self._now = int(initial_time)
        self._queue: list[tuple[int, int, int, Callable[[], Any]]] = []
        self._eid = itertools.count()

    @property
    def now(self) -> int:
        return self._now

    def schedule(self, event: Callable[[], Any], priority: int = NORMAL, delay: int = 0) -> None:
        """Run `event()` at `now + delay`."""
        if delay < 0:
            raise ValueError(f"Negative delay {delay}")
        heapq.heappush(self._queue, (self._now + int(delay), priority, next(self._eid), event))

    def run(self, until: int | None = None) -> None:
        """Process events until the queue is empty or up to (excluding) time `until`; resumable."""
        if until is not None:
            if until <= self._now:
                raise ValueError(f"until ({until}) must be greater than the current time ({self._now})")
            heapq.heappush(self._queue, (int(until), URGENT, next(self._eid), _stop))
        queue, pop = self._queue, heapq.heappop
        try:
            while queue:  # (with `until`, its sentinel stops the run before the queue is empty)
                self._now, _, _, event = pop(queue)
                event()
        except StopSimulation:
            pass

    def process(self, gen: Generator[int, Any, Any], priority: int = NORMAL, delay: int = 0, name: str = "") -> Process:
        """Start a generator process `delay` ms from now."""
        p = Process(self, gen, priority, name)
        p.wake(delay)
        return p

    def outranked(self, priority: int) -> bool:
        """Whether an event queued for now comes before any other of `priority` would."""
        q = self._queue
        return bool(q) and q[0][0] == self._now and q[0][1] < priority

    def schedule_next(self, event: Callable[[], Any], priority: int) -> None:
        """Run `event()` now, before every event of its priority queued for now (the rest of a run an
        outranking event cut, in the place its own events would have had)."""
        heapq.heappush(self._queue, (self._now, priority, -next(self._eid), event))


class Process:
    """A generator driven by the engine: `yield d` sleeps d ms (d >= 0), `yield None` idles until woken."""

    __slots__ = ("engine", "gen", "priority", "name", "_gen_id", "alive", "wake_time")

    def __init__(self, engine: Engine, gen: Generator[int, Any, Any], priority: int, name: str) -> None:
        self.engine, self.gen, self.priority, self.name = engine, gen, priority, name
        self._gen_id = 0  # bumped by every (re)schedule and stop: a queued resumption with an older one is stale
        self.alive = True
        self.wake_time: int | None = None

    def wake(self, delay: int = 0) -> None:
        """(Re)schedule the next resumption `delay` ms from now; a pending one is dropped."""
        if not self.alive:
            return
        self._gen_id += 1
        token = self._gen_id
        self.wake_time = self.engine.now + int(delay)
        self.engine.schedule(lambda: self._resume(token), self.priority, delay)

    def wake_at(self, time_ms: int) -> None:
        self.wake(max(0, time_ms - self.engine.now))

    def advance(self, delay: int) -> bool:
        """`yield delay` without the queue's round trip: when this process's resumption `delay` ms from now
        would be the engine's next event (every queued one is later, or at that time and of a lower
        rank), the clock moves there and True is returned: the generator goes on at once, as the step
        that resumed it would have. Else False, and the caller yields."""
        e = self.engine
        t = e._now + delay
        q = e._queue
        if delay <= 0 or (q and (q[0][0] < t or (q[0][0] == t and q[0][1] <= self.priority))):
            return False
        self._gen_id += 1  # as `wake` would: an entry still queued for this process is stale
        e._now = t
        return True

    def stop(self) -> None:
        self.alive = False
        self._gen_id += 1
        self.wake_time = None

    def _resume(self, token: int) -> None:
        if token != self._gen_id or not self.alive:
            return  # re-timed or stopped meanwhile
        self.wake_time = None
        try:
            delay = next(self.gen)
        except StopIteration:
            self.alive = False
            return
        if delay is None:
            return  # idle until someone calls wake()
        self.wake(int(delay))
