"""fixtures/fleet, the fleet of docs/fleet.md's tour: what its replicas view says, record by record."""

from conftest import FIXTURES
from mqtool.builder.fleet_fixture import T0
from mqtool.inspect.fleet import fleet_overview
from mqtool.inspect.replicas import replicas_view
from mqtool.store.fleet import open_fleet

FLEET = FIXTURES / "fleet"


def test_fixture_fleet_overview():
    doc = fleet_overview(open_fleet(FLEET), T0 + 700_000)
    assert [(r["name"], r["dir"], r["records"], r["clean_shutdown"]) for r in doc["stores"]] == [
        ("broker-a:0", "broker-a/master", 90, True),
        ("broker-a:1", "broker-a/slave", 70, False),
        ("broker-b:0", "broker-b/master", 60, True),
        ("broker-b:1", "broker-b/slave-late", 40, True),
    ]
    assert doc["totals"]["records"] == 260 and doc["totals"]["crashed_stores"] == 1


def test_fixture_fleet_replicas():
    doc = replicas_view(open_fleet(FLEET), T0 + 700_000)
    a, b = doc["groups"]
    (pa,) = a["pairs"]
    assert pa["slave_commitlog"]["max_offset"] == 14242 and pa["slave_commitlog"]["torn_bytes"] == 49
    assert pa["slave_commitlog"]["files_past_end"] == ["00000000000000016384"]
    assert [m["keys"] for m in pa["promotion_loses"]["messages"]] == [[f"A{i:04d}"] for i in range(70, 90)]
    assert pa["promotion_loses"]["per_topic"] == {"TopicOrder": 13, "TopicPay": 7}
    assert pa["behind"] == {"bytes": 18336 - 14242, "records": 20, "store_time_ms": 200}
    assert [q["dispatch_behind"] for q in pa["consume_queues"]] == [3, 3, 3]
    (pb,) = b["pairs"]
    assert pb["slave_commitlog"]["min_offset"] == 4096 and pb["promotion_loses"]["records"] == 0
    assert [(q["topic"], q["queue_id"], q["placeholder_units"]) for q in pb["consume_queues"]] == [
        ("TopicOrder", 0, 7),
        ("TopicOrder", 1, 7),
        ("TopicPay", 0, 6),
    ]
