"""IndexFile (spec §11; `IndexFile`, `IndexHeader`, `IndexService` of rocketmq-all-5.3.1, same in 4.9.8).

`STORE/index/yyyyMMddHHmmssSSS`: a 40-byte header, `hashSlotNum` slots of 4 bytes (each the number of
the newest entry whose key hashes there, 0 = empty) and `indexNum` entries of 20 bytes. Entry numbers
start at 1 (`indexCount` starts at 1, entry 0 is never written); entries chain to older ones through
`prevIndex`. The key is `topic + "#" + key`, hashed with `String.hashCode()`, made non-negative.

`IndexFileWriter` mirrors `IndexFile.putKey` on a bytearray, so a list of puts gives the broker's bytes.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from construct import Array, Int32sb, Int64sb, Struct

from mqtool.formats.javahash import java_string_hash

INDEX_HEADER_SIZE = 40
HASH_SLOT_SIZE = 4
INDEX_SIZE = 20
INVALID_INDEX = 0
DEFAULT_HASH_SLOT_NUM = 5_000_000  # MessageStoreConfig.maxHashSlotNum
DEFAULT_INDEX_NUM = 5_000_000 * 4  # MessageStoreConfig.maxIndexNum
INT_MAX = (1 << 31) - 1

index_header = Struct(
    "begin_timestamp" / Int64sb,  # store time of entry 1 (ms)
    "end_timestamp" / Int64sb,  # store time of the newest entry
    "begin_phy_offset" / Int64sb,
    "end_phy_offset" / Int64sb,
    "hash_slot_count" / Int32sb,  # slots that were empty when a key landed in them
    "index_count" / Int32sb,  # next entry number (entries written = index_count - 1)
)

hash_slot = Int32sb

index_entry = Struct(
    "key_hash" / Int32sb,
    "phy_offset" / Int64sb,
    "time_diff" / Int32sb,  # whole seconds since begin_timestamp
    "prev_index" / Int32sb,  # older entry in the same slot, 0 ends the chain
)


def index_file(hash_slot_num: int, index_num: int) -> Struct:
    """The whole file for a broker's `maxHashSlotNum` / `maxIndexNum` (parse it only when small)."""
    return Struct(
        "header" / index_header,
        "slots" / Array(hash_slot_num, hash_slot),
        "entries" / Array(index_num, index_entry),
    )


def index_file_size(hash_slot_num: int, index_num: int) -> int:
    """`IndexFile.fileTotalSize`."""
    return INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + index_num * INDEX_SIZE


def slot_position(hash_slot_num: int, slot: int) -> int:
    return INDEX_HEADER_SIZE + slot * HASH_SLOT_SIZE


def entry_position(hash_slot_num: int, number: int) -> int:
    return INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + number * INDEX_SIZE


def index_file_name(created_ms: int) -> str:
    """`UtilAll.timeMillisToHumanString`: yyyyMMddHHmmssSSS of the creation time (the broker uses its
    local time; mqtool writes UTC)."""
    dt = datetime.fromtimestamp(created_ms / 1000, UTC)
    return dt.strftime("%Y%m%d%H%M%S") + f"{created_ms % 1000:03d}"


def build_key(topic: str, key: str) -> str:
    """`IndexService.buildKey`: the string that is hashed."""
    return topic + "#" + key


def index_key_hash(key: str) -> int:
    """`IndexFile.indexKeyHashMethod`: `Math.abs(key.hashCode())`, 0 when that overflows (MIN_VALUE)."""
    h = abs(java_string_hash(key))
    return 0 if h > INT_MAX else h


