"""Read a ConfigManager JSON file with RocketMQ's `.bak` fallback (`ConfigManager.load`, spec §4.7, §5);
`ConfigFiles`: a store's config/ files read that way (`Store.config_files`), each with the copy it came from.

`MixAll.string2File` copies the previous content to `<file>.bak` before writing the new one (5.3.1
then overwrites the file in place; 4.9.8 writes `<file>.tmp`, deletes the file and renames), so a crash
can leave the main file torn, empty or missing. `ConfigManager.load` then reads `<file>.bak`; when that
is missing or empty too, the broker starts from defaults. Files are decoded as UTF-8 with replacement,
as `MixAll.file2String` does. Read-only: nothing is ever written.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import TypeVar

from mqtool.formats.config_json import SubscriptionGroups, Topics, parse_subscription_groups, parse_topics
from mqtool.formats.metrics_json import TopicMetrics, parse_timer_metrics, parse_transaction_metrics
from mqtool.formats.offsets_json import (
    ConfigFileError,
    ConsumerOffsets,
    DelayOffsets,
    parse_consumer_offsets,
    parse_delay_offsets,
)
from mqtool.store.findings import Findings
from mqtool.store.rocksdb import pick_config, read_kv_consumer_offsets, read_kv_subscription_groups, read_kv_topics

__all__ = ["ConfigFiles", "read_config_json"]

T = TypeVar("T")


class _Unusable(Exception):
    """Why one candidate file could not be used: `kind` for the logic, the message for people."""

    def __init__(self, path: Path, kind: str, detail: str = "") -> None:
        self.kind = kind
        super().__init__(f"{path.name}: {kind}{detail}")


def _read_text(path: Path) -> str | None:
    """The file's text, None when it does not exist; raises _Unusable when unreadable."""
    try:
        with path.open("rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _Unusable(path, "unreadable", f" ({exc.strerror or exc})") from exc
    return data.decode("utf-8", errors="replace")


def _parse(path: Path, text: str, parse: Callable[[str], T]) -> T:
    try:
        return parse(text)
    except ConfigFileError as exc:
        where = f" at line {exc.line} col {exc.col}" if exc.line is not None else ""
        raise _Unusable(path, "unparsable", f"{where} ({exc.reason})") from exc
    except ValueError as exc:
        raise _Unusable(path, "unparsable", f" ({exc})") from exc


def _load(path: Path, parse: Callable[[str], T]) -> T:
    """One candidate: raises _Unusable (missing, empty, unreadable, unparsable) or returns its value."""
    text = _read_text(path)
    if text is None:
        raise _Unusable(path, "missing")
    if not text.strip():
        raise _Unusable(path, "empty")
    return _parse(path, text, parse)


def read_config_json(path: Path, parse: Callable[[str], T]) -> tuple[T | None, Path | None, list[str]]:
    """(value, file actually used, problems) for `path`, falling back to `path.bak` like the broker.

    Both files absent is the normal state of a broker whose service never persisted: (None, None, []).
    """
    path = Path(path)
    bak = path.with_name(path.name + ".bak")
    try:
        return _load(path, parse), path, []
    except _Unusable as exc:
        main = exc
    try:
        value = _load(bak, parse)
    except _Unusable as exc:
        if main.kind == exc.kind == "missing":
            return None, None, []
        starts = exc.kind in ("missing", "empty")  # ConfigManager.loadBak returns true for these
        consequence = "the broker would start from defaults" if starts else "the broker would fail to load it"
        return None, None, [f"{main}; {exc}; {consequence}"]
    return value, bak, [f"{main}; read {bak.name}"]


class ConfigFiles:
    """A store's config/ files, each read once when first asked for (the JSON with its `.bak` fallback; a
    5.2+ store's RocksDB copy where `rocksdb_config` lists its directory). What reading finds goes to
    `findings` (the store's)."""

    def __init__(self, root: Path, rocksdb_config: tuple[str, ...], findings: Findings) -> None:
        self.root = root
        self.rocksdb_config = rocksdb_config  # `Layouts.rocksdb_config`: config/ RocksDB directories
        self.findings = findings

    @cached_property
    def delay_offsets(self) -> DelayOffsets | None:
        return self._json("delayOffset.json", parse_delay_offsets)

    @cached_property
    def _consumer_offsets(self) -> tuple[ConsumerOffsets | None, str | None]:
        json_value = self._json("consumerOffset.json", parse_consumer_offsets)
        if "config/consumerOffsets" not in self.rocksdb_config:
            return json_value, None if json_value is None else "json"
        return pick_config(json_value, read_kv_consumer_offsets(self.root, self.findings))

    @property
    def consumer_offsets(self) -> ConsumerOffsets | None:
        """config/consumerOffset.json, or config/consumerOffsets/ (RocksDB, 5.2+) when that copy is newer
        or the JSON is absent (`pick_config`)."""
        return self._consumer_offsets[0]

    @property
    def consumer_offsets_source(self) -> str | None:
        """Which copy `consumer_offsets` came from: "json", "rocksdb" or None (neither)."""
        return self._consumer_offsets[1]

    @cached_property
    def _topics(self) -> tuple[Topics | None, str | None]:
        value, used, problems = read_config_json(self.root / "config" / "topics.json", parse_topics)
        self._config_problems("topics.json", problems)
        json_file = None if used is None else str(used.relative_to(self.root))
        if "config/topics" not in self.rocksdb_config:
            return value, json_file
        picked, source = pick_config(value, read_kv_topics(self.root, self.findings))
        return picked, json_file if source == "json" else "config/topics"

    @property
    def topics(self) -> Topics | None:
        """config/topics.json (or its .bak, as the broker falls back), None when neither is usable."""
        return self._topics[0]

    @property
    def topics_file(self) -> str | None:
        """Where `topics` came from: config/topics.json, its .bak, or config/topics (RocksDB, 5.2+)."""
        return self._topics[1]

    @cached_property
    def _subscription_groups(self) -> tuple[SubscriptionGroups | None, str | None]:
        value = self._json("subscriptionGroup.json", parse_subscription_groups)
        if "config/subscriptionGroups" not in self.rocksdb_config:
            return value, None if value is None else "json"
        return pick_config(value, read_kv_subscription_groups(self.root, self.findings))

    @property
    def subscription_groups(self) -> SubscriptionGroups | None:
        """config/subscriptionGroup.json (or its .bak), or config/subscriptionGroups/ (RocksDB, 5.2+) when
        that copy is newer or the JSON is absent (`pick_config`); None when there is neither."""
        return self._subscription_groups[0]

    @property
    def subscription_groups_source(self) -> str | None:
        """Which copy `subscription_groups` came from: "json", "rocksdb" or None (neither)."""
        return self._subscription_groups[1]

    @cached_property
    def timer_metrics(self) -> TopicMetrics | None:
        """config/timermetrics (or its .bak): `TimerMetrics`' per-topic count of timers not yet delivered."""
        return self._json("timermetrics", parse_timer_metrics)

    @cached_property
    def transaction_metrics(self) -> TopicMetrics | None:
        """config/transactionMetrics (or its .bak): `TransactionMetrics`' per-topic count of open halves."""
        return self._json("transactionMetrics", parse_transaction_metrics)

    def _json(self, name: str, parse):
        value, _used, problems = read_config_json(self.root / "config" / name, parse)
        self._config_problems(name, problems)
        return value

    def _config_problems(self, name: str, problems: list[str]) -> None:
        for p in problems:
            self.findings.add(f"config/{name}", None, "store.config", "warning", p)
