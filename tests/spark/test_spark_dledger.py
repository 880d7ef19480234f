"""Spark on the issue-15 layouts: `spark-audit` on DLedger stores equals the local audit,
`rocketmq.commitlog` reads DLedger entries (also cut at entry starts, and a converted store), and
`rocketmq.consumequeue` reads BatchConsumeQueue units (RocketMQ 5.3.1 / DLedger 0.3.1.2 oracles)."""

import json
import shutil
import struct

import pytest
from dledgerkit import make_converted_store

from conftest import ORACLE, copy_with_wheel, need_oracle
from mqtool.audit.runner import run_local

pytestmark = [pytest.mark.spark, pytest.mark.oracle]

DLEDGER = ORACLE / "dledger-5.3.1"
BATCHCQ = ORACLE / "batchcq-5.3.1"
DATA0 = "dledger-n0/data/00000000000000000000"
DATA1 = "dledger-n0/data/00000000000000016384"


@pytest.fixture(scope="module")
def spark():
    """The session of tests/spark (local[2]); `getOrCreate` shares it with the other Spark modules."""
    if shutil.which("java") is None:
        pytest.skip("Java is not installed: Spark tests need Java 17")
    from mqtool.spark.runner import spark_session

    return spark_session("local[2]", fast_jvm=True, conf={"spark.sql.shuffle.partitions": "2"})


def without_engine(report: dict) -> dict:
    return {k: v for k, v in report.items() if k != "engine"}


@pytest.mark.parametrize("split", [0, 4096])
def test_spark_audit_of_the_dledger_oracle_equals_local(spark, split):
    need_oracle()
    from mqtool.spark.runner import run_spark_audit

    got = run_spark_audit(spark, DLEDGER / "store", split_bytes=split)
    local = run_local(DLEDGER / "store", split_bytes=split)
    assert got["engine"]["partitions"] == local["engine"]["partitions"]
    assert without_engine(got) == without_engine(local)
    assert got["findings"] == []
    assert got["summary"]["commitlog"]["records"] == 42
    dl = got["summary"]["dledger"]
    assert (dl["entries"], dl["begin_index"], dl["end_index"], dl["committed_index"], dl["committed_pos"]) == \
        (42, 0, 41, 41, 30025)


def test_spark_audit_of_a_damaged_dledger_store_equals_local(spark, tmp_path):
    """Entry 5's magic (file 0) and entry 27's index (file 1) broken, an index unit rewritten; 4 KiB slices."""
    need_oracle()
    from mqtool.spark.runner import run_spark_audit

    root = copy_with_wheel(DLEDGER / "store", tmp_path / "store")
    for rel, at, data in ((DATA0, 3202, struct.pack(">i", 7)), (DATA1, 8, struct.pack(">q", 99)),
                          ("dledger-n0/index/00000000000000000000", 3 * 32 + 4, struct.pack(">q", 12345))):
        with open(root / rel, "r+b") as fh:
            fh.seek(at)
            fh.write(data)
    got = run_spark_audit(spark, root, split_bytes=4096)
    assert without_engine(got) == without_engine(run_local(root, split_bytes=4096))
    msgs = {(f["check"], f["file"], f["offset"], f["message"].split(";")[0]) for f in got["findings"]}
    assert ("dledger.integrity", DATA0, 3202, "unknown entry magic 7") in msgs
    assert ("dledger.integrity", DATA1, 0, "entry index 99 does not follow 4") in msgs
    assert ("dledger.integrity", DATA1, 0, "data file after the end of the data at "
            f"{DATA0}:3202: the broker's recovery truncates it") in msgs
    assert any(c == "dledger.index" and o == 96 and "(1, 12345, 481, 3, 0)" in m for c, _f, o, m in msgs)


@pytest.mark.parametrize("split", [None, "4096"])
def test_commitlog_data_source_reads_dledger_entries(spark, split):
    """Every entry of records.jsonl, at RocketMQ's physical offset, with its DLedger index, term and pos."""
    need_oracle()
    r = spark.read.format("rocketmq.commitlog")
    df = (r.option("splitBytes", split) if split else r).load(str(DLEDGER / "store"))
    if split:
        assert df.rdd.getNumPartitions() == 8  # 4 slices per 16 KiB data file, cut at entry starts
    rows = df.select("file", "physical_offset", "topic", "queue_id", "queue_offset", "crc_ok", "dledger_index",
                     "dledger_term", "dledger_pos").collect()
    want = [json.loads(x) for x in (DLEDGER / "records.jsonl").read_text().splitlines()]
    assert sorted((x.physical_offset, x.topic, x.queue_id, x.queue_offset, x.dledger_index, x.dledger_term,
                   x.dledger_pos) for x in rows) == \
        [(w["physicalOffset"], w["topic"], w["queueId"], w["queueOffset"], w["dledgerIndex"], w["dledgerTerm"],
          w["dledgerPos"]) for w in want]
    assert all(x.crc_ok for x in rows) and {x.file for x in rows} == {DATA0, DATA1}


def test_commitlog_data_source_reads_a_converted_store(spark, tmp_path):
    """commitlog/ below dividedCommitlogOffset (no DLedger columns), then the DLedger entries."""
    root, old, divided, end, _ = make_converted_store(tmp_path)
    rows = spark.read.format("rocketmq.commitlog").load(str(root)) \
        .select("physical_offset", "total_size", "dledger_index", "dledger_pos").collect()
    rows = sorted((x.physical_offset, x.total_size, x.dledger_index, x.dledger_pos) for x in rows)
    olds = [(r["physicalOffset"], r["storeSize"], None, None) for r in old]
    assert rows[: len(old)] == sorted(olds)
    new = rows[len(old):]
    assert [(x[2], x[3]) for x in new] == [(0, divided), (1, new[0][0] + new[0][1]), (2, new[1][0] + new[1][1])]
    assert new[0][0] == divided + 48 and new[2][0] + new[2][1] == end


def test_consumequeue_data_source_reads_batch_units(spark):
    """Every unit of store-meta.json: BatchCQ units with base offset and batch size, ConsumeQueue units with 1."""
    need_oracle()
    meta = json.loads((BATCHCQ / "store-meta.json").read_text())
    want = sorted((q["topic"], q["queueId"], u["queueOffset"], u["physicalOffset"], u["size"], u["tagsCode"],
                   u.get("batchNum", 1)) for q in meta["consumeQueues"] for u in q["units"])
    rows = spark.read.format("rocketmq.consumequeue").load(str(BATCHCQ / "store")).collect()
    got = sorted((x.topic, x.queue_id, x.queue_offset, x.commitlog_offset, x.size, x.tags_code, x.batch_size)
                 for x in rows)
    assert got == want
    batch = {q["topic"] for q in meta["consumeQueues"] if q["cqType"] == "BatchCQ"}
    assert batch and all((x.store_time is not None) == (x.topic in batch) for x in rows)
    assert any(x.batch_size > 1 for x in rows)
