"""`TimerMessageStore` / `TimerWheel` rules: roll, slot counts, the chain walk of a dequeue (spec §6).

Read at `rocketmq-all-5.3.1` (`store/.../timer/TimerMessageStore.java`, `TimerWheel.java`); 4.9.8
has no timer wheel. The roll window itself (`timerRollWindowSlot` clamped into [2, slotsTotal - 60]
by the constructor) is `BrokerConfig.timer_roll_window_slots`.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from mqtool.formats.timerlog import MAGIC_DEFAULT, MAGIC_DELETE, MAGIC_ROLL

U = TypeVar("U")

# why a chain walk stopped
END = "end"  # prevPos -1: the oldest unit of the slot
MISSING = "missing"  # a position with no TimerLog unit (deleted file, unwritten bytes, corrupt prevPos)
LOOP = "loop"  # a position already walked: the broker would go round for ever
FIRST = "first_pos"  # reached the slot's firstPos (only when asked to stop there)


def need_roll(magic: int) -> bool:
    """`TimerMessageStore.needRoll`: the unit is a waypoint, re-put to the timer topic when read."""
    return magic & MAGIC_ROLL != 0


def need_delete(magic: int) -> bool:
    """`TimerMessageStore.needDelete`: the unit was enqueued from a TIMER_DEL_UNIQKEY record."""
    return magic & MAGIC_DELETE != 0


def is_cancel_request(magic: int) -> bool:
    """`needDelete(magic) && !needRoll(magic)` in `dequeue`: a cancel request, read before the others."""
    return need_delete(magic) and not need_roll(magic)


def slot_num_delta(magic: int) -> int:
    """What `doEnqueue` adds to the slot's num for a unit: -1 for a delete (even a rolled one), else +1."""
    return -1 if need_delete(magic) else 1


def do_enqueue(delayed_time: int, write_time_ms: int, roll_window_slots: int, precision_ms: int,
               delete: bool = False) -> tuple[int, int]:
    """(slot time, magic) of a unit `TimerMessageStore.doEnqueue` appends (spec §6.5).

    A delivery time at least a roll window after the write time is parked with ROLL at write +
    window, or at write + window/2 when it would then be due within a third of a window (so the
    next roll has time). A record with TIMER_DEL_UNIQKEY (`delete`) adds DELETE.
    """
    window_ms = roll_window_slots * precision_ms
    magic = MAGIC_DEFAULT
    if delayed_time - write_time_ms >= window_ms:
        magic |= MAGIC_ROLL
        if delayed_time - write_time_ms - window_ms < roll_window_slots // 3 * precision_ms:
            delayed_time = write_time_ms + roll_window_slots // 2 * precision_ms
        else:
            delayed_time = write_time_ms + window_ms
    if delete:
        magic |= MAGIC_DELETE
    return delayed_time, magic



def do_enqueue_many(delayed_time, write_time_ms: int, roll_window_slots: int, precision_ms: int, delete):
    """`do_enqueue` of many units written at one time: numpy int64 delivery times and a bool array of
    deletes in, (slot times, magics) as int64 arrays out (the timer's batch enqueue;
    tests/rules/test_timer_rules.py proves it equal to `do_enqueue`, unit by unit)."""
    import numpy as np  # the rules stay importable without it; every caller of this has it loaded

    window_ms = roll_window_slots * precision_ms
    ahead = delayed_time - write_time_ms
    roll = ahead >= window_ms
    half = ahead - window_ms < roll_window_slots // 3 * precision_ms
    slot = np.where(roll, np.where(half, write_time_ms + roll_window_slots // 2 * precision_ms,
                                   write_time_ms + window_ms), delayed_time)
    magic = MAGIC_DEFAULT | np.where(roll, MAGIC_ROLL, 0) | np.where(delete, MAGIC_DELETE, 0)
    return slot.astype(np.int64), magic.astype(np.int64)

@dataclass
class ChainWalk(Generic[U]):
    """A slot's units as `dequeue` reads them: (position, unit), newest first, and why it stopped."""

    units: list[tuple[int, U]]
    stop: str  # END, MISSING, LOOP or FIRST
    stop_pos: int  # where it stopped: -1 at END, else the position it could not (or need not) pass

    @property
    def broken(self) -> bool:
        return self.stop in (MISSING, LOOP)


def walk_chain(last_pos: int, read_unit: Callable[[int], U | None], prev_pos: Callable[[U], int],
               stop_at: int | None = None) -> ChainWalk[U]:
    """The walk of `TimerMessageStore.dequeue`: from the slot's lastPos back along each unit's prevPos.

    `read_unit(pos)` gives the unit at a TimerLog offset or None (the broker's `getWholeBuffer`
    finds no file: the walk ends). A position seen twice ends the walk (LOOP) where the broker would
    spin. `stop_at` (a slot's firstPos) ends the walk after that unit.
    """
    units: list[tuple[int, U]] = []
    seen: set[int] = set()
    pos = last_pos
    while pos != -1:
        if pos in seen:
            return ChainWalk(units, LOOP, pos)
        u = read_unit(pos)
        if u is None:
            return ChainWalk(units, MISSING, pos)
        seen.add(pos)
        units.append((pos, u))
        if pos == stop_at:
            return ChainWalk(units, FIRST, pos)
        pos = prev_pos(u)
    return ChainWalk(units, END, -1)


def dequeue_order(units: Iterable[tuple[int, U]], magic: Callable[[U], int]
                  ) -> tuple[list[tuple[int, U]], list[tuple[int, U]]]:
    """(cancel requests, the other units) of a walked slot in the order `dequeue` hands them out.

    Cancel requests (`deleteMsgStack`) go first, in walk order; the others (`normalMsgStack`,
    `addFirst`) oldest first.
    """
    deletes, normal = [], []
    for pu in units:
        (deletes if is_cancel_request(magic(pu[1])) else normal).append(pu)
    normal.reverse()
    return deletes, normal


def build_delete_key(real_topic: str | None, uniq_key: str) -> str:
    """`TimerMessageStore.buildDeleteKey` (after 5.3.1): the key later versions put in the delete list."""
    return f"{real_topic}+{uniq_key}"


def is_deleted(uniq_key: str | None, real_topic: str | None, delete_keys: set[str],
               topic_key: bool | None = False) -> bool:
    """Is a normal unit's message dropped by a cancel read in the same slot (`TimerDequeueGetService`)?

    5.3.1 (`topic_key=False`) matches the bare UNIQ_KEY against TIMER_DEL_UNIQKEY values; later 5.x
    (`True`) matches `buildDeleteKey(REAL_TOPIC, UNIQ_KEY)`; None accepts either (a store whose
    broker version is unknown).
    """
    if uniq_key is None or not delete_keys:
        return False
    if topic_key is not True and uniq_key in delete_keys:
        return True
    return topic_key is not False and build_delete_key(real_topic, uniq_key) in delete_keys
