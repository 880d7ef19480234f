"""`spark-audit` on Spark: session set-up, the audit job, `--parquet`.

The driver plans the tasks (`mqtool.audit.plan`), one Spark job runs every task in the Python
workers (an RDD of pickled tasks, one partition each; each task aggregates in the worker and
sends back one result: findings plus compact summaries), and the driver finishes the report with the
same `mqtool.audit.report.finish` as the local runner. Session start-up is kept out of
`run_spark_audit`, so callers (tests, the benchmark) can reuse one session.
"""

import hashlib
import io
import os
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from mqtool.audit.plan import DEFAULT_SPLIT_BYTES, plan_audit
from mqtool.audit.report import build_report, finish
from mqtool.audit.results import TaskResult
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.store.store import Store

FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
_LOG4J = """rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n
"""


def _workdir() -> Path:
    d = Path(tempfile.gettempdir()) / f"mqtool-spark-{os.getuid()}"
    d.mkdir(exist_ok=True)
    return d


def package_zip() -> str:
    """mqtool as a zip for `addPyFile`, so executors that lack the package can import it.

    The name carries a hash of the content: Spark refuses a file name it has seen with other bytes,
    and two checkouts (or versions) running audits at once must not overwrite each other's zip.
    """
    import mqtool

    src = Path(mqtool.__file__).parent
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for p in sorted(src.rglob("*")):
            if p.suffix in (".py", ".json") and "__pycache__" not in p.parts:
                info = zipfile.ZipInfo(str(Path("mqtool") / p.relative_to(src)), date_time=(1980, 1, 1, 0, 0, 0))
                z.writestr(info, p.read_bytes(), zipfile.ZIP_DEFLATED)
    data = buf.getvalue()
    out = _workdir() / f"mqtool-pyfiles-{hashlib.sha256(data).hexdigest()[:16]}.zip"
    if not out.exists():
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, out)
    return str(out)


