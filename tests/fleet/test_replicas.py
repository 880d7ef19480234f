"""The replicas view: real HA pairs (what a promotion would lose, to the record) and builder-made slave shapes."""

import json
import shutil
from pathlib import Path

import pytest
from fleetkit import CONFIG, FILE, T0, assert_ha_promotion_loss, build_master, fleet_with

from conftest import ORACLE, need_oracle
from mqtool.builder.replica import ReplicaShape, join_offset, write_replica
from mqtool.inspect.replicas import replicas_view
from mqtool.store.fleet import open_fleet

HA = ORACLE / "ha-async-5.3.1"


def _pair(fleet: Path, slave: str, config: Path | None = None) -> dict:
    doc = replicas_view(open_fleet(fleet, config), 0)
    return next(p for g in doc["groups"] for p in g.get("pairs", []) if p["slave"] == slave)


def _end(rec) -> int:
    return rec.physical_offset + rec.total_size


def test_ha_async_oracle_promotion_loses_exactly_phase_two():
    """README: slave behind 174024 - 124182 = 49842 bytes = the 120 phase-2 records P2-0000..P2-0119."""
    need_oracle()
    manifest = json.loads((HA / "manifest.json").read_text())
    doc = replicas_view(open_fleet(HA), 0)
    (group,) = doc["groups"]
    assert (group["group"], group["kind"], group["master"]) == ("broker-ha", "classic", "broker-ha:0")
    (pair,) = group["pairs"]
    assert pair["slave"] == "broker-ha:1"
    assert pair["master_commitlog"]["max_offset"] == 174024
    assert pair["slave_commitlog"]["max_offset"] == 124182
    assert pair["common"] == {
        "from_offset": 0,
        "to_offset": 124182,
        "bytes": 124182,
        "first_difference": None,
        "differing_bytes": 0,
        "differing_regions": [],
        "more_regions": False,
        "differing_records": pair["common"]["differing_records"],
    }
    assert pair["common"]["differing_records"]["records"] == 0
    assert pair["behind"] == {"bytes": 49842, "records": 120, "store_time_ms": 1795774275451 - 1795774269680}
    lost = pair["promotion_loses"]
    sent = manifest["phase2"]["sent"]
    assert [m["keys"] for m in lost["messages"]] == [[s["key"] for s in sent][i : i + 1] for i in range(120)]
    assert [m["uniq_key"] for m in lost["messages"]] == [s["uniqKey"] for s in sent]
    assert [m["offset"] for m in lost["messages"]] == [s["wroteOffset"] for s in sent]
    assert [(m["queue_id"], m["queue_offset"]) for m in lost["messages"]] == [
        (s["queueId"], s["queueOffset"]) for s in sent
    ]
    assert_ha_promotion_loss(lost, sent)
    assert pair["slave_commitlog"]["shutdown"] == {"clean": True, "abort_file": False}
    # facts.txt: the slave's own queues hold units 0..149 of each queue, identical to the master's
    assert [
        (
            q["queue_id"],
            q["master_max_offset"],
            q["slave_max_offset"],
            q["expected_max_offset"],
            q["mismatched_units"],
            q["dispatch_behind"],
        )
        for q in pair["consume_queues"]
    ] == [(0, 210, 150, 150, 0, 0), (1, 210, 150, 150, 0, 0)]
    assert [(f["severity"], f["message"]) for f in doc["findings"]] == [
        ("info", "broker-ha:1 vs broker-ha:0: no delayOffset.json on the slave (the master has one)"),
        (
            "warning",
            "broker-ha:1 vs broker-ha:0: the slave's topics.json lacks 1 topic(s) of the master (TopicHA): "
            "SlaveSynchronize has not copied them",
        ),
        ("warning", "broker-ha:1 vs broker-ha:0: a promotion now would lose 120 record(s) (49560 bytes)"),
    ]
    # README: SlaveSynchronize did not run: the slave's topics.json lacks TopicHA (dataVersion counter 0 vs 1),
    # no delayOffset.json on the slave, empty consumer offset tables on both
    cfg = pair["config"]
    assert (cfg["topics"]["only_on_master"], cfg["topics"]["only_on_slave"]) == (["TopicHA"], [])
    assert (cfg["topics"]["master_version"]["counter"], cfg["topics"]["slave_version"]["counter"]) == (1, 0)
    assert (cfg["delay_offsets"]["master_file"], cfg["delay_offsets"]["slave_file"]) == (True, False)
    assert cfg["consumer_offsets"]["entries"] == 0 and cfg["subscription_groups"]["only_on_master"] == []


