"""Each driver-side check of `report.finish` on hand-built typed results, findings computed by hand."""

import pickle
from types import SimpleNamespace

import numpy as np

from mqtool.audit import report
from mqtool.audit.plan import AuditPlan
from mqtool.audit.results import (
    AuditResults,
    CommitLogResult,
    ConsumeQueueResult,
    QueueStats,
    TimerLogResult,
    WheelResult,
)
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.message import RecordError
from mqtool.store.findings import Finding, Findings

CL0, CL1 = "commitlog/00000000000000000000", "commitlog/00000000000000001024"


def cl(index=0, file=CL0, file_start=0, valid_end=1000, stop="end of file", last_of_file=True, queues=None,
       hashes=(), offsets=(), commits=None, kept=(), records=0):
    return CommitLogResult(index=index, file=file, file_start=file_start, begin=0, end=1024, valid_end=valid_end,
                           stop=stop, trailing_bytes=0, last_of_file=last_of_file, records=records, bytes=0,
                           queues=queues or {}, kept=list(kept), key_hashes=np.array(hashes, np.int64),
                           key_offsets=np.array(offsets, np.int64),
                           commits=np.array(commits if commits is not None else np.zeros((0, 2)), np.int64))


def cq(index, topic, qid, first=0, units=0, max_end=0, tags=(), bad=0):
    return ConsumeQueueResult(index=index, topic=topic, queue_id=qid, file=f"consumequeue/{topic}/{qid}/0",
                              file_start=first * 20, first_offset=first, units=units, end_offset=first + units,
                              max_commitlog_end=max_end, bad_units=bad, schedule_tags=list(tags))


class Rec:
    def __init__(self, topic="T", queue_id=0, uniq_key=None):
        self.topic, self.queue_id, self.uniq_key = topic, queue_id, uniq_key


def plan_of(records=None, delay=None, consumer=None, store_findings=(), timercheck=None, **kw) -> AuditPlan:
    def read(offset):
        if offset not in (records or {}):
            raise RecordError(f"no record at {offset}")
        return records[offset]

    store = SimpleNamespace(config=BrokerConfig(), config_files=SimpleNamespace(delay_offsets=delay,
                            consumer_offsets=consumer), findings=list(store_findings),
                            commitlog=SimpleNamespace(read=read), root="/s", timerlog=None, timer_wheel=None)
    kw.setdefault("commitlog_files", [(CL0, 0, 1024), (CL1, 1024, 1024)])
    return AuditPlan(store, [], timercheck=timercheck, **kw)


def rows(findings):
    return [(f.file, f.offset, f.check, f.severity, f.message, f.topic, f.queue_id) for f in findings]


def test_collect_orders_by_task_index_and_results_pickle():
    a, b, c = cl(index=2), cq(0, "T", 0), WheelResult(index=1, slots=1, broken=0, chain_units=1,
                                                      pending_by_time={})
    res = AuditResults.collect([a, b, c])
    assert [r.index for r in res.ordered] == [0, 1, 2]
    assert res.commitlog == [a] and res.consumequeue == [b] and res.wheel == [c] and res.timerlog == []
    back = pickle.loads(pickle.dumps(a))
    assert type(back) is CommitLogResult and back.file == CL0 and back.key_hashes.dtype == np.int64


def test_commitlog_integrity_unwritten_tail_recovery_end_and_first_crc():
    """File 0 ends in zeros although file 1 exists; file 1 has an invalid record at 1024 + 50."""
    res = AuditResults.collect([
        cl(0, CL0, 0, valid_end=100, stop="unwritten (zero) tail", records=2,
           queues={("T", 0): QueueStats(2, 100, 10, 20, 0, 1)}),
        cl(1, CL1, 1024, valid_end=50, stop="invalid record: size mismatch", records=1,
           queues={("T", 0): QueueStats(1, 50, 5, 30, 2, 2)}),
    ])
    findings = Findings([Finding(CL1, 1074, "commitlog.integrity", "error", "body CRC mismatch: ...")])
    summary = report.check_commitlog_integrity(plan_of(commitlog_min=0), res, findings)
    assert rows(findings[1:]) == [(CL0, 100, "commitlog.integrity", "warning", "file ends in unwritten bytes, "
                                   "not a BLANK filler, and a later file exists", None, None)]
    assert summary == {"files": 2, "records": 3, "bytes": 0, "min_offset": 0, "max_offset": 1074,
                       "recovery_end": 1074, "first_crc_mismatch": 1074, "first_store_ts": 5,
                       "last_store_ts": 30}


