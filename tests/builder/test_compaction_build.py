"""The compaction builder against the store RocketMQ 5.3.1 wrote after one real compaction run
(../shared/oracle/compaction-5.3.1).

Rebuilt from what mqtool's readers decode: the CommitLog records (then their ConsumeQueues and
IndexFile), and the compaction log's records. The compacted file 0 is written as a run's output
(`write_compacted`: kept records 11, 13, 14, 16, no BLANK, no end unit); offsets 17..21 are appended to
file 5520 and roll to 6900 (BLANK of 93 bytes, end unit). Every file is byte-identical, except:
- `index/<name>`: same bytes, the name is the real file's wall-clock creation time;
- `lock`, `abort.bak`: lifecycle markers, not written by the builder;
- `checkpoint` matches only because its flush timestamps are copied from the real file;
- `compaction/position-checkpoint` has no real counterpart (the harness's fastjson was a stand-in, the
  file was removed); the rebuilt one holds `{"CompactT_0": 16}` as the README reports it in memory.
"""

import pytest
from rebuildkit import assert_same_files, compared_files, config, copy_checkpoint

from conftest import ORACLE, need_oracle
from mqtool.builder.compaction import CompactionLogWriter, write_position_checkpoint
from mqtool.builder.writer import StoreWriter
from mqtool.store.compaction import CompactionQueue, compaction_summary, read_position_checkpoint
from mqtool.store.findings import Findings
from mqtool.store.store import Store

SRC = ORACLE / "compaction-5.3.1" / "store"


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory):
    need_oracle()
    commitlog = list(Store.open(SRC).commitlog.iter_records())
    fs = Findings()
    log = list(CompactionQueue.open(SRC, "CompactT", 0, fs).iter_records(fs))
    assert len(commitlog) == 27 and [r.queue_offset for r in log] == [11, 13, 14, 16, 17, 18, 19, 20, 21]
    assert not fs
    out = tmp_path_factory.mktemp("compaction") / "store"
    with StoreWriter(out, config(mappedFileSizeCommitLog=16384, mappedFileSizeConsumeQueue=200,
                                 maxHashSlotNum=32, maxIndexNum=128)) as w:
        w.append_records(commitlog, [r.queue_offset for r in commitlog])
        copy_checkpoint(w, SRC)
    with CompactionLogWriter(out, "CompactT", 0, log_file_size=1400, cq_file_size=276, start=5520) as c:
        c.write_compacted(0, log[:4])
        placed = [c.append(r) for r in log[4:]]
    assert [r.physical_offset for r in placed] == [5520, 5914, 6225, 6506, 6900]
    write_position_checkpoint(out, {("CompactT", 0): 16})
    return out


def test_every_file_rebuilds_byte_identically(rebuilt):
    real, built = compared_files(SRC, rebuilt)
    assert built.pop("compaction/position-checkpoint") == b'{"empty":false,"queueOffsetMap":{"CompactT_0":16}}'
    assert_same_files(real, built, 12)  # CommitLog, 4 ConsumeQueue files, 3 + 3 compaction files, checkpoint


def test_the_rebuilt_store_reads_back(rebuilt):
    fs = Findings()
    assert read_position_checkpoint(rebuilt, fs) == {("CompactT", 0): 16}
    [row] = compaction_summary(rebuilt, fs)
    assert (row["records"], row["units"], row["min_queue_offset"], row["max_queue_offset"]) == (9, 9, 11, 21)
    assert not fs


def test_a_full_cq_file_rolls_the_log_file_too(tmp_path):
    """A 276-byte CQ file takes 5 units and the end unit: the 6th record opens a new log file."""
    need_oracle()
    commitlog = list(Store.open(SRC).commitlog.iter_records())
    small = [r for r in commitlog if r.topic == "CompactT"][:6]  # about 2 KB: the log file has room
    with CompactionLogWriter(tmp_path, "CompactT", 0, log_file_size=100_000, cq_file_size=276) as c:
        starts = [c.log.start_of(c.append(r).physical_offset) for r in small]
    size = c.log.file_size
    assert size == 100_000 // 276 * 276 and starts == [0] * 5 + [size]
    fs = Findings()
    q = CompactionQueue.open(tmp_path, "CompactT", 0, fs)
    records, units = q.check(fs)
    assert len(records) == len(units) == 6 and not fs
    assert q.ends[q.rel(q.log_files[0])].kind == "blank"
