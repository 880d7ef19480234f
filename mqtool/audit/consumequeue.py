"""`consumequeue.consistency` (spec §3): every ConsumeQueue unit against the CommitLog record it names.

Per ConsumeQueue file (a task): each written unit must point to a valid record of the same topic,
queue id and queue offset, with the unit's size; units must point forward (a repeated or earlier
CommitLog offset is a duplicate); an unwritten (zero) unit followed by written ones is a hole. The
driver then compares queues with the CommitLog walk: records with no unit (dispatch lag), units
beyond the CommitLog's valid end, and queue offsets the CommitLog holds twice or not at all.
For SCHEDULE_TOPIC_XXXX units the task also checks the `schedule` rule tagsCode = store time +
delay of the level (spec §4.3) and keeps the tagsCodes for the overdue count.
"""

import struct
from bisect import bisect_right

import numpy as np

from mqtool.audit.plan import QueueFileTask, commitlog_queue
from mqtool.formats.commitlog import MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2
from mqtool.formats.consumequeue import CQ_UNIT_SIZE
from mqtool.formats.message import RecordError, decode_message
from mqtool.formats.sysflag import BORNHOST_V6, STOREHOST_V6
from mqtool.store.findings import Finding
from mqtool.store.mapped_files import map_file

CHECK = "consumequeue.consistency"
SCHEDULE_CHECK = "schedule"
UNIT_DTYPE = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tags", ">i8")])
_HEAD = struct.Struct(">iiiiiqqiq")


class CommitLogReader:
    """Reads record headers by physical offset, keeping each CommitLog file mapped once."""

    def __init__(self, root: str):
        self.queue = commitlog_queue(root)
        self.starts = [f.start for f in self.queue.files]
        self._maps: dict[int, tuple] = {}

    def close(self) -> None:
        for fh, mm in self._maps.values():
            mm.close()
            fh.close()
        self._maps.clear()

    def _buf(self, i: int):
        if i not in self._maps:
            import mmap

            fh = open(self.queue.files[i].path, "rb")
            size = fh.seek(0, 2)
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
            self._maps[i] = (fh, mm)
        return self._maps[i][1]

    def header(self, offset: int):
        """(topic, queue id, queue offset, TOTALSIZE, buffer, position) or a reason string."""
        i = bisect_right(self.starts, offset) - 1
        if i < 0:
            return "before the first CommitLog file"
        f = self.queue.files[i]
        pos = offset - f.start
        if pos >= max(f.length, self.queue.file_size):
            return "in a missing CommitLog file"
        buf = self._buf(i)
        if pos + _HEAD.size > len(buf):
            return "past the end of its CommitLog file"
        total, magic, _crc, qid, _flag, qoff, _phys, sysflag, _born = _HEAD.unpack_from(buf, pos)
        if magic not in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2) or total <= 0 or pos + total > len(buf):
            what = "unwritten bytes" if total == 0 and magic == 0 else f"bad magic 0x{magic & 0xFFFFFFFF:08X}"
            return f"no record there ({what})"
        p = pos + _HEAD.size + (20 if sysflag & BORNHOST_V6 else 8) + 8 + (20 if sysflag & STOREHOST_V6 else 8) + 12
        body_len = struct.unpack_from(">i", buf, p)[0]
        p += 4 + body_len
        if body_len < 0 or p + 2 > pos + total:
            return "no record there (body length out of range)"
        if magic == MESSAGE_MAGIC_CODE_V2:
            tlen = struct.unpack_from(">h", buf, p)[0]
            p += 2
        else:
            tlen = struct.unpack_from(">b", buf, p)[0]
            p += 1
        if tlen < 0 or p + tlen > pos + total:
            return "no record there (topic length out of range)"
        topic = bytes(buf[p:p + tlen]).decode("utf-8", "surrogateescape")
        return topic, qid, qoff, total, buf, pos


