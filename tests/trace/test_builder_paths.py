"""Every path of issue #9 on a builder-made store: the full stage list and the verdict."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from trace_stores import CONFIG, T0, build_paths  # noqa: E402

from mqtool.store.store import Store  # noqa: E402
from mqtool.trace import TraceQuery, trace  # noqa: E402


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store.open(build_paths(tmp_path_factory.mktemp("paths") / "store"), CONFIG)


def one(store, key):
    ts = trace(store, TraceQuery(key=key))
    assert len(ts) == 1
    return ts[0], [s.stage for s in ts[0].stages]


def test_consumed_and_unconsumed_by_two_groups(store):
    t, stages = one(store, "plain")
    assert stages == ["born", "stored", "consumed", "not_consumed"]
    assert t.stages[2].detail == "consumer group GID_A: committed offset 1 > 0"
    assert t.stages[3].detail == "consumer group GID_B: committed offset 0 <= 0 (1 message(s) to go)"
    assert t.verdict.text.endswith("to TopicA/0@0, consumed by GID_A; not yet consumed by GID_B")
    t, _ = one(store, "plain2")
    assert t.verdict.text.endswith("not yet consumed by GID_A, GID_B")


def test_delay_delivered(store):
    t, stages = one(store, "delay-done")
    assert stages == ["born", "stored", "parked", "delivered", "not_consumed", "not_consumed"]
    assert t.stages[2].detail.startswith("delay level 3 (10s) in SCHEDULE_TOPIC_XXXX/2")
    assert t.stages[4].detail == "consumer group GID_A: no committed offset for queue 1"
    assert t.stages[3].detail.startswith("re-put by the schedule service from level 3, 40ms after due")
    assert t.verdict.state == "delivered"


def test_delay_still_waiting(store):
    t, stages = one(store, "delay-wait")
    assert stages == ["born", "stored", "parked"]
    assert t.as_of == T0 + 300_000
    assert t.verdict.due == T0 + 11 + 7_200_000
    assert t.verdict.text == "waiting: due 2026-11-18T13:06:40.011Z (in 1h55m), delay level 18"


def test_timer_rolled_twice_then_delivered(store):
    t, stages = one(store, "timer-roll")
    assert stages == ["born", "stored", "parked", "rolled", "rolled", "delivered"]
    assert "roll window" in t.stages[2].detail
    assert t.stages[3].detail.startswith("roll #1") and t.stages[4].detail.startswith("roll #2")
    assert "roll window" in t.stages[3].detail and "roll window" not in t.stages[4].detail
    assert t.verdict.state == "delivered"
    assert t.verdict.text.startswith("delivered 2026-11-18T11:10:50.040Z to TopicB/0@0")


def test_timer_cancelled(store):
    t, stages = one(store, "timer-victim")
    assert stages == ["born", "stored", "parked", "cancel_requested", "cancelled"]
    cancel = t.records[-1].record
    assert t.verdict.text == f"cancelled by {cancel.physical_offset} (dropped when its slot was read)"


def test_transaction_committed_after_two_checks(store):
    t, stages = one(store, "tx-commit")
    assert stages == ["born", "stored", "parked", "put_back", "put_back", "committed", "op"]
    assert t.stages[3].detail.startswith("check #1") and t.stages[4].detail.startswith("check #2")
    assert t.verdict.state == "committed" and "to TxTopic/0@0" in t.verdict.text


def test_transaction_rolled_back(store):
    t, stages = one(store, "tx-rollback")
    assert stages == ["born", "stored", "parked", "rolled_back"]
    assert t.verdict.state == "rolled_back"


def test_transaction_discarded_after_the_check_limit(store):
    t, stages = one(store, "tx-discard")
    assert stages == ["born", "stored", "parked", "put_back", "put_back", "discarded"]
    assert t.verdict.text.startswith("discarded after 2 checks (TRANSACTION_CHECK_TIMES=2 >= transactionCheckMax=2)")


def test_transaction_pending(store):
    t, stages = one(store, "tx-pending")
    assert stages == ["born", "stored", "parked"]
    assert t.verdict.state == "pending" and t.verdict.text.startswith("pending transaction: next check at ")


def test_retry_then_dlq(store):
    t, stages = one(store, "retry-dlq")
    assert stages == ["born", "stored", "retry_scheduled", "retry", "consumed", "dead_lettered"]
    assert "sent back by consumer group GID_C (reconsume #1)" in t.stages[2].detail
    assert t.stages[3].topic == "%RETRY%GID_C"
    assert t.stages[5].topic == "%DLQ%GID_C"
    assert t.verdict.state == "dead_lettered"
    assert t.verdict.text.startswith("dead-lettered 2026-11-18T11:06:52.000Z to %DLQ%GID_C/0@0 after 2 reconsumes")
