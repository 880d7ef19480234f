"""`commitlog.integrity` (spec §2): one walk over a CommitLog file or byte range.

The walk is the store's fast path, `mqtool.store.fastscan.iter_commitlog_chunks` (a compiled kernel
doing the broker's recovery work, `CommitLog.checkMessageAndReturnSize`: magic code, every length,
TOTALSIZE against the computed length (§2.10), the body CRC (§2.8)); this module adds no decoding
of its own. It turns the kernel's stop code into the torn-tail finding, and checks per record,
vectorised over each chunk's columns, that PHYSICALOFFSET equals the record's position and the
body CRC matches. The first invalid record ends the walk of the range (a torn tail when nothing
valid follows it in the file).

The same walk gathers what the other checks need, compactly and without a Python object per
record: per topic/queue counters (`stats`), a 63-bit hash of each UNIQ_KEY of an ordinary topic
(properties parsed by the fast path's own property scanner), COMMIT records and the half message
they name (`transactions`), and the few system-topic records (`schedule`, `timer`,
`transactions`).

The two string kernels (a hash of many strings, the check confirming a hash dictionary) are the
extension's (`mqtool._native`, `_kernels/audit.pxi`); their plain-Python references here
(`_hash_reference`, `_same_reference`) run where `store/extension.py` has none.
"""

import numpy as np

from mqtool.audit.layouts import dledger_slice_chunks
from mqtool.audit.plan import CommitLogSlice
from mqtool.audit.results import CommitLogResult, QueueStats
from mqtool.formats.names import (
    DLQ_GROUP_TOPIC_PREFIX,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    RETRY_GROUP_TOPIC_PREFIX,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    SYSTEM_TOPIC_PREFIX,
    SYSTEM_TOPICS,
)
from mqtool.formats.sysflag import TRANSACTION_COMMIT, TRANSACTION_MASK
from mqtool.store import extension, fastscan
from mqtool.store.findings import Findings
from mqtool.store.mapped_files import map_file

CHECK = "commitlog.integrity"
# Records of these topics are kept whole (minus the body, except for op records) for the
# schedule, timer and transaction checks; they are a small part of any real store.
_KEEP = set(SYSTEM_TOPICS)
_KEEP_BODY = {RMQ_SYS_TRANS_OP_HALF_TOPIC}
# Re-puts keep the UNIQ_KEY of the original (delay/timer delivery, commit, retry): only records of
# ordinary topics take part in the duplicate-key count.
_UNIQ_NAME = np.frombuffer(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX.encode(), np.uint8)
_C = fastscan  # column indices: _C.C_POS, ...


def is_user_topic(topic: str) -> bool:
    return topic not in _KEEP and not topic.startswith(
        (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX, SYSTEM_TOPIC_PREFIX, "RMQ_SYS_")
    )


# ----- helpers over the mapped file (`a`: uint8 array of the whole file) -----
_FNV_OFFSET, _FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3


_MASK64 = (1 << 64) - 1


def _hash_reference(a: np.ndarray, pos: np.ndarray, lens: np.ndarray, out: np.ndarray) -> None:
    """`_native.string_hashes` in plain Python: FNV-1a 64 over each string's bytes, then splitmix64's
    finaliser; 63 bits (non-negative int64)."""
    for i, (p, n) in enumerate(zip(pos.tolist(), lens.tolist(), strict=True)):
        h = _FNV_OFFSET
        for b in a[p : p + n].tobytes():
            h = ((h ^ b) * _FNV_PRIME) & _MASK64
        h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & _MASK64
        out[i] = (h ^ (h >> 31)) >> 1


def _same_reference(
    a: np.ndarray, pos: np.ndarray, lens: np.ndarray, rep_pos: np.ndarray, rep_lens: np.ndarray
) -> bool:
    """`_native.same_strings` in plain Python: string i equals representative i for every i."""
    return all(
        n == rn and a[p : p + n].tobytes() == a[rp : rp + rn].tobytes()
        for p, n, rp, rn in zip(pos.tolist(), lens.tolist(), rep_pos.tolist(), rep_lens.tolist(), strict=True)
    )