@pytest.mark.parametrize("pair_dir", ["pair_default", "pair-4.9"])
def test_oracle_pairs_a_is_a_byte_prefix_of_b(pair_dir: str):
    """A and B are copies of one master (broker.conf for both): B, which goes further, is the reference;
    A holds no byte B does not, and lacks exactly B.manifest's newRecords."""
    need_oracle()
    base = ORACLE / pair_dir
    new = json.loads((base / "B.manifest.json").read_text())["newRecords"]
    doc = replicas_view(open_fleet(base, base / "broker.conf"), 0)
    (group,) = doc["groups"]
    assert group["master"] == "broker-a:0@B" and "furthest" in group["master_reason"]
    (pair,) = group["pairs"]
    assert pair["common"]["first_difference"] is None
    assert pair["common"]["to_offset"] == new[0]["offset"] == pair["slave_commitlog"]["max_offset"]
    assert [m["offset"] for m in pair["only_on_master"]["messages"]] == [r["offset"] for r in new]
    assert [m["uniq_key"] for m in pair["only_on_master"]["messages"]] == [r["uniqKey"] for r in new]
    assert pair["behind"]["records"] == len(new)


def test_full_copy_is_byte_identical_to_the_master(tmp_path: Path):
    """The builder's slave reput builds the same ConsumeQueues, index and checkpoint as the master's."""
    fleet, recs = fleet_with(tmp_path, {"s": ReplicaShape()})
    m, s = fleet / "m", fleet / "s"
    for p in sorted(x for x in m.rglob("*") if x.is_file()):
        assert (s / p.relative_to(m)).read_bytes() == p.read_bytes(), p
    pair = _pair(fleet, "broker-x:1")
    assert pair["behind"] == {"bytes": 0, "records": 0, "store_time_ms": 0}
    assert pair["promotion_loses"]["records"] == 0
    assert pair["common"]["bytes"] == _end(recs[-1])


def test_slave_behind_at_a_record_boundary(tmp_path: Path):
    recs = build_master(tmp_path / "probe")  # the kit's master is deterministic: its offsets, learnt aside
    fleet, _ = fleet_with(tmp_path, {"s": ReplicaShape(end=_end(recs[59]))})
    pair = _pair(fleet, "broker-x:1")
    lost = pair["promotion_loses"]
    assert [m["keys"] for m in lost["messages"]] == [[f"K{i:04d}"] for i in range(60, 90)]
    assert lost["per_topic"] == {"TopicA": 20, "TopicB": 10}
    assert pair["behind"] == {"bytes": _end(recs[-1]) - _end(recs[59]), "records": 30, "store_time_ms": 300}
    assert pair["common"]["first_difference"] is None
    assert pair["slave_commitlog"]["last_store_timestamp"] == T0 + 590


def test_slave_joined_late_starts_at_the_masters_last_file_with_placeholder_units(tmp_path: Path):
    """DefaultHAConnection: a slave reporting 0 gets data from the master's last file start; its queues
    begin with fillPreBlank units (0, Integer.MAX_VALUE, 0) up to the first queue offset it dispatches."""
    recs = build_master(tmp_path / "probe")
    begin = join_offset(_end(recs[50]), FILE)
    fleet, _ = fleet_with(tmp_path, {"late": ReplicaShape(begin=begin)})
    pair = _pair(fleet, "broker-x:1")
    assert begin == 8192
    assert pair["slave_commitlog"]["min_offset"] == 8192
    assert pair["common"]["from_offset"] == 8192 and pair["common"]["first_difference"] is None
    assert pair["promotion_loses"]["records"] == 0
    first = {}
    for r in recs:
        if r.physical_offset >= begin:
            first.setdefault((r.topic, r.queue_id), r.queue_offset)
    got = {
        (q["topic"], q["queue_id"]): (q["slave_min_offset"], q["placeholder_units"], q["mismatched_units"])
        for q in pair["consume_queues"]
    }
    units_per_file = 320 // 20
    assert got == {k: (v, v % units_per_file, 0) for k, v in first.items()}


