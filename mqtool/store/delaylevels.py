"""The delay levels a store ran with: messageDelayLevel, or without a broker.conf what the store's units imply.

`delay_levels_in_effect` reads the SCHEDULE_TOPIC_XXXX units (a unit's tagsCode minus its record's store time:
`rules.schedule.implied_level_delay_ms`); `config_in_effect` is the broker.conf the views, the simulator, the
audit and `trace` use. Beside the store readers so that `trace`, `simulate` and `audit` need no `inspect`.
"""

from dataclasses import replace

from mqtool.formats.broker_conf import DEFAULT_MESSAGE_DELAY_LEVEL, BrokerConfig
from mqtool.formats.message import RecordError
from mqtool.formats.names import RMQ_SYS_SCHEDULE_TOPIC
from mqtool.rules.schedule import implied_level_delay_ms, level_delay_ms, queue_id_2_delay_level
from mqtool.store.findings import Finding
from mqtool.store.store import Store
from mqtool.times import format_duration


def implied_delay_levels(store: Store) -> dict[int, list[tuple[int, int]]]:
    """Level -> [(queue offset, delay)] the oldest and newest unit of its SCHEDULE_TOPIC_XXXX queue imply
    (`implied_level_delay_ms`; two reads per level: the newest says what the broker had last)."""
    out: dict[int, list[tuple[int, int]]] = {}
    for topic, qid in store.queue_ids:
        cq = store.consume_queue(topic, qid) if topic == RMQ_SYS_SCHEDULE_TOPIC else None
        if cq is None or cq.max_offset == 0:
            continue
        seen = []
        for off in sorted({cq.min_offset(store.commitlog.min_offset), cq.max_offset - 1}):
            unit = cq.unit(off)
            try:
                rec = store.commitlog.read(unit.commitlog_offset) if unit is not None else None
            except RecordError:
                rec = None
            if rec is None or rec.topic != topic or rec.queue_id != qid:
                continue  # a unit that does not point back to its record implies nothing
            delay = implied_level_delay_ms(unit.tags_code, rec.store_timestamp)
            if delay is not None:
                seen.append((off, delay))
        if seen:
            out[queue_id_2_delay_level(qid)] = seen
    return out


def delay_levels_in_effect(store: Store) -> tuple[list[int], str, Finding | None]:
    """(delayLevelTable as a list, its source, a finding where the store's units imply other delays).

    Source "config": messageDelayLevel of the broker.conf given (or its default when the file does not
    set it: the broker then ran with the defaults too). Without any broker.conf, "defaults", or "store
    data" when the units imply other delays: the implied ones replace the defaults (a level past the
    defaults without a unit of its own takes the delay of the level before it, as the finding says).
    """
    configured = store.config.delay_levels_ms()
    given = _levels_given(store.config)
    implied = implied_delay_levels(store)
    differ = {
        lv: seen for lv, seen in sorted(implied.items()) if any(d != level_delay_ms(lv, configured) for _, d in seen)
    }
    if not differ:
        return configured, "config" if given else "defaults", None
    levels = configured if given else _table_from(configured, implied)
    what = "; ".join(_implied_text(lv, seen, configured) for lv, seen in differ.items())
    gaps = [lv for lv, _ in enumerate(levels, 1) if lv > len(configured) and lv not in implied]
    use = (
        "messageDelayLevel of the broker.conf given is used (if the broker ran with other levels, they "
        "decide when these messages go out)"
        if given
        else "no broker.conf was given: these are used instead of the defaults (pass --config with the broker's "
        "broker.conf to use its levels)"
        + (
            f"; level(s) {', '.join(map(str, gaps))} have no unit: their delay is unknown, the one of the "
            "level before is shown"
            if gaps
            else ""
        )
    )
    return (
        levels,
        "config" if given else "store data",
        Finding(
            f"consumequeue/{RMQ_SYS_SCHEDULE_TOPIC}",
            None,
            "delay.implied",
            "warning",
            f"the delay-level units imply other delays than messageDelayLevel ({len(configured)} levels"
            f"{'' if given else ', the defaults'}): {what}; {use}",
        ),
    )


def config_in_effect(store: Store, config: BrokerConfig | None = None) -> BrokerConfig:
    """`config` (default the store's) with the delay levels `delay_levels_in_effect` uses, for the simulator."""
    config = config or store.config
    levels, source, _ = delay_levels_in_effect(store)
    if source != "store data" or _levels_given(config):
        return config
    return replace(config, message_delay_level=" ".join(map(message_delay_level_entry, levels)))


def _levels_given(config: BrokerConfig) -> bool:
    """A broker.conf was given (any setting read), or the levels are not the defaults."""
    return bool(config.raw) or config.message_delay_level != DEFAULT_MESSAGE_DELAY_LEVEL


def message_delay_level_entry(delay_ms: int) -> str:
    """One messageDelayLevel entry (`parseDelayLevel`'s units: d, h, m, s) for a delay in whole seconds."""
    for unit, ms in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000)):
        if delay_ms % ms == 0:
            return f"{delay_ms // ms}{unit}"
    return f"{delay_ms // 1000}s"


def _table_from(configured: list[int], implied: dict[int, list[tuple[int, int]]]) -> list[int]:
    newest = {lv: seen[-1][1] for lv, seen in implied.items()}
    levels: list[int] = []
    for lv in range(1, max([len(configured), *newest]) + 1):
        levels.append(newest.get(lv, configured[lv - 1] if lv <= len(configured) else levels[-1]))
    return levels


def _implied_text(level: int, seen: list[tuple[int, int]], configured: list[int]) -> str:
    had = level_delay_ms(level, configured)
    if len({d for _, d in seen}) > 1:  # messageDelayLevel changed between the oldest and the newest unit
        delays = " then ".join(f"{format_duration(d)} (unit {off})" for off, d in seen)
    else:
        delays = format_duration(seen[-1][1])
    return f"level {level} = {delays} ({'missing' if had is None else format_duration(had)} in the table)"
