"""StoreWriter.extend continues where the broker's restart leaves an appended store.

Each case builds a small store (1 KiB CommitLog files), damages it as a crash or a bad disk would,
and checks the end the builder continues from three ways: against the offset computed by hand from
the records written, against `recoverNormally` in `mqtool.rules.recovery` (through the restart
preview, `store.recovery.recovery_plan`), and against the store reader (`CommitLog.max_offset`).
"""

from __future__ import annotations

from pathlib import Path

from mqtool.builder.writer import StoreWriter
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.timerlog import TIMERLOG_BLANK_MAGIC
from mqtool.store.findings import Findings
from mqtool.store.recovery import recovery_plan
from mqtool.store.store import Store

SMALL = BrokerConfig(mapped_file_size_commitlog=1024, mapped_file_size_consume_queue=100,
                     mapped_file_size_timer_log=200)
NO_CRC_CHECK = SMALL.with_overrides({"checkCRCOnRecover": "false"})
FILE0 = "00000000000000000000"
FILE1 = "00000000000000001024"


def three_records(root: Path) -> list:
    """Three records with 200-byte bodies in file 0, stored at times 1000..1002."""
    with StoreWriter(root, SMALL) as w:
        recs = [w.append_message("T", 0, b"y" * 200, store_timestamp=1000 + i) for i in range(3)]
    return recs


def plan_end(root: Path, config: BrokerConfig = SMALL) -> int:
    """The restart preview's end of valid data (`recoverNormally` on the store's walk)."""
    return recovery_plan(Store.open(root, config), Findings())["commitlog"]["end_offset"]


def reader_end(root: Path) -> int:
    """The store reader's end: the last file's walk (no CRC stop)."""
    return Store.open(root, SMALL).commitlog.max_offset()


def test_record_sizes_the_cases_rely_on(tmp_path):
    recs = three_records(tmp_path / "a")
    # TOTALSIZE..FLAG 5*4 + QUEUEOFFSET, PHYSICALOFFSET 2*8 + SYSFLAG 4 + BORNTIMESTAMP 8 + BORNHOST 8
    # + STORETIMESTAMP 8 + STOREHOST 8 + RECONSUMETIMES 4 + PREPARED 8 + BODYLENGTH 4 + body 200
    # + TOPICLENGTH 1 + "T" 1 + PROPERTIESLENGTH 2 = 292 bytes
    assert [(r.physical_offset, r.total_size) for r in recs] == [(0, 292), (292, 292), (584, 292)]


def test_torn_tail_ends_at_the_last_whole_record(tmp_path):
    three_records(tmp_path / "a")
    path = tmp_path / "a" / "commitlog" / FILE0
    data = bytearray(path.read_bytes())
    data[876:880] = (292).to_bytes(4, "big")  # a fourth record's TOTALSIZE, the rest never written
    data[880:884] = (0xDAA320A7).to_bytes(4, "big")  # its MAGICCODE (V1), then zeros: torn
    path.write_bytes(bytes(data))
    w = StoreWriter.extend(tmp_path / "a", tmp_path / "b")
    assert (w.commitlog_end, w.last_store_timestamp) == (876, 1002)
    assert w.commitlog_end == plan_end(tmp_path / "a") == reader_end(tmp_path / "a")
    rec = w.append_message("T", 0, b"z")
    w.close()
    assert rec.physical_offset == 876


def test_crc_mismatch_ends_the_data_when_check_crc_on_recover(tmp_path):
    three_records(tmp_path / "a")
    path = tmp_path / "a" / "commitlog" / FILE0
    data = bytearray(path.read_bytes())
    data[292 + 8] ^= 0xFF  # BODYCRC of the second record
    path.write_bytes(bytes(data))
    w = StoreWriter.extend(tmp_path / "a", tmp_path / "b")
    assert (w.commitlog_end, w.last_store_timestamp) == (292, 1000)
    assert w.commitlog_end == plan_end(tmp_path / "a")
    assert reader_end(tmp_path / "a") == 876  # the reader reports the mismatch but walks on
    w.close()
    # checkCRCOnRecover=false: recovery accepts the record, as the reader does
    w = StoreWriter.extend(tmp_path / "a", tmp_path / "c", NO_CRC_CHECK)
    assert (w.commitlog_end, w.last_store_timestamp) == (876, 1002)
    assert w.commitlog_end == plan_end(tmp_path / "a", NO_CRC_CHECK) == reader_end(tmp_path / "a")
    w.close()


def test_blank_filler_in_a_middle_file_moves_on_to_the_next(tmp_path):
    with StoreWriter(tmp_path / "a", SMALL) as w:
        recs = [w.append_message("T", 0, b"y" * 200, store_timestamp=1000 + i) for i in range(4)]
    assert recs[-1].physical_offset == 1024  # 876 + 292 + 8 > 1024: a BLANK filler at 876
    w = StoreWriter.extend(tmp_path / "a", tmp_path / "b")
    assert (w.commitlog_end, w.last_store_timestamp) == (1316, 1003)
    assert w.commitlog_end == plan_end(tmp_path / "a") == reader_end(tmp_path / "a")
    w.close()


