"""Audits of the issue-15 layouts, wired into the plan additively.

- DLedger (spec §12): the CommitLog tasks walk the entry bodies through
  `DLedgerCommitLogView.slice_chunks`, so every CommitLog check sees the records; the entry checks
  (magic, size, pos, index and term continuity, index file vs data, committedIndex vs the data's
  end) are tasks and a driver of their own (`audit/dledger.py`).
- BatchConsumeQueue (spec §13): each unit against the record it names (topic, queue, size,
  INNER_BASE / INNER_NUM: `check_unit_against_record`). The driver's per-queue comparison of the
  CommitLog walk with `consumequeue/` does not apply to a BatchCQ topic (its queue offsets step by
  INNER_NUM and its units are elsewhere): those findings are replaced by the unit checks.
"""

from mqtool.audit.plan import AuditPlan, CommitLogSlice
from mqtool.audit.records import open_store
from mqtool.formats.message import RecordError
from mqtool.store.batchcq import check_unit_against_record
from mqtool.store.dledger import DLedgerCommitLogView
from mqtool.store.findings import Findings


def dledger_slice_chunks(task: CommitLogSlice, buf):
    """The body chunks of a DLedger data-file slice, or None for an ordinary CommitLog file."""
    cl = open_store(task.root).commitlog
    if not isinstance(cl, DLedgerCommitLogView) or not cl.is_data_file(task.path):
        return None
    return cl.slice_chunks(buf, task.path, task.begin, task.end)


def audit_layouts(plan: AuditPlan, findings: Findings) -> None:
    """Add the DLedger and BatchCQ checks to `findings` (see the module docstring); a BatchCQ queue's
    units are checked here, so the ConsumeQueue comparison's findings for it are dropped."""
    st = plan.store
    out = Findings()
    batch = set(st.batch_queue_ids)
    for topic, qid in sorted(batch):
        for unit in st.batch_consume_queue(topic, qid).iter_units(out):
            try:
                rec = st.commitlog.read(unit.commitlog_offset)
            except RecordError:
                rec = None
            check_unit_against_record(unit, topic, qid, rec, out)
    kept = [f for f in findings if not (f.check == "consumequeue.consistency" and (f.topic, f.queue_id) in batch
                                        and str(f.file).startswith("consumequeue/"))]
    findings[:] = kept + list(out)
