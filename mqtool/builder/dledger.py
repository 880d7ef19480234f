"""DLedgerWriter: writes a DLedger-mode CommitLog (spec §12) through `formats.dledger`'s definitions.

Mirrors openmessaging/dledger 0.3.1.2 (RocketMQ 5.3.1's `dleger.version`): `DLedgerMmapFileStore.appendAsLeader`
(entry at the data end, its index unit at index * 32), `MmapFileList.preAppend` (a `-1 | remaining` filler
when `len + MIN_BLANK_LEN > remaining`), `persistCheckPoint` and `MemberState.persistTerm` through
`IOUtils.string2File` (the previous content goes to `<name>.bak`). Each entry's body is one CommitLog
record whose PHYSICALOFFSET is `pos + BODY_OFFSET` (`DLedgerCommitLog`'s append hook).

`DLedgerStoreWriter` adds what the broker's reput service does with each body (ConsumeQueue unit, IndexFile)
through a `StoreWriter` that never writes `commitlog/`. Output is deterministic: same calls, same bytes.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from mqtool.builder.writer import MappedFiles, StoreWriter, name20
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.commitlog import commitlog_record
from mqtool.formats.consumequeue import CQ_UNIT_SIZE
from mqtool.formats.dledger import (
    BODY_OFFSET,
    CHECKPOINT_FILE,
    DEFAULT_INDEX_FILE_SIZE,
    ENTRY_MAGIC,
    INDEX_UNIT_SIZE,
    MIN_BLANK_LEN,
    TERM_FILE,
    blank_filler,
    build_checkpoint,
    build_currterm,
    dledger_entry,
    index_unit,
)
from mqtool.formats.message import MessageRecord, record_to_container
from mqtool.formats.sysflag import TRANSACTION_COMMIT, TRANSACTION_MASK, TRANSACTION_NOT_TYPE


def string2file(path: Path, text: str) -> None:
    """DLedger `IOUtils.string2File`: the file's previous content (if any) is kept as `<name>.bak`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.with_name(path.name + ".bak").write_bytes(path.read_bytes())
    path.write_bytes(text.encode("utf-8"))


def place_record(rec: MessageRecord, phys: int, file_start: int) -> tuple[MessageRecord, bytes]:
    """`rec` placed at physical offset `phys` of the file starting at `file_start` (PHYSICALOFFSET
    rewritten, as the append hooks do), and its bytes; a TOTALSIZE that disagrees with them raises."""
    placed = replace(rec, physical_offset=phys, physical_offset_field=phys, file=name20(file_start),
                     position=phys - file_start, extra={**rec.extra})
    data = commitlog_record.build(record_to_container(placed))
    if len(data) != rec.total_size:
        raise ValueError(f"built {len(data)} bytes but TOTALSIZE says {rec.total_size}")
    return placed, data


def _zero_tail(files: MappedFiles, end: int) -> None:
    """Zero the bytes from `end` to the end of its file when any is set (a torn entry, stale index units).
    `truncateOffset` only moves the write position and the broker's next appends overwrite them; the copy
    zeroes them so that no reader (nor a later recovery) takes what the new entries do not cover for data."""
    if files.start_of(end) not in files.starts():
        return
    n = files.remaining(end)
    if any(files.read(end, n)):
        files.write(end, bytes(n))


