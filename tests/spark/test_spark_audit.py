"""spark-audit on Spark: data sources, local == Spark reports, and a real standalone cluster.

One SparkSession (local[2]) serves the whole test run; the cluster test runs the CLI in a
subprocess against a master and two 1-core workers started here (and stopped by their PIDs).
"""

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ORACLE, need_oracle
from mqtool.audit.runner import run_local

pytestmark = [pytest.mark.spark, pytest.mark.oracle]

BASIC = ORACLE / "basic-5.3.1" / "store"
PAIR_B = ORACLE / "pair_default" / "B"


def _java() -> bool:
    return shutil.which("java") is not None or bool(os.environ.get("JAVA_HOME"))


@pytest.fixture(scope="session")
def spark():
    if not _java():
        pytest.skip("Java is not installed: Spark tests need Java 17")
    from mqtool.spark.runner import spark_session

    s = spark_session("local[2]", fast_jvm=True, conf={"spark.sql.shuffle.partitions": "2"})
    yield s
    s.stop()


def copy_store(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


def without_engine(report: dict) -> dict:
    return {k: v for k, v in report.items() if k != "engine"}


@pytest.mark.parametrize("store", [BASIC, PAIR_B], ids=["basic-5.3.1", "pair_default-B"])
def test_spark_report_equals_local(spark, store):
    need_oracle()
    from mqtool.spark.runner import run_spark_audit

    got = run_spark_audit(spark, store)
    assert got["engine"] == {"master": "local[2]", "partitions": got["engine"]["partitions"], "executors": 1}
    assert without_engine(got) == without_engine(run_local(store))


def test_spark_equals_local_on_a_broken_split_store(spark, tmp_path):
    """CRC error, wrong CQ unit, torn tail; CommitLog files cut into 8 KiB ranges."""
    need_oracle()
    from mqtool.spark.runner import run_spark_audit

    st = copy_store(BASIC, tmp_path / "store")
    cl0 = st / "commitlog" / "00000000000000000000"
    with open(cl0, "r+b") as fh:
        fh.seek(251 + 200)
        b = fh.read(1)
        fh.seek(251 + 200)
        fh.write(bytes([b[0] ^ 0x55]))
    with open(st / "consumequeue" / "TopicA" / "0" / "00000000000000000000", "r+b") as fh:
        fh.seek(20)
        fh.write(struct.pack(">q", 251))
    os.truncate(st / "commitlog" / "00000000000000065536", 30000)
    local = run_local(st, split_bytes=8192)
    got = run_spark_audit(spark, st, split_bytes=8192)
    assert got["engine"]["partitions"] == local["engine"]["partitions"] > 17
    assert without_engine(got) == without_engine(local)
    assert {f["check"] for f in got["findings"] if f["severity"] == "error"} == \
        {"commitlog.integrity", "consumequeue.consistency"}


def test_commitlog_data_source_rows(spark):
    need_oracle()
    rows = (spark.read.format("rocketmq.commitlog").load(str(BASIC))
            .select("file", "physical_offset", "topic", "queue_id", "crc_ok").collect())
    want = [json.loads(line) for line in open(ORACLE / "basic-5.3.1" / "commitlog.jsonl")]
    want = [(r["physicalOffset"], r["topic"], r["queueId"]) for r in want if not r.get("blank")]
    assert sorted((r.physical_offset, r.topic, r.queue_id) for r in rows) == sorted(want)
    assert all(r.crc_ok for r in rows)
    assert {r.file for r in rows} == {"commitlog/00000000000000000000", "commitlog/00000000000000065536"}


def test_commitlog_split_into_byte_ranges(spark):
    need_oracle()
    df = spark.read.format("rocketmq_commitlog").option("splitBytes", "8192").load(str(BASIC))
    assert df.rdd.getNumPartitions() > 2
    offs = [r.physical_offset for r in df.select("physical_offset").collect()]
    assert len(offs) == len(set(offs)) == 115


def test_other_data_sources(spark):
    need_oracle()
    cq = spark.read.format("rocketmq.consumequeue").load(str(BASIC))
    assert cq.count() == 115
    assert cq.filter("topic = 'TopicA' and queue_id = 0").select("commitlog_offset").orderBy("queue_offset") \
        .collect()[0].commitlog_offset == 0
    assert spark.read.format("rocketmq.consumequeue").option("topic", "TopicB").load(str(BASIC)).count() == 93
    tl = spark.read.format("rocketmq.timerlog").load(str(BASIC)).orderBy("offset").collect()
    assert [u.magic for u in tl] == [1, 1, 3, 1, 5, 1] and tl[4].prev_pos == 156
    wheel = spark.read.format("rocketmq_timerwheel").load(str(BASIC)).collect()
    assert len(wheel) == 5 and sum(w.num for w in wheel) == 4


def test_index_data_source(spark):
    """rocketmq.index on pair_default/B (broker.conf: 500 slots, 2000 entries): every written entry,
    the same as the file's bytes read with struct."""
    need_oracle()
    files = sorted((PAIR_B / "index").iterdir())
    want = []
    for p in files:
        data = p.read_bytes()
        begin, count = struct.unpack(">q", data[:8])[0], struct.unpack(">i", data[36:40])[0]
        for n in range(1, count):
            kh, phy, diff, prev = struct.unpack_from(">iqii", data, 40 + 500 * 4 + n * 20)
            want.append((f"index/{p.name}", n, kh, kh % 500, phy, begin + diff * 1000, prev))
    df = spark.read.format("rocketmq.index").option("maxHashSlotNum", 500).option("maxIndexNum", 2000) \
        .load(str(PAIR_B))
    got = [(r.file, r.entry, r.key_hash, r.slot, r.phy_offset, r.timestamp, r.prev_index)
           for r in df.orderBy("file", "entry").collect()]
    assert want and got == want
    assert spark.read.format("rocketmq_index").load(str(PAIR_B)).count() == len(want)  # geometry from the size


def test_parquet_output(spark, tmp_path):
    need_oracle()
    from mqtool.spark.runner import write_parquet

    write_parquet(spark, str(BASIC), str(tmp_path / "pq"))
    assert spark.read.parquet(str(tmp_path / "pq" / "commitlog")).count() == 115
    assert spark.read.parquet(str(tmp_path / "pq" / "timerlog")).count() == 6


def test_standalone_cluster_report_equals_local(tmp_path):
    """spark-audit --master spark://127.0.0.1:PORT on a master and two 1-core workers."""
    need_oracle()
    if not _java():
        pytest.skip("Java is not installed")
    from mqtool.spark.cluster import StandaloneCluster

    cluster = StandaloneCluster(tmp_path / "cluster", workers=2, cores=1, memory="1g")
    try:
        cluster.start()
        out = tmp_path / "report.json"
        env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
        cmd = [sys.executable, "-m", "mqtool", "spark-audit", str(BASIC), "--master", cluster.url,
               "--out", str(out), "--split-mb", "0.03125"]
        for k, v in cluster.session_conf().items():
            cmd += ["--conf", f"{k}={v}"]
        cmd += ["--conf", "spark.executor.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"]
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240)
        assert res.returncode == 0, res.stderr[-3000:]
        got = json.loads(out.read_text())
    finally:
        cluster.stop()
    assert got["engine"]["master"] == cluster.url and got["engine"]["executors"] == 2
    local = run_local(BASIC, split_bytes=32768)
    assert got["engine"]["partitions"] == local["engine"]["partitions"]
    assert without_engine(got) == without_engine(local)
    assert "WARN" not in res.stderr and "Setting default log level" not in res.stderr
