"""`fixtures/fleet/`: a small fleet of two classic broker groups, for docs/fleet.md's tour and the tests.

    fleet/broker-a/master      broker-a:0, 90 records (TopicOrder queues 0-1, TopicPay queue 0)
    fleet/broker-a/slave       broker-a:1, killed mid-transfer: the HA stream cut inside record 70's header,
                               its reput had dispatched up to record 60, `abort` left, next file pre-allocated
    fleet/broker-b/master      broker-b:0, 60 records (TopicOrder queues 0-1, TopicPay queue 0)
    fleet/broker-b/slave-late  broker-b:1, joined late: its CommitLog starts at the master's last file
                               (`DefaultHAConnection`), its queues begin with fillPreBlank placeholder units

Settings beside each store (`<dir>.broker.conf`): 4 KiB CommitLog files, 16-unit ConsumeQueue files, a small
index. Deterministic: the same bytes on every run.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from mqtool.builder.replica import ReplicaShape, join_offset, write_replica
from mqtool.builder.writer import StoreWriter
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.message import MessageRecord
from mqtool.formats.names import PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX

T0 = 1795000000000  # 2026-11-18T11:06:40Z: the fleet's first store time
FILE = 4096  # mappedFileSizeCommitLog
SETTINGS = {
    "mappedFileSizeCommitLog": FILE,
    "mappedFileSizeConsumeQueue": 320,
    "maxHashSlotNum": 64,
    "maxIndexNum": 256,
}
TOPICS = (("TopicOrder", 0), ("TopicOrder", 1), ("TopicPay", 0))
CLUSTER = "FleetCluster"


def fleet_config() -> BrokerConfig:
    return BrokerConfig().with_overrides(SETTINGS)


def conf_text(broker_name: str, broker_id: int, role: str) -> str:
    lines = [
        f"brokerClusterName={CLUSTER}",
        f"brokerName={broker_name}",
        f"brokerId={broker_id}",
        f"brokerRole={role}",
        *(f"{k}={v}" for k, v in SETTINGS.items()),
    ]
    return "".join(line + "\n" for line in lines)


def write_master(root: Path, n: int, key_prefix: str = "K", t0: int = T0) -> list[MessageRecord]:
    """n records: record i on TOPICS[i % 3], KEYS `<prefix><i:04d>`, UNIQ_KEY `U<prefix><i:04d>`, TAGS t0/t1,
    a 60-byte body, stored at t0 + 10 i ms (about 180 bytes each: 22 to a 4 KiB file)."""
    with StoreWriter(root, fleet_config()) as w:
        for i in range(n):
            topic, q = TOPICS[i % 3]
            props = [
                (PROPERTY_KEYS, f"{key_prefix}{i:04d}"),
                (PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, f"U{key_prefix}{i:04d}"),
                (PROPERTY_TAGS, f"t{i % 2}"),
            ]
            w.append_message(topic, q, b"x" * 60, props, store_timestamp=t0 + 10 * i)
        w.write_checkpoint()
        return list(w.records)


def _end(rec: MessageRecord) -> int:
    return rec.physical_offset + rec.total_size


def write_fleet_fixture(fixtures: Path) -> dict[str, int]:
    """(Re)write `fixtures/fleet/`; returns the records each master holds."""
    out = fixtures / "fleet"
    if out.exists():
        shutil.rmtree(out)
    config = fleet_config()
    a = write_master(out / "broker-a" / "master", 90, "A")
    killed = ReplicaShape(
        end=a[70].physical_offset + 50, dispatched_to=_end(a[60]), abort_pid="31337", preallocated=True
    )
    write_replica(out / "broker-a" / "master", out / "broker-a" / "slave", config, killed)
    b = write_master(out / "broker-b" / "master", 60, "B", T0 + 60_000)
    late = ReplicaShape(begin=join_offset(_end(b[30]), FILE))
    write_replica(out / "broker-b" / "master", out / "broker-b" / "slave-late", config, late)
    for group, slave in (("broker-a", "slave"), ("broker-b", "slave-late")):
        (out / group / "master.broker.conf").write_text(conf_text(group, 0, "ASYNC_MASTER"))
        (out / group / f"{slave}.broker.conf").write_text(conf_text(group, 1, "SLAVE"))
    return {"broker-a": len(a), "broker-b": len(b)}