class DLedgerWriter:
    """The files of one DLedger node, `STORE/dledger-<self_id>/`: data, index, checkpoint, currterm.

    `start` is the first data offset (a converted store's dividedCommitlogOffset, a multiple of the file
    size); `first_index` the first entry index.
    """

    def __init__(self, root: Path | str, self_id: str = "n0", data_file_size: int = 1 << 30,
                 index_file_size: int = DEFAULT_INDEX_FILE_SIZE, *, start: int = 0, first_index: int = 0):
        self.home = Path(root) / f"dledger-{self_id}"
        self.data = MappedFiles(self.home / "data", data_file_size)
        self.index = MappedFiles(self.home / "index", index_file_size)
        if start % data_file_size:
            raise ValueError("start must be a multiple of the data file size")
        self.end = start  # ledgerEndPos: where the next entry goes
        self.next_index = first_index
        self.last_term = -1
        self.curr_term, self.vote_leader = 0, self_id  # MemberState: the term new entries get (`resume`)

    @classmethod
    def resume(cls, root: Path | str, self_id: str, data_file_size: int) -> DLedgerWriter:
        """Continue a copied node's files where `DLedgerMmapFileStore.recover` leaves them: after the last
        entry its walk accepts (ledgerEndIndex / ledgerEndTerm), data and index files wholly past that end
        deleted (`MmapFileList.truncateOffset`), the index files' own size kept. The next entries are
        appended in `currterm`'s term: a restarted single node votes for itself again in that term
        (`DLedgerLeaderElector.maintainAsCandidate` with `WAIT_TO_REVOTE`), never below the last entry's.
        What a torn tail left after the ends in the kept files is zeroed (`_zero_tail`)."""
        from mqtool.store.dledger import DLedgerCommitLog
        from mqtool.store.findings import Findings

        dl = DLedgerCommitLog.open(Path(root), self_id)
        if dl is None:
            raise ValueError(f"{root}: no dledger-{self_id} directory to continue")
        entries = list(dl.iter_entries(Findings(), decode=False))
        start = max(dl.divided_offset, 0)
        w = cls(root, self_id, data_file_size, dl.index.file_size or DEFAULT_INDEX_FILE_SIZE,
                start=start - start % data_file_size)
        if entries:
            last = entries[-1]
            w.end, w.next_index, w.last_term = last.offset + last.size, last.index + 1, last.term
        for files, end in ((w.data, w.end), (w.index, w.next_index * INDEX_UNIT_SIZE)):
            for s in files.starts():
                if s > end:
                    (files.directory / name20(s)).unlink()
            _zero_tail(files, end)
        term = dl.currterm or {}
        w.curr_term = max(term.get("curr_term") or 0, w.last_term)
        w.vote_leader = term.get("vote_leader") or self_id
        return w

    def pre_append(self, length: int) -> int:
        """`MmapFileList.preAppend(len, useBlank=true)`: the entry's pos, after a filler if it does not fit."""
        if length > self.data.file_size:
            raise ValueError(f"a {length}-byte entry never fits a {self.data.file_size}-byte data file")
        remaining = self.data.remaining(self.end)
        if length + MIN_BLANK_LEN > remaining:
            self.data.ensure(self.end)
            self.data.write(self.end, blank_filler.build({"size": remaining}))
            self.end += remaining
        self.data.ensure(self.end)
        return self.end

    def append_body(self, body: bytes, term: int = 0) -> tuple[int, int]:
        """Append one entry (magic 1, channel and CRCs 0 as 0.3.1.2 writes them): (index, pos)."""
        pos = self.pre_append(BODY_OFFSET + len(body))
        return self._append_at(pos, body, term)

    def append_record(self, rec: MessageRecord, term: int = 0) -> MessageRecord:
        """Append a CommitLog record as one entry; returns it placed (physical offset = pos + 48)."""
        pos = self.pre_append(BODY_OFFSET + rec.total_size)
        placed, body = place_record(rec, pos + BODY_OFFSET, self.data.start_of(pos))
        index, _ = self._append_at(pos, body, term)
        placed.extra["dledger"] = {"index": index, "term": term, "pos": pos}
        return placed

    def _append_at(self, pos: int, body: bytes, term: int) -> tuple[int, int]:
        index = self.next_index
        entry = dledger_entry.build({"magic": ENTRY_MAGIC, "index": index, "term": term, "pos": pos, "channel": 0,
                                     "chain_crc": 0, "body_crc": 0, "body": body})
        self.data.write(pos, entry)
        self.index.write(index * INDEX_UNIT_SIZE, index_unit.build(
            {"magic": ENTRY_MAGIC, "pos": pos, "size": len(entry), "index": index, "term": term}))
        self.end, self.next_index, self.last_term = pos + len(entry), index + 1, term
        return index, pos

    @property
    def end_index(self) -> int:
        """ledgerEndIndex: the last entry's index (-1 before any)."""
        return self.next_index - 1

    def write_checkpoint(self, committed_index: int | None = None, end_index: int | None = None) -> None:
        """`persistCheckPoint`: endIndex and committedIndex (both default to the last entry)."""
        end = self.end_index if end_index is None else end_index
        string2file(self.home / CHECKPOINT_FILE, build_checkpoint(end, end if committed_index is None
                                                                  else committed_index))

    def write_currterm(self, curr_term: int = 0, vote_leader: str | None = None) -> None:
        """`MemberState.persistTerm`: the node's term and whom it voted for."""
        string2file(self.home / TERM_FILE, build_currterm(curr_term, vote_leader))

    def close(self) -> None:
        self.data.close()
        self.index.close()


