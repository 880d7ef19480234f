"""A fleet audit's task: one store's audit task, named by its store and placed in the fleet's one task list.

`spark-audit FLEET` runs every store's tasks in one job (`audit/fleet.py`). The wrapped task is the
single-store task unchanged (its `index` stays its place in its own store's plan), so the driver can
finish each store with the single-store `finish`; the wrapper's `index` orders the fleet's results.
"""

from __future__ import annotations

from dataclasses import dataclass

from mqtool.audit.results import TaskResult


@dataclass(frozen=True)
class StoreTask:
    """`task` (a `mqtool.audit.plan.Task`) of the fleet store named `store`; `index`: its place in the fleet plan."""

    index: int
    store: str
    task: object


@dataclass(kw_only=True)
class StoreTaskResult(TaskResult):
    """The wrapped task's own result, with the store it belongs to."""

    store: str
    result: TaskResult
