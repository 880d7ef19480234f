"""The column path of `overview` and `transactions` against the record path (`iter_records`).

`mqtool.inspect.columns` must give exactly what one `MessageRecord` per record gave: the same topic
names, counts per (topic, queue), bytes per topic, time range, end offset, findings and transaction
records, on every oracle store, the demo, and stores built to stress the topic grouping.
"""

from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from conftest import FIXTURES
from mqtool.builder.writer import StoreWriter
from mqtool.formats.broker_conf import BrokerConfig, load_broker_conf
from mqtool.formats.names import (
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
)
from mqtool.formats.sysflag import TRANSACTION_COMMIT, TRANSACTION_PREPARED, TRANSACTION_ROLLBACK
from mqtool.inspect import columns
from mqtool.inspect.columns import CommitLogSummary, TopicIds, summarise
from mqtool.inspect.overview import overview
from mqtool.inspect.records import commitlog_bytes, scan
from mqtool.inspect.transactions import TransactionScan, transactions_view
from mqtool.store import extension
from mqtool.store.store import Store

NOW = 1795362444000


def record_summary(store: Store) -> tuple[CommitLogSummary, TransactionScan, list]:
    """What the record path computes (the reference)."""
    s = CommitLogSummary()
    ts = TransactionScan()
    for rec in scan(store, verify_crc=True):
        s.records += 1
        s.per_queue[(rec.topic, rec.queue_id)] += 1
        s.per_topic_bytes[rec.topic] += rec.total_size
        t = rec.store_timestamp
        s.first_store_timestamp = t if s.first_store_timestamp is None else min(s.first_store_timestamp, t)
        s.last_store_timestamp = t if s.last_store_timestamp is None else max(s.last_store_timestamp, t)
        s.end_offset = rec.end_offset
        ts.feed(rec)
    return s, ts, list(store.commitlog.findings)


def assert_same(store: Store, chunk_records: int = columns.fastscan.DEFAULT_CHUNK) -> CommitLogSummary:
    want, want_ts, want_findings = record_summary(store)
    ts = TransactionScan()
    got = summarise(store, each=ts.feed_chunk, chunk_records=chunk_records)
    assert got == want
    assert sorted(store.commitlog.findings, key=repr) == sorted(want_findings, key=repr)
    assert ts.report(store, NOW) == want_ts.report(store, NOW)
    assert [h.physical_offset for h in ts.halves] == [h.physical_offset for h in want_ts.halves]
    return got


def test_same_as_the_record_path_on_the_oracle(oracle_store, kernels):
    name, root, _ = oracle_store
    conf = root.parent / "broker.conf"
    store = Store.open(root, load_broker_conf(conf) if conf.is_file() else None)
    for chunk_records in (columns.fastscan.DEFAULT_CHUNK, 7):
        assert_same(store, chunk_records)


def test_same_as_the_record_path_on_the_demo():
    demo = FIXTURES / "demo"
    if not (demo / "commitlog").is_dir():
        pytest.fail("fixtures/demo is absent (a defect: it is committed)")
    store = Store.open(demo, load_broker_conf(FIXTURES / "demo.broker.conf"))
    got = assert_same(store, 3)
    assert got.records and got.per_queue


