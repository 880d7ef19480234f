"""What the broker's recovery will do to this store's files (`mqtool.rules.recovery` on the store's readers).

`recovery_plan(store)` reads what `DefaultMessageStore.load` reads - the `abort` file, `checkpoint`, the
CommitLog walk (the store's fast scan), every ConsumeQueue's units, the TimerLog, `config/timercheck`,
the index headers - and returns the plan as a dict: clean or abnormal start, from which CommitLog file
recovery re-checks, where valid data ends, what is truncated or deleted past it, and the TimerLog
units left pointing past it. `log_end(store)`: where `recoverNormally` ends a replica's CommitLog (the
replicas view, the builder's slave). Nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mqtool.formats.indexfile import INDEX_HEADER_SIZE, index_header
from mqtool.formats.names import TIMER_TOPIC
from mqtool.formats.timerlog import TIMERLOG_BLANK, TIMERLOG_UNIT_SIZE
from mqtool.rules import recovery as rules
from mqtool.store import fastscan
from mqtool.store.findings import Findings
from mqtool.store.mapped_files import read_at
from mqtool.store.store import Store

CHECK = "restart.recovery"
RECOVERY_FILES = 3  # CommitLog#recoverNormally re-checks the last three files


def java_bool(config, name: str, default: bool) -> bool:
    """A boolean broker.conf setting by Java name (`Boolean.parseBoolean`), from the file's raw keys."""
    raw = getattr(config, "raw", {}) or {}
    return default if name not in raw else str(raw[name]).strip().lower() == "true"


def shutdown_state(store: Store) -> dict:
    """`DefaultMessageStore.isTempFileExist`: the `abort` file (it holds the broker's pid) means a crash."""
    abort = store.root / "abort"
    pid = abort.read_text(encoding="latin-1").strip() if abort.is_file() else None
    return {"clean": not abort.exists(), "abort_file": abort.exists(), "abort_pid": pid or None}


def file_walks(
    store: Store, check_crc: bool, since: int = 0, on_chunk: Callable[[fastscan.ScanChunk], None] | None = None
) -> list[rules.FileWalk]:
    """Each CommitLog file from `files[since]` on as the recovery walk sees it, from one pass of the store's fast
    scan; `on_chunk` sees every non-empty chunk of that pass (a caller's own columns, without a second walk)."""
    cl = store.commitlog
    files = cl.files[since:]
    first: dict[int, tuple[int, int]] = {}
    crc_error: dict[int, int] = {}
    for f, chunk in cl.scan_columns(files[0].start if since and files else None, verify_crc=check_crc):
        if not len(chunk):
            continue
        cols = chunk.cols
        if f.start not in first and int(cols[fastscan.C_POS, 0]) == 0:
            first[f.start] = (int(cols[fastscan.C_MAGIC, 0]), int(cols[fastscan.C_STORE_TS, 0]))
        bad = np.flatnonzero(~chunk.crc_ok)
        if bad.size and f.start not in crc_error:
            crc_error[f.start] = int(cols[fastscan.C_POS, int(bad[0])])
        if on_chunk is not None:
            on_chunk(chunk)
    walks = []
    for f in files:
        scan = cl.scans.get(cl.rel(f))
        end = scan.valid_bytes if scan else 0
        reason = scan.stop_reason if scan else "not scanned"
        magic, ts = first.get(f.start, (0, 0))
        walks.append(rules.FileWalk(f.start, end, reason == "blank filler", reason, crc_error.get(f.start), magic, ts))
    return walks


def _name(offset: int) -> str:
    return f"{offset:020d}"


