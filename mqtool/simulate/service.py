"""The one protocol the runner and the faults drive every simulated broker service through.

A service mirrors one of the broker's `ServiceThread`s/managers: `start()` is its start after
the broker's recovery, `stop(clean)` its shutdown (`clean=False`: a crash, which loses what was
not persisted), `persist()` its `ConfigManager.persist()` / checkpoint flush. A service whose
timing depends on the broker's clock may also be a `ClockListener`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from mqtool.simulate.context import SimContext


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