@pytest.fixture
def odd_store(tmp_path: Path) -> Path:
    """Topics that a padded-row grouping could confuse, across small files and chunk boundaries."""
    cfg = replace(BrokerConfig.for_version("5.3"), mapped_file_size_commitlog=4096)
    topics = [
        "A",
        "A\x00",
        "A\x00\x00",
        "",
        "AB",
        "ABCDEFGH",
        "ABCDEFGHI",
        "主题-ü",
        "T" * 127,
        "L" * 300,
        "\udcff-not-utf8",
    ]
    with StoreWriter(tmp_path / "s", cfg) as w:
        for i in range(60):
            t = topics[i % len(topics)]
            w.append_message(
                t,
                [-1, 0, 3, 2**31 - 1][i % 4],
                b"x" * (i % 5),
                {"UNIQ_KEY": f"K{i}"},
                store_timestamp=1_700_000_000_000 + (i * 7919) % 1000,
                dispatch=False,
            )
        h = w.append_message(
            RMQ_SYS_TRANS_HALF_TOPIC,
            0,
            b"h",
            {"UNIQ_KEY": "H1", "REAL_TOPIC": "A", "REAL_QID": "0", "PGROUP": "g"},
            sys_flag=TRANSACTION_PREPARED,
            store_timestamp=1_700_000_001_000,
            dispatch=False,
        )
        w.append_message(
            "A",
            0,
            b"c",
            {"UNIQ_KEY": "H1"},
            sys_flag=TRANSACTION_COMMIT,
            prepared_transaction_offset=h.physical_offset,
            dispatch=False,
        )
        w.append_message(
            "A",
            0,
            b"r",
            {"UNIQ_KEY": "H1"},
            sys_flag=TRANSACTION_ROLLBACK,
            prepared_transaction_offset=h.physical_offset + 1,
            dispatch=False,
        )
        w.append_message(RMQ_SYS_TRANS_OP_HALF_TOPIC, 0, b"0", {"TAGS": "d"}, dispatch=False)
        w.append_message(RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, 0, b"h", {"UNIQ_KEY": "H9"}, dispatch=False)
    return tmp_path / "s"


def test_topics_that_padding_could_confuse(odd_store: Path, kernels):
    store = Store.open(odd_store)
    assert len(store.commitlog.files) >= 3
    for chunk_records in (1, 5, 1000):
        got = assert_same(store, chunk_records)
    names = {t for t, _ in got.per_queue}
    assert {"A", "A\x00", "A\x00\x00", "", "L" * 300, "\udcff-not-utf8"} <= names
    assert {q for _, q in got.per_queue} == {-1, 0, 3, 2**31 - 1}


MIX, MUL, U64 = 0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, (1 << 64) - 1  # TopicIds' hash constants


def _padded_hash(topic: bytes, words: int) -> int:
    """`TopicIds`' hash of a topic in a chunk whose rows are `words` 8-byte words wide, computed here in plain
    Python: h = len * MIX, then per little-endian word h = (h ^ word) * MUL, modulo 2**64."""
    padded = topic.ljust(8 * words, b"\x00")
    h = len(topic) * MIX & U64
    for k in range(words):
        h = (h ^ int.from_bytes(padded[8 * k : 8 * k + 8], "little")) * MUL & U64
    return h


def test_a_hash_collision_falls_back_to_the_bytes(tmp_path: Path):
    """Two 16-byte topics (rows of two words) whose hashes collide: the second word of the second one is chosen
    so that the multiply-xor chain meets the first's. The grouping must still tell them apart by their bytes."""
    first = b"CollideTopicAAAA"

    def after_word0(word0: bytes) -> int:
        return ((16 * MIX & U64) ^ int.from_bytes(word0, "little")) * MUL & U64

    word1 = after_word0(first[:8]) ^ after_word0(b"CollideB") ^ int.from_bytes(first[8:], "little")
    second = b"CollideB" + word1.to_bytes(8, "little")
    assert second == b"CollideBopicAAAw" and _padded_hash(first, 2) == _padded_hash(second, 2) != 0
    with StoreWriter(tmp_path / "s") as w:
        for i in range(9):
            topic = (first, second, b"short")[i % 3].decode()
            w.append_message(
                topic, i % 2, b"x" * i, {"UNIQ_KEY": f"K{i}"}, store_timestamp=1_700_000_000_000 + i, dispatch=False
            )
    store = Store.open(tmp_path / "s")
    got = assert_same(store)
    assert got.per_queue == {
        ("CollideTopicAAAA", 0): 2,
        ("CollideTopicAAAA", 1): 1,
        ("CollideBopicAAAw", 1): 2,
        ("CollideBopicAAAw", 0): 1,
        ("short", 0): 2,
        ("short", 1): 1,
    }


@pytest.fixture(params=["extension", "plain"])
def kernels(request):
    """Topics numbered by the extension's walk (and topic bytes copied by its `gather`), or (without the
    extension) numbered by `TopicIds.of_chunk` over topic bytes gathered by numpy."""
    if request.param == "plain":
        with extension.plain_python():
            yield request.param
    else:
        yield request.param


