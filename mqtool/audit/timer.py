"""`timer` (spec §6): TimerLog units, wheel slots and the timercheck cursors.

- TimerLog task (per file): every unit's offsetPy must hold a record of `rmq_sys_wheel_timer` of
  sizePy bytes inside the CommitLog (a stale unit makes the dequeue retry forever, #10668); a unit
  that points before the CommitLog's first file is only reported when still pending.
- Wheel task (per slot range): each written slot's chain, walked from lastPos through prevPos, must
  end at firstPos, hold only units of that slot's time, and count `num` as `doEnqueue` does (+1 per
  unit, −1 per unit with DELETE, rolled or not; §6.5); broken chains in slots not yet read are
  errors (#9735), a num that differs is info (`rules.timer.wheel_slot_finding`, shared with `inspect
  timer`). The walk is `mqtool.rules.timer.walk_chain`.
- Driver: timercheck's lastTimerQueueOffset against the timer queue, lastTimerLogFlushPos against
  the TimerLog's end.
"""

from operator import itemgetter

import numpy as np

from mqtool.audit.plan import TimerLogTask, WheelTask, timerlog_queue
from mqtool.audit.records import CommitLogRecords
from mqtool.audit.results import TimerLogResult, WheelResult
from mqtool.formats.names import TIMER_TOPIC
from mqtool.formats.timerlog import MAGIC_DELETE, TIMERLOG_UNIT_SIZE
from mqtool.formats.timerwheel import slot_index
from mqtool.rules.timer import (
    END,
    LOOP,
    MISSING,
    revise_from,
    revised_slot_finding,
    slot_num_delta,
    walk_chain,
    wheel_slot_finding,
)
from mqtool.store import fastscan
from mqtool.store.findings import Finding, Findings
from mqtool.store.mapped_files import FileMaps, map_file
from mqtool.store.timer import read_wheel_slots

CHECK = "timer"


def check_timerlog_file(task: TimerLogTask) -> TimerLogResult:
    findings = Findings()
    units = pending = 0
    with CommitLogRecords(task.root) as reader, map_file(task.path) as buf:
        view = fastscan.timerlog_units(buf)  # up to the file-end filler or unwritten bytes
        cols = [view[k].tolist() for k in ("curr_write_time_ms", "delayed_time_delta", "offset_py", "size_py")]
        units = len(view)
        del view
        for i, (write_ms, delta, off_py, size_py) in enumerate(zip(*cols, strict=True)):
            pos = i * TIMERLOG_UNIT_SIZE
            due = write_ms + delta
            live = due >= task.last_read_time_ms
            pending += live
            h = reader.get(off_py)
            problem = None
            if isinstance(h, str):
                if off_py < reader.queue.min_offset:
                    problem = f"points to CommitLog offset {off_py}, before the first CommitLog file"
                else:
                    problem = f"points to CommitLog offset {off_py}: {h}"
            elif h.topic != TIMER_TOPIC:
                problem = f"points to CommitLog offset {off_py}, a record of topic {h.topic}, not {TIMER_TOPIC}"
            elif h.total_size != size_py:
                problem = f"points to a record of {h.total_size} bytes at {off_py}, the unit says {size_py}"
            if problem:
                sev = "error" if live else "warning"
                state = "pending (due " + str(due) + ")" if live else "already read"
                findings.append(Finding(task.rel, task.file_start + pos, CHECK, sev,
                                        f"TimerLog unit, {state}, {problem}"))
    end = units * TIMERLOG_UNIT_SIZE
    return TimerLogResult(index=task.index, findings=findings, file=task.rel, file_start=task.file_start,
                          units=units, pending_units=pending, end=task.file_start + end)


def check_wheel(task: WheelTask) -> WheelResult:
    findings = Findings()
    slots = read_wheel_slots(task.path, task.slot_begin, task.slot_end)
    written = np.nonzero(slots["time_units"] != 0)[0]
    tl = timerlog_queue(task.root)
    rel = "timerwheel.gz" if task.path.endswith(".gz") else "timerwheel"
    checked = broken = units_total = 0
    maps = FileMaps()
    pending_by_time: dict[int, int] = {}
    try:
        for i in written.tolist():
            s = slots[i]
            t_units, first, last, num = int(s["time_units"]), int(s["first_pos"]), int(s["last_pos"]), int(s["num"])
            time_ms = t_units * task.precision_ms
            slot = task.slot_begin + i
            live = time_ms >= task.last_read_time_ms
            checked += 1
            problems, count, walked = _walk(tl, maps, first, last, t_units, task.precision_ms)
            units_total += walked
            if live and count > 0:  # the chain's count, not num: recovery rebuilds slots with num 0
                pending_by_time[time_ms] = count
            broken += bool(problems)
            found = wheel_slot_finding(slot, time_ms, live, problems, num, count)  # graded as `inspect timer` does
            if found is not None:
                findings.append(Finding(rel, found[0], CHECK, found[1], found[2]))
    finally:
        maps.close()
    return WheelResult(index=task.index, findings=findings, slots=checked, broken=broken, chain_units=units_total,
                       pending_by_time=pending_by_time)


