"""`inspect FLEET consumers`: one section per store and each group's lag over the broker groups.

The fleet: broker-a = the demo fixture as master (a0) and a copy of it as its slave (a1, whose
consumerOffset.json is older: GID_demo committed nothing on DemoTopicB, and no offset for DemoTopicA/3);
broker-b = retry-dlq-5.3.1/B;
broker-c = pop-revive-5.3.1/B (linked in place). The lags per store are those of `test_consumers.py` and
the demo golden (GID_demo 30 = 1 + 1 + 0 + 0 + 1 + 1 + 26 over its 7 queues).
"""

import json
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from conftest import FIXTURES, ORACLE, need_oracle
from mqtool.cli.app import app
from mqtool.formats.offsets_json import parse_consumer_offsets
from mqtool.inspect import load_schema
from mqtool.inspect.consumers import fleet_consumers_view
from mqtool.store.fleet import open_fleet

NOW = 1795771600000
VALIDATOR = jsonschema.Draft202012Validator(load_schema("consumers"))


def _conf(path: Path, base: Path, name: str, broker_id: int, role: str) -> None:
    path.write_text(base.read_text() + f"\nbrokerName={name}\nbrokerId={broker_id}\nbrokerRole={role}\n")


@pytest.fixture(scope="module")
def fleet_dir(tmp_path_factory) -> Path:
    need_oracle()
    fleet = tmp_path_factory.mktemp("consumers") / "fleet"
    for name, broker_id, role in (("a0", 0, "ASYNC_MASTER"), ("a1", 1, "SLAVE")):
        shutil.copytree(FIXTURES / "demo", fleet / name)
        _conf(fleet / f"{name}.broker.conf", FIXTURES / "demo.broker.conf", "broker-a", broker_id, role)
    offsets = fleet / "a1" / "config" / "consumerOffset.json"
    text = offsets.read_text()
    assert '"DemoTopicB@GID_demo":{0:3,1:2' in text
    assert '"DemoTopicA@GID_demo":{0:2,1:2,2:4,3:1' in text
    text = text.replace('"DemoTopicB@GID_demo":{0:3,1:2', '"DemoTopicB@GID_demo":{0:0,1:0')
    offsets.write_text(text.replace('"DemoTopicA@GID_demo":{0:2,1:2,2:4,3:1', '"DemoTopicA@GID_demo":{0:2,1:2,2:4'))
    table = parse_consumer_offsets(offsets.read_text()).offset_table
    assert (table["DemoTopicB@GID_demo"], table["DemoTopicA@GID_demo"]) == ({0: 0, 1: 0}, {0: 2, 1: 2, 2: 4})
    for name, src in (("b", "retry-dlq-5.3.1"), ("c", "pop-revive-5.3.1")):
        (fleet / name).symlink_to(ORACLE / src / "B", target_is_directory=True)
        _conf(fleet / f"{name}.broker.conf", ORACLE / src / "broker.conf", f"broker-{name}", 0, "ASYNC_MASTER")
    return fleet


def test_fleet_sections_and_cluster_lag(fleet_dir):
    doc = fleet_consumers_view(open_fleet(fleet_dir), NOW)
    VALIDATOR.validate(json.loads(json.dumps(doc)))
    assert [(s["store"], s["broker_group"], s["role"], s["counted"]) for s in doc["stores"]] == [
        ("broker-a:0", "broker-a", "ASYNC_MASTER", True),
        ("broker-a:1", "broker-a", "SLAVE", False),
        ("broker-b:0", "broker-b", "ASYNC_MASTER", True),
        ("broker-c:0", "broker-c", "ASYNC_MASTER", True),
    ]
    per_store = {s["store"]: {g["group"]: g["lag"] for g in s["groups"]} for s in doc["stores"]}
    assert per_store == {
        "broker-a:0": {"GID_demo": 30, "CID_RMQ_SYS_TRANS": 1},
        "broker-a:1": {"GID_demo": 30 + 3 + 2 + 1, "CID_RMQ_SYS_TRANS": 1},  # DemoTopicB 0, 0; DemoTopicA/3 none
        "broker-b:0": {"GID_r": 0},
        "broker-c:0": {"GID_p": 0, "CID_RMQ_SYS_REVIVE_GROUP": 5},
    }
    assert all(r["store"] == s["store"] for s in doc["stores"] for r in s["queues"])
    assert [s["vs_master"] for s in doc["stores"] if s["store"] != "broker-a:1"] == [None, None, None]
    assert doc["stores"][1]["vs_master"] == {
        "master": "broker-a:0",
        "rewind": 5,
        "ahead": 0,
        "missing": 1,
        "queues": [
            {
                "group": "GID_demo",
                "topic": "DemoTopicA",
                "queue_id": 3,
                "committed_offset": None,
                "master_committed_offset": 1,
                "rewind": None,
            },
            {
                "group": "GID_demo",
                "topic": "DemoTopicB",
                "queue_id": 0,
                "committed_offset": 0,
                "master_committed_offset": 3,
                "rewind": 3,
            },
            {
                "group": "GID_demo",
                "topic": "DemoTopicB",
                "queue_id": 1,
                "committed_offset": 0,
                "master_committed_offset": 2,
                "rewind": 2,
            },
        ],
    }
    assert [(g["group"], g["system"], g["lag"], g["brokers"]) for g in doc["groups"]] == [
        ("GID_demo", False, 30, ["broker-a:0"]),
        ("GID_p", False, 0, ["broker-c:0"]),
        ("GID_r", False, 0, ["broker-b:0"]),
        ("CID_RMQ_SYS_REVIVE_GROUP", True, 5, ["broker-c:0"]),
        ("CID_RMQ_SYS_TRANS", True, 1, ["broker-a:0"]),
    ]
    demo = next(g for g in doc["groups"] if g["group"] == "GID_demo")
    assert (demo["oldest_unconsumed_ms"], demo["age_ms"]) == (1790000000060, NOW - 1790000000060)
    assert doc["totals"] == {
        "stores": 4,
        "counted_stores": 3,
        "groups": 3,
        "system_groups": 2,
        "queues": 9 + 2 + 10,
        "lag": 30,
        "system_lag": 6,
        "expired": 0,
    }


