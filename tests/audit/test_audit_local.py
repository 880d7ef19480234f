"""The audits on real RocketMQ stores and on copies broken on purpose (local runner)."""

import json
import os
import struct
import subprocess
import sys

import pytest
from audit import audit_stores
from audit.audit_stores import BASIC, PAIR_B, body_position, patch

from conftest import ORACLE, ORACLE_STORES, PROJECT, need_oracle
from mqtool.audit import commitlog
from mqtool.audit.commitlog import scan_slice
from mqtool.audit.plan import CommitLogSlice, plan_audit
from mqtool.audit.runner import run_local
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.store import extension

pytestmark = pytest.mark.oracle
basic_copy, pair_b_copy, synthetic_store = (
    audit_stores.basic_copy,
    audit_stores.pair_b_copy,
    audit_stores.synthetic_store,
)


def _want_hash(b: bytes) -> int:
    """FNV-1a 64 then splitmix64's finaliser, shifted to 63 bits, computed here in plain Python."""
    m = (1 << 64) - 1
    h = 0xCBF29CE484222325
    for x in b:
        h = ((h ^ x) * 0x100000001B3) & m
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & m
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & m
    return (h ^ (h >> 31)) >> 1


def test_string_kernels():
    """The extension's string hash and the dictionary check."""
    import numpy as np

    assert extension.kernel("string_hashes") is not None, (
        "mqtool._native is not built: python3 setup.py build_ext --inplace"
    )
    a = np.frombuffer(b"UNIQ_KEYabcab\xff", np.uint8)
    pos, lens = np.array([0, 8, 11, 8, 0]), np.array([8, 3, 2, 2, 0])
    assert commitlog.hash_strings(a, pos, lens).tolist() == [
        _want_hash(b"UNIQ_KEY"),
        _want_hash(b"abc"),
        _want_hash(b"ab"),
        _want_hash(b"ab"),
        _want_hash(b""),
    ]
    codes, raws = commitlog._dictionary(a, pos, lens)
    assert len(raws) == 4 and [raws[c] for c in codes.tolist()] == [b"UNIQ_KEY", b"abc", b"ab", b"ab", b""]
    same = commitlog.same_strings
    assert same(a, np.array([8, 11]), np.array([2, 2]), np.array([11, 8]), np.array([2, 2]))
    assert not same(a, np.array([8, 12]), np.array([2, 2]), np.array([11, 8]), np.array([2, 2]))
    assert not same(a, np.array([8]), np.array([2]), np.array([8]), np.array([3]))
    assert same(a, np.array([13, 0]), np.array([1, 0]), np.array([13, 5]), np.array([1, 0]))
    for bad in ((np.array([13]), np.array([2])), (np.array([-1]), np.array([1])), (np.array([0]), np.array([-1]))):
        with pytest.raises(IndexError):  # a span outside the buffer is refused, not read
            commitlog.hash_strings(a, *bad)
        with pytest.raises(IndexError):
            same(a, *bad, np.array([0]), np.array([1]))


def test_string_kernels_equal_their_references():
    """On random bytes (every byte value, empty and long strings, overlapping spans) the extension's
    kernels answer what their plain-Python references answer."""
    import numpy as np

    rng = np.random.default_rng(31)
    a = rng.integers(0, 256, 20_000, np.uint8)
    a[5000:5100] = a[7000:7100]  # equal strings at two places
    pos = rng.integers(0, 19_000, 3000)
    lens = rng.integers(0, 1000, 3000)
    pos[:3], lens[:3] = [5000, 7000, 19_999], [100, 100, 1]
    got = commitlog.hash_strings(a, pos, lens)
    want = np.empty(len(pos), np.int64)
    commitlog._hash_reference(a, pos, lens, want)
    assert got.tolist() == want.tolist() and got[0] == got[1] and (got >= 0).all()
    assert len(set(got.tolist())) == len({a[p : p + n].tobytes() for p, n in zip(pos, lens, strict=True)})
    rep_pos, rep_lens = pos.copy(), lens.copy()
    rep_pos[0] = 7000
    for i in (None, 5, 2999):
        if i is not None:
            rep_pos[i] = (rep_pos[i] + 1) % 19_000
        args = (a, pos, lens, rep_pos, rep_lens)
        assert commitlog.same_strings(*args) == commitlog._same_reference(*args) == (i is None or lens[i] == 0)


