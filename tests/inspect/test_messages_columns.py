"""`iter_messages` selects rows with column masks: the same records and findings as the record walk.

The reference is what `iter_messages` did before: `store.commitlog.iter_records()` filtered in Python
(`MessageQuery.matches`), stopped at the first record at or past `to_offset` or at the `limit`-th
match. Findings must be the ones that walk leaves, including when it stops early.
"""

import shutil
from pathlib import Path

import pytest

from conftest import FIXTURES, ORACLE, ORACLE_STORES, need_oracle
from mqtool.formats.broker_conf import load_broker_conf
from mqtool.formats.commitlog import MESSAGE_MAGIC_CODE_V2
from mqtool.inspect import messages
from mqtool.inspect.messages import MessageQuery, iter_messages, scan_findings
from mqtool.inspect.records import record_dict
from mqtool.store.store import Store

DEMO = FIXTURES / "demo"
STORES = sorted(ORACLE_STORES) + ["demo"]


def _open(name: str, root: Path | None = None) -> Store:
    if name == "demo":
        if not (DEMO / "commitlog").is_dir():
            pytest.fail("fixtures/demo is absent (a defect: it is committed)")
        return Store.open(root or DEMO, load_broker_conf(FIXTURES / "demo.broker.conf"))
    need_oracle()
    conf = ORACLE / name.split("/")[0] / "broker.conf"
    return Store.open(root or ORACLE / ORACLE_STORES[name][0], load_broker_conf(conf) if conf.is_file() else None)


def _reference(store: Store, q: MessageQuery, verify: bool) -> tuple[list[dict], list]:
    """The record walk, filtered in Python: (records, findings)."""
    out = []
    if q.limit is None or q.limit > 0:
        start = messages._scan_start(store, q.from_offset)
        for rec in store.commitlog.iter_records(start, verify_crc=verify):
            if q.to_offset is not None and rec.physical_offset >= q.to_offset:
                break
            if q.matches(rec):
                out.append(rec)
                if q.limit is not None and len(out) >= q.limit:
                    break
    return [record_dict(r) for r in out], scan_findings(store)


