"""The transactions view against the oracle pairs' READMEs and B.manifest.json."""

import json

import pytest

from conftest import ORACLE, need_oracle
from mqtool.inspect.transactions import parse_op_body, transactions_view
from mqtool.store.store import Store


def by_label(doc: dict) -> dict[str, dict]:
    return {h["keys"][0]: h for h in doc["half_messages"]}


def test_pair_default_b_states(open_oracle):
    doc = transactions_view(open_oracle("pair_default/B"), 1795376251537)
    states = {k: h["state"] for k, h in by_label(doc).items()}
    assert states == {"H1commit": "committed", "H2rollback": "rolled_back", "H3": "discarded", "H4": "discarded",
                      "H5": "discarded", "H6immune60": "discarded"}
    assert doc["counts"] == {"committed": 1, "rolled_back": 1, "pending": 0, "discarded": 4}
    h = by_label(doc)
    assert h["H1commit"]["commit_offset"] == 2667  # manifest: the final OracleTxTopic record
    assert h["H1commit"]["op"]["half_queue_offset"] == 0 and h["H2rollback"]["op"]["half_queue_offset"] == 1
    assert h["H1commit"]["real_topic"] == "OracleTxTopic" and h["H1commit"]["producer_group"] == "OracleTxGroup"
    # manifest halfCopiesInB: two put-back copies each, the last with TRANSACTION_CHECK_TIMES=2
    assert [c["queue_offset"] for c in h["H3"]["copies"]] == [6, 10]
    assert [c["queue_offset"] for c in h["H6immune60"]["copies"]] == [9, 13]
    assert [c["prepared_queue_offset"] for c in h["H6immune60"]["copies"]] == [5, 5]
    assert h["H6immune60"]["immunity_property"] and h["H6immune60"]["immunity_ms"] == 60000
    assert all(h[k]["check_times"] == 2 for k in ("H3", "H4", "H5", "H6immune60"))
    assert h["H3"]["discard"]["physical_offset"] == 14128
    assert doc["check_progress"] == [{"queue_id": 0, "half_offset": 14, "half_max_offset": 14, "op_offset": 1,
                                      "op_max_offset": 1}]
    assert [(d["keys"], d["queue_offset"], d["check_times"], d["real_topic"]) for d in doc["discarded"]] == [
        (["H3"], 0, 2, "OracleTxTopic"), (["H4"], 1, 2, "OracleTxTopic"), (["H5"], 2, 2, "OracleTxTopic"),
        (["H6immune60"], 3, 2, "OracleTxTopic")]
    assert doc["op_messages"] == {"records": 1, "half_offsets": 2}  # one batched op message "0,1,"


def test_pair_default_a_predicts_the_rounds_b_ran(open_oracle):
    """B's services started at T_servicesStartedMs; its check rounds started at +15.0 s and +31.07 s.

    Round 0 read the op record "0,1,", found H3 due, read more op records, found none and slept 1 s
    (SLEEP_WHILE_NO_OP): its requests went out at +16.04 s and it ended at +16.07 s; round 1 started 15 s
    after that end, read no op record (its offset had moved past it) and sent its requests and discards
    at once (+31.08 s). The prediction: +16 s and +31 s.
    """
    need_oracle()
    manifest = json.loads((ORACLE / "pair_default/B.manifest.json").read_text())
    start = manifest["T_servicesStartedMs"]
    doc = transactions_view(open_oracle("pair_default/A"), start)
    h = by_label(doc)
    assert doc["counts"] == {"committed": 1, "rolled_back": 1, "pending": 4, "discarded": 0}
    rounds = manifest["checkRoundsDetail"]
    first = {r["label"]: r["requestTimeMs"] for r in rounds[0]["requests"]}
    discards = {d["label"]: d["timeMs"] for d in manifest["checkDiscards"]}
    for label in ("H3", "H4", "H5"):
        p = h[label]["prediction"]
        assert p["next_check_ms"] == start + 16000 and 0 <= first[label] - p["next_check_ms"] < 100
        assert p["checks_before_discard"] == 2
        assert p["discard_ms"] == start + 31000 and 0 <= discards[label] - p["discard_ms"] < 200
    # apache/rocketmq#8311: immunity put-backs spend the checks, so H6 is discarded without a check request
    p6 = h["H6immune60"]["prediction"]
    assert p6["next_check_ms"] is None and p6["checks_before_discard"] == 0
    assert p6["discard_ms"] == start + 31000
    d6 = next(d for d in manifest["checkDiscards"] if d["label"] == "H6immune60")
    assert d6["round"] == 1


def test_pair_49_one_op_message_per_end_and_no_trailing_comma(open_oracle):
    doc = transactions_view(open_oracle("pair-4.9/B"), 0)
    assert doc["counts"] == {"committed": 1, "rolled_back": 1, "pending": 0, "discarded": 3}
    assert doc["op_messages"] == {"records": 2, "half_offsets": 2}
    assert by_label(doc)["H1commit"]["commit_offset"] is not None


def test_basic_two_pending_halves(basic: Store):
    doc = transactions_view(basic, 1795362444000)
    assert doc["counts"] == {"committed": 0, "rolled_back": 0, "pending": 2, "discarded": 0}
    assert [h["queue_offset"] for h in doc["half_messages"]] == [0, 1]
    # defaults: transactionTimeOut 6 s, checks every 30 s, 15 checks then the discard
    p = doc["half_messages"][0]["prediction"]
    assert p["next_check_ms"] == 1795362444000 + 30000
    assert p["checks_before_discard"] == 15 and p["discard_ms"] == 1795362444000 + 15 * 30000
    assert doc["oldest_pending"]["uniq_key"] == doc["half_messages"][0]["uniq_key"]


def test_demo_one_of_each_state(demo: Store):
    doc = transactions_view(demo, 1790000020000)
    assert doc["counts"] == {"committed": 1, "rolled_back": 1, "pending": 1, "discarded": 1}
    states = {k: h["state"] for k, h in by_label(doc).items()}
    assert states == {"H1commit": "committed", "H2rollback": "rolled_back", "H4discard": "discarded",
                      "H3pending": "pending"}


@pytest.mark.parametrize("body, offsets", [(b"0,1,3,", [0, 1, 3]), (b"7", [7]), (b"", []), (b"2,x,", [2])])
def test_op_bodies_of_both_versions(body, offsets):
    assert parse_op_body(body) == offsets
