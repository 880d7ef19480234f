"""`consumequeue.consistency` (spec §3): every ConsumeQueue unit against the CommitLog record it names.

Per ConsumeQueue file (a task): each written unit must point to a valid record of the same topic,
queue id and queue offset, with the unit's size; units must point forward (a repeated or earlier
CommitLog offset is a duplicate); an unwritten (zero) unit followed by written ones is a hole. The
driver then compares queues with the CommitLog walk: records with no unit (dispatch lag), units
beyond the CommitLog's valid end, and queue offsets the CommitLog holds twice or not at all.
For SCHEDULE_TOPIC_XXXX units the task also checks the `schedule` rule tagsCode =
`computeDeliverTimestamp(level, storeTimestamp)` (spec §4.3, `mqtool.rules.schedule`) and keeps
the tagsCodes for the overdue count.
"""

from dataclasses import replace

import numpy as np

from mqtool.audit.plan import QueueFileTask
from mqtool.audit.records import CommitLogRecords, open_store
from mqtool.audit.results import ConsumeQueueResult
from mqtool.formats.consumequeue import CQ_PRE_BLANK_SIZE, CQ_UNIT_SIZE
from mqtool.formats.names import PROPERTY_DELAY_TIME_LEVEL
from mqtool.formats.properties import parse_properties
from mqtool.rules.schedule import compute_deliver_timestamp, delay_level, delay_level_2_queue_id, queue_id_2_delay_level
from mqtool.store import fastscan
from mqtool.store.findings import Finding, Findings
from mqtool.store.mapped_files import map_file

CHECK = "consumequeue.consistency"
SCHEDULE_CHECK = "schedule"


def read_units(buf) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(commitLogOffset, size, tagsCode, written) of every unit up to the file's last written one.

    The fast path (`fastscan.cq_units`) reads the written units up to the first empty one, which is
    where a queue's data ends; when written units follow an empty one (a hole), the rest of the
    file is read too, so the holes can be reported.
    """
    units, ended = fastscan.cq_units(buf)
    n = len(units)
    cols = [units[k].astype(np.int64) for k in ("commitlog_offset", "size", "tags_code")]
    del units
    written = np.ones(n, bool)
    total = len(buf) // CQ_UNIT_SIZE
    if ended and n + 1 < total and np.any(fastscan.as_array(buf)[(n + 1) * CQ_UNIT_SIZE:total * CQ_UNIT_SIZE]):
        rest = fastscan.cq_view(buf, n * CQ_UNIT_SIZE)[: total - n]
        more = [rest[k].astype(np.int64) for k in ("commitlog_offset", "size", "tags_code")]
        del rest
        w = (more[0] != 0) | (more[1] != 0) | (more[2] != 0)
        last = int(np.flatnonzero(w)[-1]) + 1
        cols = [np.concatenate([c, m[:last]]) for c, m in zip(cols, more, strict=True)]
        written = np.concatenate([written, w[:last]])
    return cols[0], cols[1], cols[2], written


def pre_blank_units(off: np.ndarray, size: np.ndarray, tags: np.ndarray) -> int:
    """How many units at the file's start are `ConsumeQueue#fillPreBlank` placeholders (0, Integer.MAX_VALUE, 0):
    a queue whose first unit is not at its file's start (a slave that joined late) is padded with them."""
    blank = (off == 0) & (size == CQ_PRE_BLANK_SIZE) & (tags == 0)
    return int(blank.size) if blank.all() else int(np.argmin(blank))


