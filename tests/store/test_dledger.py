"""The DLedger reader against the store DLedger 0.3.1.2 + RocketMQ 5.3.1 wrote, damaged copies and a converted store."""

import base64
import ipaddress
import json
import struct

import pytest
from dledgerkit import make_converted_store
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import ORACLE, copy_with_wheel, need_oracle
from mqtool.formats.dledger import build_checkpoint
from mqtool.formats.message import decode_message
from mqtool.store.dledger import DLedgerCommitLog, find_dledger_dirs
from mqtool.store.findings import Findings

SRC = ORACLE / "dledger-5.3.1"
DATA0 = "dledger-n0/data/00000000000000000000"
DATA1 = "dledger-n0/data/00000000000000016384"


def java_host(text: str) -> tuple[str, int]:
    h, _, port = text.lstrip("/").rpartition(":")
    return str(ipaddress.ip_address(h.strip("[]"))), int(port)


@pytest.fixture(scope="module")
def expected():
    need_oracle()
    return ([json.loads(line) for line in (SRC / "records.jsonl").read_text().splitlines()],
            json.loads((SRC / "store-meta.json").read_text()))


@pytest.fixture
def damaged(tmp_path):
    """A writable copy of the oracle store; returns (root, patch(path, at, bytes))."""
    need_oracle()
    root = copy_with_wheel(SRC / "store", tmp_path / "store")

    def patch(rel: str, at: int, data: bytes) -> None:
        with open(root / rel, "r+b") as fh:
            fh.seek(at)
            fh.write(data)
    return root, patch


def audit(root):
    fs = Findings()
    summary = DLedgerCommitLog.open(root).audit(fs)
    return summary, fs


def test_every_record_is_what_rocketmq_decoded(expected):
    recs, _ = expected
    fs = Findings()
    got = list(DLedgerCommitLog.open(SRC / "store").iter_records(fs))
    assert fs == []
    assert len(got) == len(recs) == 42
    for r, e in zip(got, recs, strict=True):
        assert r.physical_offset == r.physical_offset_field == e["physicalOffset"] == e["dledgerPos"] + 48
        assert r.extra["dledger"] == {"index": e["dledgerIndex"], "term": e["dledgerTerm"], "pos": e["dledgerPos"]}
        assert (r.topic, r.queue_id, r.queue_offset, r.sys_flag, r.flag) == (
            e["topic"], e["queueId"], e["queueOffset"], e["sysFlag"], e["flag"])
        assert (r.born_timestamp, r.store_timestamp, r.body_crc, r.reconsume_times) == (
            e["bornTimestamp"], e["storeTimestamp"], e["bodyCRC"], e["reconsumeTimes"])
        assert (r.total_size, r.prepared_transaction_offset) == (e["storeSize"], e["preparedTransactionOffset"])
        # the harness prints a null (empty) body as length -1
        assert len(r.body) == max(e["bodyLength"], 0) and r.body == base64.b64decode(e.get("bodyBase64") or "")
        assert r.properties == e["properties"]
        assert r.msg_id == e["msgId"]
        assert java_host(r.born_host) == java_host(e["bornHost"])
        assert java_host(r.store_host) == java_host(e["storeHost"])
        assert r.magic_code == e["msgMagicCode"]
        assert r.crc_ok