def commitlog_recovery(store: Store, clean: bool, check_crc: bool, v4: bool, findings: Findings) -> dict | None:
    """`recoverNormally` / `recoverAbnormally` on the store's CommitLog; None when it has no files."""
    cp = store.checkpoint
    physic = int(cp.physic_msg_timestamp) if cp is not None else 0
    logics = int(cp.logics_msg_timestamp) if cp is not None else 0
    index = int(cp.index_msg_timestamp) if cp is not None else 0
    min_ts = rules.recover_min_timestamp(
        physic,
        logics,
        index,
        java_bool(store.config, "messageIndexEnable", True),
        java_bool(store.config, "messageIndexSafe", False),
    )
    walks = file_walks(store, check_crc)
    rec = rules.recover_normally(walks, check_crc) if clean else rules.recover_abnormally(walks, min_ts, check_crc, v4)
    if rec is None:
        return None
    cl = store.commitlog
    disk_end = walks[-1].start + walks[-1].end if walks else 0
    size = store.commitlog_file_size  # the overview's answer: broker.conf's size, else what the files show
    refused = [
        f"{cl.rel(f)} is {f.length} bytes, mappedFileSizeCommitLog is {size}" for f in cl.files if f.length != size
    ]
    for r in refused:
        findings.add("commitlog", None, CHECK, "error", f"MappedFileQueue.load refuses to start: {r}")
    if rec.end < disk_end or rec.deleted_files:
        findings.add(
            f"commitlog/{_name(rec.stop_file)}",
            rec.end,
            CHECK,
            "warning",
            f"recovery ends the CommitLog at {rec.end} ({rec.stop_reason}); "
            f"{disk_end - rec.end} byte(s) of decodable records after it are dropped",
        )
    return {
        "mode": rec.mode,
        "check_crc": check_crc,
        "min_timestamp": min_ts if not clean else None,
        "files": len(walks),
        "check_from_file": _name(rec.check_from),
        "check_from_offset": rec.check_from,
        "end_offset": rec.end,
        "stop_file": _name(rec.stop_file),
        "stop_reason": rec.stop_reason,
        "scan_end_offset": disk_end,
        "dropped_bytes": max(0, disk_end - rec.end),
        "deleted_files": [_name(s) for s in rec.deleted_files],
        "load_refused": refused,
    }


def consume_queue_truncation(store: Store, end: int) -> dict:
    """`ConsumeQueue.recover` on every queue, then `truncateDirtyLogicFiles(end)` when one reaches `end`."""
    queues = []
    max_phy = -1
    for topic, qid in store.queue_ids:
        cq = store.consume_queue(topic, qid)
        if cq is None:
            continue
        first = cq.first_offset
        parts = [
            (s, np.array(u[["commitlog_offset", "size"]].tolist(), dtype=np.int64).reshape(-1, 2))
            for s, u in cq.scan_columns(first)
        ]
        units = np.concatenate([p for _, p in parts]) if parts else np.zeros((0, 2), np.int64)
        valid = rules.consume_queue_recover(units.tolist())
        units = units[:valid]
        max_phy = max(max_phy, rules.max_physic_offset(units.tolist()))
        queues.append((topic, qid, first, units))
    truncate = rules.needs_truncate_dirty_logic_files(max_phy, end)
    out = []
    kept: dict[tuple[str, int], int] = {}
    for topic, qid, first, units in queues:
        n = len(units)
        keep = n
        if truncate and n:
            lo = int(np.searchsorted(units[:, 0], end, side="left"))
            lo = max(0, lo - 1)
            keep = lo + rules.truncate_dirty_logic_files(units[lo:, 0].tolist(), end)
        kept[(topic, qid)] = first + keep
        if keep < n:
            out.append(
                {
                    "topic": topic,
                    "queue_id": qid,
                    "from_queue_offset": first + keep,
                    "units": n - keep,
                    "commitlog_offsets": units[keep:, 0].tolist()[:20],
                }
            )
    return {"max_physic_offset": max_phy, "truncate": truncate, "truncated": out, "max_offsets": kept}