def test_topic_ids_of_later_chunks_come_from_the_topics_seen_and_still_tell_a_collision_apart(kernels):
    """A chunk naming only topics seen before takes their ids without grouping (`TopicIds._known_ids`); a row
    whose hash equals a seen topic's but whose bytes differ (the colliding pair above) gets a topic of its own."""
    first, second = b"CollideTopicAAAA", b"CollideBopicAAAw"  # equal hashes in rows of two words
    data = first + b"short" + second + b"\x00" * 16
    a = np.frombuffer(data, np.uint8)
    t = TopicIds()

    def names(pos: list[int], lens: list[int]) -> list[str]:
        return [t.names[i] for i in t.of_chunk(a, np.array(pos), np.array(lens)).tolist()]

    assert names([0, 16, 0], [16, 5, 16]) == ["CollideTopicAAAA", "short", "CollideTopicAAAA"]
    assert names([16, 0, 0, 16], [5, 16, 16, 5]) == ["short", "CollideTopicAAAA", "CollideTopicAAAA", "short"]
    assert len(t.names) == 2
    assert names([21, 0, 16], [16, 16, 5]) == ["CollideBopicAAAw", "CollideTopicAAAA", "short"]
    assert names([21, 21], [16, 16]) == ["CollideBopicAAAw"] * 2
    assert names([0], [3]) == ["Col"] and len(t.names) == 4


def test_topic_ids_at_the_end_of_the_buffer(kernels):
    data = b"xxTopicOne" + b"Two" + b"TopicOne"  # the last topic ends at the buffer's end
    a = np.frombuffer(data, np.uint8)
    t = TopicIds()
    ids = t.of_chunk(a, np.array([2, 10, 13, 13, 2]), np.array([8, 3, 8, 0, 5]))
    assert [t.names[i] for i in ids] == ["TopicOne", "Two", "TopicOne", "", "Topic"]
    assert t.get("Two") == ids[1] and t.get("absent") == -1
    assert len(t.of_chunk(a, np.zeros(0, np.int64), np.zeros(0, np.int64))) == 0


def test_progress_is_reported_per_chunk_and_ends_at_the_total(odd_store: Path):
    store = Store.open(odd_store)
    calls = []
    overview(store, NOW, progress=lambda done, total: calls.append((done, total)))
    total = commitlog_bytes(store)
    assert len(calls) > 2 and calls[-1] == (total, total)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls) and all(t == total for _, t in calls)
    calls.clear()
    transactions_view(store, NOW, progress=lambda done, total: calls.append((done, total)))
    assert calls[-1] == (total, total)


def test_transactions_of_the_odd_store(odd_store: Path):
    doc = transactions_view(Store.open(odd_store), NOW)
    assert doc["counts"] == {"committed": 1, "rolled_back": 0, "pending": 0, "discarded": 0}
    assert doc["op_messages"]["records"] == 1 and len(doc["discarded"]) == 1
    assert Counter(f["check"] for f in doc["findings"]) == Counter()


def test_feeder_is_asked_once_the_walk_runs():
    """`summarise(feeder=...)`: the walk is on its thread before the feeder is called (what the feeder imports
    overlaps the walk), and the chunks fed to what it returns give what `each` gives."""
    demo = FIXTURES / "demo"
    store = Store.open(demo, load_broker_conf(FIXTURES / "demo.broker.conf"))
    want, want_ts, _ = record_summary(store)
    ts, walking = TransactionScan(), []

    def feeder():
        import threading

        walking.append(any(t.name == "mqtool-walk" for t in threading.enumerate()))
        return ts.feed_chunk

    store = Store.open(demo, load_broker_conf(FIXTURES / "demo.broker.conf"))
    assert summarise(store, feeder=feeder, chunk_records=1) == want  # more chunks than the walk runs ahead
    assert walking == [extension.kernel("CommitLogWalk") is not None]
    assert ts.report(store, NOW) == want_ts.report(store, NOW)
