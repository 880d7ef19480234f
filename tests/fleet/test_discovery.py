"""Fleet discovery: which directories are stores, whose settings each takes, and the broker names."""

import shutil
from pathlib import Path

import pytest

from conftest import FIXTURES, ORACLE, need_oracle
from mqtool.store.errors import StoreError
from mqtool.store.fleet import find_store_dirs, is_fleet_dir, open_fleet, read_broker_identity

HA = ORACLE / "ha-async-5.3.1"


def _link(src: Path, dst: Path) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.symlink_to(src, target_is_directory=True)
    return dst


def test_the_ha_pair_is_a_fleet_named_by_its_broker_conf_files():
    """The oracle's directory as shipped: master/ and slave/ with broker-master.conf and broker-slave.conf."""
    need_oracle()
    fleet = open_fleet(HA)
    assert [(m.rel, m.name, m.identity.role, m.group) for m in fleet.members] == [
        ("master", "broker-ha:0", "ASYNC_MASTER", "broker-ha"),
        ("slave", "broker-ha:1", "SLAVE", "broker-ha"),
    ]
    master = fleet.members[0]
    assert master.identity.cluster == "HaCluster"
    assert master.conf_path == HA / "broker-master.conf"
    assert master.config.mapped_file_size_commitlog == 65536
    assert [m.name for m in fleet.groups()["broker-ha"]] == ["broker-ha:0", "broker-ha:1"]
    assert fleet.findings == []


def test_depth_two_own_conf_beside_and_inside(tmp_path: Path):
    """Depth 1 and 2; STORE/broker.conf beats STORE.broker.conf; a store is never searched inside."""
    need_oracle()
    fleet_dir = tmp_path / "fleet"
    a = shutil.copytree(FIXTURES / "demo", fleet_dir / "east" / "demo")
    shutil.copy(FIXTURES / "demo.broker.conf", fleet_dir / "east" / "demo.broker.conf")
    _link(ORACLE / "pair_default" / "A", fleet_dir / "west" / "A")
    dl = shutil.copytree(FIXTURES / "dledger", fleet_dir / "dledger")
    shutil.copy(FIXTURES / "dledger.broker.conf", dl / "broker.conf")
    (dl / "dledger.broker.conf").write_text("brokerName=never-read\n")  # inside the store: not a sibling
    (fleet_dir / "notes").mkdir()
    (fleet_dir / ".hidden").mkdir()
    shutil.copytree(FIXTURES / "demo", fleet_dir / ".hidden" / "demo")
    assert [p.relative_to(fleet_dir).as_posix() for p in find_store_dirs(fleet_dir)] == [
        "dledger",
        "east/demo",
        "west/A",
    ]
    fleet = open_fleet(fleet_dir)
    by = {m.rel: m for m in fleet.members}
    assert by["east/demo"].conf_path == a.parent / "demo.broker.conf"
    assert by["dledger"].conf_path == dl / "broker.conf"
    assert by["west/A"].conf_path is None and by["west/A"].name == "west/A"  # no conf: the directory
    d = by["dledger"].identity
    assert (by["dledger"].name, d.role, d.dledger_group, d.dledger_self_id) == (
        "broker-dledger:n0",
        "DLEDGER",
        "broker-dledger",
        "n0",
    )
    assert by["dledger"].config.mapped_file_size_commitlog == 2048


def test_config_for_all_and_duplicates_named_by_directory():
    """pair_default's broker.conf names A and B both broker-a:0: `@directory` tells them apart."""
    need_oracle()
    fleet = open_fleet(ORACLE / "pair_default", ORACLE / "pair_default" / "broker.conf")
    assert [m.name for m in fleet.members] == ["broker-a:0@A", "broker-a:0@B"]
    assert all(m.config.transaction_check_max == 2 for m in fleet.members)
    assert fleet.select("A").rel == "A"
    assert fleet.select("broker-a:0@B").rel == "B"
    with pytest.raises(StoreError, match="matches 2 stores: broker-a:0@A, broker-a:0@B"):
        fleet.select("broker-a:0")
    with pytest.raises(StoreError, match="names no store"):
        fleet.select("broker-z")


def test_select_by_broker_name_and_id():
    need_oracle()
    fleet = open_fleet(HA)
    assert fleet.select("broker-ha:1").rel == "slave"
    assert fleet.select("slave").name == "broker-ha:1"
    with pytest.raises(StoreError, match="matches 2"):
        fleet.select("broker-ha")


def test_controller_mode_names_the_store_from_broker_identity(tmp_path: Path):
    """`BrokerMetadata#encodeToStr`: cluster#name#id, written when the controller assigns the id."""
    store = shutil.copytree(FIXTURES / "demo", tmp_path / "f" / "s1")
    (store / "brokerIdentity").write_text("ClusterX#broker-c#7")
    (tmp_path / "f" / "s1.broker.conf").write_text("brokerName=broker-c\nenableControllerMode=true\nbrokerId=-1\n")
    m = open_fleet(tmp_path / "f").members[0]
    assert (m.name, m.identity.role, m.identity.cluster, m.identity.controller_mode, m.identity.source) == (
        "broker-c:7",
        "CONTROLLER",
        "ClusterX",
        True,
        "brokerIdentity",
    )
    assert read_broker_identity(tmp_path / "missing") is None
    (store / "brokerIdentity").write_text("only#two")
    assert read_broker_identity(store / "brokerIdentity") is None


def test_not_a_fleet(tmp_path: Path):
    with pytest.raises(StoreError, match="no such directory"):
        open_fleet(tmp_path / "nope")
    with pytest.raises(StoreError, match="not a fleet"):
        open_fleet(tmp_path)
    assert not is_fleet_dir(FIXTURES / "demo")  # a store is not a fleet
    assert is_fleet_dir(FIXTURES)


def test_bad_broker_id_is_a_finding(tmp_path: Path):
    shutil.copytree(FIXTURES / "demo", tmp_path / "f" / "s")
    (tmp_path / "f" / "s.broker.conf").write_text("brokerName=b\nbrokerId=x\n")
    fleet = open_fleet(tmp_path / "f")
    assert [(f.file, f.check, f.severity) for f in fleet.findings] == [("s.broker.conf", "fleet.discovery", "warning")]


def test_an_unusable_broker_conf_is_a_finding_not_the_end(tmp_path: Path):
    """A bad number in one store's broker.conf: that store is read with the shared settings, named from the file."""
    shutil.copytree(FIXTURES / "demo", tmp_path / "f" / "s")
    (tmp_path / "f" / "s.broker.conf").write_text("brokerName=b\nbrokerId=1\nmappedFileSizeCommitLog=lots\n")
    fleet = open_fleet(tmp_path / "f")
    (m,) = fleet.members
    assert (m.name, m.config.mapped_file_size_commitlog) == ("b:1", 1 << 30)
    ((file, severity, message),) = [(f.file, f.severity, f.message) for f in fleet.findings]
    assert (file, severity) == ("s.broker.conf", "error")
    assert 'mappedFileSizeCommitLog = "lots" is not an integer' in message and "RocketMQ's defaults" in message