def test_audit_without_the_extension_gives_the_same_report(tmp_path):
    """Where `mqtool._native` cannot be imported (built without a compiler), the references run: the
    same report on the basic store."""
    need_oracle()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PROJECT), os.environ.get("PYTHONPATH", "")])}
    code = (
        "import json, sys; {block}from mqtool.store import extension; from mqtool.audit.runner import run_local; "
        "assert (extension.kernel('string_hashes') is None) == {block_it}; "
        "print(json.dumps(run_local(sys.argv[1]), sort_keys=True, default=str))"
    )
    out = []
    for block in (True, False):
        prog = code.format(block="sys.modules['mqtool._native'] = None; " if block else "", block_it=block)
        p = subprocess.run(
            [sys.executable, "-c", prog, str(BASIC)], capture_output=True, text=True, env=env, cwd=tmp_path
        )
        assert p.returncode == 0, p.stderr[-2000:]
        out.append(json.loads(p.stdout))
    assert out[0] == out[1] and out[0]["summary"]["duplicate_uniq_keys"] == 2


def errors(report, check=None):
    return [f for f in report["findings"] if f["severity"] == "error" and check in (None, f["check"])]


@pytest.mark.parametrize("name", sorted(ORACLE_STORES))
def test_clean_oracle_stores_have_no_errors(name):
    need_oracle()
    report = run_local(ORACLE / ORACLE_STORES[name][0])
    assert errors(report) == []


def test_basic_store_summary_matches_rocketmq():
    """Counts from RocketMQ's own decoding (commitlog.jsonl) and summary.txt."""
    need_oracle()
    rep = run_local(BASIC)
    s = rep["summary"]
    assert s["commitlog"]["records"] == 115
    assert s["commitlog"]["max_offset"] == 65536 + 31099
    jsonl = [json.loads(line) for line in open(ORACLE / "basic-5.3.1/commitlog.jsonl")]
    per_queue: dict[tuple[str, int], int] = {}
    for r in jsonl:
        if not r.get("blank"):
            per_queue[(r["topic"], r["queueId"])] = per_queue.get((r["topic"], r["queueId"]), 0) + 1
    got = {(t, int(q)): v["records"] for t, d in s["topics"].items() for q, v in d["queues"].items()}
    assert got == per_queue
    assert s["consumequeues"] == {"queues": 11, "units": 115, "bad_units": 0}
    # the batch of 3 carries the batch's UNIQ_KEY last, so RocketMQ reads the same msgId three times
    assert s["duplicate_uniq_keys"] == 2
    assert [f["offset"] for f in rep["findings"] if f["check"] == "stats"] == [2540, 2849]
    # the schedule service never ran: level 1 (1 s) is overdue at the last store time
    sched = [f for f in rep["findings"] if f["check"] == "schedule"]
    assert [(f["severity"], f["queue_id"]) for f in sched] == [("warning", 0)]
    assert s["timer"]["wheel_slots"] == 5 and s["timer"]["broken_slots"] == 0
    assert s["timer"]["timerlog_units"] == 6 and s["timer"]["timer_queue_max"] == 6
    assert s["transactions"]["half_messages"] == 2


def test_header_walk_equals_rocketmq_decoding():
    """The audit's fast-path walk reads the same topic/queue/offset fields as RocketMQ's MessageDecoder."""
    need_oracle()
    plan = plan_audit(BASIC)
    kept = [k for t in plan.tasks if isinstance(t, CommitLogSlice) for k in scan_slice(t).kept]
    jsonl = {
        r["physicalOffset"]: r
        for r in map(json.loads, open(ORACLE / "basic-5.3.1/commitlog.jsonl"))
        if not r.get("blank")
    }
    assert len(kept) == 12
    for k in kept:
        j = jsonl[k["offset"]]
        assert (k["topic"], k["queue_id"], k["queue_offset"], k["size"], k["store_ts"], k["born_ts"]) == (
            j["topic"],
            j["queueId"],
            j["queueOffset"],
            j["totalSize"],
            j["storeTimestamp"],
            j["bornTimestamp"],
        )


def test_flipped_body_byte_is_a_crc_finding_at_that_record(basic_copy):
    pos = body_position(basic_copy, 251)  # record 2 (TopicA/1) at physical offset 251
    f = basic_copy / "commitlog" / "00000000000000000000"
    b = f.read_bytes()[pos]
    patch(f, pos, bytes([b ^ 0xFF]))
    rep = run_local(basic_copy)
    errs = errors(rep)
    assert [(e["check"], e["offset"], e["topic"], e["queue_id"]) for e in errs] == [
        ("commitlog.integrity", 251, "TopicA", 1)
    ]
    assert errs[0]["message"].startswith("body CRC mismatch: stored 524119650")
    assert rep["summary"]["commitlog"]["first_crc_mismatch"] == 251


