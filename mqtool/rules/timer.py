"""`TimerMessageStore` / `TimerWheel` rules: roll, slot counts, the chain walk of a dequeue (spec §6).

Read at `rocketmq-all-5.3.1` (`store/.../timer/TimerMessageStore.java`, `TimerWheel.java`); 4.9.8
has no timer wheel. The roll window itself (`timerRollWindowSlot` clamped into [2, slotsTotal - 60]
by the constructor) is `BrokerConfig.timer_roll_window_slots`.
"""

from collections.abc import Callable, Iterable, Sequence
from typing import Generic, NamedTuple, TypeVar

from mqtool.formats.broker_conf import ConfigFileError
from mqtool.formats.names import PROPERTY_TIMER_DEQUEUE_MS, PROPERTY_TIMER_ENQUEUE_MS, PROPERTY_TIMER_ROLL_TIMES
from mqtool.formats.timerlog import MAGIC_DEFAULT, MAGIC_DELETE, MAGIC_ROLL
from mqtool.formats.timerwheel import SLOT_SIZE
from mqtool.rules.java import INT_MAX, parse_int, parse_long

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
    return magic & (MAGIC_DELETE | MAGIC_ROLL) == MAGIC_DELETE


def slot_num_delta(magic: int) -> int:
    """What `doEnqueue` adds to the slot's num for a unit: -1 for a delete (even a rolled one), else +1."""
    return -1 if need_delete(magic) else 1


def check_timer_precision(precision_ms: int) -> None:
    """Refuse a `timerPrecisionMs` the broker cannot start with (a `ConfigFileError`: one line, exit 2).

    `TimerMessageStore.recover` floors times with `formatTimeMs` (time / precisionMs * precisionMs): 0
    throws ArithmeticException while the broker loads; a negative one makes `TimerWheel.getSlotIndex`
    negative, and the wheel buffer refuses the position. Only checked where the timer runs
    (`timerWheelEnable`, the default).
    """
    if precision_ms <= 0:
        raise ConfigFileError(
            f"timerPrecisionMs = {precision_ms}: the broker's timer cannot run with it "
            "(TimerMessageStore divides times by it when it recovers); give a positive number "
            "of milliseconds (default 1000)"
        )


LONG_MAX = 2**63 - 1  # Long.MAX_VALUE: TIMER_ENQUEUE_MS of a message put at once (never in the TimerLog)
# the properties `convert` sets, in the order it sets them: on a delivery the first and last, on a roll all three
CONVERT_SET = (PROPERTY_TIMER_ENQUEUE_MS, PROPERTY_TIMER_ROLL_TIMES, PROPERTY_TIMER_DEQUEUE_MS)
DELIVERY_SET = (PROPERTY_TIMER_ENQUEUE_MS, PROPERTY_TIMER_DEQUEUE_MS)


def put_at_once(delay_time: int, curr_write_time_ms: int) -> bool:
    """`TimerEnqueuePutService.putMessageToTimerWheel`: a delivery time before `currWriteTimeMs` skips the
    TimerLog and goes straight to the dequeue's put (enqueue time Long.MAX_VALUE); else `doEnqueue`."""
    return delay_time < curr_write_time_ms


def next_roll_times(value: str | bytes | None) -> int:
    """`convert`'s TIMER_ROLL_TIMES on a roll: the value + 1 (1 when absent), as Java's int wraps.

    Where `Integer.parseInt` throws (not a number), the broker's put fails with an unknown error and
    is retried (or skipped with timerSkipUnknownError); mqtool counts such a value as 0.
    """
    if isinstance(value, bytes):
        value = value.decode("utf-8", "surrogateescape")
    n = parse_int(value)
    n = 1 if n is None else n + 1
    return n if n <= INT_MAX else n - 2**32


def next_roll_times_of(props) -> int:
    """`next_roll_times` of a record's properties (a mapping of str or of bytes values)."""
    return next_roll_times(props.get(PROPERTY_TIMER_ROLL_TIMES))