def test_consumequeue_consistency_twice_missing_beyond_end_and_lag():
    """CommitLog ends at 1000. Queue T/0: 4 records for offsets 0..2, units reach 5000. Queue T/1:
    2 records for offsets 0..3 and only 2 units."""
    res = AuditResults.collect([
        cl(0, valid_end=1000, queues={("T", 0): QueueStats(4, 0, 1, 1, 0, 2), ("T", 1): QueueStats(2, 0, 1, 1, 0, 3)}),
        cq(1, "T", 0, units=3, max_end=5000), cq(2, "T", 1, units=2, max_end=900),
    ])
    findings = Findings()
    report.check_consumequeue_consistency(res, findings)
    c = "consumequeue.consistency"
    assert rows(findings) == [
        ("consumequeue/T/0/0", None, c, "error", "units reach CommitLog offset 5000, beyond the CommitLog's end 1000",
         "T", 0),
        ("consumequeue/T/0", None, c, "error", "the CommitLog holds 4 records for queue offsets 0..2: 1 queue "
         "offset(s) used twice", "T", 0),
        ("consumequeue/T/1", None, c, "warning", "the CommitLog holds 2 records for queue offsets 0..3: 2 missing",
         "T", 1),
        ("consumequeue/T/1", 40, c, "warning", "2 record(s) with no ConsumeQueue unit (dispatch lag): the CommitLog "
         "has queue offsets up to 3, the queue ends at 2", "T", 1),
    ]


def test_schedule_takes_only_the_delay_files_config_findings():
    """Level 1 stored at 1; units (1, due 60) and (2, due 500) pending at now 100: one overdue."""
    res = AuditResults.collect([cl(0, queues={("T", 0): QueueStats(1, 0, 100, 100, 0, 0)}),
                                cq(1, "SCHEDULE_TOPIC_XXXX", 0, units=3, tags=[(0, 50), (1, 60), (2, 500)])])
    bad_delay = Finding("config/delayOffset.json", None, "store.config", "warning", "delayOffset.json: empty")
    bad_consumer = Finding("config/consumerOffset.json", None, "store.config", "warning", "x")
    plan = plan_of(delay=SimpleNamespace(offset_table={1: 1}), store_findings=[bad_consumer, bad_delay])
    findings = Findings()
    summary = report.check_schedule(plan, res, findings)
    assert findings[0] == bad_delay
    assert rows(findings[1:]) == [("config/delayOffset.json", None, "schedule", "warning", "level 1: 1 message(s) "
                                   "overdue at the store's now 100; the oldest (queue offset 1) was due at 60, 40 ms "
                                   "earlier", "SCHEDULE_TOPIC_XXXX", 0)]
    assert summary == {"1": {"stored_offset": 1, "min": 0, "max": 3, "pending": 2, "overdue": 1}}


def test_timer_cursors_and_summary():
    """Timer queue ends at 6, timercheck says 4 enqueued; TimerLog ends at 156 < flush position 200."""
    tc = {"last_read_time_ms": 0, "last_timer_log_flush_pos": 200, "last_timer_queue_offset": 4,
          "master_timer_queue_offset": 4}
    res = AuditResults.collect([
        cq(0, "rmq_sys_wheel_timer", 0, units=6),
        TimerLogResult(index=1, file="timerlog/0", file_start=0, units=3, pending_units=3, end=156),
        WheelResult(index=2, slots=2, broken=1, chain_units=3, pending_by_time={5000: 2, 3000: 1}),
        WheelResult(index=3, slots=1, broken=0, chain_units=1, pending_by_time={7000: 1}),
    ])
    findings = Findings()
    summary = report.check_timer(plan_of(timercheck=tc, timerlog_files=1), res, findings)
    assert rows(findings) == [
        ("config/timercheck", 16, "timer", "info", "2 timer record(s) not yet enqueued into the TimerLog "
         "(lastTimerQueueOffset 4, queue max 6)", "rmq_sys_wheel_timer", 0),
        ("config/timercheck", 8, "timer", "error", "lastTimerLogFlushPos 200 is beyond the TimerLog's end 156",
         None, None)]
    assert summary == {"timerlog_files": 1, "timerlog_units": 3, "timerlog_end": 156, "wheel_slots": 3,
                       "broken_slots": 1, "pending_messages": 4, "next_due_ms": 3000, "timercheck": tc,
                       "timer_queue_max": 6}