def _walk(tl, maps, first: int, last: int, t_units: int, precision: int):
    """Walk a slot's chain from lastPos to firstPos (`rules.timer.walk_chain`).

    (problems, num as `doEnqueue` counts it, units walked).
    """
    problems: list[str] = []
    w = walk_chain(last, lambda pos: _read_unit(tl, maps, pos), itemgetter(0), stop_at=first)
    count = 0
    for pos, (_prev, magic, write_ms, delta, _o, _sz) in w.units:
        if (write_ms + delta) // precision != t_units:
            problems.append(f"unit at {pos} belongs to time {write_ms + delta}, not this slot")
        count += slot_num_delta(magic)
    if w.stop == MISSING:
        where = "which is in no TimerLog file" if tl.file_for(w.stop_pos) is None else "where no unit is written"
        problems.append(f"chain reaches TimerLog offset {w.stop_pos}, {where}")
    elif w.stop == LOOP:
        problems.append(f"chain does not end (cycle: back to TimerLog offset {w.stop_pos})")
    elif w.stop == END:
        problems.append(f"chain ends before reaching firstPos {first}")
    return problems, count, len(w.units)


def _read_unit(tl, maps: FileMaps, pos: int) -> tuple | None:
    """The fields of the TimerLog unit at a global offset (files mapped once into `maps`), or None."""
    f = tl.file_for(pos)
    return None if f is None else _unit_at(maps.get(f.path), pos - f.start)


def _unit_at(buf, p: int) -> tuple | None:
    """(prev_pos, magic, curr_write_time_ms, delayed_time_delta, offset_py, size_py) of the TimerLog
    unit at file position p (`fastscan.timerlog_unit_at`), None if none is written."""
    u = fastscan.timerlog_unit_at(buf, p)
    return None if u is None else u[1:7]


def cursor_findings(timercheck: dict | None, timer_queue_max: int | None, timerlog_end: int | None,
                    out: Findings) -> None:
    """timercheck cursors against the timer queue and the TimerLog (driver side), added to `out`."""
    if timercheck is None:
        return
    q = timercheck["last_timer_queue_offset"]
    if timer_queue_max is not None:
        if q > timer_queue_max:
            out.append(Finding("config/timercheck", 16, CHECK, "error",
                               f"lastTimerQueueOffset {q} is beyond the timer queue's max offset {timer_queue_max}",
                               TIMER_TOPIC, 0))
        elif q < timer_queue_max:
            out.append(Finding("config/timercheck", 16, CHECK, "info",
                               f"{timer_queue_max - q} timer record(s) not yet enqueued into the TimerLog "
                               f"(lastTimerQueueOffset {q}, queue max {timer_queue_max})", TIMER_TOPIC, 0))
    flush = timercheck["last_timer_log_flush_pos"]
    if timerlog_end is not None and flush > timerlog_end:
        out.append(Finding("config/timercheck", 8, CHECK, "error",
                           f"lastTimerLogFlushPos {flush} is beyond the TimerLog's end {timerlog_end}"))


def revised_slot_findings(store, timercheck: dict | None, out: Findings) -> dict[int, int]:
    """The slots the broker's recovery rebuilds or revises from the TimerLog units it re-reads (driver side):
    info, as `inspect timer` reports them (`rules.timer.revise_from`, `revised_slot_finding`). Returns the
    rebuilt slots not yet read, time -> their units' count (+1, -1 per DELETE), which the wheel task, reading
    only the slots the file holds, cannot count."""
    tl, wheel = store.timerlog, store.timer_wheel
    if tl is None or wheel is None or not tl.queue.files:
        return {}
    flush = timercheck["last_timer_log_flush_pos"] if timercheck else 0
    start = revise_from([f.start for f in tl.queue.files], flush, tl.queue.file_size or tl.queue.files[-1].length)
    precision = wheel.precision_ms
    last: dict[int, int] = {}  # slot time -> the last unit of it the recovery reads
    count: dict[int, int] = {}  # slot time -> its units' count
    for file_start, cols in tl.scan_columns():
        times = None
        if file_start >= start and len(cols):
            times = (cols["curr_write_time_ms"].astype(np.int64) + cols["delayed_time_delta"]) // precision
            delta = np.where(cols["magic"] & MAGIC_DELETE, -1, 1)
        del cols  # a view over the file's mapping: it must be gone before the file is closed
        if times is None:
            continue
        pos = file_start + np.arange(len(times), dtype=np.int64) * TIMERLOG_UNIT_SIZE
        uniq, first = np.unique(times[::-1], return_index=True)  # the last position of each time
        last.update(zip((uniq * precision).tolist(), pos[::-1][first].tolist(), strict=True))
        uniq, inverse = np.unique(times, return_inverse=True)
        for t, n in zip((uniq * precision).tolist(), np.bincount(inverse, delta).tolist(), strict=True):
            count[t] = count.get(t, 0) + int(n)
    read = timercheck["last_read_time_ms"] if timercheck else 0
    rebuilt: dict[int, int] = {}
    for time_ms, last_pos in sorted(last.items()):
        index = slot_index(time_ms, precision, wheel.slots_total)
        s = wheel.get_slot(time_ms)
        if s.empty or s.last_pos != last_pos:
            found = revised_slot_finding(index, time_ms, None if s.empty else s.last_pos, last_pos)
            out.append(Finding(wheel.path.name, found[0], CHECK, found[1], found[2]))
        if s.empty and time_ms >= read and count[time_ms] > 0:
            rebuilt[time_ms] = count[time_ms]
    return rebuilt
