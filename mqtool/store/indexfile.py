"""A store's `index/` directory (RocketMQ's IndexFile, spec §11) opened read-only.

Each file is memory-mapped read-only; the slot table and the entries are numpy views whose dtypes
come from the Construct definitions in formats/indexfile.py. Problems (a torn file, a slot or
prevIndex beyond indexCount, an entry time outside the header's range, a name that cannot be the
creation time) are added to the caller's `Findings` as (file, byte offset, reason), never raised.
"""

from __future__ import annotations

import mmap
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from mqtool.formats import layout
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.indexfile import (
    DEFAULT_HASH_SLOT_NUM,
    DEFAULT_INDEX_NUM,
    HASH_SLOT_SIZE,
    INDEX_HEADER_SIZE,
    INDEX_SIZE,
    index_entry,
    index_file_size,
    index_header,
)
from mqtool.store.findings import Findings

CHECK = "index.integrity"
_NAME = re.compile(r"^\d{17}$")  # UtilAll.timeMillisToHumanString: yyyyMMddHHmmssSSS, broker local time
_TZ_EAST_MS, _TZ_WEST_MS = 14 * 3_600_000, 12 * 3_600_000  # the widest local-time offsets


HEADER_DTYPE = layout.dtype(index_header)
ENTRY_DTYPE = layout.dtype(index_entry)
SLOT_DTYPE = np.dtype(">i4")
assert HEADER_DTYPE.itemsize == INDEX_HEADER_SIZE and ENTRY_DTYPE.itemsize == INDEX_SIZE


def index_geometry(config: BrokerConfig | None, size: int) -> tuple[int, int, str]:
    """(maxHashSlotNum, maxIndexNum, source): broker.conf's values; without them, the file size
    read with the default ratio maxIndexNum = 4 × maxHashSlotNum (every oracle store has it)."""
    raw = config.raw if config is not None else {}
    if "maxHashSlotNum" in raw or "maxIndexNum" in raw:
        return (int(raw.get("maxHashSlotNum", DEFAULT_HASH_SLOT_NUM)),
                int(raw.get("maxIndexNum", DEFAULT_INDEX_NUM)), "broker.conf")
    per_slot = HASH_SLOT_SIZE + 4 * INDEX_SIZE
    if size != index_file_size(DEFAULT_HASH_SLOT_NUM, DEFAULT_INDEX_NUM) and size > INDEX_HEADER_SIZE \
            and (size - INDEX_HEADER_SIZE) % per_slot == 0:
        slots = (size - INDEX_HEADER_SIZE) // per_slot
        return slots, 4 * slots, "file size"
    return DEFAULT_HASH_SLOT_NUM, DEFAULT_INDEX_NUM, "default"