def hash_strings(a: np.ndarray, pos: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """A stable 63-bit hash of each string a[pos[i]:pos[i]+lens[i]] (the same in every process,
    unlike hash()); equal hashes of UNIQ_KEYs are confirmed by reading both records."""
    out = np.empty(len(pos), np.int64)
    (extension.kernel("string_hashes") or _hash_reference)(
        a, np.ascontiguousarray(pos, np.int64), np.ascontiguousarray(lens, np.int64), out
    )
    return out


def same_strings(a: np.ndarray, pos: np.ndarray, lens: np.ndarray, rep_pos: np.ndarray, rep_lens: np.ndarray) -> bool:
    """True when string i equals representative i for every i (confirms a hash dictionary)."""
    args = (np.ascontiguousarray(x, np.int64) for x in (pos, lens, rep_pos, rep_lens))
    return bool((extension.kernel("same_strings") or _same_reference)(a, *args))


def _dictionary(a: np.ndarray, pos: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, list[bytes]]:
    """(code per item, distinct byte strings) of the strings at pos/lens; exact (each item is compared
    with its code's first item)."""
    uniq, first, codes = np.unique(hash_strings(a, pos, lens), return_index=True, return_inverse=True)
    codes = codes.ravel()
    rep = first[codes]
    if not same_strings(a, pos, lens, pos[rep], lens[rep]):  # a 63-bit collision between two topics
        raws = [a[p : p + n].tobytes() for p, n in zip(pos.tolist(), lens.tolist(), strict=True)]
        index: dict[bytes, int] = {}
        return np.array([index.setdefault(r, len(index)) for r in raws], np.int64), list(index)
    del uniq
    return codes.astype(np.int64), [
        a[p : p + n].tobytes() for p, n in zip(pos[first].tolist(), lens[first].tolist(), strict=True)
    ]


def _property_values(a: np.ndarray, pos: np.ndarray, lens: np.ndarray, name: np.ndarray):
    """(record index, value position, value length) of property `name` in each properties string that
    has it, parsed like `string2messageProperties` (a repeated name keeps its last value)."""
    n = len(pos)
    rec_offsets = np.empty(n + 1, np.int32)
    m = -1
    for cap in (n * 8, int(lens.sum()) // 3 + 1):
        kpos, klen, vpos, vlen = np.empty((4, cap), np.int64)
        m = fastscan.compiled_kernels().property_pairs(a, pos, lens, rec_offsets, kpos, klen, vpos, vlen)
        if m >= 0:
            break
    kpos, klen, vpos, vlen = kpos[:m], klen[:m], vpos[:m], vlen[:m]
    cand = np.flatnonzero(klen == len(name))
    if cand.size:
        same = (a[kpos[cand][:, None] + np.arange(len(name))] == name).all(axis=1)
        cand = cand[same]
    rec = np.searchsorted(rec_offsets, cand, side="right") - 1
    return rec, vpos[cand], vlen[cand]


class _Walk:
    """What one slice's walk accumulates, chunk by chunk."""

    def __init__(self, task: CommitLogSlice):
        self.task = task
        self.findings = Findings()
        self.queues: dict[tuple[str, int], list[int]] = {}
        self.kept: list[dict] = []
        self.hashes: list[np.ndarray] = []
        self.key_offsets: list[np.ndarray] = []
        self.commits: list[np.ndarray] = []  # (offset, prepared transaction offset) of COMMIT records
        self.topics: dict[bytes, tuple[str, bool, bool]] = {}  # raw -> (name, ordinary topic, kept topic)
        self.records = 0
        self.bytes = 0

    def add(self, a: np.ndarray, chunk: fastscan.ScanChunk) -> None:
        n = len(chunk)
        if n == 0:
            return
        c = chunk.cols
        base = chunk.base_offset
        offsets = c[_C.C_POS] + base
        total = c[_C.C_TOTAL]
        qid = c[_C.C_QUEUE_ID]
        codes, raws = _dictionary(a, c[_C.C_TOPIC_POS], c[_C.C_TOPIC_LEN])
        info = []
        for raw in raws:
            t = self.topics.get(raw)
            if t is None:
                name = raw.decode("utf-8", "surrogateescape")
                t = self.topics[raw] = (name, is_user_topic(name), name in _KEEP)
            info.append(t)
        names = [t[0] for t in info]
        self._record_findings(chunk, offsets, codes, names)
        self._queue_stats(codes, names, qid, total, c[_C.C_STORE_TS], c[_C.C_QUEUE_OFFSET])
        ordinary = np.array([t[1] for t in info], bool)[codes]
        if ordinary.any():
            rows = np.flatnonzero(ordinary & (c[_C.C_PROPS_LEN] > 0))
            rec, vpos, vlen = _property_values(a, c[_C.C_PROPS_POS][rows], c[_C.C_PROPS_LEN][rows], _UNIQ_NAME)
            self.hashes.append(hash_strings(a, vpos, vlen))
            self.key_offsets.append(offsets[rows[rec]])
        commit = np.flatnonzero((c[_C.C_SYS_FLAG] & TRANSACTION_MASK) == TRANSACTION_COMMIT)
        if commit.size:
            self.commits.append(np.stack([offsets[commit], c[_C.C_PREPARED][commit]], axis=1))
        keep_codes = [i for i, t in enumerate(info) if t[2]]
        if keep_codes:
            for i in np.flatnonzero(np.isin(codes, keep_codes)).tolist():
                self._keep(a, c[:, i].tolist(), names[int(codes[i])], base)
        self.records += n
        self.bytes += int(total.sum())

    def _record_findings(self, chunk, offsets, codes, names) -> None:
        """PHYSICALOFFSET ≠ position and body CRC mismatches (the fast path's own row checks)."""
        phys_bad = ~chunk.physical_offset_ok
        crc_bad = ~chunk.crc_ok
        c = chunk.cols
        for i in np.flatnonzero(phys_bad | crc_bad).tolist():
            topic, qid, off = names[int(codes[i])], int(c[_C.C_QUEUE_ID, i]), int(offsets[i])
            if phys_bad[i]:
                self._add(
                    off, "error", f"PHYSICALOFFSET field {int(c[_C.C_PHYS_FIELD, i])} != position {off}", topic, qid
                )
            if crc_bad[i]:
                self._add(
                    off,
                    "error",
                    f"body CRC mismatch: stored {int(c[_C.C_BODY_CRC, i])}, computed "
                    f"{int(c[_C.C_CRC, i])}; recovery with checkCRCOnRecover stops here",
                    topic,
                    qid,
                )

    def _queue_stats(self, codes, names, qid, total, store_ts, qoff) -> None:
        """[count, bytes, min/max store time, min/max queue offset] per (topic, queue), merged in."""
        key = (codes << 32) | (qid & 0xFFFFFFFF)
        order = np.argsort(key, kind="stable")
        k = key[order]
        starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
        cols = [
            np.add.reduceat(np.ones_like(k), starts),
            np.add.reduceat(total[order], starts),
            np.minimum.reduceat(store_ts[order], starts),
            np.maximum.reduceat(store_ts[order], starts),
            np.minimum.reduceat(qoff[order], starts),
            np.maximum.reduceat(qoff[order], starts),
        ]
        for kk, *v in zip(k[starts].tolist(), *(x.tolist() for x in cols), strict=True):
            low = kk & 0xFFFFFFFF
            q = (names[kk >> 32], low - (1 << 32) if low >= 1 << 31 else low)
            cur = self.queues.get(q)
            if cur is None:
                self.queues[q] = v
            else:
                self.queues[q] = [
                    cur[0] + v[0],
                    cur[1] + v[1],
                    min(cur[2], v[2]),
                    max(cur[3], v[3]),
                    min(cur[4], v[4]),
                    max(cur[5], v[5]),
                ]

    def _keep(self, a, row: list[int], topic: str, base: int) -> None:
        props = a[row[_C.C_PROPS_POS] : row[_C.C_PROPS_POS] + row[_C.C_PROPS_LEN]].tobytes()
        body = a[row[_C.C_BODY_POS] : row[_C.C_BODY_POS] + row[_C.C_BODY_LEN]].tobytes() if topic in _KEEP_BODY else b""
        self.kept.append(
            {
                "topic": topic,
                "queue_id": row[_C.C_QUEUE_ID],
                "queue_offset": row[_C.C_QUEUE_OFFSET],
                "offset": row[_C.C_POS] + base,
                "size": row[_C.C_TOTAL],
                "sys_flag": row[_C.C_SYS_FLAG],
                "born_ts": row[_C.C_BORN_TS],
                "store_ts": row[_C.C_STORE_TS],
                "properties": props.decode("utf-8", "surrogateescape"),
                "body": body,
            }
        )

    def _add(self, offset, severity, message, topic=None, qid=None) -> None:
        self.findings.add(self.task.rel, offset, CHECK, severity, message, topic, qid)


def scan_slice(task: CommitLogSlice) -> CommitLogResult:
    """Walk one slice with the fast path: its findings and compact summaries for the driver."""
    walk = _Walk(task)
    base = task.file_start
    with map_file(task.path) as buf:
        n = len(buf)
        end = min(task.end, n)
        # The kernel scans to the end of the buffer it is given: a byte range ends at `end` by
        # giving it the file's first `end` bytes (a memoryview, no copy); positions stay file positions.
        view = buf if end == n else memoryview(buf)[:end]
        a = fastscan.as_array(buf)
        chunks = (
            dledger_slice_chunks(task, buf)  # a DLedger data file: the entries' bodies (spec §12)
            or fastscan.iter_commitlog_chunks(view, base, task.begin, verify_crc=True)
        )
        try:
            last = None
            for last in chunks:
                walk.add(a, last)
            valid_end, stop, trailing = last.end, fastscan.stop_reason(last.stop, last.detail), 0
            if last.stop == fastscan.STOP_END_OF_FILE and end < n:
                stop = "end of range"
            elif last.stop == fastscan.STOP_BLANK:
                f = fastscan.stop_finding(buf, last.stop, last.detail, last.end)
                if f is not None:
                    walk._add(base + last.end, *f)
            elif last.stop >= fastscan.BAD_HEADER:
                nz = np.flatnonzero(a[last.end : end])
                trailing = int(nz[-1]) + 1 if nz.size else 0
                walk._add(base + last.end, "error", _torn_message(a, task, last, end, trailing))
        finally:
            chunks.close()
            del a
            if view is not buf:
                view.release()
    h = np.concatenate(walk.hashes) if walk.hashes else np.zeros(0, np.int64)
    o = np.concatenate(walk.key_offsets) if walk.key_offsets else np.zeros(0, np.int64)
    order = np.argsort(h, kind="stable")
    commits = np.concatenate(walk.commits) if walk.commits else np.zeros((0, 2), np.int64)
    return CommitLogResult(
        index=task.index,
        findings=walk.findings,
        file=task.rel,
        file_start=base,
        begin=task.begin,
        end=task.end,
        valid_end=valid_end,
        stop=stop,
        trailing_bytes=trailing,
        last_of_file=task.last_of_file,
        records=walk.records,
        bytes=walk.bytes,
        queues={k: QueueStats(*v) for k, v in walk.queues.items()},
        kept=walk.kept,
        key_hashes=h[order],
        key_offsets=o[order],
        commits=commits,
    )


def _torn_message(a: np.ndarray, task: CommitLogSlice, last: fastscan.ScanChunk, end: int, trailing: int) -> str:
    """The finding where the walk met an invalid record: the fast path's reason, and what it means here."""
    pos = last.end
    total = int.from_bytes(a[pos : pos + 4].tobytes(), "big", signed=True) if pos + 4 <= len(a) else None
    if last.stop == fastscan.BAD_SIZE:
        bad = f"TOTALSIZE {total} != computed length {last.detail}"
    elif last.stop == fastscan.BAD_MAGIC:
        bad = fastscan.invalid_reason(last.stop, last.detail)
    else:
        where = "in the file" if end == len(a) else "before the next checked record start"
        bad = f"TOTALSIZE {total} ({end - pos} bytes left {where}): {fastscan.invalid_reason(last.stop, last.detail)}"
    if task.last_of_file:
        return (
            f"torn tail: {bad}; the broker's recovery truncates the CommitLog here "
            f"({trailing} non-zero bytes follow in this file)"
        )
    return (
        f"{bad}; the broker's recovery would truncate the CommitLog here although "
        f"valid records follow at {task.file_start + end}"
    )