def test_truncated_last_file_is_a_torn_tail(basic_copy):
    f = basic_copy / "commitlog" / "00000000000000065536"
    last = 65536 + 31099 - 930  # the last record (filler#, 930 bytes) starts here... found below
    buf = f.read_bytes()
    # find the start of the last record by walking TOTALSIZEs
    pos = 0
    while struct.unpack_from(">i", buf, pos)[0] > 0:
        start = pos
        pos += struct.unpack_from(">i", buf, pos)[0]
    last = 65536 + start
    os.truncate(f, start + 100)
    rep = run_local(basic_copy)
    short, *torn = [e for e in errors(rep, "commitlog.integrity") if e["offset"] is not None]
    assert (short["file"], short["offset"], short["message"]) == (
        "commitlog/00000000000000065536",
        start + 100,
        f"last file is {start + 100} bytes, shorter than the queue's "
        "65536: MappedFileQueue.load refuses it, the broker does not start",
    )
    assert [e["offset"] for e in torn] == [last]
    assert torn[0]["message"].startswith("torn tail: TOTALSIZE")
    assert rep["summary"]["commitlog"]["recovery_end"] == last
    assert rep["summary"]["commitlog"]["max_offset"] == last
    # the unit of that record now points past the end of the CommitLog
    cq = errors(rep, "consumequeue.consistency")
    assert any(f"offset {last}" in e["message"] for e in cq)


def test_missing_middle_file_is_a_gap(synthetic_store):
    files = sorted((synthetic_store / "commitlog").iterdir())
    assert len(files) >= 4
    files[1].unlink()
    rep = run_local(synthetic_store)
    gaps = [e for e in errors(rep, "commitlog.integrity") if "gap" in e["message"]]
    assert len(gaps) == 1
    assert gaps[0]["file"] == f"commitlog/{files[0].name}"
    assert f"next file should start at {files[1].name}" in gaps[0]["message"]


def test_unit_pointing_to_another_queues_record(basic_copy):
    cq = basic_copy / "consumequeue" / "TopicA" / "0" / "00000000000000000000"
    patch(cq, 20, struct.pack(">q", 251))  # unit 1 of TopicA/0 -> the record of TopicA/1 at 251
    rep = run_local(basic_copy)
    errs = errors(rep)
    assert [(e["check"], e["file"], e["offset"], e["topic"], e["queue_id"]) for e in errs] == [
        ("consumequeue.consistency", "consumequeue/TopicA/0/00000000000000000000", 20, "TopicA", 0)
    ]
    assert "queue id 1" in errs[0]["message"] and "queue offset 0 (unit is 1)" in errs[0]["message"]


def test_delay_offset_beyond_queue_max(pair_b_copy):
    (pair_b_copy / "config" / "delayOffset.json").write_text('{"offsetTable":{1:99,2:1,3:2,5:1,6:1,18:0}}')
    (pair_b_copy / "config" / "delayOffset.json.bak").unlink()
    rep = run_local(pair_b_copy)
    errs = errors(rep)
    assert [(e["check"], e["file"], e["queue_id"]) for e in errs] == [("schedule", "config/delayOffset.json", 0)]
    assert "level 1: stored offset 99 is outside the queue's [0, 2]" in errs[0]["message"]
    assert "sets it to 2" in errs[0]["message"]
    assert rep["summary"]["schedule"]["1"]["stored_offset"] == 99


def test_pending_timerlog_unit_pointing_outside_commitlog(basic_copy):
    tl = basic_copy / "timerlog" / "00000000000000000000"
    patch(tl, 52 + 28, struct.pack(">q", 10**9))  # unit 1 (+1 h, pending): offsetPy far beyond
    rep = run_local(basic_copy)
    errs = errors(rep, "timer")
    assert [(e["file"], e["offset"]) for e in errs] == [("timerlog/00000000000000000000", 52)]
    assert "pending" in errs[0]["message"] and "1000000000" in errs[0]["message"]


