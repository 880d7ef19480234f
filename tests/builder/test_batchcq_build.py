"""The BatchConsumeQueue builder against the store RocketMQ 5.3.1 wrote (../shared/oracle/batchcq-5.3.1).

The store is rebuilt from what mqtool's own CommitLog reader decodes and compared file by file: the
CommitLog (both files, the BLANK filler), both BatchCQ files, PlainTopic's ConsumeQueue and the
StoreCheckpoint are byte-identical. What is not, and why:
- `index/<name>`: same bytes; the name is the wall-clock time of the file's creation, the builder uses
  the first record's store time;
- `lock`, `abort.bak`: lifecycle markers, not written by the builder;
- `checkpoint` matches because its flush timestamps are copied from the real file (wall-clock values).
A second build goes through the put path (INNER_BASE removed, the builder assigns it and re-serialises
the map) and gives the same CommitLog bytes: the harness built messages on the client side, so their
property maps are HashMap(16)s (`capacity=16`; a broker's processor would use 128).
"""

import pytest
from rebuildkit import assert_same_files, compared_files, config, copy_checkpoint, files

from conftest import ORACLE, need_oracle
from mqtool.builder.batchcq import BatchConsumeQueueWriter, BatchTopics
from mqtool.builder.writer import StoreWriter
from mqtool.formats.names import PROPERTY_INNER_BASE
from mqtool.formats.properties import parse_pairs
from mqtool.store.batchcq import BatchConsumeQueue
from mqtool.store.findings import Findings
from mqtool.store.store import Store

SRC = ORACLE / "batchcq-5.3.1" / "store"
CFG = dict(mappedFileSizeCommitLog=8192, mappedFileSizeConsumeQueue=300, maxHashSlotNum=100, maxIndexNum=400)


@pytest.fixture(scope="module")
def records():
    need_oracle()
    recs = list(Store.open(SRC).commitlog.iter_records())
    assert len(recs) == 30
    return recs


def rebuild(out, records, fresh: bool):
    with StoreWriter(out, config(**CFG)) as w:
        bt = BatchTopics(w, ["BatchTopic"], file_size=920)
        for r in records:
            if fresh and r.topic == "BatchTopic":
                pairs = [(k, v) for k, v in parse_pairs(r.properties_raw) if k != PROPERTY_INNER_BASE]
                bt.put(r.topic, r.queue_id, r.body, pairs, sys_flag=r.sys_flag, store_timestamp=r.store_timestamp,
                       born_timestamp=r.born_timestamp, born_host=r.born_host, store_host=r.store_host,
                       capacity=16)
            else:
                bt.put_record(r, r.queue_offset)
        bt.close()
        copy_checkpoint(w, SRC)
    return out


def test_every_file_rebuilds_byte_identically(records, tmp_path):
    out = rebuild(tmp_path / "store", records, fresh=False)
    real, built = compared_files(SRC, out)
    assert_same_files(real, built, 6)  # 2 CommitLog, 2 BatchCQ, 1 ConsumeQueue, checkpoint


def test_the_put_path_assigns_inner_base_and_queue_offsets_like_the_broker(records, tmp_path):
    out = rebuild(tmp_path / "store", records, fresh=True)
    real, built = files(SRC), files(out)
    for k in ("commitlog/00000000000000000000", "commitlog/00000000000000008192",
              "batchconsumequeue/BatchTopic/0/00000000000000000000",
              "batchconsumequeue/BatchTopic/1/00000000000000000000"):
        assert built[k] == real[k], k
    fs = Findings()
    assert BatchConsumeQueue.open(out, "BatchTopic", 0).offsets(fs) == (0, 48)  # README: queue 0 ends at 48
    assert BatchConsumeQueue.open(out, "BatchTopic", 1).offsets(fs) == (0, 84)  # queue 1 at 84
    assert not fs


def test_units_roll_to_the_next_file_by_byte_offset(tmp_path):
    q = BatchConsumeQueueWriter(tmp_path, "T", 0, file_size=2 * 46)
    assert [q.put(100 * i, 10, 0, 5, i, 1) for i in range(3)] == [0, 46, 92]
    q.close()
    d = tmp_path / "batchconsumequeue/T/0"
    assert sorted(p.name for p in d.iterdir()) == ["00000000000000000000", "00000000000000000092"]
    fs = Findings()
    assert [u.commitlog_offset for u in BatchConsumeQueue.open(tmp_path, "T", 0).iter_units(fs)] == [0, 100, 200]
    assert not fs
    with pytest.raises(ValueError):
        BatchConsumeQueueWriter(tmp_path, "T", 1, file_size=100)
