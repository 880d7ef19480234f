"""Broker put paths against records real RocketMQ 5.3.1 / 4.9.8 wrote, and hand-computed timer rules."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

import pytest

from mqtool.builder import broker as b
from mqtool.builder.writer import StoreWriter, read_records
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.commitlog import MESSAGE_MAGIC_CODE_V2
from mqtool.formats.message import MessageRecord
from mqtool.formats.names import TIMER_TOPIC
from mqtool.formats.properties import parse_pairs
from mqtool.formats.timerlog import timerlog_unit

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
ORACLE = SHARED / "oracle"
CONFIG = BrokerConfig(mapped_file_size_commitlog=65536, mapped_file_size_consume_queue=1280,
                      mapped_file_size_timer_log=65536)
WHEEL_SHA256 = "d436f088ecf0093a8de296970fcdaa8aee90b793f28aaa408e59ddea5eefb671"
W = 1_800_000_000_000  # a write time on a whole second
HOUR, DAY = 3_600_000, 86_400_000


@cache
def oracle(store: str) -> dict[int, MessageRecord]:
    """Records of an oracle CommitLog by physical offset (skips the test when the data is absent)."""
    path = ORACLE / store / "commitlog"
    if not path.is_dir():
        pytest.skip(f"oracle store {path} not found (shared data absent)")
    return {r.physical_offset: r for r in read_records(path)}


def writer(tmp_path: Path, version: str = "5.3", name: str = "s") -> StoreWriter:
    return StoreWriter(tmp_path / f"{name}{version}", CONFIG, version)


def client(rec: MessageRecord, *drop: str) -> list[tuple[str, str]]:
    """A stored record's pairs without what the broker added: what the client's map held."""
    dropped = {"REAL_TOPIC", "REAL_QID", *drop}
    return [(k, v) for k, v in parse_pairs(rec.properties_raw) if k not in dropped]


def hosts(rec: MessageRecord) -> dict:
    return {"born_timestamp": rec.born_timestamp, "born_host": rec.born_host, "store_host": rec.store_host}


def assert_same(got: MessageRecord, want: MessageRecord) -> None:
    """Same record bytes apart from where it was placed (offsets, store time)."""
    for name in ("topic", "queue_id", "sys_flag", "flag", "body", "properties_raw", "total_size", "magic_code",
                 "born_timestamp", "born_host", "store_host", "reconsume_times", "prepared_transaction_offset"):
        assert getattr(got, name) == getattr(want, name), name


# --------------------------------------------------------------------- put-time rewrites (5.3.1 oracle)


@pytest.mark.oracle
@pytest.mark.parametrize(("offset", "level", "tags_code"), [(3158, None, 1795362434801), (4013, 20, 1795369633805)])
def test_delay_level_put_matches_oracle(tmp_path, offset, level, tags_code):
    o = oracle("basic-5.3.1/store")[offset]
    p = o.properties
    with writer(tmp_path) as w:
        rec = b.put_delay_message(w, p["REAL_TOPIC"], int(p["REAL_QID"]), o.body, client(o), level=level,
                                  store_timestamp=o.store_timestamp, **hosts(o))
    assert_same(rec, o)  # level 20: DELAY rewritten to 18, queue 17
    assert rec.extra["tags_code"] == tags_code  # the oracle ConsumeQueue unit's tagsCode


@pytest.mark.oracle
@pytest.mark.parametrize("offset", [4300, 4629, 4958, 5297, 5648, 6056])
def test_timer_put_matches_oracle(tmp_path, offset):
    o = oracle("basic-5.3.1/store")[offset]
    p = o.properties
    with writer(tmp_path) as w:
        rec = b.put_timer_message(w, p["REAL_TOPIC"], int(p["REAL_QID"]), o.body, client(o, "TIMER_OUT_MS"),
                                  store_timestamp=o.store_timestamp, enqueue=False, **hosts(o))
    assert_same(rec, o)


@pytest.mark.oracle
def test_half_put_matches_oracle(tmp_path):
    o = oracle("basic-5.3.1/store")[6386]
    p = o.properties
    with writer(tmp_path) as w:
        rec = b.put_half_message(w, p["REAL_TOPIC"], int(p["REAL_QID"]), o.body, client(o, "__transactionId__"),
                                 store_timestamp=o.store_timestamp, sys_flag=0x4, **hosts(o))
    assert_same(rec, o)


@pytest.mark.oracle
def test_timer_enqueue_rebuilds_oracle_timerlog_and_wheel(tmp_path):
    recs = oracle("basic-5.3.1/store")
    with writer(tmp_path) as w:
        for r in sorted(recs.values(), key=lambda r: r.physical_offset):
            w.append_message(r.topic, r.queue_id, r.body, r.properties_raw, sys_flag=r.sys_flag,
                             store_timestamp=r.store_timestamp, **hosts(r))
        timer = [r for r in w.records if r.topic == TIMER_TOPIC]
        positions = [b.enqueue_timer(w, r, 1795362433809) for r in timer]
    assert positions == [0, 52, 104, 156, 208, 260]
    store = ORACLE / "basic-5.3.1" / "store"
    got = (w.root / "timerlog" / "00000000000000000000").read_bytes()
    assert got == (store / "timerlog" / "00000000000000000000").read_bytes()
    assert hashlib.sha256((w.root / "timerwheel").read_bytes()).hexdigest() == WHEEL_SHA256


@pytest.mark.oracle
def test_timer_delivery_matches_oracle(tmp_path):
    recs = oracle("basic-5.3.1/store")
    with writer(tmp_path) as w:
        rec = b.deliver_timer(w, recs[4300], enqueue_ms=1795362433000, dequeue_ms=1795362439107,
                              store_timestamp=1795362439110)
    assert_same(rec, recs[96257])


# --------------------------------------------------------------------- transactions and deliveries (pairs)


@pytest.mark.oracle
@pytest.mark.parametrize(("version", "store", "half", "commit"),
                         [("5.3", "pair_default/A", 237, 2667), ("4.9", "pair-4.9/A", 236, 2080)])
def test_commit_matches_oracle(tmp_path, version, store, half, commit):
    recs = oracle(store)
    with writer(tmp_path, version) as w:
        rec = b.commit_half(w, recs[half], store_timestamp=1)
    assert_same(rec, recs[commit])  # TRAN_MSG, REAL_TOPIC, REAL_QID stay in the bytes


@pytest.mark.oracle
@pytest.mark.parametrize(("version", "store", "offsets", "op", "host"),
                         [("5.3", "pair_default/A", [0, 1], 8311, "127.0.0.1:10911"),
                          ("4.9", "pair-4.9/A", [0], 2397, "127.0.0.1:40911")])
def test_op_message_matches_oracle(tmp_path, version, store, offsets, op, host):
    want = oracle(store)[op]
    with writer(tmp_path, version) as w:
        rec = b.put_op_message(w, offsets, store_timestamp=1, born_timestamp=want.born_timestamp, broker_host=host)
    assert_same(rec, want)


@pytest.mark.oracle
@pytest.mark.parametrize(("version", "a", "b_", "sched", "delivered"),
                         [("5.3", "pair_default/A", "pair_default/B", 5502, 9116),
                          ("4.9", "pair-4.9/A", "pair-4.9/B", 6669, 7760)])
def test_delay_delivery_matches_oracle(tmp_path, version, a, b_, sched, delivered):
    with writer(tmp_path, version) as w:
        rec = b.deliver_delayed(w, oracle(a)[sched], store_timestamp=1)
    assert_same(rec, oracle(b_)[delivered])  # DELAY, REAL_TOPIC, REAL_QID stale in the bytes


@pytest.mark.oracle
def test_check_round_copies_and_discards_match_oracle(tmp_path):
    a, bb = oracle("pair_default/A"), oracle("pair_default/B")
    a4, b4 = oracle("pair-4.9/A"), oracle("pair-4.9/B")
    with writer(tmp_path) as w, writer(tmp_path, "4.9") as w4:
        assert_same(b.put_back_half(w, a[1049], store_timestamp=1, check_times=1), bb[10624])
        assert_same(b.put_back_half(w, a[2225], store_timestamp=1, check_times=1, immunity=True), bb[11878])
        assert_same(b.discard_half(w, bb[12376], store_timestamp=1), bb[14128])
        assert_same(b.put_back_half(w4, a4[896], store_timestamp=1, check_times=1), b4[9984])
        assert_same(b.discard_half(w4, b4[11010], store_timestamp=1), b4[12036])


@pytest.mark.oracle
def test_4x_delay_put_matches_oracle(tmp_path):
    o = oracle("pair-4.9/A")[2667]  # D99: capacity-16 order, DELAY=18, no trailing separator
    p = o.properties
    with writer(tmp_path, "4.9") as w:
        rec = b.put_delay_message(w, p["REAL_TOPIC"], int(p["REAL_QID"]), o.body, client(o), level=99,
                                  store_timestamp=o.store_timestamp, **hosts(o))
    assert_same(rec, o)
    assert not rec.properties_raw.endswith("\x02")


# --------------------------------------------------------------------- timer rules by hand


def _timer(w: StoreWriter, deliver_ms: int, *extra: tuple[str, str], topic: str = "T") -> MessageRecord:
    props = [("UNIQ_KEY", f"K{len(w.records)}"), ("TIMER_DELIVER_MS", str(deliver_ms)), *extra]
    return b.put_timer_message(w, topic, 1, b"t", props, store_timestamp=W + 5, write_time_ms=W + 5)


def _unit(w: StoreWriter, pos: int):
    return timerlog_unit.parse(w.timerlog.read(pos, 52))


def test_timer_rounding(tmp_path):
    with writer(tmp_path) as w:
        exact = _timer(w, W + 60_000)
        inexact = _timer(w, W + 60_999)
    assert exact.properties["TIMER_OUT_MS"] == str(W + 59_000)  # an exact multiple moves one step earlier
    assert inexact.properties["TIMER_OUT_MS"] == str(W + 60_000)


def test_roll_2d10h_parks_at_write_time_plus_one_day(tmp_path):
    with writer(tmp_path) as w:
        rec = _timer(w, W + 2 * DAY + 10 * HOUR + 1)  # 10 h past the 2-day window < window / 3 (16 h)
        unit = _unit(w, rec.extra["timerlog_pos"])
        slot = w.wheel.get_slot(W + DAY)
    assert (unit.magic, unit.curr_write_time_ms, unit.delayed_time_delta) == (3, W, DAY)
    assert (slot.first_pos, slot.last_pos, slot.num) == (0, 0, 1)


def test_roll_3d_minus_60s_parks_at_write_time_plus_two_days(tmp_path):
    with writer(tmp_path) as w:
        rec = _timer(w, W + 3 * DAY - 60_000 + 1)  # 1 d - 60 s past the window >= 16 h
        unit = _unit(w, rec.extra["timerlog_pos"])
    assert (unit.magic, unit.delayed_time_delta) == (3, 2 * DAY)


def test_no_roll_just_inside_the_window(tmp_path):
    with writer(tmp_path) as w:
        rec = _timer(w, W + 2 * DAY - 1000 + 1)
        unit = _unit(w, rec.extra["timerlog_pos"])
    assert (unit.magic, unit.delayed_time_delta) == (1, 2 * DAY - 1000)


def test_cancel_in_the_same_slot_leaves_num_zero(tmp_path):
    with writer(tmp_path) as w:
        victim = _timer(w, W + 2 * HOUR + 7)
        cancel = b.put_timer_cancel(w, victim, [("UNIQ_KEY", "C1")], store_timestamp=W + 6, write_time_ms=W + 6)
        slot = w.wheel.get_slot(W + 2 * HOUR)
        unit = _unit(w, cancel.extra["timerlog_pos"])
    assert cancel.properties["TIMER_DEL_UNIQKEY"] == victim.properties["UNIQ_KEY"]
    assert (unit.magic, unit.prev_pos, unit.delayed_time_delta) == (5, 0, 2 * HOUR)
    assert (slot.first_pos, slot.last_pos, slot.num) == (0, 52, 0)


def test_cancel_without_timer_property_targets_the_same_slot(tmp_path):
    with writer(tmp_path) as w:
        victim = b.put_timer_message(w, "T", 0, b"v", [("UNIQ_KEY", "V"), ("TIMER_DELAY_SEC", "60")],
                                     store_timestamp=W, write_time_ms=W)
        cancel = b.put_timer_cancel(w, victim, [("UNIQ_KEY", "C")], store_timestamp=W + 1, write_time_ms=W)
        slot = w.wheel.get_slot(W + 59_000)
    assert cancel.properties["TIMER_OUT_MS"] == victim.properties["TIMER_OUT_MS"] == str(W + 59_000)
    assert (slot.num, slot.last_pos) == (0, cancel.extra["timerlog_pos"])


def test_timer_edge_cases(tmp_path):
    with writer(tmp_path) as w:
        with pytest.raises(b.PutRejected):
            _timer(w, W + 3 * DAY + 2000)  # beyond timerMaxDelaySec
        with pytest.raises(b.PutRejected):
            _timer(w, 0, ("TIMER_DEL_UNIQKEY", "x"))  # a cancel already due
        with pytest.raises(b.PutRejected):
            b.put_timer_message(w, "T", 0, b"", [("TIMER_DELAY_SEC", "soon")], store_timestamp=W)
        due = _timer(w, W - 10)  # already due: a plain record on the real topic
        delayed = b.put_timer_message(w, "T", 0, b"", [("DELAY", "2"), ("TIMER_DELAY_SEC", "30")],
                                      store_timestamp=W)
        before_write = b.put_timer_message(w, "T", 0, b"", [("TIMER_DELAY_SEC", "3")], store_timestamp=W,
                                           write_time_ms=W + 10_000)
    assert (due.topic, due.queue_id) == ("T", 1)
    assert delayed.topic == "SCHEDULE_TOPIC_XXXX" and "TIMER_DELAY_SEC" not in delayed.properties
    assert "timerlog_pos" not in before_write.extra  # due before the write time: straight to delivery


# --------------------------------------------------------------------- retry, DLQ, batch


def test_send_back_retry_then_delivery(tmp_path):
    with writer(tmp_path) as w:
        orig = b.put_message(w, "TopicX", 2, b"m", [("KEYS", "k"), ("TAGS", "t"), ("UNIQ_KEY", "U1")],
                             store_timestamp=W)
        retry = b.send_back(w, orig, "G", store_timestamp=W + 100)
        delivered = b.deliver_delayed(w, retry, store_timestamp=W + 10_100)
    p = retry.properties
    assert (retry.topic, retry.queue_id, retry.reconsume_times) == ("SCHEDULE_TOPIC_XXXX", 2, 1)
    assert (p["DELAY"], p["REAL_TOPIC"], p["REAL_QID"], p["RETRY_TOPIC"]) == ("3", "%RETRY%G", "0", "TopicX")
    assert p["ORIGIN_MESSAGE_ID"] == orig.msg_id
    assert retry.extra["tags_code"] == W + 100 + 10_000
    assert (delivered.topic, delivered.queue_id, delivered.reconsume_times) == ("%RETRY%G", 0, 1)


def test_send_back_to_dlq(tmp_path):
    with writer(tmp_path) as w:
        orig = w.append_message("TopicX", 0, b"m", [("UNIQ_KEY", "U")], reconsume_times=16, store_timestamp=W)
        dlq = b.send_back(w, orig, "G", store_timestamp=W + 1)
        direct = b.send_back(w, orig, "H", store_timestamp=W + 2, delay_level=-1, max_reconsume_times=99)
    assert (dlq.topic, dlq.properties["DELAY"], dlq.reconsume_times) == ("%DLQ%G", "0", 17)
    assert direct.topic == "%DLQ%H" and "REAL_TOPIC" not in direct.properties


def test_long_retry_topic_is_delivered_as_v2(tmp_path):
    group = "G" * 125
    with writer(tmp_path) as w:
        orig = b.put_message(w, "TopicX", 0, b"m", [("UNIQ_KEY", "U")], store_timestamp=W)
        sched = b.send_back(w, orig, group, store_timestamp=W + 1, delay_level=1)
        rec = b.deliver_delayed(w, sched, store_timestamp=W + 1001)
    assert sched.magic_code != MESSAGE_MAGIC_CODE_V2
    assert rec.topic == "%RETRY%" + group and rec.magic_code == MESSAGE_MAGIC_CODE_V2


def test_plain_put_orders_and_batch(tmp_path):
    pairs = [("KEYS", "k"), ("UNIQ_KEY", "U"), ("WAIT", "true"), ("TAGS", "t"), ("CLUSTER", "C")]
    with writer(tmp_path) as w:
        broker = b.put_message(w, "T", 0, b"", pairs, store_timestamp=W)
        as_given = b.put_message(w, "T", 0, b"", pairs, store_timestamp=W, client_order=True)
        batch = b.put_batch(w, "T", 1, [(b"1", [("KEYS", "a")]), (b"2", [("KEYS", "b")])],
                            [("UNIQ_KEY", "B"), ("WAIT", "true")], store_timestamp=W)
    assert [k for k, _ in parse_pairs(broker.properties_raw)] == ["UNIQ_KEY", "CLUSTER", "TAGS", "KEYS", "WAIT"]
    assert [k for k, _ in parse_pairs(as_given.properties_raw)] == [k for k, _ in pairs]
    assert batch[1].properties_raw == "KEYS\x01b\x02UNIQ_KEY\x01B\x02WAIT\x01true\x02"
    assert [r.queue_offset for r in batch] == [0, 1]


def test_4x_op_messages_carry_one_offset(tmp_path):
    with writer(tmp_path, "4.9") as w:
        assert b.put_op_message(w, [3], store_timestamp=W).body == b"3"
        with pytest.raises(ValueError):
            b.put_op_message(w, [3, 4], store_timestamp=W)
        with pytest.raises(ValueError):
            _timer(w, W + 60_000)