def kept(topic, qoff, offset, born=0, body=b""):
    return {"topic": topic, "queue_id": 0, "queue_offset": qoff, "offset": offset, "size": 100, "sys_flag": 0,
            "born_ts": born, "store_ts": born, "properties": "", "body": body}


def test_transactions_progress_from_consumer_offsets_and_commits():
    """Halves at queue offsets 0 and 1 (progress 1: only 1 is pending, and stuck at now 10^6); an op
    names offset 7 (no half); COMMIT 900 names the half at 1000, COMMIT 1100 names 5 (< min 100)."""
    half = "RMQ_SYS_TRANS_HALF_TOPIC"
    res = AuditResults.collect([
        cl(0, queues={("TX", 0): QueueStats(2, 0, 10**6, 10**6, 0, 1)}, commits=[[900, 1000], [1100, 5]],
           kept=[kept(half, 0, 1000), kept(half, 1, 1010), kept("RMQ_SYS_TRANS_OP_HALF_TOPIC", 0, 1020, body=b"7,")]),
        cq(1, half, 0, units=2),
    ])
    consumer = SimpleNamespace(offset_table={f"{half}@CID_RMQ_SYS_TRANS": {0: 1}})
    plan = plan_of(records={1100: Rec("TX", 2)}, consumer=consumer, commitlog_min=100)
    findings = Findings()
    summary = report.check_transactions(plan, res, findings)
    assert rows(findings) == [
        (CL0, 1020, "transactions", "error", "op message names half queue offset 7, which holds no half message",
         "RMQ_SYS_TRANS_OP_HALF_TOPIC", 0),
        (CL0, 1010, "transactions", "warning", "half message at queue offset 1 has no op message and is 1000000 ms "
         "old (immunity 6000 ms, check interval 30000 ms, checked 0 time(s)): stuck", half, 0),
        (CL1, 1100, "transactions", "info", "COMMIT record names half message at 5, before the first CommitLog file "
         "(deleted by retention)", "TX", 2),
    ]
    assert summary["progress"] == {half: {"0": 1}}
    assert (summary["pending"], summary["stuck"], summary["commits"]) == (1, 1, {"records": 2, "without_half": 1})


def test_duplicate_keys_across_slices_confirmed_by_reading():
    """Hash 5 at 10 and 1030 (same key K: a duplicate); hash 9 at 20 and 1040 (keys differ: a collision)."""
    res = AuditResults.collect([cl(0, hashes=[5, 9], offsets=[10, 20]),
                                cl(1, CL1, 1024, hashes=[5, 9], offsets=[1030, 1040])])
    records = {10: Rec(uniq_key="K"), 20: Rec(uniq_key="A"), 1030: Rec("U", 3, "K"), 1040: Rec(uniq_key="B")}
    findings = Findings()
    assert report.check_duplicate_keys(plan_of(records=records), res, findings) == 1
    assert rows(findings) == [(CL1, 1030, "stats", "info", "UNIQ_KEY K already used by the record at 10 (a producer "
                               "resend or a duplicated message)", "U", 3)]


def test_counts_list_every_check():
    counts = report.check_counts(Findings([Finding("f", 0, "timer", "error", "m"), Finding("f", 0, "x", "info", "m")]))
    assert counts["timer"] == {"error": 1, "warning": 0, "info": 0}
    assert counts["stats"] == {"error": 0, "warning": 0, "info": 0} and counts["x"]["info"] == 1
