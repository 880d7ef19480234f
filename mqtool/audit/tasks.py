"""Run one audit task, wherever it is (the local runner, or a Spark Python worker)."""

from mqtool.audit.commitlog import scan_slice
from mqtool.audit.consumequeue import check_queue_file
from mqtool.audit.dledger import DLedgerSliceTask, check_dledger_slice
from mqtool.audit.index import IndexFileTask, check_index_task
from mqtool.audit.plan import CommitLogSlice, QueueFileTask, Task, TimerLogTask, WheelTask
from mqtool.audit.results import TaskResult
from mqtool.audit.storetask import StoreTask, StoreTaskResult
from mqtool.audit.timer import check_timerlog_file, check_wheel


def run_store_task(task: StoreTask) -> StoreTaskResult:
    """A fleet audit's task (`audit/fleet.py`): the wrapped single-store task's result, with its store."""
    return StoreTaskResult(index=task.index, store=task.store, result=run_task(task.task))


_RUN = {
    CommitLogSlice: scan_slice,
    QueueFileTask: check_queue_file,
    TimerLogTask: check_timerlog_file,
    WheelTask: check_wheel,
    IndexFileTask: check_index_task,
    DLedgerSliceTask: check_dledger_slice,
    StoreTask: run_store_task,
}  # a fleet audit's task (audit/fleet.py)


def run_task(task: Task) -> TaskResult:
    """The task's typed result (`mqtool.audit.results`): its findings and compact summaries."""
    return _RUN[type(task)](task)
