"""`spark-audit FLEET`: every store of a fleet in one plan and one pass, a section per store, the cluster's
totals, and the cross-store checks (replicas, a UNIQ_KEY on two broker groups).

Two fleets: the real HA pair `ha-async-5.3.1` (its README: the slave is a byte prefix of the master and lacks
exactly the 120 phase-2 records P2-0000..P2-0119, 49842 bytes from 124182 to 174024), and a builder-made fleet
where broker-b stored order-0003 again under broker-a's UNIQ_KEY 3 s later (a producer retry that went to
another broker), while order-7777 is on both groups under two different UNIQ_KEYs (a business key reused: no
finding) and broker-a's slave lacks order-7777.
"""

import json
import shutil
from pathlib import Path

import jsonschema
import pytest
from audit.audit_stores import body_position, patch
from fleetkit import assert_ha_promotion_loss
from typer.testing import CliRunner

from conftest import ORACLE, need_oracle
from mqtool.audit.fleet import plan_fleet_audit, run_fleet_local
from mqtool.audit.runner import run_local
from mqtool.builder.replica import ReplicaShape, write_replica
from mqtool.builder.writer import StoreWriter
from mqtool.cli.app import app
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.store.fleet import open_fleet

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "mqtool/schemas/audit-report.json").read_text())
HA = ORACLE / "ha-async-5.3.1"
T0 = 1795000000000
CONF = "brokerClusterName=FleetCluster\nmappedFileSizeCommitLog=4096\nmappedFileSizeConsumeQueue=320\n"
CONFIG = BrokerConfig().with_overrides({"mappedFileSizeCommitLog": 4096, "mappedFileSizeConsumeQueue": 320})
runner = CliRunner()


def uniq(i: int) -> str:
    return f"AC1100010000{i:04X}"


def _put(w: StoreWriter, key: str, uniq_key: str, at: int, born: int | None = None) -> int:
    props = [("KEYS", key), ("UNIQ_KEY", uniq_key), ("TAGS", "t")]
    rec = w.append_message(
        "TopicA", 0, b"body of " + key.encode(), props, store_timestamp=at, born_timestamp=born or at - 5
    )
    return rec.physical_offset


def _conf(path: Path, name: str, broker_id: int, role: str) -> None:
    path.write_text(CONF + f"brokerName={name}\nbrokerId={broker_id}\nbrokerRole={role}\n")


@pytest.fixture(scope="module")
def retry_fleet(tmp_path_factory) -> tuple[Path, dict]:
    """broker-a (master, slave behind by order-7777) and broker-b; the offsets of the records that matter."""
    fleet = tmp_path_factory.mktemp("audit-fleet") / "fleet"
    offsets = {}
    with StoreWriter(fleet / "a-master", CONFIG) as w:
        for i in range(6):
            offsets[f"a{i}"] = _put(w, f"order-{i:04d}", uniq(i), T0 + 1000 * i)
        offsets["a7777"] = _put(w, "order-7777", uniq(0xA777), T0 + 7000)
        w.write_checkpoint()
    _conf(fleet / "a-master.broker.conf", "broker-a", 0, "ASYNC_MASTER")
    write_replica(fleet / "a-master", fleet / "a-slave", CONFIG, ReplicaShape(end=offsets["a7777"]))
    _conf(fleet / "a-slave.broker.conf", "broker-a", 1, "SLAVE")
    with StoreWriter(fleet / "b-master", CONFIG) as w:
        offsets["b100"] = _put(w, "order-0100", uniq(0x100), T0 + 2500)
        offsets["b3"] = _put(w, "order-0003", uniq(3), T0 + 6000, born=T0 + 5995)  # the retry
        offsets["b7777"] = _put(w, "order-7777", uniq(0xB777), T0 + 7100)
        w.write_checkpoint()
    _conf(fleet / "b-master.broker.conf", "broker-b", 0, "ASYNC_MASTER")
    return fleet, offsets


