"""`timer` (spec §6): TimerLog units, wheel slots and the timercheck cursors.

- TimerLog task (per file): every unit's offsetPy must hold a record of `rmq_sys_wheel_timer` of
  sizePy bytes inside the CommitLog (a stale unit makes the dequeue retry forever, #10668); a unit
  that points before the CommitLog's first file is only reported when still pending.
- Wheel task (per slot range): each written slot's chain, walked from lastPos through prevPos, must
  end at firstPos, hold only units of that slot's time, and count `num` = normal and roll units −
  delete units (§6.5); broken chains in slots not yet read are errors (#9735).
- Driver: timercheck's lastTimerQueueOffset against the timer queue, lastTimerLogFlushPos against
  the TimerLog's end.
"""

import gzip
import mmap

import numpy as np

from mqtool.audit.plan import TIMER_TOPIC, TimerLogTask, WheelTask, timerlog_queue
from mqtool.audit.records import CommitLogRecords
from mqtool.audit.results import TimerLogResult, WheelResult
from mqtool.formats.timerlog import MAGIC_DELETE, MAGIC_ROLL, TIMERLOG_UNIT_SIZE
from mqtool.formats.timerwheel import SLOT_SIZE
from mqtool.store import fastscan
from mqtool.store.findings import Finding, Findings
from mqtool.store.mapped_files import map_file, read_at

CHECK = "timer"
MAX_CHAIN = 1 << 22  # a longer walk means a cycle
_UNIT_FIELDS = ("prev_pos", "magic", "curr_write_time_ms", "delayed_time_delta", "offset_py", "size_py")


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


def _load_slots(path: str, begin: int, end: int) -> np.ndarray:
    if path.endswith(".gz"):
        with gzip.open(path) as fh:
            fh.seek(begin * SLOT_SIZE)
            data = fh.read((end - begin) * SLOT_SIZE)
    else:
        data = read_at(path, begin * SLOT_SIZE, (end - begin) * SLOT_SIZE)
    return fastscan.timerwheel_slots(data)


def check_wheel(task: WheelTask) -> WheelResult:
    findings = Findings()
    slots = _load_slots(task.path, task.slot_begin, task.slot_end)
    written = np.nonzero(slots["time"] != 0)[0]
    tl = timerlog_queue(task.root)
    rel = "timerwheel.gz" if task.path.endswith(".gz") else "timerwheel"
    checked = broken = units_total = 0
    maps: dict[int, object] = {}
    pending_by_time: dict[int, int] = {}
    try:
        for i in written.tolist():
            s = slots[i]
            t_units, first, last, num = int(s["time"]), int(s["first"]), int(s["last"]), int(s["num"])
            time_ms = t_units * task.precision_ms
            slot = task.slot_begin + i
            live = time_ms >= task.last_read_time_ms
            checked += 1
            problems, count, walked = _walk(tl, maps, first, last, t_units, task.precision_ms)
            units_total += walked
            if not problems and count != num:
                problems.append(f"num is {num} but the chain counts {count} (normal + roll − delete)")
            if live and num > 0:
                pending_by_time[time_ms] = num
            if problems:
                broken += 1
                sev = "error" if live else "warning"
                state = "pending" if live else "already read"
                findings.append(Finding(rel, slot * SLOT_SIZE, CHECK, sev,
                                        f"wheel slot {slot} (time {time_ms}, {state}): " + "; ".join(problems)))
    finally:
        for mm in maps.values():
            if mm is not None:
                mm.close()
    return WheelResult(index=task.index, findings=findings, slots=checked, broken=broken, chain_units=units_total,
                       pending_by_time=pending_by_time)


def _walk(tl, maps, first: int, last: int, t_units: int, precision: int):
    """Walk a slot's chain from lastPos; (problems, num as the broker counts it, units walked)."""
    problems: list[str] = []
    count = walked = 0
    pos = last
    seen_first = False
    while pos != -1 and walked < MAX_CHAIN:
        f = tl.file_for(pos)
        if f is None:
            problems.append(f"chain reaches TimerLog offset {pos}, which is in no TimerLog file")
            return problems, count, walked
        if f.start not in maps:
            with open(f.path, "rb") as fh:
                maps[f.start] = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if fh.seek(0, 2) else None
        buf = maps[f.start]
        p = pos - f.start
        unit = _unit_at(buf, p)
        if unit is None:
            problems.append(f"chain reaches TimerLog offset {pos}, where no unit is written")
            return problems, count, walked
        prev, magic, write_ms, delta, _o, _sz = unit
        walked += 1
        if (write_ms + delta) // precision != t_units:
            problems.append(f"unit at {pos} belongs to time {write_ms + delta}, not this slot")
        count += -1 if (magic & MAGIC_DELETE and not magic & MAGIC_ROLL) else 1
        if pos == first:
            seen_first = True
            break
        pos = prev
    if walked >= MAX_CHAIN:
        problems.append("chain does not end (cycle)")
    elif not seen_first:
        problems.append(f"chain ends before reaching firstPos {first}")
    return problems, count, walked


def _unit_at(buf, p: int) -> tuple | None:
    """The fields of the TimerLog unit at file position p (`fastscan.TIMERLOG_DTYPE`), None if none is written."""
    if buf is None or p < 0 or p + TIMERLOG_UNIT_SIZE > len(buf):
        return None
    u = np.frombuffer(buf, fastscan.TIMERLOG_DTYPE, count=1, offset=p)
    try:
        if int(u["size"][0]) != TIMERLOG_UNIT_SIZE:
            return None
        return tuple(int(u[k][0]) for k in _UNIT_FIELDS)
    finally:
        del u


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
