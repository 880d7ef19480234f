"""A retry or DLQ record leads back to its origin through ORIGIN_MESSAGE_ID, also without a UNIQ_KEY.

The broker writes ORIGIN_MESSAGE_ID = the offsetMsgId of the record the consumer got
(`consumerSendMsgBack`), whose last 16 hex digits are that record's physical offset (§2.4). A
message without UNIQ_KEY (an old client, or one that never set it) has no other link between its
records: the join must read the record at that offset.
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from trace_stores import CONFIG, T0  # noqa: E402

from mqtool.builder import broker as b  # noqa: E402
from mqtool.builder.writer import StoreWriter  # noqa: E402
from mqtool.store.store import Store  # noqa: E402
from mqtool.trace import TraceQuery, trace  # noqa: E402
from mqtool.trace.find import ScanFinder, UnionFinder  # noqa: E402


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("origin") / "store"
    with StoreWriter(root, CONFIG) as w:
        b.put_message(w, "TopicA", 0, b"before", [("KEYS", "other"), ("TAGS", "t")], store_timestamp=T0)
        orig = b.put_message(w, "TopicC", 1, b"no-uniq", [("KEYS", "nouniq"), ("TAGS", "t")],
                             store_timestamp=T0 + 1)
        sched = b.send_back(w, orig, "GID_X", store_timestamp=T0 + 1_000)
        retry = b.deliver_delayed(w, sched, store_timestamp=T0 + 11_000)
        dlq = b.send_back(w, retry, "GID_X", store_timestamp=T0 + 12_000, delay_level=-1)
        w.write_checkpoint(physic_msg_timestamp=T0 + 20_000)
    return Store.open(root, CONFIG), orig, sched, retry, dlq


def test_the_records_carry_no_uniq_key_only_the_origin(built):
    _st, orig, sched, retry, dlq = built
    assert orig.uniq_key is None and dlq.uniq_key is None
    assert {r.properties["ORIGIN_MESSAGE_ID"] for r in (sched, retry, dlq)} == {orig.msg_id}
    assert int(orig.msg_id[-16:], 16) == orig.physical_offset


@pytest.mark.parametrize("which", ["dlq", "retry", "sched"])
def test_from_a_copy_back_to_the_origin(built, which):
    st, orig, sched, retry, dlq = built
    start = {"dlq": dlq, "retry": retry, "sched": sched}[which]
    (t,) = trace(st, TraceQuery(offset=start.physical_offset))
    assert [(r.record.physical_offset, r.role) for r in t.records] == [
        (orig.physical_offset, "stored"), (sched.physical_offset, "retry_delay"),
        (retry.physical_offset, "retry"), (dlq.physical_offset, "dlq")]
    assert [s.stage for s in t.stages] == ["born", "stored", "retry_scheduled", "retry", "dead_lettered"]
    assert t.verdict.state == "dead_lettered"


def test_by_the_origin_message_id_and_through_a_union_finder(built):
    st, orig, _sched, _retry, dlq = built
    (t,) = trace(st, TraceQuery(msg_id=dlq.properties["ORIGIN_MESSAGE_ID"]))
    assert len(t.records) == 4
    (t,) = trace(st, TraceQuery(offset=dlq.physical_offset), finder=UnionFinder(ScanFinder(st)))
    assert t.records[0].record.physical_offset == orig.physical_offset


def test_an_origin_id_naming_another_record_is_not_followed(tmp_path):
    # ORIGIN_MESSAGE_ID whose offset holds a record with another msgId (another store host): no join
    with StoreWriter(tmp_path / "s", CONFIG) as w:
        b.put_message(w, "TopicA", 0, b"x", [("KEYS", "a")], store_timestamp=T0, store_host="10.9.9.9:10911")
        fake = "0A00000100002A9F0000000000000000"  # 10.0.0.1:10911, offset 0
        rec = b.put_message(w, "%DLQ%G", 0, b"y", [("KEYS", "b"), ("ORIGIN_MESSAGE_ID", fake)],
                            store_timestamp=T0 + 1)
        w.write_checkpoint(physic_msg_timestamp=T0 + 2)
    (t,) = trace(Store.open(tmp_path / "s", CONFIG), TraceQuery(offset=rec.physical_offset))
    assert [r.record.physical_offset for r in t.records] == [rec.physical_offset]
