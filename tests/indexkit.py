"""IndexFile oracle cases: every store RocketMQ wrote, its records as RocketMQ decoded them, and the
maxHashSlotNum / maxIndexNum it ran with (broker.conf, summary.txt or the store's README)."""

import json
import struct
from dataclasses import dataclass
from pathlib import Path

from conftest import ORACLE
from mqtool.rules.index import DispatchRequest


@dataclass(frozen=True)
class IndexCase:
    name: str
    store: Path
    records: Path
    hash_slot_num: int
    index_num: int

    def record_lines(self) -> list[dict]:
        """Message records (no BLANK) with `offset` set, in CommitLog order."""
        out = []
        for line in self.records.read_text().splitlines():
            r = json.loads(line)
            if "topic" in r and r.get("kind", "message") == "message" and not r.get("blank"):
                r["offset"] = r.get("physicalOffset", r.get("offset"))
                out.append(r)
        return out

    def dispatches(self) -> list[DispatchRequest]:
        return [DispatchRequest(r["topic"], r["offset"], r["storeTimestamp"], r["sysFlag"],
                                r["properties"].get("KEYS"), r["properties"].get("UNIQ_KEY"))
                for r in self.record_lines()]

    def index_files(self) -> list[Path]:
        return sorted((self.store / "index").iterdir())


CASES = [
    IndexCase("basic-5.3.1", ORACLE / "basic-5.3.1/store", ORACLE / "basic-5.3.1/commitlog.jsonl", 64, 256),
    IndexCase("pair_default/A", ORACLE / "pair_default/A", ORACLE / "pair_default/A.commitlog.jsonl", 500, 2000),
    IndexCase("pair_default/B", ORACLE / "pair_default/B", ORACLE / "pair_default/B.commitlog.jsonl", 500, 2000),
    IndexCase("pair-4.9/A", ORACLE / "pair-4.9/A", ORACLE / "pair-4.9/A.commitlog.jsonl", 500, 2000),
    IndexCase("pair-4.9/B", ORACLE / "pair-4.9/B", ORACLE / "pair-4.9/B.commitlog.jsonl", 500, 2000),
    IndexCase("dledger-5.3.1", ORACLE / "dledger-5.3.1/store", ORACLE / "dledger-5.3.1/records.jsonl", 100, 400),
    IndexCase("batchcq-5.3.1", ORACLE / "batchcq-5.3.1/store", ORACLE / "batchcq-5.3.1/records.jsonl", 100, 400),
    IndexCase("compaction-5.3.1", ORACLE / "compaction-5.3.1/store",
              ORACLE / "compaction-5.3.1/commitlog-records.jsonl", 32, 128),
]
CASE_IDS = [c.name for c in CASES]


def java_hash(s: str) -> int:
    """abs(String.hashCode()), 0 for MIN_VALUE: written here again so tests do not trust mqtool's."""
    h = 0
    for (u,) in struct.iter_unpack(">H", s.encode("utf-16-be")):
        h = (31 * h + u) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return 0 if h == -(1 << 31) else abs(h)


def walk_chain(data: bytes, slots: int, key: str) -> list[int]:
    """Every phyOffset whose keyHash matches, walking the slot's chain with struct only (no time bounds)."""
    _, _, _, _, _, count = struct.unpack(">qqqqii", data[:40])
    h = java_hash(key)
    (cur,) = struct.unpack_from(">i", data, 40 + (h % slots) * 4)
    out: list[int] = []
    seen: set[int] = set()
    while 0 < cur < count and cur not in seen:
        seen.add(cur)
        kh, phy, _diff, prev = struct.unpack_from(">iqii", data, 40 + slots * 4 + cur * 20)
        if kh == h:
            out.append(phy)
        cur = prev
    return out