def check_queue_file(task: QueueFileTask) -> dict:
    findings: list[Finding] = []
    topic, qid, rel = task.topic, task.queue_id, task.rel
    tags_out: list[tuple[int, int]] = []

    def add(pos, severity, message, check=CHECK):
        findings.append(Finding(rel, task.file_start + pos, check, severity, message, topic, qid))

    with map_file(task.path) as buf:
        n = len(buf) // CQ_UNIT_SIZE
        units = np.frombuffer(buf, dtype=UNIT_DTYPE, count=n) if n else np.zeros(0, UNIT_DTYPE)
        off = units["offset"].astype(np.int64)
        size = units["size"].astype(np.int64)
        tags = units["tags"].astype(np.int64)
        del units
    written = (off != 0) | (size != 0) | (tags != 0)
    idx = np.nonzero(written)[0]
    count = int(idx.size)
    end_unit = int(idx[-1]) + 1 if count else 0
    holes = np.nonzero(~written[:end_unit])[0]
    for h in holes[:20]:
        add(int(h) * CQ_UNIT_SIZE, "error", "unwritten (zero) unit before written ones: the queue has a hole")
    if holes.size > 20:
        add(int(holes[20]) * CQ_UNIT_SIZE, "error", f"{holes.size - 20} more holes in this file")
    first_qoff = task.file_start // CQ_UNIT_SIZE
    reader = CommitLogReader(task.root)
    prev = -1
    bad_units = 0
    try:
        for i in idx.tolist():
            o, s = int(off[i]), int(size[i])
            qo = first_qoff + i
            at = i * CQ_UNIT_SIZE
            if o <= prev:
                add(at, "error", f"unit {qo} points to CommitLog offset {o}, not after the previous unit's {prev} "
                    "(duplicate or out of order)")
            prev = max(prev, o)
            h = reader.header(o)
            if isinstance(h, str):
                bad_units += 1
                if o < reader.queue.min_offset:
                    add(at, "info", f"unit {qo} points to CommitLog offset {o}, before the first CommitLog file "
                        "(deleted by retention)")
                else:
                    add(at, "error", f"unit {qo} points to CommitLog offset {o}: {h}")
                continue
            rtopic, rqid, rqoff, total, rbuf, rpos = h
            wrong = []
            if rtopic != topic:
                wrong.append(f"topic {rtopic}")
            if rqid != qid:
                wrong.append(f"queue id {rqid}")
            if rqoff != qo:
                wrong.append(f"queue offset {rqoff} (unit is {qo})")
            if total != s:
                wrong.append(f"size {total} (unit says {s})")
            if wrong:
                bad_units += 1
                add(at, "error", f"unit {qo} points to CommitLog offset {o}, a record of another "
                    + ", ".join(wrong))
                continue
            if task.delays_ms is not None:
                tags_out.append((qo, int(tags[i])))
                _check_schedule_unit(task, rbuf, rpos, total, o, qo, int(tags[i]), add)
    finally:
        reader.close()
    max_end = int((off[idx] + size[idx]).max()) if count else 0
    return {
        "kind": "consumequeue", "index": task.index, "topic": topic, "queue_id": qid, "file": rel,
        "file_start": task.file_start, "first_offset": first_qoff, "units": count,
        "end_offset": first_qoff + end_unit, "max_commitlog_end": max_end, "bad_units": bad_units,
        "findings": findings, "schedule_tags": tags_out,
    }


def _check_schedule_unit(task, buf, pos, total, offset, qo, tags_code, add) -> None:
    """tagsCode of a SCHEDULE_TOPIC_XXXX unit = store time + delay of its (clamped) level (§4.3)."""
    try:
        rec = decode_message(bytes(buf[pos:pos + total]), 0, offset)
    except RecordError:
        return
    level_s = rec.properties.get("DELAY")
    if level_s is None or not level_s.lstrip("-").isdigit():
        add(qo * CQ_UNIT_SIZE - task.file_start, "warning",
            f"unit {qo}: schedule record at {offset} has no DELAY property", SCHEDULE_CHECK)
        return
    levels = task.delays_ms
    level = min(max(int(level_s), 1), len(levels))
    expect = rec.store_timestamp + levels[level - 1]
    if level - 1 != task.queue_id:
        add(qo * CQ_UNIT_SIZE - task.file_start, "error",
            f"unit {qo}: record at {offset} has DELAY={level_s} (level {level}) but sits in queue "
            f"{task.queue_id} (level {task.queue_id + 1})", SCHEDULE_CHECK)
    if tags_code != expect:
        add(qo * CQ_UNIT_SIZE - task.file_start, "error",
            f"unit {qo}: tagsCode {tags_code} != store time {rec.store_timestamp} + level {level} delay "
            f"{levels[level - 1]} ms = {expect}", SCHEDULE_CHECK)