def test_ha_pair_one_plan_a_section_per_store_and_what_the_slave_lacks():
    need_oracle()
    fleet = open_fleet(HA)
    report = run_fleet_local(fleet)
    jsonschema.validate(report, SCHEMA)
    manifest = json.loads((HA / "manifest.json").read_text())
    sent = manifest["phase2"]["sent"]
    # each section is that store's own `spark-audit STORE` (with its own broker.conf), the tasks of all in one plan
    own = {m.name: run_local(m.open()) for m in fleet.members}
    assert [(s["name"], s["dir"], s["broker_group"], s["role"]) for s in report["stores"]] == [
        ("broker-ha:0", "master", "broker-ha", "ASYNC_MASTER"),
        ("broker-ha:1", "slave", "broker-ha", "SLAVE"),
    ]
    for s in report["stores"]:
        assert (s["store"], s["summary"], s["findings"]) == (
            own[s["name"]]["store"],
            own[s["name"]]["summary"],
            own[s["name"]]["findings"],
        )
    assert report["engine"] == {
        "master": "local (no Spark)",
        "executors": 1,
        "partitions": sum(o["engine"]["partitions"] for o in own.values()),
    }
    assert [s["totals"]["tasks"] for s in report["stores"]] == [o["engine"]["partitions"] for o in own.values()]
    # README: master 420 records up to 174024, slave 300 (P1-*) up to 124182, neither store damaged
    assert [
        (s["totals"]["records"], s["summary"]["commitlog"]["max_offset"], s["totals"]["finding_counts"])
        for s in report["stores"]
    ] == [
        (420, 174024, {"error": 0, "warning": 0, "info": 0}),
        (300, 124182, {"error": 0, "warning": 0, "info": 0}),
    ]
    t = report["totals"]
    assert (t["stores"], t["broker_groups"], t["records"], t["duplicate_uniq_keys"], t["uniq_keys_on_two_groups"]) == (
        2,
        1,
        720,
        0,
        0,
    )
    assert t["bytes"] == sum(s["summary"]["commitlog"]["bytes"] for s in report["stores"])
    assert (t["last_store_ts"], t["finding_counts"]) == (
        sent[-1]["storeTimestamp"],
        {"error": 0, "warning": 2, "info": 1},
    )
    # the replica check: a byte prefix, behind by exactly the 120 phase-2 records
    (group,) = report["cross_store"]["replicas"]["groups"]
    (pair,) = group["pairs"]
    assert (group["master"], pair["slave"], pair["common"]["first_difference"]) == ("broker-ha:0", "broker-ha:1", None)
    assert pair["behind"] == {"bytes": 174024 - 124182, "records": 120, "store_time_ms": 1795774275451 - 1795774269680}
    lost = pair["promotion_loses"]
    assert "messages" not in lost  # the keys are `inspect FLEET replicas --json`'s
    assert (lost["records"], lost["bytes"]) == (120, sum(s["wroteBytes"] for s in sent))
    assert_ha_promotion_loss(lost, sent)
    assert report["cross_store"]["uniq_keys_on_two_groups"] == []
    assert [(f["check"], f["severity"], f["file"], f["offset"], f["message"]) for f in report["findings"]] == [
        (
            "fleet.replica",
            "info",
            "broker-ha:1",
            None,
            "broker-ha:1 vs broker-ha:0: no delayOffset.json on the slave (the master has one)",
        ),
        (
            "fleet.replica",
            "warning",
            "broker-ha:1",
            None,
            "broker-ha:1 vs broker-ha:0: the slave's topics.json lacks 1 topic(s) of the master (TopicHA): "
            "SlaveSynchronize has not copied them",
        ),
        (
            "fleet.replica",
            "warning",
            "broker-ha:1",
            124182,
            "broker-ha:1 vs broker-ha:0: a promotion now would lose 120 record(s) (49560 bytes)",
        ),
    ]


def test_a_uniq_key_on_two_broker_groups(retry_fleet):
    root, off = retry_fleet
    report = run_fleet_local(open_fleet(root))
    jsonschema.validate(report, SCHEMA)
    assert [(s["name"], s["dir"], s["totals"]["records"]) for s in report["stores"]] == [
        ("broker-a:0", "a-master", 7),
        ("broker-a:1", "a-slave", 6),
        ("broker-b:0", "b-master", 3),
    ]
    # within one store nothing repeats; order-0003 on broker-a's master and slave is a replica, not a duplicate
    assert [s["summary"]["duplicate_uniq_keys"] for s in report["stores"]] == [0, 0, 0]
    copy = {"topic": "TopicA", "queue_id": 0}
    assert report["cross_store"]["uniq_keys_on_two_groups"] == [
        {
            "uniq_key": uniq(3),
            "broker_groups": ["broker-a", "broker-b"],
            "copies": [
                {
                    "store": "broker-a:0",
                    "broker_group": "broker-a",
                    **copy,
                    "queue_offset": 3,
                    "physical_offset": off["a3"],
                    "born_timestamp": T0 + 2995,
                    "store_timestamp": T0 + 3000,
                },
                {
                    "store": "broker-a:1",
                    "broker_group": "broker-a",
                    **copy,
                    "queue_offset": 3,
                    "physical_offset": off["a3"],
                    "born_timestamp": T0 + 2995,
                    "store_timestamp": T0 + 3000,
                },
                {
                    "store": "broker-b:0",
                    "broker_group": "broker-b",
                    **copy,
                    "queue_offset": 1,
                    "physical_offset": off["b3"],
                    "born_timestamp": T0 + 5995,
                    "store_timestamp": T0 + 6000,
                },
            ],
        }
    ]
    assert report["totals"]["uniq_keys_on_two_groups"] == 1
    (pair,) = report["cross_store"]["replicas"]["groups"][0]["pairs"]
    assert (pair["slave"], pair["behind"]["records"], pair["promotion_loses"]["per_topic"]) == (
        "broker-a:1",
        1,
        {"TopicA": 1},
    )
    assert report["cross_store"]["replicas"]["groups"][1] == {
        "group": "broker-b",
        "stores": ["broker-b:0"],
        "kind": "single",
        "master": "broker-b:0",
        "pairs": [],
    }
    ours = [f for f in report["findings"] if f["check"] == "fleet.uniq_key"]
    assert ours == [
        {
            "check": "fleet.uniq_key",
            "severity": "warning",
            "file": "b-master/commitlog/00000000000000000000",
            "offset": off["b3"],
            "topic": "TopicA",
            "queue_id": 0,
            "message": f"UNIQ_KEY {uniq(3)} is stored on 2 broker groups (broker-a, broker-b: broker-a:0 @{off['a3']}, "
            f"broker-a:1 @{off['a3']}, broker-b:0 @{off['b3']}): a producer retry that went to another "
            "broker; its consumers get it twice",
        }
    ]


