"""The local (non-Spark) runner: the same plan and the same tasks, run one after another here.

For small stores and tests; `mqtool.spark.runner` runs the same tasks in Spark's Python workers.
"""

from collections.abc import Callable
from pathlib import Path

from mqtool.audit.plan import DEFAULT_SPLIT_BYTES, plan_audit
from mqtool.audit.report import build_report, finish
from mqtool.audit.tasks import run_task
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.store.store import Store


def run_local(store: Store | Path | str, config: BrokerConfig | None = None,
              split_bytes: int = DEFAULT_SPLIT_BYTES, progress: Callable[[int, int], None] | None = None) -> dict:
    """Audit a store in this process; returns the report document.

    `store`: a `Store` (with its `BrokerConfig`) or a path (opened with `config`, default RocketMQ's).
    """
    plan = plan_audit(store, config, split_bytes)
    results = []
    for i, task in enumerate(plan.tasks):
        results.append(run_task(task))
        if progress:
            progress(i + 1, len(plan.tasks))
    summary, findings = finish(plan, results)
    engine = {"master": "local (no Spark)", "partitions": len(plan.tasks), "executors": 1}
    return build_report(plan.root, engine, summary, findings)


def write_report(report: dict, path: Path) -> None:
    """`spark-audit --out FILE`: the report as indented JSON; a path that cannot be written is an input error."""
    import json

    from mqtool.errors import MqtoolError

    try:
        path.write_text(json.dumps(report, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    except OSError as e:
        raise MqtoolError(f"{path}: cannot write the report ({e.strerror or e})") from None
