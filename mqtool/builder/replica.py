"""Slaves written as RocketMQ 5.3.1's classic HA writes them, from a master store (never modified).

- `DefaultHAConnection.WriteSocketService`: the master sends CommitLog bytes from the offset the slave
  reported; a slave reporting 0 (an empty store) gets them from the start of the master's LAST file
  (`join_offset`), so a slave that joins late has a CommitLog that does not start at 0. Each transfer is at
  most `haTransferBatchSize` bytes (32 KiB by default) and cuts records anywhere.
- `DefaultHAClient.dispatchReadRequest` -> `CommitLog#appendData`: the bytes land at the same offsets in
  mapped files created whole (zero-filled; `AllocateMappedFileService` also pre-allocates the next file).
- The slave's `ReputMessageService` builds its own ConsumeQueues and index from what it appended
  (`ConsumeQueue#putMessagePositionInfo`, `fillPreBlank` for a queue whose first unit is not offset 0).
- A slave killed mid-transfer keeps a cut last record, its `abort` file (it holds the pid), queues behind
  its CommitLog (reput had not caught up) and possibly the pre-allocated next file.

`write_replica` does one of these; the flip of a byte is bit rot, not HA.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mqtool.builder.dledger import string2file
from mqtool.builder.writer import MappedFiles, StoreWriter, name20, read_records
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.sysflag import TRANSACTION_COMMIT, TRANSACTION_MASK, TRANSACTION_NOT_TYPE
from mqtool.store.mapped_files import open_queue, read_at

HA_TRANSFER_BATCH_SIZE = 32 * 1024  # MessageStoreConfig#haTransferBatchSize default


def join_offset(master_max_offset: int, file_size: int) -> int:
    """`WriteSocketService.run`: a slave that requests 0 is sent data from the master's last file start."""
    return max(0, master_max_offset - master_max_offset % file_size)


@dataclass(frozen=True)
class ReplicaShape:
    """What the slave holds: the master's CommitLog bytes [begin, end); its reput dispatched records
    ending at or before `dispatched_to` (None: all it holds); a crash leaves `abort` with `abort_pid`;
    `preallocated` leaves the next empty CommitLog file; `flips` are offsets whose byte is inverted;
    `lost_from` zeroes the CommitLog from there after the reput (queues ahead of their CommitLog)."""

    begin: int = 0
    end: int | None = None
    dispatched_to: int | None = None
    abort_pid: str | None = None
    preallocated: bool = False
    flips: tuple[int, ...] = ()
    lost_from: int | None = None  # CommitLog bytes from here zeroed after the reput: pages the queues outlived


def ha_transfer(master_root: Path, slave_root: Path, begin: int, end: int, file_size: int) -> None:
    """The master's CommitLog bytes [begin, end) appended to the slave's files at the same offsets, in
    batches of `haTransferBatchSize` that never cross a master file (`getCommitLogData` returns one file's
    slice)."""
    src = open_queue(master_root / "commitlog", file_size, "commitlog", master_root)
    out = MappedFiles(slave_root / "commitlog", file_size)
    try:
        pos = begin
        while pos < end:
            f = src.file_for(pos)
            if f is None:
                raise ValueError(f"the master has no CommitLog file holding offset {pos}")
            n = min(HA_TRANSFER_BATCH_SIZE, end - pos, f.start + file_size - pos)
            data = read_at(f.path, pos - f.start, n)
            if len(data) < n:
                raise ValueError(f"{f.path} ends before offset {pos + n}")
            out.write(pos, data)
            pos += n
        out.ensure(begin)
    finally:
        out.close()


def reput(slave_root: Path, config: BrokerConfig, dispatched_to: int | None) -> StoreWriter:
    """`ReputMessageService`: the slave's own ConsumeQueue units and index entries for the records its
    CommitLog walk decodes, up to `dispatched_to`; writes the StoreCheckpoint. Returns the closed writer."""
    w = StoreWriter(slave_root, config, _existing=True)
    last = 0
    for rec in read_records(slave_root / "commitlog"):
        if dispatched_to is not None and rec.physical_offset + rec.total_size > dispatched_to:
            break
        if rec.sys_flag & TRANSACTION_MASK in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT):
            w.dispatch_cq(
                rec.topic, rec.queue_id, rec.queue_offset, rec.physical_offset, rec.total_size, w.tags_code(rec)
            )
        w.index.build(rec)
        last = rec.store_timestamp
    w.last_store_timestamp = last
    w.write_checkpoint()
    w.close()
    return w