def timerlog_steps(store: Store) -> list[tuple[int, list[tuple[int, int]]]]:
    """(file start, [(size, magic)] of the valid units and of the step that ended them) per TimerLog file."""
    tl = store.timerlog
    out = []
    for f, (start, units) in zip(tl.queue.files, tl.scan_columns(), strict=True):
        steps = list(zip(units["size"].tolist(), units["magic"].tolist(), strict=True))
        del units
        pos = len(steps) * TIMERLOG_UNIT_SIZE
        tail = read_at(f.path, pos, TIMERLOG_BLANK.size)
        if len(tail) == TIMERLOG_BLANK.size:  # size and magic sit where the filler has them in a unit too
            size, _, magic = TIMERLOG_BLANK.unpack(tail)
            steps.append((size, magic))
        out.append((start, steps))
    return out


def timer_recovery(store: Store, end: int, timer_queue_max: int | None, findings: Findings) -> dict | None:
    """`TimerMessageStore.recover`: the TimerLog's own end, units past the CommitLog end, the enqueue offset."""
    tl, tc = store.timerlog, store.timercheck
    if tl is None or tc is None:
        return None
    flush = int(tc.last_timer_log_flush_pos)
    last_size = tl.queue.files[-1].length if tl.queue.files else None
    begin = rules.timer_recover_begin(flush, last_size)
    tl_end = rules.recover_and_revise(timerlog_steps(store), begin)
    units = list(tl.iter_units())
    truncated = [u.pos for u in units if u.pos >= tl_end]
    dangling = [
        {
            "pos": u.pos,
            "offset_py": u.offset_py,
            "size_py": u.size_py,
            "kind": u.kind,
            "delayed_time_ms": u.delayed_time_ms,
        }
        for u in units
        if u.pos < tl_end and u.offset_py + u.size_py > end
    ]
    for d in dangling:
        findings.add(
            "timerlog",
            d["pos"],
            CHECK,
            "error",
            f"TimerLog unit points at CommitLog {d['offset_py']}, past the recovered end {end}: recovery "
            "keeps it, and its slot will read whatever is written there next",
            TIMER_TOPIC,
            0,
        )
    last = next((u for u in reversed(units) if u.pos < tl_end), None)
    last_qoff = None
    if last is not None and last.offset_py + last.size_py <= end:
        try:
            last_qoff = store.commitlog.read(last.offset_py).queue_offset
        except Exception:  # noqa: BLE001 - getMessageByCommitOffset returns null: -1
            last_qoff = None
    queue_offset = rules.revise_queue_offset(
        last_qoff, int(tc.last_timer_queue_offset), int(tc.master_timer_queue_offset)
    )
    if timer_queue_max is not None and queue_offset > timer_queue_max:
        findings.add(
            "config/timercheck",
            None,
            CHECK,
            "error",
            f"the timer enqueue resumes at queue offset {queue_offset} but {TIMER_TOPIC}/0 ends at "
            f"{timer_queue_max} after recovery: the next {queue_offset - timer_queue_max} timer message(s) "
            "stored there are never enqueued",
            TIMER_TOPIC,
            0,
        )
    return {
        "check_from": begin,
        "end_offset": tl_end,
        "truncated_units": truncated,
        "dangling_units": dangling,
        "enqueue_queue_offset": queue_offset,
        "timer_queue_max_offset": timer_queue_max,
    }


def index_recovery(store: Store, clean: bool) -> dict:
    """`IndexService.load(lastExitOK)`: index files destroyed after an abnormal exit."""
    d: Path = store.root / "index"
    files = []
    if d.is_dir():
        for p in sorted(d.iterdir()):
            head = read_at(p, 0, INDEX_HEADER_SIZE) if p.is_file() else b""
            if len(head) == INDEX_HEADER_SIZE:
                files.append((p.name, index_header.parse(head).end_timestamp))
    cp = store.checkpoint
    index_ts = int(cp.index_msg_timestamp) if cp is not None else 0
    return {
        "files": len(files),
        "index_msg_timestamp": index_ts,
        "destroyed": rules.index_files_to_destroy(files, index_ts, clean),
    }


