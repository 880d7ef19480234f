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
from mqtool.formats.config_json import dump_subscription_groups, dump_topics, parse_subscription_groups, parse_topics
from mqtool.formats.metrics_json import dump_topic_metrics, parse_timer_metrics, parse_transaction_metrics

if TYPE_CHECKING:
    from mqtool.builder.writer import StoreWriter

__all__ = ["CONFIG_FILES", "dump_config", "parse_config", "rebuild_config_dir", "write_config"]

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