def check_queue_file(task: QueueFileTask) -> ConsumeQueueResult:
    findings = Findings()
    topic, qid, rel = task.topic, task.queue_id, task.rel
    tags_out: list[tuple[int, int]] = []

    def add(pos, severity, message, check=CHECK):
        at = None if task.rocksdb else task.file_start + pos  # a database has no byte offset to name
        findings.append(Finding(rel, at, check, severity, message, topic, qid))

    if task.rocksdb:  # every entry of a RocksDB consume queue (spec §14), missing offsets as unwritten units
        first, off, size, tags, written = open_store(task.root).consume_queue(topic, qid).columns(findings)
        task = replace(task, file_start=first * CQ_UNIT_SIZE)
    else:
        with map_file(task.path) as buf:
            off, size, tags, written = read_units(buf)
        lead = pre_blank_units(off, size, tags)  # a late joiner's placeholders: the queue starts after them
        off, size, tags, written = off[lead:], size[lead:], tags[lead:], written[lead:]
        task = replace(task, file_start=task.file_start + lead * CQ_UNIT_SIZE)
    idx = np.nonzero(written)[0]
    count = int(idx.size)
    end_unit = int(idx[-1]) + 1 if count else 0
    holes = np.nonzero(~written[:end_unit])[0]
    for h in holes[:20]:
        add(int(h) * CQ_UNIT_SIZE, "error", "unwritten (zero) unit before written ones: the queue has a hole")
    if holes.size > 20:
        add(int(holes[20]) * CQ_UNIT_SIZE, "error", f"{holes.size - 20} more holes in this file")
    first_qoff = task.file_start // CQ_UNIT_SIZE
    prev = -1
    bad_units = 0
    with CommitLogRecords(task.root) as reader:
        for i in idx.tolist():
            o, s = int(off[i]), int(size[i])
            qo = first_qoff + i
            at = i * CQ_UNIT_SIZE
            if o <= prev:
                add(at, "error", f"unit {qo} points to CommitLog offset {o}, not after the previous unit's {prev} "
                    "(duplicate or out of order)")
            prev = max(prev, o)
            h = reader.get(o)
            if isinstance(h, str):
                bad_units += 1
                if o < reader.queue.min_offset:
                    add(at, "info", f"unit {qo} points to CommitLog offset {o}, before the first CommitLog file "
                        "(deleted by retention)")
                else:
                    add(at, "error", f"unit {qo} points to CommitLog offset {o}: {h}")
                continue
            wrong = []
            if h.topic != topic:
                wrong.append(f"topic {h.topic}")
            if h.queue_id != qid:
                wrong.append(f"queue id {h.queue_id}")
            if h.queue_offset != qo:
                wrong.append(f"queue offset {h.queue_offset} (unit is {qo})")
            if h.total_size != s:
                wrong.append(f"size {h.total_size} (unit says {s})")
            if wrong:
                bad_units += 1
                add(at, "error", f"unit {qo} points to CommitLog offset {o}, a record of another "
                    + ", ".join(wrong))
                continue
            if task.delays_ms is not None:
                tags_out.append((qo, int(tags[i])))
                _check_schedule_unit(task, h, o, qo, int(tags[i]), add)
    max_end = int((off[idx] + size[idx]).max()) if count else 0
    return ConsumeQueueResult(
        index=task.index, findings=findings, topic=topic, queue_id=qid, file=rel, file_start=task.file_start,
        first_offset=first_qoff, units=count, end_offset=first_qoff + end_unit, max_commitlog_end=max_end,
        bad_units=bad_units, schedule_tags=tags_out)


def _check_schedule_unit(task, rec, offset, qo, tags_code, add) -> None:
    """tagsCode of a SCHEDULE_TOPIC_XXXX unit = `computeDeliverTimestamp` of its (clamped) level (§4.3)."""
    level_s = parse_properties(rec.properties_raw).get(PROPERTY_DELAY_TIME_LEVEL)
    levels = list(task.delays_ms)
    level = delay_level(level_s, len(levels))
    at = qo * CQ_UNIT_SIZE - task.file_start
    if level is None:
        add(at, "warning", f"unit {qo}: schedule record at {offset} has no DELAY property", SCHEDULE_CHECK)
        return
    if level <= 0:
        add(at, "warning", f"unit {qo}: schedule record at {offset} has DELAY={level_s}, not a level: the "
            "CommitLog kept the TAGS hash as its tagsCode, not a deliver time", SCHEDULE_CHECK)
        return
    expect = compute_deliver_timestamp(level, rec.store_timestamp, levels)
    if delay_level_2_queue_id(level) != task.queue_id:
        add(at, "error", f"unit {qo}: record at {offset} has DELAY={level_s} (level {level}) but sits in queue "
            f"{task.queue_id} (level {queue_id_2_delay_level(task.queue_id)})", SCHEDULE_CHECK)
    if tags_code != expect:
        add(at, "error", f"unit {qo}: tagsCode {tags_code} != store time {rec.store_timestamp} + level {level} delay "
            f"{expect - rec.store_timestamp} ms = {expect}", SCHEDULE_CHECK)