def test_the_plan_holds_every_stores_files_and_names_their_store(retry_fleet):
    root, _off = retry_fleet
    fplan = plan_fleet_audit(open_fleet(root))
    assert [t.index for t in fplan.tasks] == list(range(len(fplan.tasks)))
    by_store = {}
    for t in fplan.tasks:
        by_store.setdefault(t.store, []).append(t.task)
    assert list(by_store) == ["broker-a:0", "broker-a:1", "broker-b:0"]
    for sp in fplan.stores:  # a store's tasks are its own plan's, in its order, reading its own files
        assert by_store[sp.member.name] == sp.plan.tasks
        assert {Path(t.root) for t in sp.plan.tasks} == {Path(sp.plan.root)}


def test_cli_fleet_exit_codes_and_report_file(retry_fleet, tmp_path):
    root, _off = retry_fleet
    out = tmp_path / "r.json"
    res = runner.invoke(app, ["spark-audit", str(root), "--local", "--json", "--out", str(out)])
    assert res.exit_code == 0, res.output  # warnings only
    doc = json.loads(res.stdout)
    assert doc == json.loads(out.read_text()) and doc["fleet"] == str(root.absolute())
    assert set(doc) == {"version", "fleet", "engine", "stores", "totals", "cross_store", "findings"}
    assert doc["totals"]["finding_counts"] == {"error": 0, "warning": 2, "info": 0}  # the retry; the slave behind
    assert runner.invoke(app, ["spark-audit", str(root), "--local", "--fail-on", "warning"]).exit_code == 1
    res = runner.invoke(app, ["spark-audit", str(root), "--local"])
    assert "UNIQ_KEYs on two broker groups: 1 (AC11000100000003)" in res.stdout
    # a flipped body byte in broker-b's first record: an error in broker-b's section only, and exit 1
    broken = tmp_path / "fleet"
    shutil.copytree(root, broken)
    patch(broken / "b-master" / "commitlog" / "00000000000000000000", body_position(broken / "b-master", 0), b"\xff")
    res = runner.invoke(app, ["spark-audit", str(broken), "--local", "--json"])
    bad = json.loads(res.stdout)
    jsonschema.validate(bad, SCHEMA)
    assert res.exit_code == 1
    assert [
        (f["check"], f["severity"], f["file"], f["offset"])
        for f in bad["stores"][2]["findings"]
        if f["severity"] == "error"
    ] == [("commitlog.integrity", "error", "commitlog/00000000000000000000", 0)]
    assert [s["findings"] for s in bad["stores"][:2]] == [s["findings"] for s in doc["stores"][:2]]
    assert bad["totals"]["finding_counts"]["error"] == 1


@pytest.mark.spark
def test_spark_runs_the_fleet_in_one_job_with_the_local_report(retry_fleet):
    if shutil.which("java") is None:
        pytest.skip("Java is not installed: Spark tests need Java 17")
    from mqtool.spark.runner import run_spark_fleet_audit, spark_session

    spark = spark_session("local[2]", fast_jvm=True, conf={"spark.sql.shuffle.partitions": "2"})  # tests/spark's
    try:  # stopped after: a session left active would be reused by later tests that expect none (test_errors)
        root, _off = retry_fleet
        jobs = spark.sparkContext.statusTracker().getJobIdsForGroup(None)
        report = run_spark_fleet_audit(spark, open_fleet(root))
        assert len(spark.sparkContext.statusTracker().getJobIdsForGroup(None)) == len(jobs) + 1  # one job
    finally:
        spark.stop()
    local = run_fleet_local(open_fleet(root))
    assert report["engine"]["partitions"] == local["engine"]["partitions"]
    assert {k: v for k, v in report.items() if k != "engine"} == {k: v for k, v in local.items() if k != "engine"}