def test_entries_headers_and_summary_match_the_store(expected):
    recs, meta = expected
    d = DLedgerCommitLog.open(SRC / "store")
    entries = list(d.iter_entries(Findings()))
    for en, e in zip(entries, recs, strict=True):
        assert (en.offset, en.index, en.term, en.magic, en.size, en.chain_crc, en.body_crc, en.body_length) == (
            e["dledgerPos"], e["dledgerIndex"], e["dledgerTerm"], e["dledgerMagic"], e["dledgerSize"],
            e["dledgerChainCrc"], e["dledgerBodyCrc"], e["dledgerBodyLength"])
    summary, fs = audit(SRC / "store")
    assert fs == []
    assert (summary["begin_index"], summary["end_index"], summary["end_term"], summary["committed_index"]) == (
        meta["dledgerLedgerBeginIndex"], meta["dledgerLedgerEndIndex"], meta["dledgerLedgerEndTerm"],
        meta["dledgerCommittedIndex"])
    assert summary["committed_pos"] == meta["commitLogMaxOffset"] == 30025
    assert summary["divided_commitlog_offset"] == meta["commitLogMinOffset"] == 0
    assert (summary["curr_term"], summary["vote_leader"], summary["home"]) == (0, "n0", "dledger-n0")


def test_every_consume_queue_unit_points_at_a_record(expected):
    _, meta = expected
    by_offset = {r.physical_offset: r for r in DLedgerCommitLog.open(SRC / "store").iter_records(Findings())}
    n = 0
    for q in meta["consumeQueues"]:
        for u in q["units"]:
            r = by_offset[u["physicalOffset"]]
            assert (r.topic, r.queue_id, r.queue_offset, r.total_size) == (
                q["topic"], q["queueId"], u["queueOffset"], u["size"])
            n += 1
    assert n == 42


def test_a_normal_store_has_no_dledger_commitlog():
    need_oracle()
    assert find_dledger_dirs(ORACLE / "basic-5.3.1/store") == []
    assert DLedgerCommitLog.open(ORACLE / "basic-5.3.1/store") is None


# ----------------------------------------------------------------------------- damaged copies
def test_truncated_last_entry(damaged):
    root, _ = damaged
    with open(root / DATA1, "r+b") as fh:
        fh.truncate(29244 - 16384 + 20)  # entry 41 keeps 20 of its 781 bytes
    summary, fs = audit(root)
    assert summary["end_index"] == 40
    torn = [f for f in fs if f.check == "dledger.integrity"]
    assert [(f.file, f.offset, f.severity) for f in torn] == [(DATA1, 29244 - 16384, "error")]
    assert "torn entry" in torn[0].message
    assert any(f.check == "dledger.index" and "1 index unit(s) past the last entry 40" in f.message for f in fs)
    assert any(f.check == "dledger.checkpoint" and f.severity == "error" and "committedIndex 41" in f.message
               for f in fs)


def test_bad_magic_stops_the_file_and_flags_what_follows(damaged):
    root, patch = damaged
    patch(DATA0, 3202, struct.pack(">i", 7))  # entry 5
    summary, fs = audit(root)
    errors = [f for f in fs if f.severity == "error" and f.check == "dledger.integrity"]
    assert (errors[0].file, errors[0].offset) == (DATA0, 3202)
    assert errors[0].message.startswith("unknown entry magic 7; the broker's recovery stops here")
    errors = [(f.file, f.offset) for f in errors]
    assert (DATA1, 0) in errors  # the next file lies after the end of the data
    assert any("entry index 27 does not follow 4" in f.message for f in fs)
    assert summary["entries"] == 5 + 15


def test_index_gap_in_the_data(damaged):
    root, patch = damaged
    patch(DATA0, 6369 + 8, struct.pack(">q", 11))  # entry 10 claims index 11
    _, fs = audit(root)
    gap = [f for f in fs if "does not follow" in f.message]
    assert (gap[0].file, gap[0].offset) == (DATA0, 6369)
    assert "entry index 11 does not follow 9" in gap[0].message
    mismatch = [f for f in fs if f.check == "dledger.index"]
    assert mismatch and all(f.severity == "error" for f in mismatch)


def test_index_file_disagreeing_with_the_data(damaged):
    root, patch = damaged
    patch("dledger-n0/index/00000000000000000000", 3 * 32 + 4, struct.pack(">q", 12345))
    _, fs = audit(root)
    assert [(f.file, f.offset, f.check) for f in fs] == [("dledger-n0/index/00000000000000000000", 96,
                                                          "dledger.index")]
    assert "(1, 12345, 481, 3, 0)" in fs[0].message


