"""A small master written by the builder, and fleets of it with replicas shaped like real slaves."""

from pathlib import Path

from mqtool.builder.replica import ReplicaShape, write_replica
from mqtool.builder.writer import StoreWriter
from mqtool.formats.broker_conf import BrokerConfig

T0 = 1795000000000
FILE = 4096  # CommitLog file size
CONF = (
    "brokerClusterName=FleetCluster\nmappedFileSizeCommitLog=4096\nmappedFileSizeConsumeQueue=320\n"
    "maxHashSlotNum=64\nmaxIndexNum=256\n"
)
CONFIG = BrokerConfig().with_overrides(
    {"mappedFileSizeCommitLog": FILE, "mappedFileSizeConsumeQueue": 320, "maxHashSlotNum": 64, "maxIndexNum": 256}
)
TOPICS = (("TopicA", 0), ("TopicA", 1), ("TopicB", 0))


def build_master(root: Path, n: int = 90) -> list:
    """n records (record i: TOPICS[i % 3], key K<i>, stored at T0 + 10 i ms), ~180 bytes each: 5 files."""
    with StoreWriter(root, CONFIG) as w:
        for i in range(n):
            topic, q = TOPICS[i % 3]
            props = [("KEYS", f"K{i:04d}"), ("UNIQ_KEY", f"U{i:04d}"), ("TAGS", "t" + str(i % 2))]
            w.append_message(topic, q, b"x" * 60, props, store_timestamp=T0 + 10 * i)
        w.write_checkpoint()
        return list(w.records)


def write_conf(path: Path, name: str, broker_id: int, role: str) -> None:
    path.write_text(CONF + f"brokerName={name}\nbrokerId={broker_id}\nbrokerRole={role}\n")


def fleet_with(tmp: Path, shapes: dict[str, ReplicaShape], n: int = 90) -> tuple[Path, list]:
    """fleet/m (broker-x:0 master) and fleet/<name> slaves (broker-x:1, 2, ...) shaped as given."""
    fleet = tmp / "fleet"
    recs = build_master(fleet / "m", n)
    write_conf(fleet / "m.broker.conf", "broker-x", 0, "ASYNC_MASTER")
    for i, (name, shape) in enumerate(shapes.items(), 1):
        write_replica(fleet / "m", fleet / name, CONFIG, shape)
        write_conf(fleet / f"{name}.broker.conf", "broker-x", i, "SLAVE")
    return fleet, recs


def assert_ha_promotion_loss(lost: dict, sent: list[dict]) -> None:
    """ha-async-5.3.1: what promoting the slave loses is phase 2's 120 sends (its manifest), 60 a queue."""
    assert lost["per_topic"] == {"TopicHA": 120}
    assert lost["per_queue"] == [
        {"topic": "TopicHA", "queue_id": 0, "records": 60},
        {"topic": "TopicHA", "queue_id": 1, "records": 60},
    ]
    assert (lost["first_store_timestamp"], lost["last_store_timestamp"]) == (
        sent[0]["storeTimestamp"],
        sent[-1]["storeTimestamp"],
    )
