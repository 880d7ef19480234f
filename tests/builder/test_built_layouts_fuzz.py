"""Damaged copies of stores the new builders write (DLedger, BatchCQ, compaction): random bit flips and
truncations at random offsets go through the library behind `mqtool inspect STORE overview/messages/queue
--json`. Never a traceback; damage shows up as findings with a file, an offset and a reason."""

import json
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqtool.builder.batchcq import BatchTopics
from mqtool.builder.broker import put_message
from mqtool.builder.compaction import CompactionLogWriter
from mqtool.builder.dledger import DLedgerStoreWriter
from mqtool.builder.writer import StoreWriter
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.sysflag import INNER_BATCH
from mqtool.inspect.messages import MessageQuery, find_messages, scan_findings
from mqtool.inspect.overview import overview
from mqtool.inspect.queue import iter_queue
from mqtool.inspect.records import record_dict
from mqtool.store.store import Store

T = 1_700_000_000_000
CFG = BrokerConfig().with_overrides({"mappedFileSizeCommitLog": 4096, "mappedFileSizeConsumeQueue": 200,
                                     "maxHashSlotNum": 16, "maxIndexNum": 64})


def _dledger(root):
    with DLedgerStoreWriter(root, CFG, index_file_size=512) as w:
        for i in range(30):
            w.put(w.store.make_record("TopicD", i % 2, b"d" * (40 + i * 7), [("KEYS", f"k{i}"), ("TAGS", "t")],
                                      store_timestamp=T + i))
        w.dledger.write_checkpoint()
        w.dledger.write_currterm(0, "n0")
    return "TopicD", 0


def _batchcq(root):
    with StoreWriter(root, CFG) as w:
        bt = BatchTopics(w, ["TopicB"], file_size=10 * 46)
        for i in range(30):
            bt.put("TopicB", i % 2, b"b" * (30 + i), {"INNER_NUM": str(1 + i % 5), "TAGS": "x"},
                   sys_flag=INNER_BATCH if i % 3 else 0, store_timestamp=T + i)
        bt.close()
    return "TopicB", 1


def _compaction(root):
    with StoreWriter(root, CFG) as w:
        recs = [put_message(w, "TopicC", 0, b"c" * (20 + i), [("KEYS", f"k{i % 4}")], store_timestamp=T + i)
                for i in range(20)]
    with CompactionLogWriter(root, "TopicC", 0, log_file_size=1400, cq_file_size=276) as c:
        for r in recs:
            c.append(r)
    return "TopicC", 0


BUILDERS = {"dledger": _dledger, "batchcq": _batchcq, "compaction": _compaction}


@pytest.fixture(scope="module", params=sorted(BUILDERS))
def built(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param) / "store"
    topic, qid = BUILDERS[request.param](root)
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    return root, files, topic, qid


def views(root, topic: str, qid: int) -> list[dict]:
    """What overview / messages / queue --json would print, and every finding they report."""
    store = Store.open(root)
    doc = overview(store, T + 10**6)
    json.dumps(doc)
    _source, recs = find_messages(store, MessageQuery())
    rows = [record_dict(r) for r in recs]
    rows += list(iter_queue(store, topic, qid))
    json.dumps(rows)
    return [f.as_dict() for f in scan_findings(store)] + list(doc.get("findings", []))


def test_the_undamaged_stores_read_without_errors(built):
    root, _files, topic, qid = built
    assert [f for f in views(root, topic, qid) if f["severity"] == "error"] == []


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_damage_gives_findings_never_a_traceback(built, tmp_path_factory, data):
    root, files, topic, qid = built
    copy = tmp_path_factory.mktemp("damaged") / "store"
    shutil.copytree(root, copy)
    rel = data.draw(st.sampled_from(files), label="file")
    raw = bytearray((copy / rel).read_bytes())
    if raw and data.draw(st.booleans(), label="truncate"):
        raw = raw[: data.draw(st.integers(0, len(raw) - 1), label="cut")]
    else:
        for _ in range(data.draw(st.integers(1, 6), label="flips")):
            if raw:
                at = data.draw(st.integers(0, len(raw) - 1), label="at")
                raw[at] ^= 1 << data.draw(st.integers(0, 7), label="bit")
    (copy / rel).write_bytes(bytes(raw))
    for f in views(copy, topic, qid):
        assert f["file"] and f["message"]
        assert f.get("offset") is None or isinstance(f["offset"], int)
    shutil.rmtree(copy)


FIRST = {"dledger": "dledger-n0/data/00000000000000000000",
         "batchcq": "batchconsumequeue/TopicB/1/00000000000000000000",
         "compaction": "compaction/compactionLog/TopicC/0/00000000000000000000"}


@pytest.mark.parametrize("kind", sorted(FIRST))
def test_a_flipped_byte_in_the_first_unit_is_a_finding_at_that_file(kind, tmp_path):
    root = tmp_path / "store"
    topic, qid = BUILDERS[kind](root)
    path = root / FIRST[kind]
    raw = bytearray(path.read_bytes())
    raw[3] ^= 0x40  # entry magic / unit offset / record TOTALSIZE
    path.write_bytes(bytes(raw))
    hits = [f for f in views(root, topic, qid) if f["file"] == FIRST[kind] and f["severity"] == "error"]
    assert hits and all(isinstance(f["offset"], int) for f in hits), views(root, topic, qid)
