"""The driver-side checks as pure functions, on inputs small enough to check by hand."""

import numpy as np

from mqtool.audit import schedule, transactions
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.message import RecordError
from mqtool.store.findings import Findings


def half(qoff, born, props="", qid=0, offset=None):
    return {"topic": "RMQ_SYS_TRANS_HALF_TOPIC", "queue_id": qid, "queue_offset": qoff,
            "offset": 1000 + qoff if offset is None else offset, "size": 100, "sys_flag": 0, "born_ts": born,
            "store_ts": born, "properties": props, "body": b""}


def op(body, offset=5000):
    return {"topic": "RMQ_SYS_TRANS_OP_HALF_TOPIC", "queue_id": 0, "queue_offset": 0, "offset": offset,
            "size": 100, "sys_flag": 0, "born_ts": 0, "store_ts": 0, "properties": "", "body": body}


def test_op_offsets_both_formats():
    assert transactions.op_offsets(b"0,1,3,") == [0, 1, 3]
    assert transactions.op_offsets(b"7") == [7]


def test_transactions_stuck_dangling_and_delay():
    s = BrokerConfig(transaction_timeout=6000, transaction_check_interval=30000, transaction_check_max=15)
    kept = [half(0, 0), half(1, 0), half(2, 95_000), half(3, 0, "DELAY\x013\x02TRANSACTION_CHECK_TIMES\x0115\x02"),
            op(b"0,9,")]
    findings = Findings()
    summary = transactions.check(kept, {}, {0: (0, 4)}, s, 100_000, lambda o: "commitlog/x", findings)
    errs = [(f.offset, f.message) for f in findings if f.severity == "error"]
    assert errs == [(5000, "op message names half queue offset 9, which holds no half message")]
    stuck = sorted(f.offset for f in findings if "stuck" in f.message)
    assert stuck == [1001, 1003]  # half 0 has an op; half 2 is 5 s old
    assert any(f.offset == 1003 and "DELAY=3" in f.message for f in findings)
    assert any(f.offset == 1003 and f.severity == "info" and "discards" in f.message for f in findings)
    assert summary["pending"] == 3 and summary["stuck"] == 2 and summary["resolved"] == 2


def test_transactions_progress_hides_handled_halves():
    s = BrokerConfig()
    findings = Findings()
    summary = transactions.check([half(0, 0), half(1, 0)], {"RMQ_SYS_TRANS_HALF_TOPIC": {0: 2}},
                                 {0: (0, 2)}, s, 10 ** 9, lambda o: "f", findings)
    assert findings == [] and summary["pending"] == 0


def test_schedule_offsets_and_overdue():
    findings = Findings()
    summary = schedule.check({1: 5, 2: 1}, {0: {"min": 0, "max": 3}, 1: {"min": 0, "max": 2}},
                             {0: [(0, 10), (1, 20), (2, 30)], 1: [(0, 50), (1, 150)]}, LEVELS, 100, findings)
    msgs = sorted((f.severity, f.queue_id, f.message) for f in findings)
    assert msgs[0][:2] == ("error", 0) and "stored offset 5 is outside the queue's [0, 3]" in msgs[0][2]
    assert summary["1"] == {"stored_offset": 5, "min": 0, "max": 3, "pending": 0, "overdue": 0}
    assert summary["2"] == {"stored_offset": 1, "min": 0, "max": 2, "pending": 1, "overdue": 0}
    findings = Findings()
    summary = schedule.check(None, {0: {"min": 0, "max": 3}}, {0: [(0, 10), (1, 20), (2, 300)]}, LEVELS, 100, findings)
    assert [f.message.split(";")[0] for f in findings] == ["level 1: 2 message(s) overdue at the store's now 100"]


def test_schedule_a_level_missing_from_the_table_is_never_delivered_not_overdue():
    """Levels 1s 5s 10s: queue 17 (level 18) has units due at 10 and 20 from its stored offset 0; no task reads it."""
    findings = Findings()
    summary = schedule.check({18: 0}, {17: {"min": 0, "max": 2}}, {17: [(0, 10), (1, 20)]}, [1000, 5000, 10000], 100,
                             findings)
    assert summary["18"] == {"stored_offset": 0, "min": 0, "max": 2, "pending": 2, "overdue": 0}
    assert [(f.severity, f.queue_id) for f in findings] == [("warning", 17)]
    assert "2 message(s) in it are never delivered while it is missing" in findings[0].message


LEVELS = [1000, 5000, 10000, 30000, 60000, 120000, 180000, 240000, 300000, 360000, 420000, 480000, 540000,
          600000, 1200000, 1800000, 3600000, 7200000]


def test_commit_records_against_half_messages():
    """A COMMIT record must name a half message (or its put-back copy) by physical offset."""
    class Rec:
        def __init__(self, topic, queue_id=0):
            self.topic, self.queue_id = topic, queue_id

    records = {900: Rec("OracleTxTopic", 3), 901: Rec("OracleTxTopic", 1), 902: Rec("OracleTxTopic"),
               1000: Rec("RMQ_SYS_TRANS_HALF_TOPIC"), 500: Rec("TopicA")}

    def read_record(offset):
        if offset not in records:
            raise RecordError(f"no record at {offset}")
        return records[offset]

    commits = np.array([[900, 1000], [901, 500], [902, 777], [903, 5]], np.int64)
    findings = Findings()
    summary = transactions.check_commits(commits, [half(0, 0, offset=1000)], 100, read_record,
                                         lambda o: "commitlog/x", findings)
    assert [(f.offset, f.severity, f.topic, f.queue_id, f.message) for f in findings] == [
        (901, "error", "OracleTxTopic", 1, "COMMIT record's PREPARED TRANSACTION OFFSET 500 names no half message "
         "(the record there is of topic TopicA)"),
        (902, "error", "OracleTxTopic", 0, "COMMIT record's PREPARED TRANSACTION OFFSET 777 names no half message "
         "(no record starts there: no record at 777)"),
        (903, "info", None, None, "COMMIT record names half message at 5, before the first CommitLog file "
         "(deleted by retention)"),
    ]
    assert summary == {"records": 4, "without_half": 3}
