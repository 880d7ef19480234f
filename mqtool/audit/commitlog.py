"""`commitlog.integrity` (spec §2): one walk over a CommitLog file or byte range.

The walk reads each record's header fields with `struct` and checks, as RocketMQ's recovery does
(`CommitLog.checkMessageAndReturnSize`): magic code, TOTALSIZE against the computed length (§2.10),
the body CRC (§2.8); and, beyond recovery, that PHYSICALOFFSET equals the record's position. The
first invalid record ends the walk of the range (a torn tail when nothing valid follows it in the
file). The same walk gathers what the other checks need, compactly: per topic/queue counters
(`stats`), UNIQ_KEY hashes, and the few system-topic records (`schedule`, `timer`, `transactions`).
It does not build a `MessageRecord` per record (that is what made per-record decoding slow); the
field layout is `mqtool.formats.commitlog`'s, and `tests/audit` checks it against `decode_message`.
"""

import struct
import zlib

import numpy as np

from mqtool.audit.plan import (
    OP_HALF_TOPIC,
    SYSTEM_TOPICS,
    CommitLogSlice,
)
from mqtool.formats.commitlog import (
    BLANK_MAGIC_CODE,
    FIXED_SIZE,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
)
from mqtool.formats.sysflag import BORNHOST_V6, STOREHOST_V6
from mqtool.store.findings import Finding
from mqtool.store.mapped_files import map_file

CHECK = "commitlog.integrity"
_HEAD = struct.Struct(">iiiiiqqiq")  # TOTALSIZE .. BORNTIMESTAMP
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")
_MAGICS = (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2)
# Records of these topics are kept whole (minus the body, except for op records) for the
# schedule, timer and transaction checks; they are a small part of any real store.
_KEEP = set(SYSTEM_TOPICS)
_KEEP_BODY = {OP_HALF_TOPIC}
# Re-puts keep the UNIQ_KEY of the original (delay/timer delivery, commit, retry): only records of
# ordinary topics take part in the duplicate-key count.
_UNIQ_NAME = b"UNIQ_KEY\x01"


def is_user_topic(topic: str) -> bool:
    return topic not in _KEEP and not topic.startswith(("%RETRY%", "%DLQ%", "rmq_sys_", "RMQ_SYS_"))


def key_hash(key: bytes) -> int:
    """A stable 63-bit hash of a UNIQ_KEY: CRC-32 and Adler-32 side by side (hash() differs per process).

    Equal hashes are confirmed by reading both records, so a collision is never reported."""
    return ((zlib.crc32(key) & 0x7FFFFFFF) << 32) | zlib.adler32(key)