def spark_session(master: str = "local[*]", verbose: bool = False, fast_jvm: bool = False,
                  conf: dict | None = None, app_name: str = "mqtool spark-audit"):
    """A SparkSession set up for mqtool: workers run this Python, quiet logs, no UI, data sources registered."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    if master.startswith(("spark://127.", "local")):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    log4j = _workdir() / ("log4j2-verbose.properties" if verbose else "log4j2-quiet.properties")
    log4j.write_text(_LOG4J.format(level="warn" if verbose else "error"))
    java_opts = f"-Dlog4j2.configurationFile=file:{log4j}" + (f" {FAST_JVM}" if fast_jvm else "")
    b = (SparkSession.builder.master(master).appName(app_name)
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.driver.extraJavaOptions", java_opts)
         .config("spark.executor.extraJavaOptions", java_opts))
    if master.startswith(("spark://127.", "local")):
        b = b.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    for k, v in (conf or {}).items():
        b = b.config(k, v)
    if verbose:
        spark = b.getOrCreate()
    else:
        # The driver JVM and the Python workers it starts inherit stderr: point it at a log file while
        # the JVM starts, so launcher lines ("Using incubator modules", "Setting default log level")
        # and Java warnings stay out of the terminal. Our own stderr is restored right after.
        log = open(_workdir() / "spark-driver.log", "ab")
        saved = os.dup(2)
        try:
            sys.stderr.flush()
            os.dup2(log.fileno(), 2)
            spark = b.getOrCreate()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            log.close()
    spark.sparkContext.setLogLevel("WARN" if verbose else "ERROR")
    spark.sparkContext.addPyFile(package_zip())
    from mqtool.spark.datasource import register

    register(spark)
    return spark


def executor_count(spark) -> int:
    """Executors (not counting the driver); 1 for local mode, where the driver runs the tasks."""
    sc = spark.sparkContext
    if sc.master.startswith("local"):
        return 1
    try:
        return max(1, sc._jsc.sc().getExecutorMemoryStatus().size() - 1)
    except Exception:  # pragma: no cover - the JVM gateway differs between deployments
        return 1


def _run_pickled_task(blob: bytes) -> bytes:
    """In a Python worker: run one pickled audit task; its typed result (`mqtool.audit.results`), pickled.

    `worker` (process id, start and end time) only feeds the benchmark's concurrency figures.
    """
    import pickle

    from mqtool.audit.tasks import run_task

    start = time.time()
    result = run_task(pickle.loads(blob))
    result.worker = {"pid": os.getpid(), "start": start, "end": time.time()}
    return pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)


def run_tasks(spark, tasks) -> list[TaskResult]:
    """Run audit tasks in the Python workers, one Spark task (and partition) each; one result per task.

    A plain RDD job: `parallelize` sends each pickled task only to the Spark task that runs it, and
    a reused Python worker starts the next task at once. (A Python data source, the first version,
    planned every job in extra Python processes on the driver and sent every task's reader, holding
    the whole task list, to every task: 1-1.5 s more per 2 GiB job on these machines, growing with
    the square of the task count.)
    """
    import pickle

    if not tasks:
        return []
    blobs = [pickle.dumps(t, protocol=pickle.HIGHEST_PROTOCOL) for t in tasks]
    sc = spark.sparkContext
    sc.setJobDescription(f"mqtool spark-audit: {len(blobs)} tasks")
    try:
        out = sc.parallelize(blobs, len(blobs)).map(_run_pickled_task).collect()
    finally:
        sc.setJobDescription(None)
    return [pickle.loads(b) for b in out]


def run_spark_audit(spark, store: Store | Path | str, config: BrokerConfig | None = None,
                    split_bytes: int = DEFAULT_SPLIT_BYTES, parquet: str | None = None,
                    timings: dict | None = None) -> dict:
    """Audit a store on Spark; returns the same report document as `mqtool.audit.runner.run_local`.

    `store`: a `Store` (with its `BrokerConfig`) or a path (opened with `config`, default RocketMQ's).
    """
    t0 = time.perf_counter()
    plan = plan_audit(store, config, split_bytes)
    t1 = time.perf_counter()
    results = run_tasks(spark, plan.tasks)
    t2 = time.perf_counter()
    summary, findings = finish(plan, results)
    if timings is not None:
        t3 = time.perf_counter()
        timings.update(plan_s=t1 - t0, job_s=t2 - t1, finish_s=t3 - t2, audit_s=t3 - t0,
                       tasks=[r.worker for r in sorted(results, key=lambda r: r.index)])
    if parquet:
        write_parquet(spark, plan.root, parquet, split_bytes)
    engine = {"master": spark.sparkContext.master, "partitions": len(plan.tasks),
              "executors": executor_count(spark)}
    return build_report(plan.root, engine, summary, findings)


def run_spark_fleet_audit(spark, fleet, split_bytes: int = DEFAULT_SPLIT_BYTES, parquet: str | None = None) -> dict:
    """Audit every store of a fleet (`mqtool.store.fleet.Fleet`) in one Spark job; the same report as
    `mqtool.audit.fleet.run_fleet_local`. With `parquet`, each store's records go to PARQUET/<store dir>."""
    from mqtool.audit.fleet import finish_fleet, plan_fleet_audit

    fplan = plan_fleet_audit(fleet, split_bytes)
    results = run_tasks(spark, fplan.tasks)
    engine = {"master": spark.sparkContext.master, "partitions": len(fplan.tasks),
              "executors": executor_count(spark)}
    report = finish_fleet(fplan, results, engine)
    if parquet:
        for sp in fplan.stores:
            if sp.plan is not None:
                write_parquet(spark, sp.plan.root, str(Path(parquet) / sp.member.rel), split_bytes)
    return report


def write_parquet(spark, store: str, out: str, split_bytes: int = DEFAULT_SPLIT_BYTES) -> None:
    """Decoded records as Parquet: OUT/commitlog, OUT/consumequeue, OUT/timerlog (when present)."""
    (spark.read.format("rocketmq.commitlog").option("splitBytes", str(split_bytes)).load(store)
     .write.mode("overwrite").parquet(str(Path(out) / "commitlog")))
    spark.read.format("rocketmq.consumequeue").load(store).write.mode("overwrite").parquet(
        str(Path(out) / "consumequeue"))
    if (Path(store) / "timerlog").is_dir():
        spark.read.format("rocketmq.timerlog").load(store).write.mode("overwrite").parquet(
            str(Path(out) / "timerlog"))


def write_parquet_local(store: str, out: str, split_bytes: int = DEFAULT_SPLIT_BYTES) -> None:
    """The same Parquet layout without Spark (pyarrow only), for `--local --parquet`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mqtool.audit.plan import commitlog_slices
    from mqtool.spark import arrow
    from mqtool.store.batchcq import BCQ_DIR, discover_batch_queues
    from mqtool.store.consumequeue import discover_queues
    from mqtool.store.mapped_files import open_queue

    root = Path(store)
    dst = Path(out)

    def write(name, schema, batches):
        (dst / name).mkdir(parents=True, exist_ok=True)
        with pq.ParquetWriter(str(dst / name / "part-00000.parquet"), schema) as w:
            for b in batches:
                w.write_table(pa.Table.from_batches([b], schema=schema))

    write("commitlog", arrow.COMMITLOG_ARROW,
          (b for s in commitlog_slices(root, split_bytes) for b in arrow.commitlog_batches(s)))

    def cq():
        for t, q in discover_queues(root):
            for f in open_queue(root / "consumequeue" / t / str(q), None, "consumequeue", root).files:
                yield from arrow.consumequeue_batches(t, q, str(f.path), str(f.path.relative_to(root)), f.start)
        for t, q in discover_batch_queues(root):  # BatchConsumeQueue units (spec §13), as rocketmq.consumequeue
            for f in open_queue(root / BCQ_DIR / t / str(q), None, BCQ_DIR, root).files:
                yield from arrow.batchcq_batches(t, q, str(f.path), str(f.path.relative_to(root)), f.start)

    write("consumequeue", arrow.CONSUMEQUEUE_ARROW, cq())
    if (root / "timerlog").is_dir():
        tl = open_queue(root / "timerlog", None, "timerlog", root)
        write("timerlog", arrow.TIMERLOG_ARROW,
              (b for f in tl.files for b in arrow.timerlog_batches(str(f.path), str(f.path.relative_to(root)),
                                                                     f.start)))
