"""`CommitLog.max_offset`: where a restarted broker's `MappedFileQueue.getMaxOffset` ends the CommitLog (the last
file kept by recovery, at the wrote position recovery set), not the last file's start plus its scan.

RocketMQ 5.3.1 `CommitLog#recoverNormally` walks the last three files; it goes on into the next file only after a
BLANK filler (`checkMessageAndReturnSize` size 0, success); zeros or an invalid record end the data there, and
`truncateDirtyFiles` deletes every file after it.
"""

import shutil
from pathlib import Path

from conftest import FIXTURES, ORACLE, need_oracle
from mqtool.formats.broker_conf import load_broker_conf
from mqtool.store.recovery import log_end
from mqtool.store.store import Store

BASIC_END = 96635  # the last record of basic-5.3.1: physicalOffset 96257 + storeSize 378 (its commitlog.jsonl)
BASIC_BLANK = 65029  # where file 0 of basic-5.3.1 ends in its BLANK filler


def _fleet_store(side: str) -> Store:
    path = FIXTURES / "fleet/broker-a" / side
    return Store.open(path, load_broker_conf(path.parent / f"{side}.broker.conf"))


def test_the_crashed_slave_ends_at_its_torn_record_not_at_the_empty_file_after_it():
    """docs/fleet.md: broker-a's slave (4096-byte files) holds 0..14242, a torn record at 14242 in file 12288,
    and a pre-allocated empty file 16384 that recovery deletes."""
    slave = _fleet_store("slave")
    assert [f.start for f in slave.commitlog.files][-2:] == [12288, 16384]
    assert slave.commitlog.max_offset() == 14242
    assert log_end(slave).end == 14242  # the recovery rule (CRC checked) agrees


def test_the_master_ends_in_its_last_file():
    assert _fleet_store("master").commitlog.max_offset() == 18336


def test_a_normal_store_ends_after_its_last_record():
    need_oracle()
    assert Store.open(ORACLE / "basic-5.3.1/store").commitlog.max_offset() == BASIC_END


def _copy(tmp_path: Path, keep: list[str]) -> Path:
    src = ORACLE / "basic-5.3.1/store/commitlog"
    root = tmp_path / "store"
    (root / "commitlog").mkdir(parents=True)
    for name in keep:
        shutil.copyfile(src / name, root / "commitlog" / name)
    return root


def test_a_preallocated_empty_file_after_a_partly_written_one_adds_nothing(tmp_path):
    need_oracle()
    root = _copy(tmp_path, ["00000000000000000000", "00000000000000065536"])
    (root / "commitlog/00000000000000131072").write_bytes(bytes(65536))
    assert Store.open(root).commitlog.max_offset() == BASIC_END


def test_an_empty_file_after_a_blank_filler_is_where_the_data_ends(tmp_path):
    """The walk moves past the filler into the next file and stops at its first byte: recovery keeps that file
    at wrote position 0, so the end is its start."""
    need_oracle()
    root = _copy(tmp_path, ["00000000000000000000"])
    assert Store.open(root).commitlog.max_offset() == BASIC_BLANK
    (root / "commitlog/00000000000000065536").write_bytes(bytes(65536))
    assert Store.open(root).commitlog.max_offset() == 65536


def test_a_walk_cut_short_does_not_move_the_end():
    """A walk stopped after one record (`--limit 1`) leaves its file's scan unfinished; the end is still 14242."""
    slave = _fleet_store("slave")
    next(slave.commitlog.iter_records(start=8192))  # file 8192, one of the three recovery walks
    assert slave.commitlog.max_offset() == 14242
