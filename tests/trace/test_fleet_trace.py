"""`trace FLEET`: every store searched, every record named by its store, a UNIQ_KEY on two broker groups
called out.

The fleet is built: broker-a (a master and a full slave written as DefaultHAConnection/DefaultHAClient
would, `builder/replica.py`) holds order-0000 .. order-0005; broker-b holds order-0003 again under the same
UNIQ_KEY, born and stored 3 s later (the producer timed out on broker-a, which had stored it, and retried on
broker-b), and order-7777 under another UNIQ_KEY than broker-a's order-7777 (a business key used twice),
which broker-a's slave has not received yet.
"""

import json
import subprocess
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from mqtool.builder.replica import ReplicaShape, write_replica
from mqtool.builder.writer import StoreWriter
from mqtool.cli.app import app
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.store.fleet import open_fleet
from mqtool.trace import TraceQuery
from mqtool.trace.fleet import trace_fleet

ROOT = Path(__file__).resolve().parents[2]
FLEET_SCHEMA = jsonschema.Draft202012Validator(json.loads((ROOT / "mqtool/schemas/trace-fleet.json").read_text()))
TRACE_SCHEMA = jsonschema.Draft202012Validator(json.loads((ROOT / "mqtool/schemas/trace.json").read_text()))
T0 = 1795000000000
CONF = "brokerClusterName=FleetCluster\nmappedFileSizeCommitLog=4096\nmappedFileSizeConsumeQueue=320\n"
A_HOST, B_HOST = "10.0.0.1:10911", "10.0.0.2:10911"  # the brokers' addresses, in each record's STOREHOST
CONFIG = BrokerConfig().with_overrides({"mappedFileSizeCommitLog": 4096, "mappedFileSizeConsumeQueue": 320})


def uniq(i: int) -> str:
    return f"AC1100010000{i:04X}"


def _put(w: StoreWriter, key: str, uniq_key: str, at: int, born: int | None = None, host: str = A_HOST) -> int:
    """Append one message; its physical offset."""
    props = [("KEYS", key), ("UNIQ_KEY", uniq_key), ("TAGS", "t")]
    body = b"body of " + key.encode()
    rec = w.append_message("TopicA", 0, body, props, store_timestamp=at, born_timestamp=born or at - 5, store_host=host)
    return rec.physical_offset


def _conf(path: Path, name: str, broker_id: int, role: str) -> None:
    path.write_text(CONF + f"brokerName={name}\nbrokerId={broker_id}\nbrokerRole={role}\n")


@pytest.fixture(scope="module")
def fleet_dir(tmp_path_factory) -> Path:
    fleet = tmp_path_factory.mktemp("trace") / "fleet"
    with StoreWriter(fleet / "a-master", CONFIG) as w:
        for i in range(6):
            _put(w, f"order-{i:04d}", uniq(i), T0 + 1000 * i)
        last = _put(w, "order-7777", uniq(0xA777), T0 + 7000)
        w.write_checkpoint()
    _conf(fleet / "a-master.broker.conf", "broker-a", 0, "ASYNC_MASTER")
    write_replica(fleet / "a-master", fleet / "a-slave", CONFIG, ReplicaShape(end=last))  # behind by order-7777
    _conf(fleet / "a-slave.broker.conf", "broker-a", 1, "SLAVE")
    with StoreWriter(fleet / "b-master", CONFIG) as w:
        _put(w, "order-0100", uniq(0x100), T0 + 2500, host=B_HOST)
        _put(w, "order-0003", uniq(3), T0 + 6000, born=T0 + 5995, host=B_HOST)  # the retry, 3 s after broker-a
        _put(w, "order-7777", uniq(0xB777), T0 + 7100, host=B_HOST)
        w.write_checkpoint()
    _conf(fleet / "b-master.broker.conf", "broker-b", 0, "ASYNC_MASTER")
    return fleet


def _doc(result) -> dict:
    from mqtool.inspect.records import record_dict

    doc = json.loads(json.dumps(result.as_dict(lambda r: record_dict(r, body="none"))))
    FLEET_SCHEMA.validate(doc)
    for t in doc["traces"]:
        TRACE_SCHEMA.validate(t["trace"])
    return doc


