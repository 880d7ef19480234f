"""Writing the broker's ConfigManager files (`config/*.json`, `timermetrics`, `transactionMetrics`).

One table, `CONFIG_FILES`, pairs each file name with the `formats/` reader and writer of its dialect
(fastjson pretty for topics.json and subscriptionGroup.json, fastjson compact + BrowserCompatible for
the two metrics files). `write_config` stores a model through `StoreWriter.write_config_file`, which
keeps the broker's `<file>.bak` rule; `rebuild_config_dir` re-serialises a whole config directory
from its parsed models into another directory (never into its input), which the tests compare byte
for byte with what real brokers wrote.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqtool.errors import MqtoolError
from mqtool.formats.config_json import (
    TopicConfig,
    Topics,
    dump_subscription_groups,
    dump_topics,
    parse_subscription_groups,
    parse_topics,
)
from mqtool.formats.javahash import java_string_hash
from mqtool.formats.metrics_json import dump_topic_metrics, parse_timer_metrics, parse_transaction_metrics
from mqtool.formats.offsets_json import (
    LOADED_TABLE_SIZE,
    ConsumerOffsets,
    DataVersion,
    _chm_order,
    derive_group_topic_map,
)

if TYPE_CHECKING:
    from mqtool.builder.writer import StoreWriter

__all__ = [
    "CONFIG_FILES",
    "create_topics",
    "dump_config",
    "parse_config",
    "rebuild_config_dir",
    "with_group_topic_map",
    "write_config",
]

CONFIG_FILES: dict[str, tuple[Callable[[str], Any], Callable[[Any], str]]] = {
    "topics.json": (parse_topics, dump_topics),  # TopicConfigManager
    "subscriptionGroup.json": (parse_subscription_groups, dump_subscription_groups),  # SubscriptionGroupManager
    "timermetrics": (parse_timer_metrics, dump_topic_metrics),  # TimerMetrics
    "transactionMetrics": (parse_transaction_metrics, dump_topic_metrics),  # TransactionMetrics
}


def _entry(name: str) -> tuple[Callable[[str], Any], Callable[[Any], str]]:
    base = name.removesuffix(".bak")
    if base not in CONFIG_FILES:
        raise MqtoolError(f"no writer for config file {name!r} (known: {', '.join(CONFIG_FILES)})")
    return CONFIG_FILES[base]


def parse_config(name: str, text: str) -> Any:
    """The model of config file `name` (a `.bak` reads like its main file)."""
    return _entry(name)[0](text)


def dump_config(name: str, model: Any) -> str:
    """The bytes (as text) the broker writes for `model` under file name `name`."""
    return _entry(name)[1](model)


def write_config(w: StoreWriter, name: str, model: Any) -> None:
    """Persist `model` as config/`name`; the previous content becomes `name.bak`, as the broker does."""
    w.write_config_file(name, dump_config(name, model))


def rebuild_config_dir(src: Path, out: Path) -> list[str]:
    """Re-serialise every known config file of `src` (main and `.bak`) into `out`; the names written."""
    src, out = Path(src), Path(out)
    if out.resolve() == src.resolve():
        raise MqtoolError("rebuild_config_dir never writes into the directory it reads")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted(src.iterdir()):
        if path.name.removesuffix(".bak") not in CONFIG_FILES or not path.is_file():
            continue
        text = path.read_bytes().decode("utf-8")
        (out / path.name).write_bytes(dump_config(path.name, parse_config(path.name, text)).encode("utf-8"))
        written.append(path.name)
    return written


def create_topics(topics: Topics, requests: list[tuple[str, int, int, int]], v4: bool = False) -> Topics:
    """topics.json after `TopicConfigManager.createTopicInSendMessageBackMethod` ran for each (topic, queue nums,
    perm, time) request in order: an absent topic is added (read = write = queue nums, sysFlag 0) and moves the
    dataVersion one step (`nextVersion`: counter + 1, that time, stateVersion 0); a present one is left as it is."""
    table = dict(topics.topic_config_table)
    dv = topics.data_version
    for name, nums, perm, when in requests:
        if name in table:
            continue
        table[name] = TopicConfig(name, nums, nums, perm, attributes=None if v4 else {})
        if dv is not None:
            dv = DataVersion(dv.counter + 1, None if dv.state_version is None else 0, when)
    return Topics(table, dv)


def with_group_topic_map(offsets: ConsumerOffsets) -> ConsumerOffsets:
    """consumerOffset.json as 5.x persists it: `getGroupTopicMap()` is derived from the offset table when
    written (4.x files have no such member and keep None)."""
    if offsets.group_topic_map is None:
        return offsets
    # the getter walks offsetTable's keys in the ConcurrentHashMap's order: a HashSet keeps it within a bin
    table = {k: offsets.offset_table[k] for k in _chm_order(offsets.offset_table, java_string_hash, LOADED_TABLE_SIZE)}
    return ConsumerOffsets(offsets.offset_table, offsets.data_version, derive_group_topic_map(table))
