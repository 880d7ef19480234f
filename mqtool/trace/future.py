"""`trace --until T`: continue a message's timeline into the future with the simulator.

`mqtool.simulate.simulate` replays the schedule, timer and transaction-check services from the
store's own "now" (its newest store timestamp, as `mqtool simulate` does) up to `until_ms`; the
events of this message (same UNIQ_KEY, or a record of its family, or a record a matched event
wrote) become `simulated` stages, and the last decisive one replaces the verdict.

With a scenario's `[[consumers]]` the consumer groups run too: consumptions, send-backs (retry
levels with their due times), redeliveries to `%RETRY%group`, POP revives and the DLQ become
stages, and the verdict says per group how the message ended (`consumed at … after 2 retries`,
`dead-lettered at … after 16 retries`) or where it waits.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from mqtool.formats.names import ACK_TAG, RETRY_GROUP_TOPIC_PREFIX, RMQ_SYS_SCHEDULE_TOPIC
from mqtool.rules.schedule import delay_level_2_queue_id
from mqtool.simulate.scenario import Scenario, ScenarioError, load_scenario
from mqtool.store.store import Store
from mqtool.times import format_time, parse_time
from mqtool.trace.model import Stage, Trace, TraceError, Verdict

# simulator event -> stage name
_STAGE = {
    "deliver": "delivered", "enqueue": "parked", "roll": "rolled", "cancel": "cancelled", "check": "put_back",
    "put_back": "put_back", "commit": "committed", "rollback": "rolled_back", "discard": "discarded",
    "skip": "discarded", "put_failed": "skipped",
}
# consumer service events (simulate/consumer.py) -> stage name; `consume` is consumed / consume_failed
_CONSUMER_STAGE = {"send_back": "retry_scheduled", "dlq": "dead_lettered", "drop": "discarded", "pop": "popped",
                   "revive": "revived", ACK_TAG: "acked", "put_failed": "skipped"}
_CONSUMER_END = ("dlq", "drop")  # a group is done with the message (besides a successful consumption)
_TERMINAL = {"deliver": "delivered", "cancel": "cancelled", "rollback": "rolled_back", "discard": "discarded",
             "skip": "discarded"}


def _detail(ev) -> str:
    d = ev.detail
    if ev.event == "deliver":
        return f"{ev.service} service delivers it" + (f" (due {format_time(d['due'])})" if d.get("due") else "")
    if ev.event == "enqueue":
        return f"timer enqueue into slot {format_time(d.get('slot'))}" + (" (roll window)" if d.get("roll") else "")
    if ev.event == "roll":
        return f"roll #{d.get('roll_times')} at slot {format_time(d.get('slot'))}"
    if ev.event == "cancel":
        return f"dropped by a cancel at slot {format_time(d.get('slot'))}"
    if ev.event == "check":
        return (f"check request to producer group {d.get('producer_group')} (TRANSACTION_CHECK_TIMES="
                f"{d.get('check_times')}), answer: {d.get('answer')}")
    if ev.event == "put_back":
        return f"{d.get('reason', 'check')} put-back (TRANSACTION_CHECK_TIMES={d.get('check_times')})"
    if ev.event == "put_failed":
        return f"put failed ({d.get('status') or d.get('reason')})" + (f", {d['next']}" if d.get("next") else "")
    return ", ".join(f"{k}={v}" for k, v in d.items())


def _retries(n: int) -> str:
    return f"{n} {'retry' if n == 1 else 'retries'}"


def _consumer_stage(ev) -> tuple[str, str] | None:
    """(stage, detail) of a consumer event of this message; None for events that are no stage."""
    d = ev.detail
    g = d.get("group")
    if ev.event == "consume":
        ok = d.get("outcome") == "ok"
        how = "consumed it" if ok else ("sent it to the DLQ at pop (reconsumeTimes at the limit)"
                                          if d.get("outcome") == "dlq" else "failed to consume it")
        return ("consumed" if ok else "consume_failed",
                f"consumer group {g} {how} (reconsume #{d.get('reconsume_times')})")
    if ev.event not in _CONSUMER_STAGE:
        return None
    return _CONSUMER_STAGE[ev.event], _CONSUMER_TEXT[ev.event](ev, d, g)


# The detail of each consumer event in _CONSUMER_STAGE: (event, its detail, its consumer group) -> text.
_CONSUMER_TEXT: dict[str, Callable[[Any, dict, str | None], str]] = {
    "send_back": lambda ev, d, g: (f"sent back by consumer group {g} (reconsume #{d.get('reconsume_times')}), "
                                   f"delay level {d.get('level')}, due {format_time(d.get('due'))}"),
    "dlq": lambda ev, d, g: (f"consumer group {g}: {_retries(d.get('reconsume_times', 1) - 1)} used up, "
                             f"moved to {ev.topic}/{ev.queue_id}"),
    "drop": lambda ev, d, g: f"consumer group {g}: sent back but dropped ({d.get('reason')})",
    "pop": lambda ev, d, g: (f"popped by consumer group {g} (reconsume #{d.get('reconsume_times')}), invisible "
                             f"until {format_time(d.get('invisible_until'))}"),
    "revive": lambda ev, d, g: (f"revived for consumer group {g} into {ev.topic}/{ev.queue_id}@{d.get('queue_offset')} "
                                f"(reconsume #{d.get('reconsume_times')}, "
                                f"revive time {format_time(d.get('revive_time'))})"),
    "put_failed": lambda ev, d, g: f"consumer group {g}: send-back put failed ({d.get('status')}), {d.get('next')}",
    ACK_TAG: lambda ev, d, g: f"acked by consumer group {g}: it will not be revived",  # the ack event: its tag
}


def _group_outcomes(events: list) -> dict[str, tuple[str, str, int | None]]:
    """Per consumer group: (state, text, due) after its last event of this message."""
    out: dict[str, tuple[str, str, int | None]] = {}
    for ev in events:
        d, g = ev.detail, ev.detail.get("group")
        when = format_time(ev.time)
        n = d.get("reconsume_times") or 0
        if ev.event == "consume" and d.get("outcome") == "ok":
            out[g] = ("consumed", f"consumed at {when} by {g} after {_retries(n)}", None)
        elif ev.event == "dlq":  # the event has the DLQ record's reconsumeTimes: one more than the retries
            out[g] = ("dead_lettered", f"dead-lettered at {when} to {ev.topic} by {g} after {_retries(n - 1)}", None)
        elif ev.event == "drop":
            out[g] = ("discarded", f"dropped at {when} by {g} (retryQueueNums <= 0)", None)
        elif ev.event == "send_back":
            out[g] = ("waiting", f"waiting for retry #{n} of {g} (delay level {d.get('level')}, due "
                      f"{format_time(d.get('due'))})", d.get("due"))
        elif g not in out or out[g][0] not in ("consumed", "dead_lettered", "discarded"):
            out[g] = ("in_flight", f"with {g} since {when} ({ev.event})", None)
    return out


def _consumer_verdict(events: list, until_ms: int) -> Verdict:
    """One line for every group that met the message; the state of the most urgent one."""
    per = _group_outcomes(events)
    states = [s for s, _t, _d in per.values()]
    state = next((s for s in ("dead_lettered", "discarded", "waiting", "consumed") if s in states), "unknown")
    if state == "unknown" and "in_flight" in states:
        state = "delivered"  # being consumed: the last stage says where
    text = "; ".join(t for _s, t, _d in (per[g] for g in sorted(per)))
    due = min((d for s, _t, d in per.values() if s == "waiting" and d is not None), default=None)
    if "waiting" in states or "in_flight" in states:
        text += f"; still so at {format_time(until_ms)}"
    return Verdict(state, text + " (simulated)", due)


def simulator_plan(store: Store, until: str | None, scenario: Path | None,
                   local: bool = False) -> tuple[int | None, Scenario | None]:
    """`trace --until T [--scenario FILE]`: the simulator's stop time (relative T counts from its start,
    the store's last sign of life) and its scenario; (None, None) without --until. A scenario alone
    would run nothing, so it is refused."""
    if until is None:
        if scenario is not None:
            raise TraceError("--scenario is for the simulator: add --until T")
        return None, None
    from mqtool.simulate.runner import default_start

    start_ms = default_start(store)
    until_ms = parse_time(until, start_ms, local)
    if scenario is not None and not scenario.is_file():
        raise ScenarioError(f"{scenario}: no such scenario file")
    return until_ms, load_scenario(scenario, start_ms)


def continue_trace(store: Store, tr: Trace, until_ms: int, broker_version: str = "5.3", seed: int = 0,
                   scenario: Scenario | None = None) -> Trace:
    """The trace with the simulated stages up to `until_ms` appended and the verdict updated.

    `scenario` (its consumers, faults, answers) is what the simulator runs; None: the services alone.
    """
    from mqtool.simulate.runner import default_start, simulate

    start_ms = default_start(store)
    if until_ms <= start_ms:
        raise TraceError(f"--until ({format_time(until_ms)}) must be after the simulator's start "
                         f"({format_time(start_ms)}, the store's last sign of life)")
    from mqtool.store.delaylevels import config_in_effect

    config = config_in_effect(store)  # no broker.conf: the delay levels the store's units imply
    result = simulate(store, config, start_ms, until_ms, scenario, seed=seed, broker_version=broker_version)
    keys = {k.upper() for k in tr.uniq_keys}
    offsets = {r.record.physical_offset for r in tr.records}
    last = None
    consumed: list = []  # this message's consumer events
    for ev in result.events:
        mine = (ev.uniq_key is not None and ev.uniq_key.upper() in keys) or ev.physical_offset in offsets
        if not mine:
            continue
        if ev.service == "consumer":
            consumed.append(ev)
            _add_consumer_stage(tr, ev, offsets)
            continue
        if ev.event not in _STAGE:
            continue
        if ev.new_physical_offset is not None:
            offsets.add(ev.new_physical_offset)
        phys = ev.new_physical_offset if ev.new_physical_offset is not None else ev.physical_offset
        retry = ev.event == "deliver" and (ev.topic or "").startswith(RETRY_GROUP_TOPIC_PREFIX)
        tr.stages.append(Stage(ev.time, "retry" if retry else _STAGE[ev.event], ev.topic, ev.queue_id,
                               ev.detail.get("queue_offset"), phys, _detail(ev), simulated=True))
        if ev.event in _TERMINAL or ev.event == "commit":
            last = ev
    tr.until = until_ms
    if consumed:
        tr.verdict = _consumer_verdict(consumed, until_ms)
    elif last is not None:
        when = format_time(last.time)
        if last.event == "deliver":
            where = f"{last.topic}/{last.queue_id}@{last.detail.get('queue_offset')}"
            state = "committed" if tr.verdict.state == "pending" and last.service == "transaction" else "delivered"
            tr.verdict = Verdict(state, f"{'committed' if state == 'committed' else 'delivered'} {when} to "
                                 f"{where} (simulated)")
        elif last.event == "commit":
            tr.verdict = Verdict("committed", f"committed {when} (simulated)")
        else:
            text = {"cancelled": f"cancelled {when} (simulated)", "rolled_back": f"rolled back {when} (simulated)",
                    "discarded": f"discarded {when} after {last.detail.get('check_times')} checks (simulated)"}
            tr.verdict = Verdict(_TERMINAL[last.event], text[_TERMINAL[last.event]])
    else:
        tr.verdict = Verdict(tr.verdict.state, f"{tr.verdict.text}; still so at {format_time(until_ms)} (simulated)",
                             tr.verdict.due)
    return tr


def _add_consumer_stage(tr: Trace, ev, offsets: set[int]) -> None:
    """A consumer event as a stage; the records it wrote (retry, DLQ, revive) join the message."""
    staged = _consumer_stage(ev)
    if ev.new_physical_offset is not None and ev.event in ("send_back", "dlq", "revive"):
        offsets.add(ev.new_physical_offset)  # an ack's own record is not the message
    if staged is None:
        return
    stage, detail = staged
    d = ev.detail
    qo = d.get("queue_offset") if ev.event in ("consume", "pop", "revive", ACK_TAG) else None
    phys = ev.new_physical_offset if ev.event in ("send_back", "dlq", "revive") else ev.physical_offset
    topic, qid = ev.topic, ev.queue_id
    if ev.event == "send_back":  # parked in the schedule topic, queue level - 1, for %RETRY%group
        topic, qid = RMQ_SYS_SCHEDULE_TOPIC, delay_level_2_queue_id(int(d.get("level", 1)))
    tr.stages.append(Stage(ev.time, stage, topic, qid, qo, phys, detail, simulated=True))