def test_a_producer_retry_on_two_broker_groups_is_called_out(fleet_dir):
    result = trace_fleet(open_fleet(fleet_dir), TraceQuery(uniq_key=uniq(3)))
    doc = _doc(result)
    assert [(s["store"], s["broker_group"], s["role"], s["found"]) for s in doc["stores"]] == [
        ("broker-a:0", "broker-a", "ASYNC_MASTER", 1),
        ("broker-a:1", "broker-a", "SLAVE", 1),
        ("broker-b:0", "broker-b", "ASYNC_MASTER", 1),
    ]
    # every record names its store; the slave's copy lies at the master's offset (a byte prefix)
    placed = [
        (t["store"], r["store"], r["physical_offset"], r["store_timestamp"])
        for t in doc["traces"]
        for r in t["trace"]["records"]
    ]
    a_offset = placed[0][2]
    assert placed == [
        ("broker-a:0", "broker-a:0", a_offset, T0 + 3000),
        ("broker-a:1", "broker-a:1", a_offset, T0 + 3000),
        ("broker-b:0", "broker-b:0", placed[2][2], T0 + 6000),
    ]
    assert [c["uniq_key"] for c in doc["cross_broker"]] == [uniq(3)]
    assert doc["not_replicated"] == []  # broker-a's slave holds it too; broker-b has one store
    c = doc["cross_broker"][0]
    assert c["broker_groups"] == ["broker-a", "broker-b"]
    assert [(x["store"], x["store_timestamp"], x["born_timestamp"]) for x in c["copies"]] == [
        ("broker-a:0", T0 + 3000, T0 + 2995),
        ("broker-a:1", T0 + 3000, T0 + 2995),
        ("broker-b:0", T0 + 6000, T0 + 5995),
    ]
    assert doc["verdict"].startswith(
        "found on 3 of 3 stores: broker-a:0, broker-a:1, broker-b:0; UNIQ_KEY "
        f"{uniq(3)} is stored on 2 broker groups (broker-a, broker-b)"
    )


def test_a_replicated_message_is_no_duplicate(fleet_dir):
    doc = _doc(trace_fleet(open_fleet(fleet_dir), TraceQuery(key="order-0001")))
    assert [s["found"] for s in doc["stores"]] == [1, 1, 0]
    assert doc["cross_broker"] == [] and doc["key_broker_groups"] == [] and doc["not_replicated"] == []
    assert doc["verdict"] == "found on 2 of 3 stores: broker-a:0, broker-a:1"


def test_a_business_key_on_two_broker_groups_is_listed_not_alarmed(fleet_dir):
    doc = _doc(trace_fleet(open_fleet(fleet_dir), TraceQuery(key="order-7777")))
    assert [s["found"] for s in doc["stores"]] == [1, 0, 1]
    assert doc["cross_broker"] == [] and doc["key_broker_groups"] == ["broker-a", "broker-b"]
    assert sorted({t["trace"]["query"]["uniq_keys"][0] for t in doc["traces"]}) == [uniq(0xA777), uniq(0xB777)]


def test_a_message_the_slave_lacks_is_what_its_promotion_would_lose(fleet_dir):
    doc = _doc(trace_fleet(open_fleet(fleet_dir), TraceQuery(uniq_key=uniq(0xA777))))
    assert doc["not_replicated"] == [
        {
            "message": f"UNIQ_KEY {uniq(0xA777)}",
            "broker_group": "broker-a",
            "held_by": ["broker-a:0"],
            "missing_on": ["broker-a:1"],
        }
    ]
    assert doc["verdict"] == (
        f"found on 1 of 3 stores: broker-a:0; UNIQ_KEY {uniq(0xA777)} is not on broker-a:1 "
        "of broker-a: a promotion of it now would lose the message"
    )


def _cli(*args) -> subprocess.CompletedProcess:
    """`mqtool trace ARGS` run in this process (the CLI a user runs, without a new interpreter's start)."""
    r = CliRunner().invoke(app, ["trace", *map(str, args)])
    return subprocess.CompletedProcess(args, r.exit_code, r.stdout, r.stderr)


def test_cli(fleet_dir):
    r = _cli(fleet_dir, "--key", "order-0003")
    assert r.returncode == 0, r.stderr
    assert "== broker-b:0 (broker group broker-b, ASYNC_MASTER): 1 message(s)" in r.stdout
    assert f"UNIQ_KEY {uniq(3)} is stored on 2 broker groups: a producer retry that went to another broker" in r.stdout
    r = _cli(fleet_dir, "--key", "order-0001")
    assert "== broker-a:1 (broker group broker-a, SLAVE): 1 message(s)" in r.stdout
    assert "== broker-b:0" not in r.stdout and "not on 1 store(s): broker-b:0" in r.stdout
    r = _cli(fleet_dir, "--key", "order-7777")
    assert "--key order-7777 is on 2 broker groups (broker-a, broker-b) under different UNIQ_KEYs" in r.stdout
    r = _cli(fleet_dir, "--uniq-key", uniq(3), "--json")
    assert json.loads(r.stdout)["cross_broker"][0]["broker_groups"] == ["broker-a", "broker-b"]
    r = _cli(fleet_dir, "--key", "nope", "--json")
    assert r.returncode == 1 and json.loads(r.stdout)["verdict"] == "not found on any of the 3 stores"
    r = _cli(fleet_dir, "--key", "order-0003", "--until", "+1h")
    assert r.returncode == 2 and "--until works on one store" in r.stderr
    r = _cli(fleet_dir, "--offset", "0")
    assert r.returncode == 2 and "--offset is a place in one store's CommitLog" in r.stderr