def test_fixture_fleet_late_joiners_placeholder_units_are_no_damage():
    """fixtures/fleet: broker-b's slave joined late (CommitLog from 4096); `ConsumeQueue#fillPreBlank` padded its
    queues' first file with (0, Integer.MAX_VALUE, 0) units up to its first real unit (7, 7 and 6, as the replicas
    view counts them). Its audit finds nothing, and its queues start after the placeholders."""
    report = run_fleet_local(open_fleet(ROOT / "fixtures" / "fleet"))
    late = report["stores"][3]
    assert (late["name"], late["findings"], late["summary"]["consumequeues"]) == (
        "broker-b:1",
        [],
        {"queues": 3, "units": 40, "bad_units": 0},
    )
    queues = {
        (t, q): (v["cq_min_offset"], v["cq_max_offset"], v["min_queue_offset"])
        for t, d in late["summary"]["topics"].items()
        for q, v in d["queues"].items()
        if t.startswith("Topic")
    }
    assert queues == {("TopicOrder", "0"): (7, 20, 7), ("TopicOrder", "1"): (7, 20, 7), ("TopicPay", "0"): (6, 20, 6)}
    placeholders = [
        q["placeholder_units"] for q in report["cross_store"]["replicas"]["groups"][1]["pairs"][0]["consume_queues"]
    ]
    assert placeholders == [7, 7, 6]
    assert [s["totals"]["finding_counts"]["error"] for s in report["stores"]] == [0, 1, 0, 0]  # broker-a's torn slave


def test_without_broker_conf_each_store_is_its_own_group_and_the_confirmed_keys_are_capped(tmp_path, monkeypatch):
    """No broker.conf: discovery cannot tell a slave from another broker, so each store is its own group and a
    full copy shares all 90 UNIQ_KEYs with its master. Only the first MAX hashes are read back; the rest are
    counted by hash."""
    from fleetkit import CONFIG as KIT_CONFIG
    from fleetkit import build_master

    import mqtool.audit.fleet as audit_fleet

    build_master(tmp_path / "fleet" / "m", 90)
    write_replica(tmp_path / "fleet" / "m", tmp_path / "fleet" / "s", KIT_CONFIG)
    monkeypatch.setattr(audit_fleet, "MAX_DUPLICATE_FINDINGS", 10)
    report = run_fleet_local(open_fleet(tmp_path / "fleet", config=None))
    keys = report["cross_store"]["uniq_keys_on_two_groups"]
    assert report["totals"]["uniq_keys_on_two_groups"] == 90
    # the 10 confirmed are those of the 10 smallest key hashes (the distinct-hash sort), the same every run
    assert [k["uniq_key"] for k in keys] == [
        "U0002", "U0003", "U0012", "U0027", "U0034", "U0035", "U0072", "U0077", "U0088", "U0089",
    ]
    assert all(k["broker_groups"] == ["m", "s"] and [c["store"] for c in k["copies"]] == ["m", "s"] for k in keys)
    assert all(k["copies"][0]["physical_offset"] == k["copies"][1]["physical_offset"] for k in keys)
    assert sum(f["check"] == "fleet.uniq_key" for f in report["findings"]) == 10


def test_cli_local_parquet_writes_each_store_under_its_directory(tmp_path):
    import pyarrow.parquet as pq

    out = tmp_path / "pq"
    res = runner.invoke(app, ["spark-audit", str(ROOT / "fixtures" / "fleet"), "--local", "--parquet", str(out)])
    assert res.exit_code == 1  # broker-a's slave: the torn record is an error
    rows = {
        d: pq.read_table(out / d / "commitlog").num_rows
        for d in ("broker-a/master", "broker-a/slave", "broker-b/master", "broker-b/slave-late")
    }
    assert rows == {"broker-a/master": 90, "broker-a/slave": 70, "broker-b/master": 60, "broker-b/slave-late": 40}


def test_cli_fleet_with_a_missing_config_is_one_error_line(tmp_path):
    res = runner.invoke(app, ["spark-audit", str(ROOT / "fixtures" / "fleet"), "--local", "--config", str(tmp_path)])
    assert res.exit_code == 2
    assert res.output == f"Error: {tmp_path}: cannot read (Is a directory)\n"