def write_replica(
    master_root: Path | str, slave_root: Path | str, config: BrokerConfig, shape: ReplicaShape = ReplicaShape()
) -> Path:
    """A slave store of `master_root` in `slave_root` (created; must not exist), shaped by `shape`."""
    master, slave = Path(master_root), Path(slave_root)
    if slave.exists():
        raise FileExistsError(f"{slave} exists")
    size = config.mapped_file_size_commitlog
    end = shape.end if shape.end is not None else _master_end(master, config)
    slave.mkdir(parents=True)
    ha_transfer(master, slave, shape.begin, end, size)
    reput(slave, config, shape.dispatched_to)
    for offset in shape.flips:  # after the reput: the queues were built from the good bytes
        _flip(slave / "commitlog", size, offset)
    if shape.lost_from is not None:
        _zero_from(slave / "commitlog", size, shape.lost_from)
    if shape.preallocated:
        MappedFiles(slave / "commitlog", size).ensure(end - end % size + size)
    (slave / "lock").write_bytes(b"lock")
    (slave / "abort.bak").write_bytes(b"")  # MixAll.string2File at start: the backup of the empty abort file
    if shape.abort_pid is not None:
        (slave / "abort").write_text(shape.abort_pid)
    return slave


def _master_end(master: Path, config: BrokerConfig) -> int:
    from mqtool.store.recovery import log_end
    from mqtool.store.store import Store

    return log_end(Store.open(master, config)).end


def _zero_from(directory: Path, file_size: int, offset: int) -> None:
    """Zero the CommitLog from `offset` on (a power loss that took CommitLog pages the ConsumeQueues kept)."""
    for path in sorted(directory.iterdir()):
        start = int(path.name)
        if start + file_size <= offset:
            continue
        with path.open("r+b") as fh:
            pos = max(0, offset - start)
            fh.seek(pos)
            fh.write(bytes(file_size - pos))


def _flip(directory: Path, file_size: int, offset: int) -> None:
    """Invert one byte of the slave's copy (bit rot, or a bad disk)."""
    path = directory / name20(offset - offset % file_size)
    with path.open("r+b") as fh:
        fh.seek(offset % file_size)
        b = fh.read(1)
        fh.seek(offset % file_size)
        fh.write(bytes([b[0] ^ 0xFF]))


def write_dledger_follower(
    leader_root: Path | str,
    out_root: Path | str,
    self_id: str,
    end_index: int,
    committed_index: int | None = None,
    flips: tuple[int, ...] = (),
) -> Path:
    """A DLedger follower of the leader's store that holds entries up to `end_index`: the leader's data and
    index files copied into `dledger-<self_id>` (`appendAsFollower` writes each entry at the leader's pos),
    the rest of the files zero-filled as mapped files are, its checkpoint (`persistCheckPoint`) and currterm
    (same term, voting for the leader). `flips` are data-file positions whose byte is inverted. The follower's
    own ConsumeQueues and index (built from committed entries by its reput) are not written."""
    from mqtool.builder.dledger import string2file
    from mqtool.formats.dledger import INDEX_UNIT_SIZE, build_checkpoint, build_currterm
    from mqtool.store.dledger import DLedgerCommitLog

    leader = DLedgerCommitLog.open(Path(leader_root))
    if leader is None:
        raise ValueError(f"{leader_root} is no DLedger store")
    out = Path(out_root)
    home = out / f"dledger-{self_id}"
    _, units = leader.index_units(_no_findings())
    kept = units[units["index"] <= end_index]
    data_end = int(kept["pos"][-1]) + int(kept["size"][-1]) if len(kept) else 0
    _copy_prefix(leader.data.files, leader.data.file_size, home / "data", data_end)
    _copy_prefix(leader.index.files, leader.index.file_size, home / "index", len(kept) * INDEX_UNIT_SIZE)
    for pos in flips:
        _flip(home / "data", leader.data.file_size, pos)
    committed = end_index if committed_index is None else committed_index
    string2file(home / "checkpoint", build_checkpoint(end_index, committed))
    term = (leader.currterm or {}).get("curr_term") or 0
    string2file(home / "currterm", build_currterm(term, leader.home.name.removeprefix("dledger-")))
    (out / "lock").write_bytes(b"lock")
    return out


def _no_findings():
    from mqtool.store.findings import Findings

    return Findings()


def _copy_prefix(files, file_size: int, directory: Path, end: int) -> None:
    """Bytes [0, end) of a mapped-file queue into whole zero-filled files (files wholly past `end` skipped)."""
    out = MappedFiles(directory, file_size)
    try:
        for f in files:
            if f.start >= end and f.start > 0:
                continue
            n = max(0, min(f.length, end - f.start))
            out.ensure(f.start)
            if n:
                out.write(f.start, read_at(f.path, 0, n))  # the prefix only, not the whole (1 GiB) file
    finally:
        out.close()


def write_epoch_file(root: Path | str, entries: list[tuple[int, int]]) -> None:
    """Controller mode's `epochFileCheckpoint` (`CheckpointFile#write` through `MixAll.string2File`: the
    previous content becomes `.bak`)."""
    from mqtool.formats.epochfile import EPOCH_FILE, build_epoch_file

    string2file(Path(root) / EPOCH_FILE, build_epoch_file(entries))


def write_broker_identity(root: Path | str, cluster: str, broker_name: str, broker_id: int) -> None:
    """`BrokerMetadata#updateAndPersist`: `cluster#brokerName#brokerId` in the store's `brokerIdentity`."""
    (Path(root) / "brokerIdentity").write_text(f"{cluster}#{broker_name}#{broker_id}", "utf-8")
