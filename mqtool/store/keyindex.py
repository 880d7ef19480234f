"""The store's IndexFiles as a key lookup (`open_key_index`), for `inspect messages` and `trace`.

Beside the IndexFile reader so that `trace` and the views share it without `trace` importing `inspect`:
`IndexService.queryOffset` (`rules.index.query_offset`) over the files of `index/`, plus where the files
stop answering (the CommitLog parts a caller scans itself).
"""

from __future__ import annotations

from dataclasses import dataclass

from mqtool.rules.index import LONG_MAX, query_offset
from mqtool.store.findings import Findings
from mqtool.store.indexfile import IndexFile, check_index_file, open_index_dir
from mqtool.store.store import Store


def commitlog_range(store: Store) -> tuple[int, int] | None:
    """[min, max) of the CommitLog's valid data; None when the store has no CommitLog files."""
    if not (store.root / "commitlog").is_dir() or not store.commitlog.files:
        return None
    return store.commitlog.min_offset, store.commitlog.max_offset()


def walk_cap(files: list[IndexFile]) -> int:
    """maxNum for an exhaustive walk: every entry once; a looping chain (the broker walks it until
    maxNum) then ends instead of running forever."""
    return sum(f.index_count for f in files) + 1


def close_index_files(files: list[IndexFile]) -> None:
    """Unmap every file (the readers hold mmaps)."""
    for f in files:
        f.close()


@dataclass
class KeyIndex:
    """The store's IndexFiles opened for the key lookups of `inspect messages` and `trace`.

    The files answer for CommitLog offsets [`begin`, `end`]: `begin` is the first entry's record,
    `end` the newest entry's (`endPhyOffset` of the last file). A caller scans the rest itself:
    [CommitLog start, `begin`) and from `tail_start` on (records the broker had not indexed yet).
    A record is looked up as `topic#key` in each of `topics` (the ConsumeQueue directories: the
    IndexFile has no key without its topic: `index_topics`)."""

    files: list[IndexFile]
    topics: list[str]
    begin: int
    end: int
    head_end: int | None  # scan [CommitLog start, head_end) too; None: nothing before `begin`
    tail_start: int | None  # scan from here on too; None: the IndexFiles reach the CommitLog's end

    @property
    def source(self) -> str:
        """What answers a lookup: "indexfile", or "indexfile+scan" when a part is scanned."""
        return "indexfile" if self.head_end is None and self.tail_start is None else "indexfile+scan"

    def offsets(self, key: str, topics: list[str] | None = None, begin: int = 0, end: int = LONG_MAX) -> list[int]:
        """Every offset `IndexService.queryOffset` finds for topic#key (no 64 cap), ascending, once each."""
        found: set[int] = set()
        for topic in self.topics if topics is None else topics:
            cap = walk_cap(self.files)
            found.update(query_offset(self.files, topic, key, cap, begin, end, cap, max_steps=cap).phy_offsets)
        return sorted(found)

    def close(self) -> None:
        close_index_files(self.files)


def index_topics(store: Store) -> list[str]:
    """The topics a key is looked up in: every ConsumeQueue and BatchConsumeQueue directory and every
    topic of config/topics.json (or its .bak)."""
    from mqtool.formats.config_json import parse_topics
    from mqtool.store.config_files import read_config_json

    topics = {t for t, _ in store.queue_ids}
    bcq = store.root / "batchconsumequeue"
    if bcq.is_dir():
        topics.update(p.name for p in bcq.iterdir() if p.is_dir())
    conf, _, _ = read_config_json(store.root / "config" / "topics.json", parse_topics)
    if conf is not None:
        topics.update(conf.topic_config_table)
    return sorted(topics)


def open_key_index(store: Store, since_ms: int | None = None, until_ms: int | None = None) -> KeyIndex | None:
    """The IndexFiles for key lookups, or None when they cannot answer: no file with entries, a file
    with error findings (a broken chain could hide records), or none overlapping [since, until)."""
    findings = Findings()
    files = open_index_dir(store.root, findings, store.config)
    for f in files:
        check_index_file(f, findings)
    written = [f for f in files if f.index_count > 1]
    rng = commitlog_range(store)
    lo, hi = (0 if since_ms is None else since_ms), (LONG_MAX if until_ms is None else until_ms)
    usable = (
        written
        and rng is not None
        and findings.worst() != "error"
        and any(f.begin_timestamp <= hi and f.end_timestamp >= lo for f in written)
    )
    if not usable:
        close_index_files(files)
        return None
    begin, end = written[0].begin_phy_offset, written[-1].end_phy_offset
    tail = None
    try:
        last = store.commitlog.read(end)
        if end + last.total_size < rng[1]:
            tail = end + last.total_size
    except Exception:  # the newest entry points to no record: scan everything after it
        tail = end + 1 if end + 1 < rng[1] else None
    return KeyIndex(files, index_topics(store), begin, end, begin if begin > rng[0] else None, tail)