def recovery_plan(store: Store, findings: Findings, v4: bool = False) -> dict:
    """The whole plan: shutdown state, CommitLog, ConsumeQueues, TimerLog and index."""
    state = shutdown_state(store)
    check_crc = java_bool(store.config, "checkCRCOnRecover", True)
    cl = commitlog_recovery(store, state["clean"], check_crc, v4, findings)
    end = cl["end_offset"] if cl else 0
    cq = consume_queue_truncation(store, end)
    timer = timer_recovery(store, end, cq["max_offsets"].get((TIMER_TOPIC, 0)), findings)
    cp = store.checkpoint
    return {
        "shutdown": state,
        "checkpoint": None if cp is None else {k: int(v) for k, v in cp.items() if not k.startswith("_")},
        "commitlog": cl,
        "consume_queues": {k: v for k, v in cq.items() if k != "max_offsets"},
        "timerlog": timer,
        "index": index_recovery(store, state["clean"]),
        "_max_offsets": cq["max_offsets"],
        "_end": end,
    }


@dataclass(frozen=True)
class Recovered:
    """What the broker's recovery leaves of a store (`recovery_plan`): the CommitLog's end (`recoverAbnormally`)
    and each ConsumeQueue's max offset after `truncateDirtyLogicFiles`."""

    end: int
    max_offsets: dict[tuple[str, int], int]


def recovered(store: Store) -> Recovered | None:
    """The recovery of a store left without a clean shutdown (an `abort` file); None after a clean one.

    A restarted broker appends at the recovered end, not after the last decodable record, and reads no
    ConsumeQueue unit past it; a clean shutdown's end is the scan's end, so nothing is computed then.
    """
    if not (store.root / "abort").exists():
        return None
    plan = recovery_plan(store, Findings())
    return Recovered(plan["_end"], dict(plan["_max_offsets"]))


@dataclass
class LogEnd:
    """One store's CommitLog as a promotion would find it."""

    min_offset: int
    end: int  # where recovery ends the data (processOffset)
    disk_end: int  # where the record walk of the last files stopped
    last_store_timestamp: int | None
    stop_reason: str
    deleted_files: list[str]
    torn_bytes: int  # non-zero bytes after the end in the stop file (a torn record recovery drops)

    def as_dict(self) -> dict:
        return {
            "min_offset": self.min_offset,
            "max_offset": self.end,
            "last_store_timestamp": self.last_store_timestamp,
            "recovery_stop_reason": self.stop_reason,
            "files_past_end": self.deleted_files,
            "torn_bytes": self.torn_bytes,
        }


def log_end(store: Store) -> LogEnd:
    """`recoverNormally` on the last three files, from one walk of them (CRC checked, as `checkCRCOnRecover`)."""
    cl = store.commitlog
    files = cl.files
    if not files:
        return LogEnd(0, 0, 0, None, "no files", [], 0)
    check_crc = java_bool(store.config, "checkCRCOnRecover", True)
    ends: list[np.ndarray] = []
    stamps: list[np.ndarray] = []

    def keep(chunk: fastscan.ScanChunk) -> None:
        ends.append(chunk.physical_offset + chunk.cols[fastscan.C_TOTAL])
        stamps.append(chunk.cols[fastscan.C_STORE_TS].copy())

    walks = file_walks(store, check_crc, max(0, len(files) - RECOVERY_FILES), keep)
    rec = rules.recover_normally(walks, check_crc)
    last_ts = None
    if ends:
        e, s = np.concatenate(ends), np.concatenate(stamps)
        kept = s[e <= rec.end]
        last_ts = int(kept[-1]) if kept.size else None
    stop = next((cl.scans.get(cl.rel(f)) for f in files if f.start == rec.stop_file), None)
    torn = stop.trailing_bytes if stop is not None else 0
    disk_end = walks[-1].start + walks[-1].end
    return LogEnd(
        cl.min_offset,
        rec.end,
        max(disk_end, rec.end),
        last_ts,
        rec.stop_reason,
        [f"{s:020d}" for s in rec.deleted_files],
        torn,
    )