def test_msg_id_finds_the_broker_it_names_and_its_replica(fleet_dir):
    """An offsetMsgId encodes the store host and the offset: broker-b's record is not at broker-a's offset
    under that id, so only broker-a and its slave (which holds the master's bytes) answer."""
    a = trace_fleet(open_fleet(fleet_dir), TraceQuery(key="order-0001"))
    msg_id = a.stores[0].traces[0].records[0].record.msg_id
    doc = _doc(trace_fleet(open_fleet(fleet_dir), TraceQuery(msg_id=msg_id)))
    assert [s["found"] for s in doc["stores"]] == [1, 1, 0] and doc["cross_broker"] == []


# ----------------------------------------------------------------------------- real replication


def test_the_ha_pair_holds_phase_one_twice_and_phase_two_on_the_master_only():
    """ha-async-5.3.1 as shipped (master/, slave/, broker-*.conf): P1-0150 lies at 61950 on both (the slave's
    CommitLog is a byte prefix of the master's), one broker group, no duplicate; P2-0005 (phase 2, after the
    slave stopped) only on the master at 126247 (master.commitlog.jsonl)."""
    from conftest import ORACLE, need_oracle

    need_oracle()
    fleet = open_fleet(ORACLE / "ha-async-5.3.1")
    doc = _doc(trace_fleet(fleet, TraceQuery(key="P1-0150")))
    assert [(s["store"], s["found"]) for s in doc["stores"]] == [("broker-ha:0", 1), ("broker-ha:1", 1)]
    assert [
        (t["store"], r["physical_offset"], r["queue_id"], r["queue_offset"], r["store_timestamp"])
        for t in doc["traces"]
        for r in t["trace"]["records"]
    ] == [("broker-ha:0", 61950, 0, 75, 1795774269320), ("broker-ha:1", 61950, 0, 75, 1795774269320)]
    assert doc["cross_broker"] == [] and doc["key_broker_groups"] == [] and doc["not_replicated"] == []
    doc = _doc(trace_fleet(fleet, TraceQuery(key="P2-0005")))
    assert [(s["store"], s["found"]) for s in doc["stores"]] == [("broker-ha:0", 1), ("broker-ha:1", 0)]
    assert [(n["broker_group"], n["held_by"], n["missing_on"]) for n in doc["not_replicated"]] == [
        ("broker-ha", ["broker-ha:0"], ["broker-ha:1"])
    ]
    assert [r["physical_offset"] for r in doc["traces"][0]["trace"]["records"]] == [126247]


def test_a_store_the_lookup_cannot_search_is_a_note(fleet_dir):
    """The builder wrote no IndexFiles here: --lookup indexfile searches no store, and says why on each."""
    result = trace_fleet(open_fleet(fleet_dir), TraceQuery(key="order-0001"), lookup="indexfile")
    doc = _doc(result)
    assert [(s["lookup"], s["found"]) for s in doc["stores"]] == [(None, 0)] * 3
    assert all(
        s["notes"][0].startswith("not searched: ") and "no IndexFile can answer" in s["notes"][0] for s in doc["stores"]
    )
    assert not result.found
    r = _cli(fleet_dir, "--msg-id", "not-hex")  # a bad query is an input error, not three notes
    assert r.returncode == 2 and "not a message id" in r.stderr


def test_the_fixture_fleet_as_docs_fleet_md_tours_it():
    """docs/fleet.md step 5: A0075 (record 75) lies past where broker-a's slave was killed (record 70)."""
    from conftest import FIXTURES

    fleet = open_fleet(FIXTURES / "fleet")
    doc = _doc(trace_fleet(fleet, TraceQuery(key="A0075")))
    assert doc["verdict"] == (
        "found on 1 of 4 stores: broker-a:0; UNIQ_KEY UA0075 is not on broker-a:1 of "
        "broker-a: a promotion of it now would lose the message"
    )
    assert [(s["store"], s["lookup"]) for s in doc["stores"]] == [
        ("broker-a:0", "indexfile"),
        ("broker-a:1", "indexfile+scan"),
        ("broker-b:0", "indexfile"),
        ("broker-b:1", "indexfile"),
    ]
    r = _cli(FIXTURES / "fleet", "--key", "A0075")
    assert "not on 3 store(s): broker-a:1, broker-b:0, broker-b:1" in r.stdout