def scan_slice(task: CommitLogSlice) -> dict:
    """Walk one slice; returns findings and compact summaries (see `report.finish`)."""
    findings: list[Finding] = []
    queues: dict[tuple[str, int], list[int]] = {}
    kept: list[dict] = []
    hashes: list[int] = []
    offsets: list[int] = []
    topics: dict[bytes, tuple[str, bool, bool]] = {}  # raw topic -> (name, ordinary topic, kept topic)
    records = 0
    record_bytes = 0
    stop = "end of range"
    trailing = 0
    rel, base = task.rel, task.file_start
    head_from = _HEAD.unpack_from
    i64_from = _I64.unpack_from
    crc32 = zlib.crc32

    def add(pos, severity, message, topic=None, qid=None):
        findings.append(Finding(rel, base + pos, CHECK, severity, message, topic, qid))

    with map_file(task.path) as buf:
        n = len(buf)
        end = min(task.end, n)
        pos = task.begin
        mv = memoryview(buf) if n else memoryview(b"")
        try:
            while pos < end:
                if pos + _HEAD.size + 64 > n:
                    if pos + 8 > n:
                        stop = "end of file"  # fewer than 8 bytes left: a full file ends here
                        break
                    total, magic = struct.unpack_from(">ii", buf, pos)
                    crc = qid = qoff = phys = sysflag = born_ts = 0
                else:
                    total, magic, crc, qid, _flag, qoff, phys, sysflag, born_ts = head_from(buf, pos)
                if magic == BLANK_MAGIC_CODE:
                    stop = "blank filler"
                    if total != n - pos:
                        add(pos, "warning", f"BLANK filler declares {total} bytes, {n - pos} remain in the file")
                    break
                if total == 0 and magic == 0:
                    stop = "unwritten (zero) tail"  # pre-allocated, never written
                    break
                bad = None
                if magic != MESSAGE_MAGIC_CODE and magic != MESSAGE_MAGIC_CODE_V2:
                    bad = f"bad magic code 0x{magic & 0xFFFFFFFF:08X}"
                elif total <= 0 or pos + total > n:
                    bad = f"TOTALSIZE {total} runs past the end of the file ({n - pos} bytes left)"
                elif total < _HEAD.size + 64:
                    bad = f"TOTALSIZE {total} is shorter than a record header"
                else:
                    lim = pos + total
                    born_host = 20 if sysflag & BORNHOST_V6 else 8
                    hosts = born_host + (20 if sysflag & STOREHOST_V6 else 8)
                    store_ts = i64_from(buf, pos + _HEAD.size + born_host)[0]
                    p = pos + _HEAD.size + hosts + 20  # STORETIMESTAMP, RECONSUMETIMES, PREPARED OFFSET
                    body_len = _I32.unpack_from(buf, p)[0]
                    body_at = p + 4
                    p = body_at + body_len
                    v2 = magic == MESSAGE_MAGIC_CODE_V2
                    if body_len < 0 or p + 4 > lim:
                        bad = f"body length {body_len} does not fit in TOTALSIZE {total}"
                    else:
                        if v2:
                            topic_len = _I16.unpack_from(buf, p)[0]
                            p += 2
                        else:
                            topic_len = buf[p] - 256 if buf[p] > 127 else buf[p]  # a signed byte
                            p += 1
                        if topic_len < 0 or p + topic_len + 2 > lim:
                            bad = f"topic length {topic_len} does not fit in TOTALSIZE {total}"
                        else:
                            topic_raw = buf[p:p + topic_len]
                            props_len = _I16.unpack_from(buf, p + topic_len)[0]
                            props_at = p + topic_len + 2
                            # §2.10 calMsgLength, as `computed_size`: FIXED_SIZE + hosts + parts
                            size = FIXED_SIZE + hosts + body_len + (2 if v2 else 1) + topic_len + props_len
                            if props_len < 0 or size != total:
                                bad = f"TOTALSIZE {total} != computed length {size}"
                if bad is not None:
                    stop = "invalid record"
                    trailing = _nonzero(mv, pos, end)
                    if task.last_of_file:
                        what = (f"torn tail: {bad}; the broker's recovery truncates the CommitLog here "
                                f"({trailing} non-zero bytes follow in this file)")
                    else:
                        what = (f"{bad}; the broker's recovery would truncate the CommitLog here although "
                                f"valid records follow at {base + end}")
                    add(pos, "error", what)
                    break
                t = topics.get(topic_raw)
                if t is None:
                    name = topic_raw.decode("utf-8", "surrogateescape")
                    t = topics[topic_raw] = (name, is_user_topic(name), name in _KEEP)
                topic, ordinary, keep = t
                if phys != base + pos:
                    add(pos, "error", f"PHYSICALOFFSET field {phys} != position {base + pos}", topic, qid)
                if body_len and (crc32(mv[body_at:body_at + body_len]) & 0x7FFFFFFF) != crc:
                    add(pos, "error", f"body CRC mismatch: stored {crc}, computed "
                        f"{crc32(mv[body_at:body_at + body_len]) & 0x7FFFFFFF}; recovery with "
                        "checkCRCOnRecover stops here", topic, qid)
                q = queues.get((topic, qid))
                if q is None:
                    queues[(topic, qid)] = [1, total, store_ts, store_ts, qoff, qoff]
                else:
                    q[0] += 1
                    q[1] += total
                    if store_ts < q[2]:
                        q[2] = store_ts
                    elif store_ts > q[3]:
                        q[3] = store_ts
                    if qoff < q[4]:
                        q[4] = qoff
                    elif qoff > q[5]:
                        q[5] = qoff
                if ordinary and props_len:
                    props_end = props_at + props_len
                    k = buf.rfind(_UNIQ_NAME, props_at, props_end)  # the last one wins (string2messageProperties)
                    while k > props_at and buf[k - 1] != 2:
                        k = buf.rfind(_UNIQ_NAME, props_at, k)  # inside a value: not a property name
                    if k >= 0:
                        v = k + len(_UNIQ_NAME)
                        e = buf.find(b"\x02", v, props_end)
                        hashes.append(key_hash(buf[v:e if e >= 0 else props_end]))
                        offsets.append(base + pos)
                if keep:
                    kept.append(_kept(topic, qid, qoff, base + pos, total, sysflag, born_ts, store_ts,
                                      bytes(mv[props_at:props_at + props_len]).decode("utf-8", "surrogateescape"),
                                      bytes(mv[body_at:body_at + body_len]) if topic in _KEEP_BODY else b""))
                records += 1
                record_bytes += total
                pos += total
            else:
                stop = "end of range" if pos == end and end < n else "end of file"
        finally:
            mv.release()
    h = np.asarray(hashes, dtype=np.int64)
    o = np.asarray(offsets, dtype=np.int64)
    order = np.argsort(h, kind="stable")
    return {
        "kind": "commitlog", "index": task.index, "file": rel, "file_start": base, "begin": task.begin,
        "end": task.end, "valid_end": pos, "stop": stop, "trailing_bytes": trailing,
        "last_of_file": task.last_of_file, "records": records, "bytes": record_bytes,
        "findings": findings, "queues": queues, "kept": kept, "key_hashes": h[order], "key_offsets": o[order],
    }


def _kept(topic, qid, qoff, offset, size, sysflag, born_ts, store_ts, props, body) -> dict:
    return {"topic": topic, "queue_id": qid, "queue_offset": qoff, "offset": offset, "size": size,
            "sys_flag": sysflag, "born_ts": born_ts, "store_ts": store_ts, "properties": props, "body": body}


def _nonzero(mv, pos: int, end: int) -> int:
    """Bytes from pos to the last non-zero byte before end: what a torn tail leaves unread."""
    return len(bytes(mv[pos:end]).rstrip(b"\x00"))