def test_wheel_slot_count_against_chain(basic_copy):
    import gzip

    data = bytearray(gzip.decompress((basic_copy / "timerwheel.gz").read_bytes()))
    (basic_copy / "timerwheel.gz").unlink()
    slot = (1795362433000 + 3600000) // 1000 % (604800 * 2)  # the +1 h timer's slot
    struct.pack_into(">i", data, slot * 32 + 24, 7)
    (basic_copy / "timerwheel").write_bytes(bytes(data))
    rep = run_local(basic_copy)
    assert errors(rep, "timer") == []  # num only feeds the timer metrics: info (issue #27)
    found = [f for f in rep["findings"] if f["check"] == "timer"]
    assert [(f["file"], f["offset"], f["severity"]) for f in found] == [("timerwheel", slot * 32, "info")]
    assert "num 7 but its chain counts 1" in found[0]["message"]


def test_split_file_gives_the_same_report(basic_copy):
    """Cutting CommitLog files at ConsumeQueue record starts changes nothing but the partition count."""
    pos = body_position(basic_copy, 251)
    patch(basic_copy / "commitlog" / "00000000000000000000", pos, b"\x00")
    whole = run_local(basic_copy)
    split = run_local(basic_copy, split_bytes=8192)
    assert split["engine"]["partitions"] > whole["engine"]["partitions"]
    assert split["findings"] == whole["findings"] and split["summary"] == whole["summary"]


def test_bad_magic_mid_file_with_split_reports_records_after_it(basic_copy):
    patch(basic_copy / "commitlog" / "00000000000000000000", 1016 + 4, b"\x00\x00\x00\x01")
    rep = run_local(basic_copy, split_bytes=16384)
    bad = [e for e in errors(rep, "commitlog.integrity") if e["offset"] == 1016]
    assert len(bad) == 1 and "bad magic code 0x00000001" in bad[0]["message"]
    assert "valid records follow" in bad[0]["message"]
    assert rep["summary"]["commitlog"]["recovery_end"] == 1016


def test_broker_conf_settings_reach_the_checks(pair_b_copy, tmp_path):
    """`--config` values (a BrokerConfig from load_broker_conf) change what the checks report."""
    from mqtool.formats.broker_conf import load_broker_conf

    conf = tmp_path / "broker.conf"
    conf.write_text("messageDelayLevel=1s 5s\ntransactionCheckMax=2\n")
    cfg = load_broker_conf(conf)
    assert cfg.delay_levels_ms() == [1000, 5000] and cfg.transaction_check_max == 2
    default = run_local(pair_b_copy)
    rep = run_local(pair_b_copy, cfg)
    sched = [f for f in rep["findings"] if f["check"] == "schedule" and "not configured" in f["message"]]
    assert {f["queue_id"] for f in sched} == {2, 4, 5, 17}  # levels 3, 5, 6 and 18 are beyond the two
    assert not [f for f in default["findings"] if "not configured" in f["message"]]
    plan = plan_audit(pair_b_copy, BrokerConfig(message_delay_level="1s 2m 1h 1d"))
    assert [t.delays_ms for t in plan.tasks if getattr(t, "delays_ms", None)][0] == (1000, 120000, 3600000, 86400000)


def test_commit_record_naming_no_half_message(pair_b_copy):
    """The COMMIT record of OracleTxTopic (at 2667) names its half at 237; point it elsewhere."""
    f = pair_b_copy / "commitlog" / "00000000000000000000"
    buf = f.read_bytes()
    assert struct.unpack_from(">i", buf, 2667 + 36)[0] & 0xC == 0x8
    prepared_at = 2667 + 48 + 8 + 8 + 8 + 4  # after the IPv4 hosts and RECONSUMETIMES
    assert struct.unpack_from(">q", buf, prepared_at)[0] == 237
    assert run_local(pair_b_copy)["summary"]["transactions"]["commits"] == {"records": 1, "without_half": 0}
    patch(f, prepared_at, struct.pack(">q", 0))  # offset 0: a record of OracleTopicA
    rep = run_local(pair_b_copy)
    errs = errors(rep, "transactions")
    assert [(e["offset"], e["topic"], e["queue_id"], e["message"]) for e in errs] == [
        (
            2667,
            "OracleTxTopic",
            0,
            "COMMIT record's PREPARED TRANSACTION OFFSET 0 names no half message "
            "(the record there is of topic OracleTopicA)",
        )
    ]
    assert rep["summary"]["transactions"]["commits"] == {"records": 1, "without_half": 1}


def test_pair_b_transactions_summary():
    need_oracle()
    rep = run_local(PAIR_B)
    t = rep["summary"]["transactions"]
    assert t["discarded"] == 4 and t["op_messages"] >= 1
    assert t["progress"]["RMQ_SYS_TRANS_HALF_TOPIC"] == {"0": 14}
    assert sorted(rep["summary"]["schedule"]) == ["1", "18", "2", "3", "5", "6"]