def test_slave_killed_mid_transfer(tmp_path: Path):
    """A cut inside record 70's header: recovery ends at record 70; the torn bytes, the abort file, the
    pre-allocated next file and queues dispatched only to record 60 are all reported."""
    recs = build_master(tmp_path / "probe")
    cut = recs[70].physical_offset + 50
    shape = ReplicaShape(end=cut, dispatched_to=_end(recs[60]), abort_pid="4242", preallocated=True)
    fleet, _ = fleet_with(tmp_path, {"killed": shape})
    pair = _pair(fleet, "broker-x:1")
    sc = pair["slave_commitlog"]
    assert sc["max_offset"] == recs[70].physical_offset
    head = (fleet / "m" / "commitlog" / recs[70].file).read_bytes()[recs[70].position :][:50]
    assert sc["torn_bytes"] == len(head.rstrip(b"\0")) > 40  # the cut's bytes but their trailing zeros
    assert sc["shutdown"] == {"clean": False, "abort_file": True}
    assert sc["files_past_end"] == [f"{cut - cut % FILE + FILE:020d}"]
    assert [m["keys"] for m in pair["promotion_loses"]["messages"]] == [[f"K{i:04d}"] for i in range(70, 90)]
    behind = {}
    for r in recs[61:70]:
        behind[(r.topic, r.queue_id)] = behind.get((r.topic, r.queue_id), 0) + 1
    assert {(q["topic"], q["queue_id"]): q["dispatch_behind"] for q in pair["consume_queues"]} == behind


def test_torn_record_that_recovery_accepts_is_a_difference(tmp_path: Path):
    """Cut inside record 70's properties: the zeros still parse (lengths agree, body CRC passes), so the
    slave's recovery keeps a record with damaged properties; the bytes differ from the cut on."""
    recs = build_master(tmp_path / "probe")
    r = recs[70]
    cut = _end(r) - 5
    fleet, _ = fleet_with(tmp_path, {"torn": ReplicaShape(end=cut)})
    pair = _pair(fleet, "broker-x:1")
    assert pair["slave_commitlog"]["max_offset"] == _end(r)
    c = pair["common"]
    assert (c["first_difference"], c["differing_regions"]) == (cut, [[cut, _end(r)]])  # the 5 zeroed bytes
    assert [m["keys"] for m in c["differing_records"]["messages"]] == [["K0070"]]
    assert [m["keys"] for m in pair["promotion_loses"]["messages"]] == [[f"K{i:04d}"] for i in range(70, 90)]


def test_flipped_byte_in_an_old_file(tmp_path: Path):
    recs = build_master(tmp_path / "probe")
    at = recs[5].physical_offset + 120
    fleet, _ = fleet_with(tmp_path, {"rot": ReplicaShape(flips=(at,))})
    doc = replicas_view(open_fleet(fleet), 0)
    pair = doc["groups"][0]["pairs"][0]
    c = pair["common"]
    assert (c["first_difference"], c["differing_bytes"], c["differing_regions"]) == (at, 1, [[at, at + 1]])
    assert [m["keys"] for m in pair["promotion_loses"]["messages"]] == [["K0005"]]
    assert pair["behind"]["bytes"] == 0
    assert [f["severity"] for f in doc["findings"]] == ["error", "warning"]
    assert doc["findings"][0]["offset"] == at


def test_flipped_byte_in_the_last_files_ends_the_slave_at_recovery(tmp_path: Path):
    """checkCRCOnRecover: a CRC mismatch within the last three files ends the recovered CommitLog there."""
    recs = build_master(tmp_path / "probe")
    fleet, _ = fleet_with(tmp_path, {"rot": ReplicaShape(flips=(recs[85].physical_offset + 120,))})
    pair = _pair(fleet, "broker-x:1")
    assert pair["slave_commitlog"]["max_offset"] == recs[85].physical_offset
    assert "CRC" in pair["slave_commitlog"]["recovery_stop_reason"]
    assert [m["keys"] for m in pair["promotion_loses"]["messages"]] == [[f"K{i:04d}"] for i in range(85, 90)]


def test_a_slave_ahead_of_its_master(tmp_path: Path):
    """The master copy lost its tail (crash, truncated on recovery) after the slave had it."""
    fleet, recs = fleet_with(tmp_path, {"s": ReplicaShape()})
    shutil.rmtree(fleet / "m")
    write_replica(fleet / "s", fleet / "m", CONFIG, ReplicaShape(end=_end(recs[79])))
    pair = _pair(fleet, "broker-x:1")
    assert pair["ahead"] == {"bytes": _end(recs[-1]) - _end(recs[79]), "records": 10}
    assert [m["keys"] for m in pair["only_on_slave"]["messages"]] == [[f"K{i:04d}"] for i in range(80, 90)]
    assert pair["promotion_loses"]["records"] == 0