def test_blank_filler_ending_the_last_file_is_where_recovery_stops(tmp_path):
    """`recoverNormally`: a BLANK in the last file leaves processOffset at the filler; the next put
    re-writes the filler when the record does not fit (doAppend), else takes the space."""
    with StoreWriter(tmp_path / "a", SMALL) as w:
        [w.append_message("T", 0, b"y" * 200, store_timestamp=1000 + i) for i in range(4)]
    (tmp_path / "a" / "commitlog" / FILE1).unlink()  # the file after the filler was never flushed
    w = StoreWriter.extend(tmp_path / "a", tmp_path / "b")
    assert (w.commitlog_end, w.last_store_timestamp) == (876, 1002)
    assert w.commitlog_end == plan_end(tmp_path / "a") == reader_end(tmp_path / "a")
    small = w.append_message("T", 0, b"")  # 92 bytes: 876 + 92 + 8 <= 1024, it fits
    big = w.append_message("T", 0, b"y" * 200)
    w.close()
    assert (small.physical_offset, small.total_size, big.physical_offset) == (876, 92, 1024)
    data = (tmp_path / "b" / "commitlog" / FILE0).read_bytes()
    assert int.from_bytes(data[968:972], "big") == 1024 - 968  # the new filler after the small record
    assert reader_end(tmp_path / "b") == 1316


def test_torn_file_drops_the_later_files(tmp_path):
    with StoreWriter(tmp_path / "a", SMALL) as w:
        [w.append_message("T", 0, b"y" * 200, store_timestamp=1000 + i) for i in range(5)]
    path = tmp_path / "a" / "commitlog" / FILE0
    data = bytearray(path.read_bytes())
    data[584:588] = (5).to_bytes(4, "big")  # the third record's TOTALSIZE
    path.write_bytes(bytes(data))
    w = StoreWriter.extend(tmp_path / "a", tmp_path / "b")
    assert (w.commitlog_end, w.last_store_timestamp) == (584, 1001)
    assert w.commitlog_end == plan_end(tmp_path / "a")
    assert sorted(p.name for p in (tmp_path / "b" / "commitlog").iterdir()) == [FILE0]
    assert sorted(p.name for p in (tmp_path / "a" / "commitlog").iterdir()) == [FILE0, FILE1]  # source kept
    w.close()


def test_empty_store_starts_at_zero(tmp_path):
    (tmp_path / "a" / "commitlog").mkdir(parents=True)
    (tmp_path / "a" / "consumequeue" / "T" / "0").mkdir(parents=True)
    w = StoreWriter.extend(tmp_path / "a", tmp_path / "b", SMALL)
    assert (w.commitlog_end, w.last_store_timestamp, w.timerlog_end, w.next_queue_offset("T", 0)) == (0, 0, 0, 0)
    assert reader_end(tmp_path / "a") == 0
    assert recovery_plan(Store.open(tmp_path / "a", SMALL), Findings())["commitlog"] is None
    rec = w.append_message("T", 0, b"x")
    w.close()
    assert (rec.physical_offset, rec.queue_offset) == (0, 0)


def test_consume_queue_ends_at_the_first_unit_recover_rejects(tmp_path):
    with StoreWriter(tmp_path / "a", SMALL) as w:
        recs = [w.append_message("T", 0, b"y" * 10, store_timestamp=1000 + i) for i in range(3)]
        w.put_cq_unit("T", 0, 2, recs[2].physical_offset, 0, 0)  # size 0: ConsumeQueue.recover stops here
    w = StoreWriter.extend(tmp_path / "a", tmp_path / "b")
    assert w.next_queue_offset("T", 0) == 2
    rec = w.append_message("T", 0, b"z")
    w.close()
    assert rec.queue_offset == 2


def test_timerlog_filler_and_torn_unit(tmp_path):
    with StoreWriter(tmp_path / "a", SMALL) as w:
        pos = [w.append_timerlog_unit(-1, 1, 1000, 10, 0, 100, 7) for _ in range(5)]
    assert pos == [0, 52, 104, 200, 252]  # 156 + 52 + 16 > 200: a 16-byte filler at 156, then file 200
    w = StoreWriter.extend(tmp_path / "a", tmp_path / "b")
    assert w.timerlog_end == 304
    w.close()
    path = tmp_path / "a" / "timerlog" / "00000000000000000200"
    data = bytearray(path.read_bytes())
    data[52 + 12 : 52 + 16] = (3).to_bytes(4, "big")  # the second unit's magic: not a 4-bit value
    path.write_bytes(bytes(data))
    w = StoreWriter.extend(tmp_path / "a", tmp_path / "c")
    assert w.timerlog_end == 304
    data[52 + 12 : 52 + 16] = (0x40).to_bytes(4, "big")
    path.write_bytes(bytes(data))
    w.close()
    w = StoreWriter.extend(tmp_path / "a", tmp_path / "d")
    assert w.timerlog_end == 252  # TimerMessageStore.isMagicOK fails: recoverAndRevise truncates there
    w.close()
    first = (tmp_path / "a" / "timerlog" / "00000000000000000000").read_bytes()
    assert int.from_bytes(first[156 + 12 : 156 + 16], "big", signed=True) == TIMERLOG_BLANK_MAGIC
