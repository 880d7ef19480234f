"""`mqtool inspect FLEET`: the fleet overview, --broker, the replicas view on the command line, the schemas."""

import json
from pathlib import Path

import jsonschema
import pytest
from fleetkit import build_master, fleet_with
from typer.testing import CliRunner

from conftest import ORACLE, need_oracle
from mqtool.builder.replica import ReplicaShape
from mqtool.cli.app import app
from mqtool.inspect import load_schema
from mqtool.inspect.fleet import fleet_overview
from mqtool.inspect.replicas import replicas_view
from mqtool.store.fleet import open_fleet

HA = ORACLE / "ha-async-5.3.1"
NOW = 1795774280353  # the master's last sign of life (manifest T_masterDownMs)


def run(*args: str):
    return CliRunner().invoke(app, ["inspect", *map(str, args)])


def valid(name: str, doc: dict) -> None:
    schema = load_schema(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(json.loads(json.dumps(doc)))


def test_fleet_overview_of_the_ha_pair():
    need_oracle()
    doc = fleet_overview(open_fleet(HA), NOW)
    valid("fleet", doc)
    rows = {r["name"]: r for r in doc["stores"]}
    m, s = rows["broker-ha:0"], rows["broker-ha:1"]
    assert (m["records"], m["max_offset"], m["role"], m["cluster"]) == (420, 174024, "ASYNC_MASTER", "HaCluster")
    assert (s["records"], s["max_offset"], s["role"], s["last_store_timestamp"]) == (
        300,
        124182,
        "SLAVE",
        1795774269680,
    )
    # the README's overview: 12 topics configured with no queue directory (one info line, issue #27), and on
    # the slave one more (TopicHA has no topics.json entry there)
    assert (m["finding_counts"], s["finding_counts"]) == (
        {"error": 0, "warning": 0, "info": 1},
        {"error": 0, "warning": 0, "info": 2},
    )
    assert m["clean_shutdown"] and s["clean_shutdown"]
    assert (m["behind_master_bytes"], s["behind_master_bytes"]) == (None, 174024 - 124182)
    assert doc["groups"] == {"broker-ha": ["broker-ha:0", "broker-ha:1"]}
    t = doc["totals"]
    assert (t["stores"], t["groups"], t["clusters"], t["records"], t["bytes"]) == (
        2,
        1,
        ["HaCluster"],
        720,
        3 * 65536 + 2 * 65536,
    )
    assert (t["first_store_timestamp"], t["last_store_timestamp"]) == (1795774268857, 1795774275451)
    assert t["finding_counts"] == {"error": 0, "warning": 0, "info": 3}


def test_replicas_documents_match_their_schema(tmp_path: Path):
    need_oracle()
    valid("replicas", replicas_view(open_fleet(HA), NOW))
    recs = build_master(tmp_path / "probe")
    shapes = {
        "late": ReplicaShape(begin=8192),
        "rot": ReplicaShape(flips=(recs[5].physical_offset + 120,)),
        "killed": ReplicaShape(end=recs[70].physical_offset + 50, abort_pid="1", preallocated=True),
    }
    fleet, _ = fleet_with(tmp_path, shapes)
    (fleet / "lonely").mkdir()
    build_master(fleet / "lonely" / "single", 3)  # no broker.conf: its own group, named by its directory
    doc = replicas_view(open_fleet(fleet), NOW)
    valid("replicas", doc)
    assert [(g["group"], g["kind"]) for g in doc["groups"]] == [("broker-x", "classic"), ("lonely/single", "single")]
    valid("replicas", replicas_view(open_fleet(fleet), NOW, keys=False))
    valid("fleet", fleet_overview(open_fleet(fleet), NOW))


def test_cli_fleet_overview_and_broker():
    need_oracle()
    r = run(HA, "--json", "--now", NOW)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["view"] == "fleet" and [s["name"] for s in doc["stores"]] == ["broker-ha:0", "broker-ha:1"]
    r = run(HA, "overview", "--broker", "broker-ha:1", "--json", "--now", NOW)
    assert r.exit_code == 0, r.output
    one = json.loads(r.stdout)
    slave = str((HA / "slave").resolve())  # the store by its real path (../shared may be a symlink)
    assert (one["view"], one["store"], one["commitlog"]["max_offset"]) == ("overview", slave, 124182)
    r = run(HA, "messages", "--broker", "slave", "--key", "P1-0299", "--json")
    assert r.exit_code == 0, r.output
    (line,) = r.stdout.splitlines()
    assert json.loads(line)["physical_offset"] == 123769  # facts.txt: P1-0299's offset on the slave


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("delay",),
            "a fleet of 2 stores: the delay view reads one, give --broker NAME[:ID] (broker-ha:0, broker-ha:1)",
        ),
        (("--broker", "broker-ha"), '--broker "broker-ha" matches 2 stores: broker-ha:0, broker-ha:1'),
        (("--broker", "nope"), '--broker "nope" names no store of the fleet'),
    ],
)
def test_cli_fleet_errors(args, message):
    need_oracle()
    r = run(HA, *args)
    assert r.exit_code == 2
    assert message in r.stderr


def test_cli_store_refuses_fleet_options():
    need_oracle()
    r = run(HA / "slave", "replicas")
    assert r.exit_code == 2 and "the replicas view compares the stores of a fleet" in r.stderr
    r = run(HA / "slave", "--broker", "x")
    assert r.exit_code == 2 and "--broker picks a store of a fleet; this is one store" in r.stderr


def test_cli_replicas_exit_codes(tmp_path: Path):
    """Exit 0 for a slave that is only behind (warning); 1 when the bytes differ (error)."""
    need_oracle()
    r = run(HA, "replicas", "--json", "--now", NOW)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["groups"][0]["pairs"][0]["promotion_loses"]["records"] == 120
    recs = build_master(tmp_path / "probe")
    fleet, _ = fleet_with(tmp_path, {"rot": ReplicaShape(flips=(recs[5].physical_offset + 120,))})
    r = run(fleet, "replicas")
    assert r.exit_code == 1
    assert "promotion now loses" in r.stdout and "1 record(s)" in r.stdout
    assert f"the CommitLogs differ from offset {recs[5].physical_offset + 120}" in r.stderr
