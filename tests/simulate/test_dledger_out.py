"""`simulate --out` on a DLedger-mode store writes the re-puts as DLedger entries (issue #15).

The new store continues the source as its restarted single-node leader would (`DLedgerMmapFileStore.
appendAsLeader`): entries with the next indexes in `currterm`'s term, each at the previous entry's end (or
after a `-1 | remaining` filler), its CommitLog record at pos + 48, dispatched to the ConsumeQueue and
IndexFile; `checkpoint` commits the last entry. Everything the source wrote stays byte for byte."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from dledgerkit import ORACLE_CONF, check_continuation, make_converted_store, simulate_out

from conftest import FIXTURES, ORACLE, need_oracle


def test_fixture_out_appends_dledger_entries(tmp_path):
    """fixtures/dledger: one delayed message comes due. Its last entry (16, term 1) ends at 3816 + 221 = 4037;
    1989 bytes into a 2048-byte file, the 59 left cannot hold 48 + the record + 8: a 59-byte filler, the new
    entry 17 at 4096, its record at 4144."""
    src, conf = FIXTURES / "dledger", FIXTURES / "dledger.broker.conf"
    run, result = simulate_out(src, conf, "+2d", tmp_path / "out")
    new = check_continuation(src, tmp_path / "out", conf, result, term=1)
    assert [(e.index, e.pos, e.record.physical_offset) for e in new] == [(17, 4096, 4144)]
    assert (new[0].record.topic, new[0].record.queue_id, new[0].record.queue_offset) == ("LedgerTopicA", 0, 3)
    # the command writes the same bytes, with no warning (a record placed elsewhere than predicted)
    p = subprocess.run([sys.executable, "-m", "mqtool", "simulate", src, "--config", conf, "--start", str(run.start_ms),
                        "--until", "+2d", "--out", tmp_path / "cli"], capture_output=True, text=True, env=os.environ,
                       timeout=300)
    assert p.returncode == 0 and "warning" not in p.stderr, p.stderr
    files = sorted(x.relative_to(tmp_path / "out") for x in (tmp_path / "out").rglob("*") if x.is_file())
    assert files == sorted(x.relative_to(tmp_path / "cli") for x in (tmp_path / "cli").rglob("*") if x.is_file())
    assert all((tmp_path / "out" / f).read_bytes() == (tmp_path / "cli" / f).read_bytes() for f in files)


@pytest.fixture(scope="module")
def oracle_copy(tmp_path_factory):
    need_oracle()
    base = tmp_path_factory.mktemp("dledger-oracle")
    shutil.copytree(ORACLE / "dledger-5.3.1/store", base / "store")
    for p in (base / "store").rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    (base / "broker.conf").write_text(ORACLE_CONF)
    return base / "store", base / "broker.conf"


def test_oracle_out_continues_rocketmqs_ledger(oracle_copy, tmp_path):
    """dledger-5.3.1 (written by RocketMQ 5.3.1 + DLedger 0.3.1.2): its 4 delayed messages come due; the new
    entries 42..45 follow entry 41 where records.jsonl says it ends, in term 0 (currterm)."""
    src, conf = oracle_copy
    last = json.loads((ORACLE / "dledger-5.3.1/records.jsonl").read_text().splitlines()[-1])
    out = tmp_path / "out"
    run, result = simulate_out(src, conf, "+1h", out)
    new = check_continuation(src, out, conf, result, term=0)
    assert [e.index for e in new] == [42, 43, 44, 45]
    assert new[0].pos == last["dledgerPos"] + last["dledgerSize"]
    assert [(e.record.topic, e.record.queue_id, e.record.queue_offset) for e in new] == [("TopicA", 0, q)
                                                                                        for q in (10, 11, 12, 13)]
    # the second DLedger index file (units 32..63) gains units 42..45; the old units are untouched
    assert (out / "dledger-n0/index/00000000000000001024").read_bytes()[:10 * 32] == \
        (src / "dledger-n0/index/00000000000000001024").read_bytes()[:10 * 32]
    # mqtool reads the new store without a finding; IndexService.queryOffset finds a re-put by its key
    env = {**os.environ}
    p = subprocess.run([sys.executable, "-m", "mqtool", "inspect", out, "--config", conf, "--json"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    view = json.loads(p.stdout)
    assert view["findings"] == [] and view["commitlog"]["records"] == 46
    key = new[-1].record.properties["UNIQ_KEY"]
    p = subprocess.run([sys.executable, "-m", "mqtool", "inspect", out, "index", "--config", conf, "--topic",
                        "TopicA", "--key", key, "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["broker_phy_offsets"] == [new[-1].pos + 48]


def test_converted_store_out_leaves_the_old_commitlog(tmp_path):
    """A store converted to DLedger (basic-5.3.1's CommitLog below dividedCommitlogOffset 131072, entries 0..2
    after it): the re-puts of its delayed and half messages become entries 3.. after the last one's end
    (`make_converted_store`), and commitlog/ is left as it was."""
    root, _, divided, end, _ = make_converted_store(tmp_path)
    shutil.copytree(ORACLE / "basic-5.3.1/store/consumequeue", root / "consumequeue")
    for p in (root / "consumequeue").rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    conf = tmp_path / "broker.conf"
    conf.write_text("mappedFileSizeCommitLog=65536\nmappedFileSizeConsumeQueue=1280\n")
    run, result = simulate_out(root, conf, "+4d", tmp_path / "out")
    new = check_continuation(root, tmp_path / "out", conf, result, term=0)
    assert (new[0].index, new[0].pos) == (3, end) and divided == 131072
    assert {m.service for m in result.state["model"].appended} == {"schedule", "transaction"}
    for f in sorted((root / "commitlog").iterdir()):
        assert (tmp_path / "out/commitlog" / f.name).read_bytes() == f.read_bytes()


def test_out_wants_the_data_files_size_from_broker_conf(tmp_path):
    """fixtures/dledger's data files are 2048 bytes; without its broker.conf (1 GiB) --out is refused before
    the run, as for a CommitLog."""
    p = subprocess.run([sys.executable, "-m", "mqtool", "simulate", FIXTURES / "dledger", "--until", "+1h",
                        "--out", tmp_path / "out"], capture_output=True, text=True, env=os.environ, timeout=300)
    assert p.returncode == 2 and "DLedger data files are 2048 bytes but mappedFileSizeCommitLog is 1073741824" \
        in p.stderr, p.stderr
    assert not (tmp_path / "out").exists()