def test_torn_tail_after_the_last_entry(damaged):
    root, patch = damaged
    patch(DATA1, 30025 - 16384 + 12, b"\x13\x37")  # past an all-zero magic and size
    _, fs = audit(root)
    assert [(f.file, f.offset, f.severity) for f in fs] == [(DATA1, 30025 - 16384, "error")]
    assert "torn tail: 14 bytes" in fs[0].message


def test_garbage_with_a_size_after_the_last_entry(damaged):
    root, patch = damaged
    patch(DATA1, 30025 - 16384 + 4, struct.pack(">i", 300))
    _, fs = audit(root)
    assert [(f.file, f.offset, f.severity) for f in fs] == [(DATA1, 30025 - 16384, "error")]
    assert "unknown entry magic 0" in fs[0].message


def test_filler_and_body_damage(damaged):
    root, patch = damaged
    patch(DATA0, 15021 + 4, struct.pack(">i", 99))  # filler size
    patch(DATA0, 48 + 8, struct.pack(">i", 1))  # entry 0's body CRC
    patch(DATA0, 749 + 48 + 28, struct.pack(">q", 5))  # entry 1's PHYSICALOFFSET field
    _, fs = audit(root)
    got = sorted((f.offset, f.severity, f.message.split(":")[0]) for f in fs)
    assert got == [(48, "error", "entry 0"), (797, "error", "entry 1"), (15021, "warning",
                                                                           "end-of-file filler declares 99 bytes, "
                                                                           "1363 remain in the file")]


def test_checkpoint_behind_the_data(damaged):
    root, _ = damaged
    (root / "dledger-n0/checkpoint").write_text(build_checkpoint(40, 39))
    summary, fs = audit(root)
    assert [(f.check, f.severity) for f in fs] == [("dledger.checkpoint", "warning"), ("dledger.checkpoint", "info")]
    assert "entries 40..41 are past committedIndex 39" in fs[0].message
    assert summary["committed_pos"] == 28522  # entry 39 ends where entry 40 starts


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flips=st.lists(st.tuples(st.integers(0, 2 * 16384 - 1), st.integers(0, 255)), min_size=1, max_size=8))
def test_random_damage_gives_findings_never_a_traceback(damaged, flips):
    root, patch = damaged
    originals = []
    for at, value in flips:
        rel = DATA0 if at < 16384 else DATA1
        originals.append((rel, at % 16384, (root / rel).read_bytes()[at % 16384]))
        patch(rel, at % 16384, bytes([value]))
    try:
        summary, fs = audit(root)
        list(DLedgerCommitLog.open(root).iter_records(Findings()))
        assert summary["entries"] <= 42
    finally:
        for rel, at, b in reversed(originals):
            patch(rel, at, bytes([b]))


# ----------------------------------------------------------------------------- converted store
def test_a_store_converted_from_normal_mode_reads_as_one_commitlog(tmp_path):
    root, old, divided, pos, data = make_converted_store(tmp_path)
    d = DLedgerCommitLog.open(root)
    assert d.divided_offset == divided
    fs = Findings()
    recs = list(d.iter_records(fs))
    assert fs == []
    assert [r.physical_offset for r in recs[: len(old)]] == [r["physicalOffset"] for r in old]
    assert all("dledger" not in r.extra for r in recs[: len(old)])
    new = recs[len(old) :]
    assert [r.extra["dledger"]["index"] for r in new] == [0, 1, 2]
    assert new[0].physical_offset == new[0].physical_offset_field == divided + 48
    assert [(r.topic, r.queue_offset) for r in new] == [(r["topic"], r["queueOffset"]) for r in old[:3]]
    summary, fs = audit(root)
    assert fs == [] and summary["committed_pos"] == pos
    assert decode_message(data, old[0]["physicalOffset"]).topic == new[0].topic