def _queries(store: Store) -> list[MessageQuery]:
    recs = list(store.commitlog.iter_records(verify_crc=False))
    assert recs
    mid = recs[len(recs) // 2]
    last = recs[-1]
    times = sorted(r.store_timestamp for r in recs)
    t1, t2 = times[len(times) // 4], times[3 * len(times) // 4]
    keyed = next((r for r in recs if r.keys), mid)
    tagged = next((r for r in recs if r.tags), mid)
    uniq = next((r for r in recs if r.uniq_key), mid)
    topics = sorted({r.topic for r in recs})
    qs = [
        MessageQuery(),
        MessageQuery(topic=mid.topic),
        MessageQuery(topic=mid.topic, queue_id=mid.queue_id),
        MessageQuery(queue_id=mid.queue_id),
        MessageQuery(queue_id=1 << 40),
        MessageQuery(topic="no-such-topic"),
        MessageQuery(topic=""),
        MessageQuery(topic=topics[-1] + "x"),
        MessageQuery(topic=topics[0][:-1]) if len(topics[0]) > 1 else MessageQuery(topic="\udcff"),
        MessageQuery(topic="\ud800"),  # cannot be stored: no record matches
        MessageQuery(from_offset=mid.physical_offset),
        MessageQuery(from_offset=mid.physical_offset + 1),
        MessageQuery(to_offset=mid.physical_offset),
        MessageQuery(to_offset=mid.physical_offset + 1, topic=mid.topic),
        MessageQuery(from_offset=recs[1].physical_offset if len(recs) > 1 else 0, to_offset=last.physical_offset),
        MessageQuery(to_offset=0),
        MessageQuery(from_offset=last.end_offset + 10**12),
        MessageQuery(to_offset=-(1 << 70), from_offset=1 << 70),
        MessageQuery(since_ms=t1),
        MessageQuery(until_ms=t2),
        MessageQuery(since_ms=t1, until_ms=t2, topic=mid.topic),
        MessageQuery(since_ms=1 << 70),
        MessageQuery(until_ms=-(1 << 70)),
        MessageQuery(key=keyed.keys[0] if keyed.keys else "k"),
        MessageQuery(key=keyed.keys[0] if keyed.keys else "k", topic=keyed.topic, queue_id=keyed.queue_id),
        MessageQuery(tag=(tagged.tags or "t").split("||")[0], topic=tagged.topic),
        MessageQuery(uniq_key=(uniq.uniq_key or "u").lower()),
        MessageQuery(limit=1),
        MessageQuery(limit=0),
        MessageQuery(limit=3, topic=mid.topic),
        MessageQuery(limit=2, queue_id=mid.queue_id, since_ms=t1),
        MessageQuery(limit=len(recs)),
    ]
    return qs


def _check(store: Store, verify: bool) -> None:
    for q in _queries(store):
        want, want_findings = _reference(store, q, verify)
        got = [record_dict(r) for r in iter_messages(store, q, verify)]
        assert got == want, q
        assert scan_findings(store) == want_findings, q


@pytest.mark.parametrize("name", STORES)
@pytest.mark.parametrize("verify", [False, True])
def test_same_records_and_findings_as_the_record_walk(name: str, verify: bool, chunk_records):
    _check(_open(name), verify)


def _damage(root: Path) -> None:
    """Bad CRCs and PHYSICALOFFSET fields on some records of the first CommitLog file."""
    f = sorted((root / "commitlog").iterdir())[0]
    store = _open("demo", root)
    recs = [r for r in store.commitlog.iter_records() if r.file.endswith(f.name)]
    data = bytearray(f.read_bytes())
    for i, r in enumerate(recs[3::5]):
        if i % 2 == 0 and r.body:
            topic_len_bytes = 2 if r.magic_code == MESSAGE_MAGIC_CODE_V2 else 1
            tail = (len(r.properties_raw.encode("utf-8", "surrogateescape")) + 2
                    + len(r.topic.encode("utf-8", "surrogateescape")) + topic_len_bytes)
            data[r.position + r.total_size - tail - 1] ^= 0xFF  # the body's last byte: CRC mismatch
        if i % 3 != 1:
            data[r.position + 28 + 7] ^= 0x01  # PHYSICALOFFSET field off by one
    f.write_bytes(bytes(data))


@pytest.fixture
def damaged(tmp_path: Path) -> Store:
    """A copy of the demo with `_damage` done to it."""
    if not (DEMO / "commitlog").is_dir():
        pytest.fail("fixtures/demo is absent (a defect: it is committed)")
    root = tmp_path / "demo"
    shutil.copytree(DEMO, root)
    _damage(root)
    return _open("demo", root)


@pytest.mark.parametrize("verify", [False, True])
def test_findings_of_early_stops_on_a_damaged_store(verify: bool, chunk_records, damaged: Store):
    store = damaged
    list(store.commitlog.iter_records(verify_crc=True))
    assert any("CRC" in x.message for x in store.commitlog.findings)
    assert any("PHYSICALOFFSET" in x.message for x in store.commitlog.findings)
    _check(store, verify)
    recs = list(store.commitlog.iter_records(verify_crc=verify))
    for r in recs[:40]:  # stops right at, before and after each damaged record
        for q in (MessageQuery(to_offset=r.physical_offset), MessageQuery(to_offset=r.physical_offset + 1),
                  MessageQuery(from_offset=r.physical_offset, limit=1),
                  MessageQuery(topic=r.topic, queue_id=r.queue_id, limit=2)):
            want, want_findings = _reference(store, q, verify)
            got = [record_dict(x) for x in iter_messages(store, q, verify)]
            assert got == want and scan_findings(store) == want_findings, q


def test_a_reader_that_stops_early_leaves_the_walk_findings(chunk_records, damaged: Store):
    store = damaged
    for k in (1, 4, 9, 23):
        it = iter_messages(store, MessageQuery(), verify=True)
        got = [next(it) for _ in range(k)]
        it.close()
        want, want_findings = _reference(store, MessageQuery(limit=k), True)
        assert [record_dict(x) for x in got] == want
        assert scan_findings(store) == want_findings
