"""`spark-audit` on a RocksDB consume queue store (spec §14) equals the local audit, `rocksdb.integrity`
findings included: the RocksDB checks run on the driver (`report.finish`), the queue tasks on the workers.
The store is fixtures/demo turned into a RocksDB consume queue by `builder/rocksdb.py`, its DemoTopicB/1 max
entry moved two offsets past the last key (as in tests/audit/test_rocksdb_integrity.py)."""

import shutil

import pytest

from mqtool.audit.runner import run_local
from mqtool.builder.rocksdb import ROCKSDICT_CONFIG, rocksdb_copy_of
from mqtool.formats.rocksdb_cq import MAX, build_offset_key, offset_value

pytestmark = [pytest.mark.spark]


@pytest.fixture(scope="module")
def spark():
    """The session of tests/spark (local[2]); `getOrCreate` shares it with the other Spark modules."""
    if shutil.which("java") is None:
        pytest.skip("Java is not installed: Spark tests need Java 17")
    from mqtool.spark.runner import spark_session

    return spark_session("local[2]", fast_jvm=True, conf={"spark.sql.shuffle.partitions": "2"})


def test_spark_audit_of_a_damaged_rocksdb_store_equals_local(spark, tmp_path):
    from rocksdict import Options, Rdict

    from mqtool.spark.runner import run_spark_audit

    root = rocksdb_copy_of("fixtures/demo", tmp_path / "store")
    db = Rdict(str(root / "consumequeue"), Options(raw_mode=True), column_families={"offset": Options(raw_mode=True)})
    db.get_column_family("offset")[build_offset_key("DemoTopicB", 1, MAX)] = offset_value.build(
        {"phy_offset": 25856, "cq_offset": 29})
    db.close()
    (root / "consumequeue" / ROCKSDICT_CONFIG).unlink(missing_ok=True)
    got, local = run_spark_audit(spark, root), run_local(root)
    assert {k: v for k, v in got.items() if k != "engine"} == {k: v for k, v in local.items() if k != "engine"}
    assert [(f["severity"], f["topic"], f["queue_id"], f["message"]) for f in got["findings"]
            if f["check"] == "rocksdb.integrity"] == [
        ("error", "DemoTopicB", 1, "the offset table's max entry names queue offset 29 but the last entry is 27: "
         "offsets 28..29 have no entry (getMaxOffsetInQueue answers 30)")]
    assert got["summary"]["rocksdb"]["checkpoint"] == 27307