@dataclass
class IndexFile:
    """One IndexFile, read-only. Fits `rules.index.IndexFileLike` (header values as the broker loads them)."""

    path: Path
    rel: str
    hash_slot_num: int
    index_num: int
    size: int
    header: dict[str, int]
    slots: np.ndarray  # >i4 view; shorter than hash_slot_num when the file is torn
    entries: np.ndarray  # ENTRY_DTYPE view of every whole entry in the file (entry 0 included)
    geometry_source: str = "broker.conf"
    _map: mmap.mmap | None = field(default=None, repr=False)

    # --- IndexFileLike ---
    @property
    def begin_timestamp(self) -> int:
        return self.header["begin_timestamp"]

    @property
    def end_timestamp(self) -> int:
        return self.header["end_timestamp"]

    @property
    def begin_phy_offset(self) -> int:
        return self.header["begin_phy_offset"]

    @property
    def end_phy_offset(self) -> int:
        return self.header["end_phy_offset"]

    @property
    def index_count(self) -> int:
        """`IndexHeader.load`: a count <= 0 is taken as 1."""
        return max(self.header["index_count"], 1)

    def slot(self, n: int) -> int | None:
        return int(self.slots[n]) if 0 <= n < len(self.slots) else None

    def entry(self, n: int) -> tuple[int, int, int, int] | None:
        if not 0 <= n < len(self.entries):
            return None
        e = self.entries[n]
        return int(e["key_hash"]), int(e["phy_offset"]), int(e["time_diff"]), int(e["prev_index"])

    def written(self) -> np.ndarray:
        """Entries 1 .. indexCount-1 that lie in the file."""
        return self.entries[1:min(self.index_count, len(self.entries))]

    def entry_offset(self, n: int) -> int:
        return INDEX_HEADER_SIZE + self.hash_slot_num * HASH_SLOT_SIZE + n * INDEX_SIZE

    def close(self) -> None:
        self.slots = self.entries = np.empty(0)
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:  # a view handed out still lives; the map goes with it
                pass
            self._map = None

    def __enter__(self) -> IndexFile:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_index_file(path: Path, findings: Findings, config: BrokerConfig | None = None,
                    rel: str | None = None) -> IndexFile:
    """Map one IndexFile read-only; short or oversized files and header problems become findings."""
    rel = rel or path.name
    size = path.stat().st_size
    slots_n, index_num, source = index_geometry(config, size)
    mm = None
    buf: bytes | mmap.mmap = b""
    if size:
        with open(path, "rb") as fh:
            mm = buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    expected = index_file_size(slots_n, index_num)
    if size < INDEX_HEADER_SIZE:
        findings.add(rel, 0, CHECK, "error", f"file is {size} bytes, shorter than the 40-byte header")
        header = dict.fromkeys(HEADER_DTYPE.names, 0)
    else:
        h = np.frombuffer(buf, HEADER_DTYPE, 1)[0]
        header = {name: int(h[name]) for name in HEADER_DTYPE.names}
        if size < expected:
            findings.add(rel, size, CHECK, "error", f"torn or short file: {size} of {expected} bytes "
                         f"(maxHashSlotNum {slots_n}, maxIndexNum {index_num}); the rest is unread")
        elif size > expected:
            findings.add(rel, expected, CHECK, "warning", f"file is {size} bytes, more than the {expected} of "
                         f"maxHashSlotNum {slots_n} / maxIndexNum {index_num}: is broker.conf the store's?")
    slot_bytes = max(0, min(size, INDEX_HEADER_SIZE + slots_n * HASH_SLOT_SIZE) - INDEX_HEADER_SIZE)
    slots = np.frombuffer(buf, SLOT_DTYPE, slot_bytes // HASH_SLOT_SIZE, INDEX_HEADER_SIZE) if slot_bytes \
        else np.empty(0, SLOT_DTYPE)
    first = INDEX_HEADER_SIZE + slots_n * HASH_SLOT_SIZE
    n_entries = max(0, min(index_num, (size - first) // INDEX_SIZE)) if size > first else 0
    entries = np.frombuffer(buf, ENTRY_DTYPE, n_entries, first) if n_entries else np.empty(0, ENTRY_DTYPE)
    return IndexFile(path, rel, slots_n, index_num, size, header, slots, entries, source, mm)


def open_index_dir(root: Path, findings: Findings, config: BrokerConfig | None = None) -> list[IndexFile]:
    """Every regular file under `root/index`, in name order (as `IndexService.load` sorts them)."""
    d = Path(root) / "index"
    if not d.is_dir():
        return []
    return [open_index_file(p, findings, config, f"index/{p.name}") for p in sorted(d.iterdir()) if p.is_file()]


def name_time_ms(name: str) -> int | None:
    """The creation time in a file name, read as UTC (the broker wrote local time); None if not one."""
    if not _NAME.match(name):
        return None
    try:
        dt = datetime.strptime(name, "%Y%m%d%H%M%S%f").replace(tzinfo=UTC)
    except ValueError:
        return None
    return int(dt.timestamp() * 1000)


def check_index_file(f: IndexFile, findings: Findings, utc_offset_ms: int | None = None) -> None:
    """Everything the broker's own walk would trip on, as findings.

    `utc_offset_ms` is the broker's local-time offset, when known; unknown, a name is only flagged
    when no time zone can make it a time at or after the file's first entry (the broker creates the
    file while dispatching that entry's record, after it was stored)."""
    _check_header(f, findings)
    _check_name(f, findings, utc_offset_ms)
    if len(f.slots):
        _check_slots(f, findings)
    if len(f.written()):
        _check_entries(f, findings)


def _check_header(f: IndexFile, findings: Findings) -> None:
    h = f.header
    if f.size < INDEX_HEADER_SIZE:
        return
    if h["index_count"] <= 0:
        findings.add(f.rel, 36, CHECK, "error", f"indexCount {h['index_count']} (the broker reads it as 1)")
    if h["index_count"] > f.index_num:
        findings.add(f.rel, 36, CHECK, "error", f"indexCount {h['index_count']} beyond maxIndexNum {f.index_num}")
    if h["begin_timestamp"] > h["end_timestamp"]:
        findings.add(f.rel, 0, CHECK, "error",
                     f"beginTimestamp {h['begin_timestamp']} after endTimestamp {h['end_timestamp']}")
    if h["begin_phy_offset"] > h["end_phy_offset"]:
        findings.add(f.rel, 16, CHECK, "error",
                     f"beginPhyOffset {h['begin_phy_offset']} after endPhyOffset {h['end_phy_offset']}")
    used = int(np.count_nonzero(f.slots)) if len(f.slots) == f.hash_slot_num else None
    if used is not None and used != h["hash_slot_count"]:
        findings.add(f.rel, 32, CHECK, "warning", f"hashSlotCount {h['hash_slot_count']} but {used} slots are set")
    written = f.written()
    if len(written) and h["index_count"] <= len(f.entries):
        if int(written[-1]["phy_offset"]) != h["end_phy_offset"]:
            findings.add(f.rel, 24, CHECK, "warning", f"endPhyOffset {h['end_phy_offset']} but the newest entry "
                         f"points to {int(written[-1]['phy_offset'])}")
        if int(written[0]["phy_offset"]) != h["begin_phy_offset"]:
            findings.add(f.rel, 16, CHECK, "warning", f"beginPhyOffset {h['begin_phy_offset']} but entry 1 "
                         f"points to {int(written[0]['phy_offset'])}")


def _check_name(f: IndexFile, findings: Findings, utc_offset_ms: int | None) -> None:
    t = name_time_ms(f.path.name)
    if t is None:
        findings.add(f.rel, None, CHECK, "warning", "file name is not a creation time (yyyyMMddHHmmssSSS)")
        return
    if f.header["index_count"] <= 1 or f.begin_timestamp <= 0:
        return
    latest = t - utc_offset_ms if utc_offset_ms is not None else t + _TZ_WEST_MS
    slack = 1000  # the broker's clock between store and dispatch
    if latest + slack < f.begin_timestamp:
        findings.add(f.rel, 0, CHECK, "warning", f"name says the file was created at {f.path.name}, "
                     f"{(f.begin_timestamp - latest) // 1000} s before its first entry was stored "
                     f"(beginTimestamp {f.begin_timestamp})")


def _check_slots(f: IndexFile, findings: Findings) -> None:
    slots = f.slots.astype(np.int64)
    bad = np.nonzero((slots < 0) | (slots >= f.index_count))[0]
    for s in bad[:20]:
        findings.add(f.rel, INDEX_HEADER_SIZE + int(s) * HASH_SLOT_SIZE, CHECK, "error",
                     f"slot {int(s)} points to entry {int(slots[s])}, beyond indexCount {f.index_count}")
    if len(bad) > 20:
        findings.add(f.rel, None, CHECK, "error", f"{len(bad) - 20} more slots point beyond indexCount")
    ok = np.nonzero((slots > 0) & (slots < min(f.index_count, len(f.entries))))[0]
    heads = slots[ok]
    wrong = ok[(f.entries["key_hash"][heads].astype(np.int64) % f.hash_slot_num) != ok]
    for s in wrong[:20]:
        findings.add(f.rel, INDEX_HEADER_SIZE + int(s) * HASH_SLOT_SIZE, CHECK, "error",
                     f"slot {int(s)} points to entry {int(slots[s])}, whose key hashes to another slot")


def _check_entries(f: IndexFile, findings: Findings) -> None:
    e = f.written()
    numbers = np.arange(1, len(e) + 1)
    prev = e["prev_index"].astype(np.int64)
    rows = [(int(n), f"prevIndex {int(p)} beyond indexCount {f.index_count}")
            for n, p in zip(numbers[(prev < 0) | (prev >= f.index_count)], prev[(prev < 0) | (prev >= f.index_count)],
                            strict=True)]
    loop = (prev >= numbers) & (prev < f.index_count)
    rows += [(int(n), f"prevIndex {int(p)} is not an older entry (the chain can loop)")
             for n, p in zip(numbers[loop], prev[loop], strict=True)]
    linked = (prev > 0) & (prev < numbers)
    kh = e["key_hash"].astype(np.int64)
    moved = np.nonzero(linked & (kh % f.hash_slot_num != f.entries["key_hash"][prev * linked] % f.hash_slot_num))[0]
    rows += [(int(numbers[i]), f"prevIndex {int(prev[i])} is an entry of another slot") for i in moved]
    rows += [(int(n), f"keyHash {int(h)} is negative") for n, h in zip(numbers[kh < 0], kh[kh < 0], strict=True)]
    t = f.begin_timestamp + e["time_diff"].astype(np.int64) * 1000
    out = (t < f.begin_timestamp) | (t > f.end_timestamp)
    rows += [(int(n), f"timestamp {int(x)} outside the header's range [{f.begin_timestamp}, {f.end_timestamp}]")
             for n, x in zip(numbers[out], t[out], strict=True)]
    for n, reason in sorted(rows)[:50]:
        findings.add(f.rel, f.entry_offset(n), CHECK, "error" if "prevIndex" in reason else "warning",
                     f"entry {n}: {reason}")
    if len(rows) > 50:
        findings.add(f.rel, None, CHECK, "error", f"{len(rows) - 50} more entry findings")


def chain_lengths(f: IndexFile) -> np.ndarray:
    """For each written entry (index 0 = entry 0), how many entries its chain holds from it to the end,
    following only links to older entries (pointer doubling: log2(n) numpy passes, no Python loop)."""
    n = min(f.index_count, len(f.entries))
    if n <= 1:
        return np.zeros(max(n, 0), np.int64)
    prev = f.entries["prev_index"][:n].astype(np.int64)
    numbers = np.arange(n)
    nxt = np.where((prev > 0) & (prev < numbers), prev, 0)
    dist = np.ones(n, np.int64)
    dist[0], nxt[0] = 0, 0
    while nxt.any():
        dist, nxt = dist + dist[nxt], nxt[nxt]
    return dist


def index_file_stats(f: IndexFile, commitlog_range: tuple[int, int] | None = None) -> dict:
    """One row of the index view: the header, fill, slots used, longest chain, entries outside the
    CommitLog [min, max) when its range is given. Fill counts the `maxIndexNum - 1` usable entries."""
    written = f.written()
    slots = f.slots.astype(np.int64)
    valid_heads = slots[(slots > 0) & (slots < min(f.index_count, len(f.entries)))]
    lengths = chain_lengths(f)
    outside = None
    if commitlog_range is not None:
        phy = written["phy_offset"]
        outside = int(np.count_nonzero((phy < commitlog_range[0]) | (phy >= commitlog_range[1])))
    return {
        "file": f.rel,
        **f.header,
        "entries": int(max(f.header["index_count"], 1) - 1),
        "max_hash_slot_num": f.hash_slot_num,
        "max_index_num": f.index_num,
        "geometry_from": f.geometry_source,
        "file_size": f.size,
        "fill_ratio": round((max(f.header["index_count"], 1) - 1) / max(f.index_num - 1, 1), 6),
        "slots_used": int(np.count_nonzero(slots)),
        "longest_chain": int(lengths[valid_heads].max()) if len(valid_heads) else 0,
        "entries_outside_commitlog": outside,
    }