def convert_properties(props: dict[str, str], enqueue_time: int, need_roll: bool, dequeue_ms: int) -> dict[str, str]:
    """`TimerMessageStore.convert`: a copy of the properties with TIMER_ENQUEUE_MS (unless -1: a unit
    read without its write time), TIMER_ROLL_TIMES + 1 on a roll, and TIMER_DEQUEUE_MS (the put time)."""
    out = dict(props)
    if enqueue_time != -1:
        out[PROPERTY_TIMER_ENQUEUE_MS] = str(enqueue_time)
    if need_roll:
        out[PROPERTY_TIMER_ROLL_TIMES] = str(next_roll_times(out.get(PROPERTY_TIMER_ROLL_TIMES)))
    out[PROPERTY_TIMER_DEQUEUE_MS] = str(dequeue_ms)
    return out


def convert_size_change(old_lengths: tuple[int | None, ...], new_values: tuple[int | str, ...]) -> int:
    """How many bytes `convert` adds to a properties string: per property of `CONVERT_SET` (or
    `DELIVERY_SET`, by the length of `old_lengths`), the new value's length less the old one's (UTF-8
    lengths, None where absent: then the key and its two separators are added too)."""
    keys = CONVERT_SET if len(old_lengths) == 3 else DELIVERY_SET
    n = 0
    for key, old, new in zip(keys, old_lengths, new_values, strict=True):
        new_len = len(str(new))
        n += len(key) + 2 + new_len if old is None else new_len - old
    return n


def roll_times(props: dict[str, str]) -> int | None:
    """TIMER_ROLL_TIMES of a record: how often the timer re-put it to its topic (None: never, or not a number)."""
    return parse_int(props.get(PROPERTY_TIMER_ROLL_TIMES))


def dequeue_ms(props: dict[str, str]) -> int | None:
    """TIMER_DEQUEUE_MS of a record: when the timer's dequeue put it (None: it did not)."""
    v = props.get(PROPERTY_TIMER_DEQUEUE_MS)
    return None if v is None else parse_long(v)


def was_rolled(props: dict[str, str]) -> bool:
    """Does the record carry TIMER_ROLL_TIMES, i.e. is it a roll re-put (`convert` with needRoll)?"""
    return PROPERTY_TIMER_ROLL_TIMES in props


def was_dequeued(props: dict[str, str]) -> bool:
    """Does the record carry TIMER_DEQUEUE_MS, i.e. was it put by the timer's dequeue (`convert`)?"""
    return PROPERTY_TIMER_DEQUEUE_MS in props


