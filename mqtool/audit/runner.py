"""The local (non-Spark) runner: the same plan and the same tasks, run one after another here.

For small stores and tests; `mqtool.spark.runner` runs the same tasks in Spark's Python workers.
"""

from collections.abc import Callable
from pathlib import Path

from mqtool.audit.plan import DEFAULT_SPLIT_BYTES, plan_audit
from mqtool.audit.report import build_report, finish
from mqtool.audit.settings import AuditSettings
from mqtool.audit.tasks import run_task


def run_local(store: Path | str, settings: AuditSettings | None = None, split_bytes: int = DEFAULT_SPLIT_BYTES,
              progress: Callable[[int, int], None] | None = None) -> dict:
    """Audit a store in this process; returns the report document."""
    plan = plan_audit(store, settings, split_bytes)
    results = []
    for i, task in enumerate(plan.tasks):
        results.append(run_task(task))
        if progress:
            progress(i + 1, len(plan.tasks))
    summary, findings = finish(plan, results)
    engine = {"master": "local (no Spark)", "partitions": len(plan.tasks), "executors": 1}
    return build_report(plan.root, engine, summary, findings)
