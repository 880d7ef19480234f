"""`simulate --out` on a DLedger store whose last entry is torn (issue #15): the copy continues where
`DLedgerMmapFileStore.recover` and `DLedgerCommitLog.dledgerRecoverNormally` leave the node.

fixtures/dledger holds entries 0..16 in term 1 (2048-byte data files). Entry 15 (LedgerTopicB/1 offset 7) is at
3595 with 221 bytes, so it ends at 3816; entry 16 (LedgerTopicA/1 offset 2) is at 3816, its record at 3864. The
torn copy zeroes entry 16 from its size field on (data file 2048, bytes 1772..2047) and has a third, all-zero
data file 4096 (created for a next entry, never flushed), and an `abort` file (a torn tail is a crash's: the
simulator starts from the recovered store, `simulate.model.recovered`). DLedger's recovery then reads size 0 at
3816 ("Recover data file to the end"): ledgerEndIndex 15, processOffset 3816, and `truncateOffset(3816)` deletes
the data file 4096 (it starts past 3816): before the fix StoreWriter._recover tried to delete it under
commitlog/ and the command failed ("cannot write the new store"). The broker's `truncateDirtyLogicFiles(3816)`
then cuts LedgerTopicA/1's unit 2 (CommitLog offset 3864 >= 3816): units 0 and 1 (entries 1 and 3, records at
221 + 48 = 269 and 663 + 48 = 711) stay.

The delayed message (entry 7, SCHEDULE_TOPIC_XXXX/2, level 3) is delivered as in fixtures/dledger's own run
(test_dledger_out): it becomes entry 16 again, at 3816 (264 bytes fit the 280 left in file 2048 with the 8-byte
room for a filler), in term 1 (currterm), its record at 3816 + 48 = 3864, LedgerTopicA/0 offset 3, 216 bytes
like the earlier delivery of entry 4 (entry 6: 264 - 48)."""

import json
import os
import shutil
import subprocess
import sys

from dledgerkit import entries_of, simulate_out

from conftest import FIXTURES
from mqtool.audit.runner import run_local
from mqtool.formats.broker_conf import load_broker_conf
from mqtool.formats.dledger import parse_checkpoint
from mqtool.store.store import Store

CONF = FIXTURES / "dledger.broker.conf"
DATA = "dledger-n0/data"


def torn_copy(dest):
    shutil.copytree(FIXTURES / "dledger", dest)
    f = dest / DATA / "00000000000000002048"
    data = bytearray(f.read_bytes())
    data[3816 - 2048 + 4:] = bytes(2048 - (3816 - 2048 + 4))  # entry 16 after its magic
    f.write_bytes(bytes(data))
    (dest / DATA / "00000000000000004096").write_bytes(bytes(2048))
    (dest / "abort").write_bytes(b"")  # recoverAbnormally: the same ends here (every body passes its CRC)
    return dest


def test_torn_last_entry_out_continues_after_the_last_whole_entry(tmp_path):
    src = torn_copy(tmp_path / "src")
    _, old, _, _ = entries_of(src, CONF)
    assert [e.index for e in old] == list(range(16)) and old[-1].offset + old[-1].size == 3816
    out = tmp_path / "out"
    simulate_out(src, CONF, "+2d", out)
    _, entries, _, findings = entries_of(out, CONF)
    assert [(f.severity, f.message) for f in findings if f.severity != "info"] == []
    assert [(e.offset, e.index, e.term, e.size) for e in entries[:16]] == \
        [(e.offset, e.index, e.term, e.size) for e in old]
    new = entries[16:]
    assert [(e.index, e.term, e.pos, e.size, e.record.physical_offset) for e in new] == [(16, 1, 3816, 264, 3864)]
    assert (new[0].record.topic, new[0].record.queue_id, new[0].record.queue_offset) == ("LedgerTopicA", 0, 3)
    assert sorted(p.name for p in (out / DATA).iterdir()) == ["00000000000000000000", "00000000000000002048"]
    assert parse_checkpoint((out / "dledger-n0/checkpoint").read_text()) == {"end_index": 16, "committed_index": 16}
    st = Store.open(out, load_broker_conf(CONF))
    a1 = st.consume_queue("LedgerTopicA", 1)
    assert a1.max_offset == 2 and [u.commitlog_offset for u in a1.iter_units(0)] == [269, 711]
    unit = st.consume_queue("LedgerTopicA", 0).unit(3)
    assert (unit.commitlog_offset, unit.size) == (3864, 216)
    # the audit agrees, but for the IndexFile: the copy keeps its files as they are (IndexFiles.load,
    # no `IndexService.load` destroy after a crash), so the torn entry 16's keys still name 3864
    errors = [(f["check"], f["message"]) for f in run_local(out, load_broker_conf(CONF))["findings"]
              if f["severity"] == "error"]
    assert [c for c, _ in errors] == ["index", "index"] and all("points to the record at 3864" in m
                                                                for _, m in errors)


def test_the_command_writes_the_torn_store(tmp_path):
    src = torn_copy(tmp_path / "src")
    p = subprocess.run([sys.executable, "-m", "mqtool", "simulate", src, "--config", CONF, "--until", "+2d",
                        "--out", tmp_path / "out"], capture_output=True, text=True, env=os.environ, timeout=300)
    warnings = [line for line in p.stderr.splitlines() if "warning" in line]  # the torn tail is an error finding
    assert p.returncode == 0 and warnings == [f"warning: the store has at least 1 error finding(s); see mqtool "
                                              f"inspect {src}"], p.stderr
    p = subprocess.run([sys.executable, "-m", "mqtool", "inspect", tmp_path / "out", "--config", CONF, "--json"],
                       capture_output=True, text=True, env=os.environ, timeout=300)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["findings"] == []
    assert (src / DATA / "00000000000000004096").exists()  # the source is untouched