def do_enqueue(
    delayed_time: int, write_time_ms: int, roll_window_slots: int, precision_ms: int, delete: bool = False
) -> tuple[int, int]:
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
    slot = np.where(
        roll,
        np.where(half, write_time_ms + roll_window_slots // 2 * precision_ms, write_time_ms + window_ms),
        delayed_time,
    )
    magic = MAGIC_DEFAULT | np.where(roll, MAGIC_ROLL, 0) | np.where(delete, MAGIC_DELETE, 0)
    return slot.astype(np.int64), magic.astype(np.int64)


class ChainWalk(NamedTuple, Generic[U]):
    """A slot's units as `dequeue` reads them: (position, unit), newest first, and why it stopped; with a
    `magic` to `walk_chain`, the cancel requests apart in `cancels`."""

    units: list[tuple[int, U]]
    stop: str  # END, MISSING, LOOP or FIRST
    stop_pos: int  # where it stopped: -1 at END, else the position it could not (or need not) pass
    cancels: list[tuple[int, U]]

    @property
    def broken(self) -> bool:
        return self.stop in (MISSING, LOOP)


def walk_chain(
    last_pos: int,
    read_unit: Callable[[int], U | None],
    prev_pos: Callable[[U], int],
    stop_at: int | None = None,
    magic: Callable[[U], int] | None = None,
) -> ChainWalk[U]:
    """The walk of `TimerMessageStore.dequeue`: from the slot's lastPos back along each unit's prevPos.

    `read_unit(pos)` gives the unit at a TimerLog offset or None (the broker's `getWholeBuffer`
    finds no file: the walk ends). A position seen twice ends the walk (LOOP) where the broker would
    spin; while every prevPos points before its unit (a chain as `doEnqueue` appends it) no position can
    repeat, so the positions are kept for that test only from the first step that does not. `stop_at` (a
    slot's firstPos) ends the walk after that unit. With `magic` (a unit's magic) the walk also sorts the
    units as `dequeue` does in the same loop: cancel requests (`needDelete && !needRoll`: `deleteMsgStack`,
    read first, in walk order) go to `cancels`, the others stay in `units` (`normalMsgStack.addFirst`: handed
    out oldest first). The one walk: the simulator's dequeue calls it once a slot with a reader over its columns.
    """
    units: list[tuple[int, U]] = []
    cancels: list[tuple[int, U]] = []
    seen: set[int] | None = None
    before = last_pos + 1  # the position walked last: the next one lies before it, or the walk may loop
    pos = last_pos
    while pos != -1:
        if seen is not None or pos >= before:
            if seen is None:
                seen = {p for p, _u in units + cancels}
            if pos in seen:
                return ChainWalk(units, LOOP, pos, cancels)
            seen.add(pos)
        u = read_unit(pos)
        if u is None:
            return ChainWalk(units, MISSING, pos, cancels)
        if magic is not None and is_cancel_request(magic(u)):
            cancels.append((pos, u))
        else:
            units.append((pos, u))
        if pos == stop_at:
            return ChainWalk(units, FIRST, pos, cancels)
        before = pos
        pos = prev_pos(u)
    return ChainWalk(units, END, -1, cancels)


def timer_out_ms(deliver_ms: int, precision_ms: int) -> int:
    """The TIMER_OUT_MS a timer message is stored with (`HookUtils.transformTimerMessage`): its due time
    floored to the precision, and an exact multiple one precision earlier."""
    if deliver_ms % precision_ms == 0:
        return deliver_ms - precision_ms
    return deliver_ms // precision_ms * precision_ms


def format_time_ms(time_ms: int, precision_ms: int) -> int:
    """`TimerMessageStore.formatTimeMs`: a time floored to the precision, the time of its wheel slot."""
    return time_ms // precision_ms * precision_ms


def cancels_in_slot(cancel_out_ms: int | None, target_out_ms: int | None, precision_ms: int) -> bool:
    """Will a cancel record drop a timer message (`dequeue` + `TimerDequeueGetMessageService`)?

    A cancel acts only on the units read in its own slot. Rolls move both the cancel and its target
    on to the slot of their TIMER_OUT_MS (roll units are re-put, never matched), so the cancel takes
    effect where both end: the same slot of the wheel, whatever either rolled before or after the
    other was written.
    """
    if cancel_out_ms is None or target_out_ms is None or precision_ms <= 0:
        return False
    return format_time_ms(cancel_out_ms, precision_ms) == format_time_ms(target_out_ms, precision_ms)


def need_retry_sleep(precision_ms: int) -> int:
    """`TimerDequeuePutMessageService.run`'s sleep after each put of its retry loop (500 × precision / 1000 ms)."""
    return 500 * precision_ms // 1000


def do_put_retry(status: str, attempt: int, precision_ms: int, in_loop: bool = False) -> int | None:
    """The wait (ms) before the next put of a timer message whose put failed with `status`, or None to give up.

    `TimerMessageStore.doPut` puts once and retries its own way: SERVICE_NOT_AVAILABLE returns PUT_NEED_RETRY
    at once; MESSAGE_ILLEGAL and PROPERTIES_SIZE_EXCEEDED return PUT_NO_RETRY; any other failure counts a retry,
    sleeps 50 ms and puts again, and after the third the put it makes is not looked at (PUT_NO_RETRY whatever it
    answered). `attempt` is the put's number inside its `doPut` call (1 = the call's first): a PUT_NEED_RETRY
    ends the call, and `TimerDequeuePutMessageService.run` calls `doPut` anew, at once the first time, then
    sleeping `need_retry_sleep` after each call until one returns something else (`in_loop`: an earlier call
    returned PUT_NEED_RETRY, so this put is the loop's; the loop's sleep also follows the call that ends it).
    5.0-5.3.1 alike; 5.3.2 dropped the call's own retries (every failure but the illegal ones is PUT_NEED_RETRY,
    UNKNOWN_ERROR skipped or held per `timerSkipUnknownError`), which the simulator does not follow."""
    if attempt > 3 or status in ("MESSAGE_ILLEGAL", "PROPERTIES_SIZE_EXCEEDED"):
        return None
    if status == "SERVICE_NOT_AVAILABLE":
        return need_retry_sleep(precision_ms) if in_loop else 0
    return 50


def build_delete_key(real_topic: str | None, uniq_key: str) -> str:
    """`TimerMessageStore.buildDeleteKey` (after 5.3.1): the key later versions put in the delete list."""
    return f"{real_topic}+{uniq_key}"


def is_deleted(
    uniq_key: str | None, real_topic: str | None, delete_keys: set[str], topic_key: bool | None = False
) -> bool:
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


def revise_from(file_starts: Sequence[int], last_timer_log_flush_pos: int, file_size: int) -> int | None:
    """`TimerMessageStore.recover` -> `recoverAndRevise(lastFlushPos - fileSize, true)`: the start of the first
    TimerLog file whose units revise the wheel (the last file starting at or before that offset, else the
    first file); None without files."""
    if not file_starts:
        return None
    begin = max(0, last_timer_log_flush_pos - file_size)
    starts = [s for s in file_starts if s <= begin]
    return starts[-1] if starts else file_starts[0]


def revise_slots(
    units: Iterable[tuple[int, int]], get_slot: Callable[[int], Sequence[int] | None]
) -> dict[int, list[int]]:
    """`recoverAndRevise`'s `TimerWheel.reviseSlot(delayTime, IGNORE, pos, force=true)` for each (TimerLog
    position, slot time) it reads, in order: the slots it changes, time -> [first_pos, last_pos, num].

    A slot holding that time gets the unit as its last position; any other (empty, or of a time 14 days
    older) is rebuilt by the 3-argument `putSlot` as (pos, pos) with the num its bytes held: 0 for an
    empty slot, so a slot rebuilt for one unit counts 0 while its chain counts 1. `get_slot(time)` is the
    wheel before recovery ([first_pos, last_pos, num], None when it does not hold that time).
    """
    revised: dict[int, list[int]] = {}
    for pos, time_ms in units:
        s = revised.get(time_ms)
        if s is None:
            old = get_slot(time_ms)
            s = revised[time_ms] = [pos, pos, 0] if old is None else [old[0], pos, old[2]]
        s[1] = pos
    return revised


def wheel_slot_finding(
    slot_index: int, time_ms: int, pending: bool, chain_problems: Sequence[str], num: int, chain_num: int
) -> tuple[int, str, str] | None:
    """(byte offset of the slot in the `timerwheel` file, severity, message) of a written slot, or None.

    The one grading `inspect timer` and `spark-audit` share. A chain the dequeue cannot walk whole (it
    stops, spins, or reads units of another time) loses messages: an error while the slot is still to be
    read, a warning once read. A `num` other than the chain's count (+1 per unit, -1 per DELETE unit,
    `doEnqueue`) is info: `num` only feeds the timer metrics (`calcTimerDistribution`, `getAllNum`), and a
    real broker writes such slots in a clean run (`revise_slots` rebuilds a slot with the num it held).
    """
    state = "pending" if pending else "already read"
    where = f"wheel slot {slot_index} (time {time_ms}, {state})"
    if chain_problems:
        return slot_index * SLOT_SIZE, "error" if pending else "warning", f"{where}: " + "; ".join(chain_problems)
    if num != chain_num:
        return (
            slot_index * SLOT_SIZE,
            "info",
            f"{where}: num {num} but its chain counts {chain_num} "
            "(normal + roll - delete); num only feeds the timer metrics",
        )
    return None


def revised_slot_finding(
    slot_index: int, time_ms: int, old_last_pos: int | None, last_pos: int
) -> tuple[int, str, str]:
    """(byte offset in the `timerwheel` file, severity, message) of a slot `recoverAndRevise` changes
    (`revise_slots`): rebuilt when the file does not hold it (`old_last_pos` None), its lastPos moved
    when the file's lags the TimerLog. Info: the broker repairs it and delivers the units."""
    where = f"wheel slot {slot_index} (time {time_ms})"
    if old_last_pos is None:
        what = f"the wheel file does not hold this slot of TimerLog unit(s) up to {last_pos}; the broker rebuilds it"
    else:
        what = f"lastPos {old_last_pos} lags the TimerLog, whose unit {last_pos} is in this slot; the broker revises it"
    return slot_index * SLOT_SIZE, "info", f"{where}: {what} when it recovers (recoverAndRevise -> reviseSlot)"
