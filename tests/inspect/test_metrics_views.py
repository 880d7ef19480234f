"""config/timermetrics and config/transactionMetrics in the timer and transactions views, against the
5.3.1 oracle pair (pair_default README: A holds T3, T20, T45s, T90 and T600 pending plus the cancelled
T60c; H3-H5 and H6immune60 open; B after 151 s: only T600 pending, every open half discarded)."""

import pytest

from conftest import ORACLE, copy_with_wheel, need_oracle
from mqtool.formats.broker_conf import load_broker_conf
from mqtool.inspect.timer import timer_view
from mqtool.inspect.transactions import transactions_view
from mqtool.store.store import Store

A_NOW, B_NOW = 1795376096205, 1795376251537


def _store(side: str, tmp_path) -> Store:
    need_oracle()
    root = copy_with_wheel(ORACLE / "pair_default" / side, tmp_path / side)
    return Store.open(root, load_broker_conf(ORACLE / "pair_default/broker.conf"))


@pytest.mark.parametrize(("side", "now", "expected"), [
    ("A", A_NOW, [("OracleTopicA", 3, 1795376096205, 3), ("OracleTopicB", 2, 1795376096205, 2)]),
    ("B", B_NOW, [("OracleTopicA", 1, 1795376157089, 1), ("OracleTopicB", 0, 1795376187108, 0)]),
])
def test_timer_metrics_agree_with_the_timerlog(side, now, expected, tmp_path):
    doc = timer_view(_store(side, tmp_path), now)
    m = doc["metrics"]
    assert [(r["topic"], r["count"], r["time_stamp"], r["pending_in_timerlog"]) for r in m["topics"]] == expected
    assert m["agrees"] and doc["pending"]["count"] == sum(e[3] for e in expected)
    assert not [f for f in doc["findings"] if f["check"] == "timer.metrics"]


@pytest.mark.parametrize(("side", "now", "count", "counter"), [("A", A_NOW, 4, 8), ("B", B_NOW, 0, 12)])
def test_transaction_metrics_agree_with_the_half_topic(side, now, count, counter, tmp_path):
    doc = transactions_view(_store(side, tmp_path), now)
    m = doc["metrics"]
    assert m["data_version"]["counter"] == counter
    assert [(r["topic"], r["count"], r["pending_halves"]) for r in m["topics"]] == [("OracleTxTopic", count, count)]
    assert m["agrees"] and doc["counts"]["pending"] == count


def test_a_stale_metric_is_an_info_finding(tmp_path):
    need_oracle()
    root = copy_with_wheel(ORACLE / "pair_default" / "B", tmp_path / "B")
    # B's store with A's transactionMetrics: the file says 4 open, the half topic has none left
    (root / "config/transactionMetrics").write_bytes((ORACLE / "pair_default/A/config/transactionMetrics").read_bytes())
    doc = transactions_view(Store.open(root, load_broker_conf(ORACLE / "pair_default/broker.conf")), B_NOW)
    assert doc["metrics"]["agrees"] is False
    f = [f for f in doc["findings"] if f["check"] == "transactions.metrics"]
    assert len(f) == 1 and f[0]["severity"] == "info" and "counts 4" in f[0]["message"]


def test_without_the_files_metrics_is_null(basic: Store):
    assert timer_view(basic, 1795362444000)["metrics"] is None  # basic-5.3.1 ships no timermetrics


def test_single_file_dump_of_timermetrics():
    need_oracle()
    from mqtool.inspect.dump import dump_file
    doc = dump_file(ORACLE / "pair_default/B/config/timermetrics.bak")
    assert (doc["kind"], doc["config"], doc["member"]) == ("config", "timermetrics", "timingCount")
    assert doc["data_version"] == {"counter": 13, "state_version": 0, "timestamp": 1795376187108}
    assert doc["counts"] == [{"topic": "OracleTopicA", "count": 1, "time_stamp": 1795376157089},
                             {"topic": "OracleTopicB", "count": 0, "time_stamp": 1795376187108}]
