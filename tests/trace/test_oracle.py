"""Traces of the labelled messages in stores written by real RocketMQ 5.3.1 and 4.9.8."""

import pytest

from conftest import ORACLE, need_oracle
from mqtool.formats.broker_conf import load_broker_conf
from mqtool.store.store import Store
from mqtool.trace import TraceQuery, trace

pytestmark = pytest.mark.oracle


def _store(name: str) -> Store:
    need_oracle()
    return Store.open(ORACLE / name / "B", load_broker_conf(ORACLE / name / "broker.conf"))


@pytest.fixture(scope="module")
def b53() -> Store:
    return _store("pair_default")


@pytest.fixture(scope="module")
def b49() -> Store:
    return _store("pair-4.9")


def one(store: Store, key: str):
    traces = trace(store, TraceQuery(key=key))
    assert len(traces) == 1, [t.uniq_keys for t in traces]
    t = traces[0]
    return t, [(s.stage, s.physical_offset) for s in t.stages]


def test_as_of_is_the_stores_last_sign_of_life(b53):
    t, _ = one(b53, "N1")
    assert t.as_of == 1795376251603  # timercheck dataVersion timestamp, just after T_stopMs


def test_plain(b53):
    t, stages = one(b53, "N1")
    assert stages == [("born", None), ("stored", 0)]
    assert t.verdict.state == "delivered"
    assert t.verdict.text == ("delivered 2026-11-22T19:34:52.574Z to OracleTopicA/0@0; "
                              "no consumer group has committed an offset on OracleTopicA")


def test_delay_delivered_to_the_real_queue_at_the_b_store_time(b53):
    t, stages = one(b53, "D1a")
    assert stages == [("born", None), ("stored", 5502), ("parked", 5502), ("delivered", 9116)]
    parked, delivered = t.stages[2], t.stages[3]
    assert parked.place == "SCHEDULE_TOPIC_XXXX/0@0"
    assert "delay level 1 (1s)" in parked.detail and "due 2026-11-22T19:34:57.156Z" in parked.detail
    assert (delivered.time, delivered.place) == (1795376102531, "OracleTopicA/0@1")
    assert t.verdict.state == "delivered"
    assert t.verdict.text.startswith("delivered 2026-11-22T19:35:02.531Z to OracleTopicA/0@1")
    assert [r.role for r in t.records] == ["delay", "delivered"]


@pytest.mark.parametrize("label, due", [("D18", 1795376096159 + 7_200_000), ("D99", 1795376096160 + 7_200_000)])
def test_delay_level_18_still_waiting(b53, label, due):
    t, stages = one(b53, label)
    assert [s for s, _ in stages] == ["born", "stored", "parked"]
    assert t.verdict.state == "waiting" and t.verdict.due == due
    assert t.verdict.text.startswith("waiting: due 2026-11-22T21:34:56.1")
    assert "(in 1h57m)" in t.verdict.text  # format_duration: the two largest units (mqtool/times.py)


def test_timer_delivered(b53):
    t, stages = one(b53, "T3")
    assert stages == [("born", None), ("stored", 3060), ("parked", 3060), ("delivered", 8450)]
    assert "TimerLog @0" in t.stages[2].detail and "wheel slot 2026-11-22T19:34:59.000Z" in t.stages[2].detail
    assert "re-put by the timer service" in t.stages[3].detail
    assert t.verdict.text.startswith("delivered 2026-11-22T19:35:01.643Z to OracleTopicA/1@0")


def test_timer_cancelled_by_the_cancel_record(b53):
    t, stages = one(b53, "T60c")
    assert stages == [("born", None), ("stored", 4058), ("parked", 4058), ("cancel_requested", 5074),
                      ("cancelled", None)]
    assert t.stages[-1].time == 1795376156000  # the slot; timercheck lastReadTimeMs is past it
    assert t.verdict.state == "cancelled"
    assert t.verdict.text == "cancelled by 5074 (dropped when its slot was read)"
    assert [r.role for r in t.records] == ["timer", "cancel"]


def test_the_cancel_record_itself(b53):
    t, _ = one(b53, "T60c-cancel")
    assert t.verdict.state == "cancel_request"


def test_timer_pending(b53):
    t, stages = one(b53, "T600")
    assert [s for s, _ in stages] == ["born", "stored", "parked"]
    assert t.verdict.state == "waiting" and t.verdict.due == 1795376696000
    assert t.verdict.text == ("waiting: due 2026-11-22T19:44:56.000Z (in 7m24s), "
                              "timer wheel slot 2026-11-22T19:44:56.000Z")


def test_committed(b53):
    t, stages = one(b53, "H1commit")
    assert stages == [("born", None), ("stored", 237), ("parked", 237), ("committed", 2667), ("op", 8311)]
    assert t.verdict.state == "committed"
    assert t.verdict.text.startswith("committed 2026-11-22T19:34:52.625Z to OracleTxTopic/0@0")


def test_rolled_back(b53):
    t, stages = one(b53, "H2rollback")
    assert stages == [("born", None), ("stored", 641), ("parked", 641), ("rolled_back", 8311)]
    assert t.verdict.state == "rolled_back"
    assert t.verdict.text == "rolled back 2026-11-22T19:34:56.933Z (op record 8311)"


