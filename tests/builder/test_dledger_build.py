"""The DLedger builder against the store DLedger 0.3.1.2 + RocketMQ 5.3.1 wrote (../shared/oracle/dledger-5.3.1).

The store is rebuilt from what mqtool's own reader decodes (each entry's term and CommitLog record) and
compared file by file. Every file is byte-identical except:
- `index/<name>`: same bytes, but the name is the wall-clock time the real IndexFile was created
  (20261123182610319), a few ms after the first record's store time, which the builder uses (…283);
- `lock` ("lock") and `abort.bak` (empty): lifecycle markers of a running/cleanly stopped broker, not
  layouts; the builder does not write them;
- `checkpoint` (StoreCheckpoint) is identical only because its flush timestamps are copied from the
  real file: the broker writes wall-clock flush times there.
"""

import pytest
from rebuildkit import assert_same_files, compared_files, config, copy_checkpoint

from conftest import ORACLE, need_oracle
from mqtool.builder.dledger import DLedgerStoreWriter, DLedgerWriter
from mqtool.formats.dledger import BLANK_MAGIC, ENTRY_MAGIC, entry_header
from mqtool.store.dledger import DLedgerCommitLog
from mqtool.store.findings import Findings

SRC = ORACLE / "dledger-5.3.1" / "store"


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory):
    need_oracle()
    fs = Findings()
    entries = list(DLedgerCommitLog.open(SRC).iter_entries(fs))
    assert not fs and len(entries) == 42
    out = tmp_path_factory.mktemp("dl") / "store"
    cfg = config(mappedFileSizeCommitLog=16384, mappedFileSizeConsumeQueue=300, maxHashSlotNum=100, maxIndexNum=400)
    with DLedgerStoreWriter(out, cfg, "n0", index_file_size=1024) as w:
        for e in entries:
            w.put(e.record, e.term, e.record.queue_offset)
        w.dledger.write_checkpoint()  # the periodic flush ...
        w.dledger.write_checkpoint()  # ... and the one at shutdown: checkpoint.bak holds the previous text
        w.dledger.write_currterm(0, "n0")
        copy_checkpoint(w.store, SRC)
    return out


def test_every_file_rebuilds_byte_identically(rebuilt):
    real, built = compared_files(SRC, rebuilt)
    # 2 data, 2 index, checkpoint(.bak), currterm, 9 ConsumeQueue files, StoreCheckpoint
    assert_same_files(real, built, 17)


def test_the_rebuilt_store_reads_back_without_findings(rebuilt):
    fs = Findings()
    summary = DLedgerCommitLog.open(rebuilt).audit(fs)
    assert not fs
    assert (summary["entries"], summary["end_index"], summary["committed_index"], summary["vote_leader"]) == (
        42, 41, 41, "n0")


def test_filler_only_when_the_entry_and_a_blank_do_not_fit(tmp_path):
    """`preAppend`: len + MIN_BLANK_LEN > remaining ends the file with -1 | remaining; equality still fits."""
    w = DLedgerWriter(tmp_path, "a", data_file_size=200, index_file_size=64)
    assert w.append_body(b"x" * 96) == (0, 0)  # 144 bytes; 56 remain
    assert w.append_body(b"") == (1, 144)  # 48 + 8 == 56: fits; 8 remain
    assert w.append_body(b"z") == (2, 200)  # 49 + 8 > 8: an 8-byte filler, then the next file
    w.close()
    raw = (tmp_path / "dledger-a/data/00000000000000000000").read_bytes()
    assert len(raw) == 200
    assert entry_header.parse(raw[144:192]).size == 48
    assert (int.from_bytes(raw[192:196], "big", signed=True), int.from_bytes(raw[196:200], "big")) == (BLANK_MAGIC, 8)
    units = (tmp_path / "dledger-a/index/00000000000000000000").read_bytes()
    assert len(units) == 64 and int.from_bytes(units[0:4], "big") == ENTRY_MAGIC  # units 0, 1 (64-byte file)
    assert (tmp_path / "dledger-a/index/00000000000000000064").read_bytes()[:4] == b"\0\0\0\1"  # unit 2