def test_config_files_a_promotion_would_serve(tmp_path: Path):
    """SlaveSynchronize's files: offsets behind the master's are consumed / delivered again after a promotion."""
    from mqtool.formats.offsets_json import ConsumerOffsets, DelayOffsets, dump_consumer_offsets, dump_delay_offsets

    fleet, _ = fleet_with(tmp_path, {"s": ReplicaShape()})
    for name, offsets, levels in (("m", {0: 30, 1: 25}, {1: 4, 3: 2}), ("s", {0: 21}, {1: 4})):
        cfg = fleet / name / "config"
        cfg.mkdir(exist_ok=True)
        table = {"TopicA@GroupA": offsets, "TopicB@GroupB": {0: 7}} if name == "m" else {"TopicA@GroupA": offsets}
        (cfg / "consumerOffset.json").write_text(dump_consumer_offsets(ConsumerOffsets(table)))
        (cfg / "delayOffset.json").write_text(dump_delay_offsets(DelayOffsets(levels)))
    doc = replicas_view(open_fleet(fleet), 0)
    c = doc["groups"][0]["pairs"][0]["config"]
    assert (
        c["consumer_offsets"]["entries"],
        c["consumer_offsets"]["missing_on_slave"],
        c["consumer_offsets"]["behind"],
        c["consumer_offsets"]["consumed_again"],
    ) == (3, 2, 1, 9)
    assert c["consumer_offsets"]["examples"] == [
        {"topic": "TopicA", "group": "GroupA", "queue_id": 0, "master": 30, "slave": 21, "again": 9}
    ]
    assert c["delay_offsets"]["levels_behind"] == [{"level": 3, "master": 2, "slave": 0, "again": 2}]
    assert [f["message"] for f in doc["findings"]] == [
        "broker-x:1 vs broker-x:0: 1 consumer offset(s) behind the master's (9 message(s) consumed again after a "
        "promotion), 2 missing on the slave",
        "broker-x:1 vs broker-x:0: delayOffset.json behind the master's on 1 level(s) (2 delayed message(s) "
        "delivered again after a promotion)",
    ]


def test_commitlog_file_sizes_that_differ_are_an_error(tmp_path: Path):
    fleet, recs = fleet_with(tmp_path, {"s": ReplicaShape(end=_end(build_master(tmp_path / "probe")[10]))})
    shutil.rmtree(fleet / "s" / "commitlog")
    (fleet / "s" / "commitlog").mkdir()
    data = (fleet / "m" / "commitlog" / "00000000000000000000").read_bytes()
    (fleet / "s" / "commitlog" / "00000000000000000000").write_bytes(
        data[: _end(recs[10])] + bytes(8192 - _end(recs[10]))
    )
    conf = fleet / "s.broker.conf"  # the slave configured for its files (else it refuses them: a store finding)
    conf.write_text(conf.read_text().replace("mappedFileSizeCommitLog=4096", "mappedFileSizeCommitLog=8192"))
    doc = replicas_view(open_fleet(fleet), 0)
    pair = doc["groups"][0]["pairs"][0]
    assert (pair["master_commitlog"]["file_size"], pair["slave_commitlog"]["file_size"]) == (4096, 8192)
    assert [(f["severity"], f["message"]) for f in doc["findings"]] == [
        (
            "error",
            "broker-x:1 vs broker-x:0: CommitLog files of 8192 bytes, the master's are 4096: HA copies bytes to the "
            "same offsets in files of one size (mappedFileSizeCommitLog)",
        ),
        ("warning", "broker-x:1 vs broker-x:0: a promotion now would lose 79 record(s) (15089 bytes)"),
    ]


def test_queues_ahead_of_the_slaves_commitlog(tmp_path: Path):
    """The slave's queues kept units for CommitLog bytes it lost (zeroed from record 80): recovery ends its
    CommitLog at 80 and truncateDirtyLogicFiles drops the units past it."""
    recs = build_master(tmp_path / "probe")
    fleet, _ = fleet_with(tmp_path, {"s": ReplicaShape(lost_from=recs[80].physical_offset)})
    doc = replicas_view(open_fleet(fleet), 0)
    pair = doc["groups"][0]["pairs"][0]
    assert pair["slave_commitlog"]["max_offset"] == recs[80].physical_offset
    ahead = {}
    for r in recs[80:]:
        ahead[(r.topic, r.queue_id)] = ahead.get((r.topic, r.queue_id), 0) + 1
    assert {(q["topic"], q["queue_id"]): q["past_commitlog_end"] for q in pair["consume_queues"]} == ahead
    assert sum(1 for f in doc["findings"] if "point past the slave's CommitLog end" in f["message"]) == 3
    assert [m["keys"] for m in pair["promotion_loses"]["messages"]] == [[f"K{i:04d}"] for i in range(80, 90)]