@pytest.mark.parametrize("label, copies, discard", [("H3", (10624, 12376), 14128), ("H4", (11042, 12794), 14548),
                                                    ("H5", (11460, 13212), 14968)])
def test_discarded_after_two_checks(b53, label, copies, discard):
    t, stages = one(b53, label)
    assert [s for s, _ in stages] == ["born", "stored", "parked", "put_back", "put_back", "discarded"]
    assert [o for s, o in stages if s == "put_back"] == list(copies)
    assert stages[-1] == ("discarded", discard)
    assert t.verdict.state == "discarded"
    assert t.verdict.text.startswith("discarded after 2 checks (TRANSACTION_CHECK_TIMES=2 >= transactionCheckMax=2)")


def test_immunity_halves_are_not_checks(b53):
    t, stages = one(b53, "H6immune60")
    assert [s for s, _ in stages] == ["born", "stored", "parked", "put_back", "put_back", "discarded"]
    assert all("immunity re-put" in s.detail for s in t.stages if s.stage == "put_back")
    assert t.verdict.text.startswith("discarded after 0 checks and 2 immunity re-put(s)")


def test_without_the_broker_conf_the_discard_says_why_it_surprises(b53):
    need_oracle()
    plain = Store.open(ORACLE / "pair_default/B")
    t = trace(plain, TraceQuery(key="H3"))[0]
    assert "transactionCheckMax=15 of this config" in t.verdict.text


def test_every_label_is_found_once(b53):
    import json

    m = json.loads((ORACLE / "pair_default/B.manifest.json").read_text())
    for o in m["outcomes"]:
        if not o.get("uniqKey"):
            continue
        ts = trace(b53, TraceQuery(uniq_key=o["uniqKey"]))
        assert len(ts) == 1 and ts[0].verdict.state != "unknown", o["label"]


# ----------------------------------------------------------------------------- 4.9.8


def test_49_delay_delivered_and_pending(b49):
    t, stages = one(b49, "D1c")
    assert stages == [("born", None), ("stored", 7239), ("parked", 7239), ("delivered", 8316)]
    assert t.verdict.text.startswith("delivered 2026-11-22T20:28:42.905Z to OracleTopicA/3@0")
    t, _ = one(b49, "D19")
    assert t.verdict.state == "waiting" and "delay level 18" in t.verdict.text


def test_49_transactions(b49):
    t, stages = one(b49, "H1commit")
    assert stages == [("born", None), ("stored", 236), ("parked", 236), ("committed", 2080), ("op", 2397)]
    t, stages = one(b49, "H2rollback")
    assert stages[-1] == ("rolled_back", 2532) and t.verdict.state == "rolled_back"
    t, stages = one(b49, "H3")
    assert [o for s, o in stages if s in ("put_back", "discarded")] == [9984, 11010, 12036]
    assert t.verdict.text.startswith("discarded after 2 checks")


# ----------------------------------------------------------------------------- basic-5.3.1


def test_basic_cancelled_victim(basic_store):
    store = Store.open(basic_store)
    t = trace(store, TraceQuery(uniq_key="FD00000000000000000000000000000238075FFD2B276F88C3160014"))[0]
    assert [(s.stage, s.physical_offset) for s in t.stages] == [
        ("born", None), ("stored", 5297), ("parked", 5297), ("cancel_requested", 5648)]
    assert t.verdict.state == "cancelled"
    assert t.verdict.text == "cancelled by 5648 (dropped when slot 2026-11-22T17:47:13.000Z is read)"


def test_basic_rolled_timer_is_parked_until_it_rolls(basic_store):
    store = Store.open(basic_store)
    t = trace(store, TraceQuery(key="tkey2"))[0]
    assert [s.stage for s in t.stages] == ["born", "stored", "parked"]
    assert "TimerLog @104" in t.stages[2].detail and "roll window" in t.stages[2].detail
    assert t.verdict.state == "waiting" and t.verdict.due == 1795621573000
    assert t.verdict.text.endswith("timer wheel slot 2026-11-24T15:47:13.000Z until it rolls")


def test_basic_batch_members_share_a_uniq_key(basic_store):
    store = Store.open(basic_store)
    t = trace(store, TraceQuery(key="bkey1"))[0]
    assert [s.stage for s in t.stages] == ["born", "stored", "stored", "stored"]


def test_by_offset_and_msg_id(b53):
    by_off = trace(b53, TraceQuery(offset=9116))[0]
    assert by_off.uniq_keys == ["FD0000000000000000000000000000021DD55FFD2B2770593B9C000E"]
    by_msgid = trace(b53, TraceQuery(msg_id="7F00000100002A9F000000000000157E"))[0]
    assert [s.stage for s in by_msgid.stages] == [s.stage for s in by_off.stages]
    by_client_id = trace(b53, TraceQuery(msg_id="FD0000000000000000000000000000021DD55FFD2B2770593B9C000E"))[0]
    assert by_client_id.verdict == by_off.verdict
    assert trace(b53, TraceQuery(offset=9117)) == []
    assert trace(b53, TraceQuery(uniq_key="00")) == []