class IndexFileWriter:
    """One IndexFile being written as the broker writes it (`new IndexFile(...)` then `putKey`s).

    `end_phy_offset` / `end_timestamp` are those of the previous (full) file, as
    `IndexService.getAndCreateLastIndexFile` passes them; they seed the header until entry 1 is put.
    """

    def __init__(self, hash_slot_num: int, index_num: int, end_phy_offset: int = 0, end_timestamp: int = 0):
        self.hash_slot_num, self.index_num = hash_slot_num, index_num
        self.data = bytearray(index_file_size(hash_slot_num, index_num))
        self.begin_timestamp = self.end_timestamp = 0
        self.begin_phy_offset = self.end_phy_offset = 0
        self.hash_slot_count, self.index_count = 0, 1
        if end_phy_offset > 0:
            self.begin_phy_offset = self.end_phy_offset = end_phy_offset
        if end_timestamp > 0:
            self.begin_timestamp = self.end_timestamp = end_timestamp

    @classmethod
    def load(cls, data: bytes, hash_slot_num: int, index_num: int) -> IndexFileWriter:
        """A file as written before (`IndexFile.load`: the header read back), to continue putting keys."""
        w = cls(hash_slot_num, index_num)
        w.data[:len(data)] = data[:len(w.data)]
        h = index_header.parse(bytes(w.data[:INDEX_HEADER_SIZE]))
        w.begin_timestamp, w.end_timestamp = h.begin_timestamp, h.end_timestamp
        w.begin_phy_offset, w.end_phy_offset = h.begin_phy_offset, h.end_phy_offset
        w.hash_slot_count, w.index_count = h.hash_slot_count, max(h.index_count, 1)
        return w

    def is_write_full(self) -> bool:
        """`IndexFile.isWriteFull`."""
        return self.index_count >= self.index_num

    def _int(self, pos: int) -> int:
        return int.from_bytes(self.data[pos:pos + 4], "big", signed=True)

    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        """`IndexFile.putKey`: False when the file is full (the caller then rolls to a new file)."""
        if self.index_count >= self.index_num:
            return False
        key_hash = index_key_hash(key)
        slot_pos = slot_position(self.hash_slot_num, key_hash % self.hash_slot_num)
        slot_value = self._int(slot_pos)
        if slot_value <= INVALID_INDEX or slot_value > self.index_count:
            slot_value = INVALID_INDEX
        time_diff = _java_div(store_timestamp - self.begin_timestamp, 1000)
        if self.begin_timestamp <= 0:
            time_diff = 0
        else:
            time_diff = min(max(time_diff, 0), INT_MAX)
        pos = entry_position(self.hash_slot_num, self.index_count)
        self.data[pos:pos + INDEX_SIZE] = index_entry.build(
            {"key_hash": key_hash, "phy_offset": phy_offset, "time_diff": time_diff, "prev_index": slot_value})
        self.data[slot_pos:slot_pos + 4] = hash_slot.build(self.index_count)
        if self.index_count <= 1:
            self.begin_phy_offset, self.begin_timestamp = phy_offset, store_timestamp
        if slot_value == INVALID_INDEX:
            self.hash_slot_count += 1
        self.index_count += 1
        self.end_phy_offset, self.end_timestamp = phy_offset, store_timestamp
        return True

    def slot(self, n: int) -> int | None:
        """Slot n as stored (None beyond the table)."""
        return self._int(slot_position(self.hash_slot_num, n)) if 0 <= n < self.hash_slot_num else None

    def entry(self, n: int) -> tuple[int, int, int, int] | None:
        """Entry n as (keyHash, phyOffset, timeDiff, prevIndex); None beyond the file."""
        if not 0 <= n < self.index_num:
            return None
        pos = entry_position(self.hash_slot_num, n)
        e = index_entry.parse(bytes(self.data[pos:pos + INDEX_SIZE]))
        return e.key_hash, e.phy_offset, e.time_diff, e.prev_index

    def header(self) -> dict:
        return {"begin_timestamp": self.begin_timestamp, "end_timestamp": self.end_timestamp,
                "begin_phy_offset": self.begin_phy_offset, "end_phy_offset": self.end_phy_offset,
                "hash_slot_count": self.hash_slot_count, "index_count": self.index_count}

    def to_bytes(self) -> bytes:
        """The file as flushed (`IndexHeader.updateByteBuffer` then the mapped bytes)."""
        self.data[:INDEX_HEADER_SIZE] = index_header.build(self.header())
        return bytes(self.data)


def _java_div(a: int, b: int) -> int:
    """Java's long division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def build_index_file(puts: Iterable[tuple[str, int, int]], hash_slot_num: int, index_num: int,
                     end_phy_offset: int = 0, end_timestamp: int = 0) -> bytes:
    """One IndexFile from (key, phyOffset, storeTimestamp) puts in order; the key is already `topic#key`.

    ValueError when the puts do not fit (`IndexService` would roll to a new file: see rules/index.py).
    """
    w = IndexFileWriter(hash_slot_num, index_num, end_phy_offset, end_timestamp)
    for key, phy_offset, store_timestamp in puts:
        if not w.put_key(key, phy_offset, store_timestamp):
            raise ValueError(f"IndexFile full after {w.index_count - 1} entries (maxIndexNum {index_num})")
    return w.to_bytes()