class DLedgerStoreWriter:
    """A DLedger-mode store: entries through `DLedgerWriter`, each body dispatched to the ConsumeQueue and
    IndexFile by a `StoreWriter` (`store`) exactly as a normal CommitLog record would be."""

    def __init__(self, root: Path | str, config: BrokerConfig | None = None, self_id: str = "n0",
                 index_file_size: int = DEFAULT_INDEX_FILE_SIZE):
        self.store = StoreWriter(root, config)
        self.dledger = DLedgerWriter(root, self_id, self.store.config.mapped_file_size_commitlog, index_file_size)

    @classmethod
    def extend(cls, src_root: Path | str, out_root: Path | str, self_id: str, config: BrokerConfig | None = None,
               broker_version: str = "5.3") -> DLedgerStoreWriter:
        """Copy a DLedger-mode store (source untouched) and continue it as its restarted leader would:
        `StoreWriter.extend` for ConsumeQueues, IndexFile and timer files, `DLedgerWriter.resume` for
        `dledger-<self_id>/` (next index, term, the data and index files' ends)."""
        self = cls.__new__(cls)
        self.store = StoreWriter.extend(src_root, out_root, config, broker_version)
        self.dledger = DLedgerWriter.resume(out_root, self_id, self.store.config.mapped_file_size_commitlog)
        self.cut_queues_at_ledger_end()
        return self

    def cut_queues_at_ledger_end(self) -> None:
        """`DLedgerCommitLog.dledgerRecoverNormally` after DLedger's recovery: when a ConsumeQueue reaches the
        ledger's end (`maxPhyOffsetOfConsumeQueue >= maxWrotePosition`), `truncateDirtyLogicFiles(end)` cuts
        every unit at or past it (`store.recovery.consume_queue_truncation`): files whose first unit is cut
        are deleted, the rest of the cut file is zeroed, and the queue continues at the first unit cut."""
        from mqtool.store.recovery import consume_queue_truncation
        from mqtool.store.store import Store

        w = self.store
        for q in consume_queue_truncation(Store(w.root, w.config), self.dledger.end)["truncated"]:
            key, keep = (q["topic"], q["queue_id"]), q["from_queue_offset"]
            files = w._cq(*key)
            cut = keep * CQ_UNIT_SIZE
            for s in files.starts():
                if s >= cut:
                    (files.directory / name20(s)).unlink()
            _zero_tail(files, cut)
            w._cq_end[key] = w._next_qoff[key] = keep

    def put(self, rec: MessageRecord, term: int | None = None, queue_offset: int | None = None,
            tags_code: int | None = None) -> MessageRecord:
        """Append `rec` (QUEUEOFFSET: `queue_offset`, default the queue's next; term: the node's current
        term) and dispatch it."""
        w = self.store
        term = self.dledger.curr_term if term is None else term
        key = (rec.topic, rec.queue_id)
        dispatchable = rec.sys_flag & TRANSACTION_MASK in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT)
        if queue_offset is None:
            queue_offset = w.next_queue_offset(*key) if dispatchable else 0
        placed = self.dledger.append_record(replace(rec, queue_offset=queue_offset), term)
        if dispatchable:
            w._next_qoff[key] = queue_offset + 1
            code = w.tags_code(placed) if tags_code is None else tags_code
            w.dispatch_cq(placed.topic, placed.queue_id, queue_offset, placed.physical_offset, placed.total_size, code)
            placed.extra["tags_code"] = code
        w.index.build(placed)
        w.last_store_timestamp = placed.store_timestamp
        w.records.append(placed)
        return placed

    def persist(self) -> None:
        """What a restarted single-node leader leaves: its vote (`MemberState.persistTerm`, the previous
        `currterm` kept as `.bak`) and `persistCheckPoint` (endIndex = committedIndex = the last entry:
        alone in its group, the leader commits each entry it appends)."""
        self.dledger.write_currterm(self.dledger.curr_term, self.dledger.vote_leader)
        self.dledger.write_checkpoint()

    def close(self) -> None:
        self.dledger.close()
        self.store.close()

    def __enter__(self) -> DLedgerStoreWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