def test_fleet_filter_by_group(fleet_dir):
    doc = fleet_consumers_view(open_fleet(fleet_dir), NOW, group="GID_r")
    assert [(g["group"], g["lag"], g["brokers"]) for g in doc["groups"]] == [
        ("GID_r", 0, ["broker-a:0", "broker-b:0", "broker-c:0"])
    ]  # asked for: shown (empty) on every store
    assert [len(s["queues"]) for s in doc["stores"]] == [0, 0, 2, 0]


def _cli(*args) -> subprocess.CompletedProcess:
    """`mqtool inspect ARGS` run in this process (the CLI a user runs, without a new interpreter's start)."""
    r = CliRunner().invoke(app, ["inspect", *map(str, args)])
    return subprocess.CompletedProcess(args, r.exit_code, r.stdout, r.stderr)


def test_cli_fleet_text_json_and_broker(fleet_dir):
    r = _cli(fleet_dir, "consumers", "--now", NOW)
    assert r.returncode == 0, r.stderr
    assert "== broker-a:1 (broker group broker-a, SLAVE; a replica: not counted in the cluster's totals)" in r.stdout
    assert "4 store(s), 3 counted; 3 group(s): lag 30, 0 expired unconsumed; 2 system group(s): lag 6" in r.stdout
    assert (
        "committed offsets vs broker-a:0: 5 message(s) behind on 2 queue(s), consumed again if this store "
        "were promoted now; 1 queue offset(s) missing"
    ) in r.stdout
    r = _cli(fleet_dir, "consumers", "--now", NOW, "--json", "--broker", "broker-a:1")
    one = json.loads(r.stdout)
    assert "stores" not in one and [(g["group"], g["lag"]) for g in one["groups"]] == [
        ("GID_demo", 36),
        ("CID_RMQ_SYS_TRANS", 1),
    ]
    r = _cli(fleet_dir, "retry", "--now", NOW, "--json", "--broker", "b")  # every view, by directory
    assert r.returncode == 0 and [g["group"] for g in json.loads(r.stdout)["groups"]] == ["GID_r"]
    r = _cli(fleet_dir, "delay", "--now", NOW)
    assert r.returncode == 2 and "the delay view reads one, give --broker NAME[:ID]" in r.stderr
    r = _cli(fleet_dir, "consumers", "--broker", "broker-z")
    assert r.returncode == 2 and "names no store of the fleet" in r.stderr
    r = _cli(fleet_dir / "a0", "consumers", "--broker", "broker-a")
    assert r.returncode == 2 and "--broker picks a store of a fleet; this is one store" in r.stderr


def test_a_store_that_cannot_be_read_is_an_error_finding(fleet_dir, monkeypatch):
    from mqtool.store.errors import StoreError
    from mqtool.store.fleet import FleetMember

    opened = FleetMember.open

    def open_or_fail(self, findings=None):
        if self.rel == "b":
            raise StoreError("no longer there", self.path)
        return opened(self, findings)

    monkeypatch.setattr(FleetMember, "open", open_or_fail)
    doc = fleet_consumers_view(open_fleet(fleet_dir), NOW)
    VALIDATOR.validate(json.loads(json.dumps(doc)))
    b = next(s for s in doc["stores"] if s["store"] == "broker-b:0")
    assert (b["groups"], b["queues"], b["offsets_source"]) == ([], [], None)
    assert [(f["severity"], f["file"]) for f in doc["findings"]] == [("error", "b")]
    assert "cannot read the store b: " in doc["findings"][0]["message"]
    assert [g["group"] for g in doc["groups"]] == ["GID_demo", "GID_p", "CID_RMQ_SYS_REVIVE_GROUP", "CID_RMQ_SYS_TRANS"]
